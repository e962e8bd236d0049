//! The real provider key and the credential it belongs to: the value lives in a buffer wiped on
//! drop, prints as `Secret([redacted])`, and has no `Display` or `Serialize`, so it cannot reach
//! a log line, an error or a report by accident.

use std::fmt;

use zeroize::Zeroizing;

/// A real credential value.
pub struct Secret(Zeroizing<String>);

impl Secret {
    pub fn new(value: String) -> Self {
        Self(Zeroizing::new(value))
    }

    /// The value, for the one header or query parameter it is injected into and for redaction.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// One `credentialEnv` variable of the Adapter: its name, the placeholder the agent holds in its
/// place, the real value, and the one route host it may be spent on (a placeholder presented on
/// any other route is refused, so one provider's key never reaches another provider).
pub struct Credential {
    pub name: String,
    pub placeholder: String,
    pub value: Secret,
    pub host: String,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The placeholder is as good as a key while the session lives.
        f.debug_struct("Credential").field("name", &self.name).field("host", &self.host).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_names_the_variable_and_nothing_secret() {
        let credential = Credential {
            name: "OPENAI_API_KEY".into(),
            placeholder: "rt-placeholder-abcdef".into(),
            value: Secret::new("sk-live-1234567890".into()),
            host: "api.openai.com".into(),
        };
        let printed = format!("{credential:?} {:?}", credential.value);
        assert!(printed.contains("OPENAI_API_KEY"), "{printed}");
        assert!(printed.contains("Secret([redacted])"), "{printed}");
        assert!(!printed.contains("sk-live") && !printed.contains("rt-placeholder"), "{printed}");
    }
}
