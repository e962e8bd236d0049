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

/// Whether `c` is invisible formatting: a bidi control, a zero-width character or another
/// character of Unicode's general category Cf (format), or a line or paragraph separator. Such
/// characters make text display differently from what it is (a right-to-left override reverses
/// what follows it), so names refuse them and terminal output escapes them.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x2028..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// `U+202E (RIGHT-TO-LEFT OVERRIDE)`: a character named for a message, with the name of the
/// invisible characters people meet most.
pub fn describe_char(c: char) -> String {
    let name = match c as u32 {
        0x00AD => "SOFT HYPHEN",
        0x061C => "ARABIC LETTER MARK",
        0x200B => "ZERO WIDTH SPACE",
        0x200C => "ZERO WIDTH NON-JOINER",
        0x200D => "ZERO WIDTH JOINER",
        0x200E => "LEFT-TO-RIGHT MARK",
        0x200F => "RIGHT-TO-LEFT MARK",
        0x2028 => "LINE SEPARATOR",
        0x2029 => "PARAGRAPH SEPARATOR",
        0x202A => "LEFT-TO-RIGHT EMBEDDING",
        0x202B => "RIGHT-TO-LEFT EMBEDDING",
        0x202C => "POP DIRECTIONAL FORMATTING",
        0x202D => "LEFT-TO-RIGHT OVERRIDE",
        0x202E => "RIGHT-TO-LEFT OVERRIDE",
        0x2060 => "WORD JOINER",
        0x2066 => "LEFT-TO-RIGHT ISOLATE",
        0x2067 => "RIGHT-TO-LEFT ISOLATE",
        0x2068 => "FIRST STRONG ISOLATE",
        0x2069 => "POP DIRECTIONAL ISOLATE",
        0xFEFF => "ZERO WIDTH NO-BREAK SPACE",
        _ if c.is_control() => "a control character",
        _ => "an invisible formatting character",
    };
    format!("U+{:04X} ({name})", c as u32)
}

/// Whether `c` is a control character (escape sequences, line breaks) or invisible formatting:
/// what text from outside must never carry raw onto a terminal or into a prompt.
pub fn is_hidden(c: char) -> bool {
    c.is_control() || is_invisible(c)
}

/// `text` with every hidden character (see [`is_hidden`]) replaced by a visible escape like
/// `\u{202e}`, so it shows as one line that displays as what it is.
pub fn escape_hidden(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hidden(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// Why `text` is refused for holding a control or invisible formatting character, naming the
/// first one; `None` when it holds none.
pub fn hidden_character_problem(text: &str) -> Option<String> {
    let c = text.chars().find(|c| is_hidden(*c))?;
    Some(format!(
        "it contains {}, which would make it display differently from what it is; remove it",
        describe_char(c)
    ))
}

/// Checks an Assignment or AdmissionPolicy name: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn check_object_name(name: &str) -> Result<(), NameError> {
    if let Some(problem) = hidden_character_problem(name) {
        return Err(NameError(format!("invalid name {name:?}: {problem}")));
    }
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
    if let Some(problem) = hidden_character_problem(name) {
        return Err(NameError(format!("invalid adapter name {name:?}: {problem}")));
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

/// The longest host name, in bytes, without a trailing dot (RFC 1035's 255 on the wire).
pub const MAX_HOST_LEN: usize = 253;

/// The longest label of a host name, in bytes.
pub const MAX_HOST_LABEL_LEN: usize = 63;

/// Why a text is not an exact, canonical DNS host name. This is Roundtable's one host-name rule:
/// `validate` applies it to an Adapter's `providerHosts` (through [`HostName`]) and the egress
/// gateway to its allowlist and to every CONNECT host, where each variant maps to a reason code.
/// The message is shown to operators as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("the host name is empty")]
    Empty,
    #[error("give the bare host name, without a scheme")]
    Scheme,
    #[error("wildcards are not allowed; list each exact host")]
    Wildcard,
    #[error("IP literals and ports are not allowed; give an exact DNS name")]
    PortOrBracket,
    #[error("{0:?} is not allowed: use a-z, 0-9, '-' and '.' (an internationalized name in its xn-- form)")]
    Character(char),
    #[error("longer than {MAX_HOST_LEN} characters")]
    TooLong,
    #[error("remove the trailing dot")]
    TrailingDot,
    #[error("host names must be lowercase")]
    Uppercase,
    #[error("each label is 1 to {MAX_HOST_LABEL_LEN} of a-z, 0-9 and '-', not starting or ending with '-'")]
    Label,
    #[error("IP literals are not allowed; give an exact DNS name")]
    IpLiteral,
    #[error(
        "IP literals are not allowed, and a last label that is a number (all digits, or starting with 0x, as in 127.1 or x.0xff) makes one; give an exact DNS name"
    )]
    NumericLastLabel,
    #[error("a single label (like localhost) is not a public host name")]
    SingleLabel,
    #[error("localhost names are not public host names")]
    Localhost,
}

/// Checks that `text` is an exact, canonical DNS host name: lowercase labels of a-z, 0-9 and `-`,
/// at least two of them, at most 253 bytes, no wildcard, IP literal or numeric last label (which
/// URL parsers read as an address: `127.1`, `2130706433`, `0x7f.0.0.1`), port, scheme, trailing
/// dot or `localhost`. Internationalized names pass in their `xn--` form.
///
/// The checks run in the order the gateway's reason codes need: an IP address first, then the
/// bytes, then canonical form (trailing dot, case), then labels, then the numeric last label,
/// then single-label and `localhost` names.
pub fn check_host(text: &str) -> Result<(), HostError> {
    if text.parse::<std::net::IpAddr>().is_ok() {
        return Err(HostError::IpLiteral);
    }
    if text.is_empty() {
        return Err(HostError::Empty);
    }
    if text.contains("://") {
        return Err(HostError::Scheme);
    }
    if text.contains('*') {
        return Err(HostError::Wildcard);
    }
    if text.contains([':', '[', ']']) {
        return Err(HostError::PortOrBracket);
    }
    if let Some(bad) = text.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '.')) {
        return Err(HostError::Character(bad));
    }
    if text.len() > MAX_HOST_LEN {
        return Err(HostError::TooLong);
    }
    if text.ends_with('.') {
        return Err(HostError::TrailingDot);
    }
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(HostError::Uppercase);
    }
    let labels: Vec<&str> = text.split('.').collect();
    let bad_label = |label: &&str| {
        label.is_empty() || label.len() > MAX_HOST_LABEL_LEN || label.starts_with('-') || label.ends_with('-')
    };
    if labels.iter().any(bad_label) {
        return Err(HostError::Label);
    }
    // "Ends in a number" (WHATWG URL), widened to every `0x` label: such a name is an address.
    let last = labels.last().copied().unwrap_or_default();
    if last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
        return Err(HostError::NumericLastLabel);
    }
    if labels.len() < 2 {
        return Err(HostError::SingleLabel);
    }
    if last == "localhost" {
        return Err(HostError::Localhost);
    }
    Ok(())
}

/// Host names and how [`check_host`] decides each: the shared test vector every crate that
/// applies the rule (specs, the gateway) checks itself against.
#[doc(hidden)]
pub fn host_cases() -> Vec<(String, Result<(), HostError>)> {
    use HostError::*;
    let label = |c: &str, n: usize| c.repeat(n);
    let long_label = format!("{}.example", label("a", MAX_HOST_LABEL_LEN + 1));
    let longest_label = format!("{}.example", label("a", MAX_HOST_LABEL_LEN));
    let name_of =
        |last: usize| format!("{}.{}.{}.{}", label("a", 63), label("b", 63), label("c", 63), label("d", last));
    let cases: Vec<(&str, Result<(), HostError>)> = vec![
        ("api.openai.com", Ok(())),
        ("generativelanguage.googleapis.com", Ok(())),
        ("a-b.example", Ok(())),
        ("a.b", Ok(())),
        ("xn--bcher-kva.example", Ok(())),
        ("1.example.com", Ok(())),
        ("api.0ff", Ok(())),
        ("api.x0ff", Ok(())),
        (&longest_label, Ok(())),
        ("", Err(Empty)),
        ("1.2.3.4", Err(IpLiteral)),
        ("10.0.0.1", Err(IpLiteral)),
        ("::1", Err(IpLiteral)),
        ("api.0xff", Err(NumericLastLabel)),
        ("a.0x", Err(NumericLastLabel)),
        ("0x7f.1", Err(NumericLastLabel)),
        ("0x7f.0.0.1", Err(NumericLastLabel)),
        ("127.1", Err(NumericLastLabel)),
        ("1.2.3.4.5", Err(NumericLastLabel)),
        ("123", Err(NumericLastLabel)),
        ("2130706433", Err(NumericLastLabel)),
        ("https://api.openai.com", Err(Scheme)),
        ("*.openai.com", Err(Wildcard)),
        ("[::1]", Err(PortOrBracket)),
        ("api.openai.com:443", Err(PortOrBracket)),
        ("a_b.example.com", Err(Character('_'))),
        ("a b.example.com", Err(Character(' '))),
        ("bücher.example", Err(Character('ü'))),
        ("API_x.example", Err(Character('_'))),
        ("a..b", Err(Label)),
        (".a.com", Err(Label)),
        ("-a.com", Err(Label)),
        ("a-.com", Err(Label)),
        (&long_label, Err(Label)),
        ("api.openai.com.", Err(TrailingDot)),
        (".", Err(TrailingDot)),
        ("API.openai.com", Err(Uppercase)),
        ("api.0XFF", Err(Uppercase)),
        ("localhost", Err(SingleLabel)),
        ("example", Err(SingleLabel)),
        ("foo.localhost", Err(Localhost)),
    ];
    let mut owned: Vec<(String, Result<(), HostError>)> =
        cases.into_iter().map(|(text, expected)| (text.to_owned(), expected)).collect();
    owned.push((name_of(MAX_HOST_LEN - 3 * 64), Ok(())));
    owned.push((name_of(MAX_HOST_LEN + 1 - 3 * 64), Err(TooLong)));
    owned
}

/// An exact, canonical DNS name a gateway may reach, as [`check_host`] decides: lowercase labels,
/// at least two of them, no wildcard, IP literal, numeric last label, port, scheme, trailing dot
/// or `localhost`.
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
        check_host(text).map_err(|error| NameError(format!("invalid host {text:?}: {error}")))?;
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

    /// A bare image ID (`sha256:…`): it names an image only the engine that built or loaded it
    /// has, so there is nothing to pull.
    pub fn is_image_id(&self) -> bool {
        self.0.starts_with("sha256:")
    }

    /// The repository, tag and digest of a reference (`None` for an image ID): the parser's
    /// split, so every reader splits the same way.
    fn parts(&self) -> Option<(&str, Option<&str>, Option<&str>)> {
        if self.is_image_id() {
            return None;
        }
        let (name_and_tag, digest) = match self.0.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest)),
            None => (self.0.as_str(), None),
        };
        let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
        Some(match name_and_tag[last_slash..].rfind(':') {
            Some(i) => (&name_and_tag[..last_slash + i], Some(&name_and_tag[last_slash + i + 1..]), digest),
            None => (name_and_tag, None, digest),
        })
    }

    /// The digest a digest reference names (`sha256:…`).
    pub fn digest(&self) -> Option<&str> {
        self.parts().and_then(|(_, _, digest)| digest)
    }

    /// The registry host a reference is pulled from: its first path component when that names a
    /// host (a `.` or `:` in it, or `localhost`), else Docker Hub, `docker.io`; `None` for an
    /// image ID.
    pub fn registry(&self) -> Option<&str> {
        let (repository, _, _) = self.parts()?;
        Some(match repository.split_once('/') {
            Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first,
            _ => "docker.io",
        })
    }

    /// What a pull asks the engine for: exactly one manifest, by digest when there is one (a
    /// tag beside it is dropped, as the engine drops it), else by tag, `latest` when none is
    /// written. Never a bare repository, which an engine reads as every tag of it. `None` for an
    /// image ID.
    pub fn pullable(&self) -> Option<String> {
        let (repository, tag, digest) = self.parts()?;
        Some(match (tag, digest) {
            (_, Some(digest)) => format!("{repository}@{digest}"),
            (Some(tag), None) => format!("{repository}:{tag}"),
            (None, None) => format!("{repository}:latest"),
        })
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
        // `user:password@registry/…` puts a credential where only a digest may be: refused
        // without quoting the reference, so the secret reaches no finding, status row or log.
        let refuse_unquoted = || {
            Err(NameError(
                "invalid image reference (not repeated here: what precedes its '@' may be a credential): only a digest, sha256: and 64 lowercase hex digits, may follow '@'; registry credentials never go in a reference (pulls read them from the Docker config the engine's client uses)".to_owned(),
            ))
        };
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
            return refuse_unquoted();
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

// === RuntimeClass ===

/// The name of an OCI runtime the container engine has registered (`runc`, `runsc` for gVisor,
/// `kata`, …): what an Adapter's `runtimeClass` names, as `docker run --runtime` takes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuntimeClass(String);

impl RuntimeClass {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for RuntimeClass {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut bytes = text.bytes();
        let first_ok = bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let rest_ok = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.'));
        if !first_ok || !rest_ok || text.len() > 63 {
            return Err(NameError(format!(
                "invalid runtime class {text:?}: the name the engine registered the runtime under (a-z, 0-9, '-', '_', '.'; at most 63), such as runc or runsc"
            )));
        }
        Ok(Self(text.to_owned()))
    }
}

checked_string!(RuntimeClass, "RuntimeClass", {
    "type": "string",
    "pattern": "^[a-z0-9][a-z0-9._-]*$",
    "maxLength": 63
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
    fn names_refuse_bidi_controls_and_invisible_characters_naming_them() {
        let message = |result: Result<(), NameError>| result.err().map(|NameError(m)| m).unwrap_or_default();
        for (c, named) in [
            ('\u{202e}', "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
            ('\u{2066}', "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
            ('\u{200f}', "U+200F (RIGHT-TO-LEFT MARK)"),
            ('\u{061c}', "U+061C (ARABIC LETTER MARK)"),
            ('\u{200b}', "U+200B (ZERO WIDTH SPACE)"),
            ('\u{feff}', "U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),
            ('\u{00ad}', "U+00AD (SOFT HYPHEN)"),
            ('\u{e0041}', "U+E0041 (an invisible formatting character)"),
            ('\u{1b}', "U+001B (a control character)"),
        ] {
            let adapter = message(check_adapter_name(&format!("Qwen{c}CLI")));
            assert!(adapter.contains(named), "{adapter}");
            let object = message(check_object_name(&format!("fix{c}it")));
            assert!(object.contains(named), "{object}");
            // The message itself carries the character escaped, never raw.
            assert!(!adapter.contains(c) && !object.contains(c), "{adapter:?} {object:?}");
        }
        // Ordinary non-ASCII letters are not invisible.
        assert!(check_adapter_name("Café CLI").is_ok());
        assert!(!"aé日本ß".chars().any(is_invisible));
    }

    #[test]
    fn invisible_characters_cover_unicode_format_controls() {
        for code in [
            0x00AD, 0x0600, 0x0605, 0x061C, 0x06DD, 0x070F, 0x180E, 0x200B, 0x200E, 0x200F, 0x202A, 0x202E, 0x2060,
            0x2064, 0x2066, 0x2069, 0x206F, 0xFEFF, 0xFFF9, 0xFFFB, 0xE0001, 0xE0020, 0xE007F,
        ] {
            let c = char::from_u32(code).expect("a scalar value");
            assert!(is_invisible(c), "U+{code:04X}");
        }
        for code in [0x0041, 0x00AC, 0x00AE, 0x0606, 0x200A, 0x2065, 0x2070, 0xFEFE, 0xFFFC, 0xE0002, 0xE0080] {
            let c = char::from_u32(code).expect("a scalar value");
            assert!(!is_invisible(c), "U+{code:04X}");
        }
    }

    #[test]
    fn hosts_follow_the_one_rule() {
        let cases = host_cases();
        for (text, expected) in &cases {
            assert_eq!(check_host(text), *expected, "{text:?}");
            match (text.parse::<HostName>(), expected) {
                (Ok(host), Ok(())) => assert_eq!(host.as_str(), text),
                (Err(NameError(message)), Err(error)) => {
                    assert_eq!(message, format!("invalid host {text:?}: {error}"));
                }
                (got, _) => panic!("{text:?}: HostName gave {got:?}, the rule {expected:?}"),
            }
        }
        // The table covers the edges it claims to.
        let has = |len: usize, expected: Result<(), HostError>| {
            cases.iter().any(|(text, e)| text.len() == len && *e == expected && text.split('.').all(|l| l.len() <= 63))
        };
        assert!(has(MAX_HOST_LEN, Ok(())) && has(MAX_HOST_LEN + 1, Err(HostError::TooLong)));
        assert!(cases.iter().any(|(text, e)| e.is_ok() && text.split('.').any(|l| l.len() == MAX_HOST_LABEL_LEN)));
        assert!(cases.iter().any(|(text, e)| *e == Err(HostError::Label) && text.split('.').any(|l| l.len() == 64)));
    }

    #[test]
    fn host_messages_name_what_to_fix() {
        let message = |text: &str| text.parse::<HostName>().err().map(|NameError(m)| m).unwrap_or_default();
        assert!(message("*.openai.com").contains("wildcard"));
        assert!(message("10.0.0.1").contains("IP literal"));
        assert!(message("api.0xff").contains("IP literal"));
        assert!(message("api.openai.com.").contains("trailing dot"));
        assert!(message("API.openai.com").contains("lowercase"));
        assert!(message("bücher.example").contains("xn--"));
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
    fn a_reference_splits_into_registry_and_what_a_pull_asks_for() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let cases = [
            ("busybox", Some("docker.io"), Some("busybox:latest".into()), None),
            ("team/agent:v1", Some("docker.io"), Some("team/agent:v1".into()), None),
            (
                "registry.example:5000/team/agent",
                Some("registry.example:5000"),
                Some("registry.example:5000/team/agent:latest".into()),
                None,
            ),
            ("localhost/x:2", Some("localhost"), Some("localhost/x:2".into()), None),
            ("127.0.0.1:5000/x", Some("127.0.0.1:5000"), Some("127.0.0.1:5000/x:latest".into()), None),
            (
                &*format!("127.0.0.1:5000/x@{digest}"),
                Some("127.0.0.1:5000"),
                Some(format!("127.0.0.1:5000/x@{digest}")),
                Some(&*digest),
            ),
            (&*format!("x:v1@{digest}"), Some("docker.io"), Some(format!("x@{digest}")), Some(&*digest)),
            (&*digest, None, None, None),
        ];
        for (text, registry, pullable, wanted_digest) in cases {
            let image: ImageRef = text.parse().expect(text);
            assert_eq!(image.registry(), registry, "{text}");
            assert_eq!(image.pullable(), pullable, "{text}");
            assert_eq!(image.digest(), wanted_digest, "{text}");
            assert_eq!(image.is_image_id(), registry.is_none(), "{text}");
        }
    }

    #[test]
    fn a_reference_with_credentials_is_refused_without_repeating_them() {
        let digest = format!("sha256:{}", "a".repeat(64));
        for text in [
            "user:hunter2@registry.example/agent".to_owned(),
            "https://user:hunter2@registry.example/agent".to_owned(),
            format!("user:hunter2@registry.example/agent@{digest}"),
            "registry.example/agent@hunter2".to_owned(),
        ] {
            let error = text.parse::<ImageRef>().expect_err(&text);
            assert!(!error.0.contains("hunter2"), "{text}: {error}");
            assert!(error.0.contains("credentials never go in a reference"), "{error}");
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
