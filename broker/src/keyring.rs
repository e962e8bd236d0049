//! The session's placeholders, kept only as SHA-256 digests beside their credential's name, real
//! value and route host, and where a request carries one: the places each scheme puts its key. A candidate
//! is compared in constant time against every digest, so timing says nothing about how close it
//! came.

use roundtable_specs::broker::{PLACEHOLDER_PREFIX, Scheme};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::secret::{Credential, Secret};
use crate::settings::BrokerError;

/// Where a key is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// `x-api-key: <key>`.
    ApiKey,
    /// `x-goog-api-key: <key>`.
    GoogApiKey,
    /// `?key=<key>`.
    QueryKey,
}

impl Place {
    /// Where a scheme's clients put the key, in the order they are looked at.
    pub(crate) fn of(scheme: Scheme) -> &'static [Place] {
        match scheme {
            Scheme::Openai => &[Place::Bearer],
            Scheme::Anthropic => &[Place::ApiKey, Place::Bearer],
            Scheme::Gemini => &[Place::GoogApiKey, Place::QueryKey, Place::Bearer],
            Scheme::Custom => &[Place::Bearer, Place::ApiKey, Place::GoogApiKey, Place::QueryKey],
        }
    }
}

pub(crate) struct Entry {
    digest: [u8; 32],
    pub(crate) name: String,
    pub(crate) value: Secret,
    /// The route host this credential may be spent on.
    pub(crate) host: String,
}

pub(crate) struct Keyring {
    entries: Vec<Entry>,
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

impl Keyring {
    pub(crate) fn new(credentials: Vec<Credential>) -> Result<Self, BrokerError> {
        if credentials.is_empty() {
            return Err(BrokerError::NoCredentials);
        }
        let mut entries: Vec<Entry> = Vec::with_capacity(credentials.len());
        for credential in credentials {
            let Credential { name, placeholder, value, host } = credential;
            if !placeholder.starts_with(PLACEHOLDER_PREFIX) || placeholder.len() <= PLACEHOLDER_PREFIX.len() {
                return Err(BrokerError::BadPlaceholder(name));
            }
            let real = value.expose();
            if real.is_empty() || real.bytes().any(|b| b.is_ascii_control() || !b.is_ascii()) {
                return Err(BrokerError::BadValue(name));
            }
            let digest = digest(&placeholder);
            if entries.iter().any(|entry| entry.digest == digest) {
                return Err(BrokerError::DuplicatePlaceholder(name));
            }
            entries.push(Entry { digest, name, value, host });
        }
        Ok(Self { entries })
    }

    /// The credential whose placeholder `candidate` is. Every digest is compared, whatever
    /// matched before.
    pub(crate) fn find(&self, candidate: &str) -> Option<&Entry> {
        let wanted = digest(candidate);
        let mut found = None;
        for entry in &self.entries {
            if bool::from(entry.digest.ct_eq(&wanted)) {
                found = Some(entry);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(name: &str, placeholder: &str) -> Credential {
        Credential {
            name: name.into(),
            placeholder: placeholder.into(),
            value: Secret::new(format!("sk-{name}")),
            host: "api.openai.com".into(),
        }
    }

    #[test]
    fn only_this_sessions_placeholders_are_found() {
        let keyring = Keyring::new(vec![credential("A", "rt-placeholder-aa"), credential("B", "rt-placeholder-bb")])
            .expect("keyring");
        assert_eq!(keyring.find("rt-placeholder-bb").map(|e| e.name.as_str()), Some("B"));
        assert!(keyring.find("rt-placeholder-cc").is_none());
        assert!(keyring.find("rt-placeholder-b").is_none());
        assert!(matches!(Keyring::new(vec![credential("A", "sk-real")]), Err(BrokerError::BadPlaceholder(_))));
        assert!(matches!(
            Keyring::new(vec![credential("A", "rt-placeholder-aa"), credential("B", "rt-placeholder-aa")]),
            Err(BrokerError::DuplicatePlaceholder(_))
        ));
    }
}
