//! Validated names: object names, slugs, exact DNS host names, environment variable names,
//! image references, CIDRs and version floors.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a name did not validate; the message is shown to operators as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NameError(pub String);

/// The longest object name, as in Kubernetes DNS labels.
pub const MAX_NAME_LEN: usize = 63;

/// Checks an Assignment or AdmissionPolicy name: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn check_object_name(name: &str) -> Result<(), NameError> {
    let bytes = name.as_bytes();
    let edges_ok = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let body_ok = bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
    if name.len() > MAX_NAME_LEN || !body_ok || !edges_ok(bytes.first()) || !edges_ok(bytes.last()) {
        return Err(NameError(format!(
            "invalid name {name:?}: use lowercase letters, digits and '-', start and end with a letter or digit, at most {MAX_NAME_LEN} characters"
        )));
    }
    Ok(())
}

/// Checks an Adapter name, which may be a display name (`Qwen CLI`) as long as its slug is usable.
pub fn check_adapter_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() || name.chars().count() > MAX_NAME_LEN {
        return Err(NameError(format!("invalid adapter name {name:?}: 1 to {MAX_NAME_LEN} characters")));
    }
    if name.chars().any(char::is_control) {
        return Err(NameError(format!("invalid adapter name {name:?}: control characters are not allowed")));
    }
    if slug(name).is_empty() {
        return Err(NameError(format!("invalid adapter name {name:?}: it must contain a letter or digit")));
    }
    Ok(())
}

/// The name lowercased, every run of characters outside `[a-z0-9]` turned into one `-`, trimmed of `-`.
pub fn slug(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut pending_dash = false;
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            if pending_dash && !out.is_empty() {
                out.push('-');
            }
            pending_dash = false;
            out.push(c);
        } else {
            pending_dash = true;
        }
    }
    out
}

/// Implements string-like serde, `FromStr`, `Display` and a string JSON Schema for a checked newtype.
macro_rules! checked_string {
    ($type:ident, $schema_name:literal, $schema:tt) => {
        impl fmt::Display for $type {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        impl JsonSchema for $type {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed($schema_name)
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

// === HostName ===

/// An exact, canonical DNS name a gateway may reach: lowercase labels, at least two of them,
/// no wildcard, IP literal, port, scheme, trailing dot or `localhost`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostName(String);

impl HostName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for HostName {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = |why: &str| Err(NameError(format!("invalid host {text:?}: {why}")));
        if text.contains("://") {
            return refuse("give the bare host name, without a scheme");
        }
        if text.contains('*') {
            return refuse("wildcards are not allowed; list each exact host");
        }
        if text.contains(':') || text.parse::<std::net::IpAddr>().is_ok() {
            return refuse("IP literals and ports are not allowed; give an exact DNS name");
        }
        if text.ends_with('.') {
            return refuse("remove the trailing dot");
        }
        if text.len() > 253 {
            return refuse("longer than 253 characters");
        }
        if text.bytes().any(|b| b.is_ascii_uppercase()) {
            return refuse("host names must be lowercase");
        }
        let labels: Vec<&str> = text.split('.').collect();
        if labels.len() < 2 {
            return refuse("a single label (like localhost) is not a public host name");
        }
        for label in &labels {
            let valid = !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !valid {
                return refuse("each label is 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'");
            }
        }
        if labels.last().is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit())) {
            return refuse("IP literals are not allowed; give an exact DNS name");
        }
        if labels.last() == Some(&"localhost") {
            return refuse("localhost names are not provider hosts");
        }
        Ok(Self(text.to_owned()))
    }
}

checked_string!(HostName, "HostName", {
    "type": "string",
    "description": "An exact lowercase DNS name: no wildcards, IP literals, ports, schemes or trailing dots.",
    "pattern": "^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\\.)+[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
    "maxLength": 253
});

// === EnvVarName ===

/// An environment variable name, `^[A-Z_][A-Z0-9_]*$`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EnvVarName(String);

impl EnvVarName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for EnvVarName {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut bytes = text.bytes();
        let first_ok = bytes.next().is_some_and(|b| b.is_ascii_uppercase() || b == b'_');
        if !first_ok || !bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') || text.len() > 128 {
            return Err(NameError(format!(
                "invalid environment variable name {text:?}: use A-Z, 0-9 and '_', not starting with a digit"
            )));
        }
        Ok(Self(text.to_owned()))
    }
}

checked_string!(EnvVarName, "EnvVarName", {
    "type": "string",
    "pattern": "^[A-Z_][A-Z0-9_]*$",
    "maxLength": 128
});

// === ImageRef ===

/// A container image reference: `[registry/]path[:tag][@sha256:<64 hex>]`, or a bare image ID
/// `sha256:<64 hex>` as locally built images have.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageRef(String);

impl ImageRef {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Pinned means the reference names immutable content: a digest or a full image ID.
    pub fn is_pinned(&self) -> bool {
        self.0.starts_with("sha256:") || self.0.contains("@sha256:")
    }
}

fn is_sha256_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

impl FromStr for ImageRef {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = |why: &str| Err(NameError(format!("invalid image reference {text:?}: {why}")));
        if text.starts_with("sha256:") {
            return if is_sha256_digest(text) {
                Ok(Self(text.to_owned()))
            } else {
                refuse("an image ID is sha256: and 64 lowercase hex digits")
            };
        }
        let (name_and_tag, digest) = match text.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest)),
            None => (text, None),
        };
        if let Some(digest) = digest
            && !is_sha256_digest(digest)
        {
            return refuse("the digest must be sha256: and 64 lowercase hex digits");
        }
        // A colon after the last slash separates the tag; one before it belongs to a registry port.
        let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name_and_tag[last_slash..].rfind(':') {
            Some(i) => (&name_and_tag[..last_slash + i], Some(&name_and_tag[last_slash + i + 1..])),
            None => (name_and_tag, None),
        };
        if let Some(tag) = tag {
            let tag_ok = !tag.is_empty()
                && tag.len() <= 128
                && !tag.starts_with(['.', '-'])
                && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !tag_ok {
                return refuse("a tag is 1 to 128 of letters, digits, '.', '_' and '-'");
            }
        }
        let mut components: Vec<&str> = name.split('/').collect();
        let registry_like = components.len() > 1 && components[0].contains(['.', ':']) || components[0] == "localhost";
        if registry_like {
            let registry = components.remove(0);
            let registry_ok = registry.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:".contains(&b));
            if !registry_ok {
                return refuse("the registry host is not a host name with an optional port");
            }
        }
        for component in &components {
            let ok = !component.is_empty()
                && component.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
                && component.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && component.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit());
            if !ok {
                return refuse("repository path components are lowercase letters, digits and separators");
            }
        }
        Ok(Self(text.to_owned()))
    }
}

checked_string!(ImageRef, "ImageRef", {
    "type": "string",
    "description": "An image reference ([registry/]path[:tag][@sha256:digest]) or a full image ID (sha256:<64 hex>). Pinned means a digest or an image ID.",
    "minLength": 1
});

// === Cidr ===

/// An IP network in canonical form (host bits zero), such as `10.0.0.0/8` or `fd00::/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr(ipnet::IpNet);

impl Cidr {
    pub fn net(&self) -> ipnet::IpNet {
        self.0
    }

    /// Why this network cannot be an exception to the gateway's address policy (`allowCidrs`):
    /// a `/0` would switch the policy off.
    pub fn refused_as_exception(&self) -> Option<String> {
        (self.0.prefix_len() == 0).then(|| {
            format!("{self} covers a whole address family and would switch the gateway's address policy off; name the networks")
        })
    }

    fn as_str(&self) -> String {
        self.0.to_string()
    }
}

impl FromStr for Cidr {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let net: ipnet::IpNet = text.parse().map_err(|_| {
            NameError(format!("invalid CIDR {text:?}: expected an address and prefix length like 10.0.0.0/8"))
        })?;
        if net.trunc() != net {
            return Err(NameError(format!("invalid CIDR {text:?}: host bits are set; did you mean {}?", net.trunc())));
        }
        Ok(Self(net))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl Serialize for Cidr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cidr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Cidr {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Cidr")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "description": "An IP network in canonical form, such as 10.0.0.0/8."})
    }
}

// === VersionFloor ===

/// A minimum version such as `0.50.0`: one to three dot-separated numbers, optionally followed
/// by a pre-release or build suffix.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VersionFloor(String);

impl VersionFloor {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for VersionFloor {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let core = text.split(['-', '+']).next().unwrap_or_default();
        let parts: Vec<&str> = core.split('.').collect();
        let ok = (1..=3).contains(&parts.len())
            && parts.iter().all(|p| !p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit()))
            && text.len() <= 64;
        if !ok {
            return Err(NameError(format!("invalid version {text:?}: expected a version like 0.50.0")));
        }
        Ok(Self(text.to_owned()))
    }
}

checked_string!(VersionFloor, "VersionFloor", {
    "type": "string",
    "pattern": "^[0-9]+(\\.[0-9]+){0,2}([-+].*)?$"
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_fold_display_names() {
        assert_eq!(slug("Qwen CLI"), "qwen-cli");
        assert_eq!(slug("  --Codex__2--"), "codex-2");
        assert_eq!(slug("codex"), "codex");
        assert_eq!(slug("日本"), "");
    }

    #[test]
    fn object_names_follow_dns_labels() {
        for ok in ["a", "fix-readme-typo", "x1", &"a".repeat(63)] {
            assert!(check_object_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a-", "Fix", "a_b", "a.b", &"a".repeat(64)] {
            assert!(check_object_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn adapter_names_may_be_display_names_with_a_slug() {
        assert!(check_adapter_name("Qwen CLI").is_ok());
        assert!(check_adapter_name("---").is_err());
        assert!(check_adapter_name("bad\nname").is_err());
    }

    #[test]
    fn hosts_are_exact_canonical_names() {
        for ok in ["api.openai.com", "generativelanguage.googleapis.com", "a-b.example"] {
            assert!(ok.parse::<HostName>().is_ok(), "{ok}");
        }
        for bad in [
            "*.openai.com",
            "https://api.openai.com",
            "api.openai.com:443",
            "api.openai.com.",
            "localhost",
            "foo.localhost",
            "127.0.0.1",
            "[::1]",
            "::1",
            "API.openai.com",
            "a..b",
            "-a.com",
            "1.2.3.4",
            "",
        ] {
            assert!(bad.parse::<HostName>().is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn env_var_names() {
        assert!("CODEX_API_KEY".parse::<EnvVarName>().is_ok());
        assert!("_X".parse::<EnvVarName>().is_ok());
        for bad in ["", "1X", "lower", "A-B", "A B"] {
            assert!(bad.parse::<EnvVarName>().is_err(), "{bad}");
        }
    }

    #[test]
    fn image_references_and_pinning() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let cases = [
            ("busybox", true, false),
            ("roundtable-test/agent:v1", true, false),
            ("registry.example:5000/codex-agent:1.0", true, false),
            (&*format!("registry.example/codex-agent@{digest}"), true, true),
            (&*digest, true, true),
            ("localhost/x", true, false),
            ("sha256:abc", false, false),
            ("Upper/Case", false, false),
            ("x@sha256:zz", false, false),
            ("x:", false, false),
            ("", false, false),
        ];
        for (text, valid, pinned) in cases {
            let parsed = text.parse::<ImageRef>();
            assert_eq!(parsed.is_ok(), valid, "{text}");
            if let Ok(image) = parsed {
                assert_eq!(image.is_pinned(), pinned, "{text}");
            }
        }
    }

    #[test]
    fn cidrs_must_be_canonical() {
        assert!("10.0.0.0/8".parse::<Cidr>().is_ok());
        assert!("fd00::/8".parse::<Cidr>().is_ok());
        let err = "10.0.0.1/8".parse::<Cidr>().expect_err("host bits");
        assert!(err.0.contains("10.0.0.0/8"), "{err}");
        assert!("10.0.0.0".parse::<Cidr>().is_err());
    }

    #[test]
    fn version_floors() {
        for ok in ["0.50.0", "2", "1.2", "1.2.3-beta.1"] {
            assert!(ok.parse::<VersionFloor>().is_ok(), "{ok}");
        }
        for bad in ["", "v1.2", "1..2", "1.2.3.4", "latest"] {
            assert!(bad.parse::<VersionFloor>().is_err(), "{bad}");
        }
    }
}
