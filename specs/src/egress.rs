//! The egress gateway's words as types (docs/gateway.md): every reason code a tunnel can end with
//! ([`GatewayReason`], `address_denied:<class>` carrying an [`AddressClass`]), a decision line's
//! `allow` or `deny` ([`Decision`]) and a close line's `close_reason` ([`CloseReason`]). Each is
//! serialised as exactly the string the gateway has always written, here and nowhere else; nothing
//! compares them as strings.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// A string that is none of the words of its type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("unknown gateway reason {0:?}")]
    Reason(String),
    #[error("unknown address class {0:?}")]
    AddressClass(String),
    #[error("unknown decision {0:?}: allow or deny")]
    Decision(String),
    #[error("unknown close reason {0:?}: completed, idle_timeout, gateway_shutdown or error: <detail>")]
    CloseReason(String),
}

use crate::wire::wire_string;

/// Declares [`AddressClass`] from its words, with `address_denied:<word>` for each as a
/// `&'static str`.
macro_rules! address_classes {
    ($($(#[$vmeta:meta])* $variant:ident = $word:literal,)+) => {
        /// Why an answer of a tunnel's one lookup was not admitted: the `<class>` of
        /// `address_denied:<class>`. The address policy's classes (docs/gateway.md §3), then the
        /// two checks around it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum AddressClass {
            $($(#[$vmeta])* $variant,)+
        }

        impl AddressClass {
            pub const ALL: &'static [AddressClass] = &[$(AddressClass::$variant,)+];

            /// The class word.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(AddressClass::$variant => $word,)+
                }
            }

            /// `address_denied:<class>`.
            fn reason_code(self) -> &'static str {
                match self {
                    $(AddressClass::$variant => concat!("address_denied:", $word),)+
                }
            }
        }

        impl FromStr for AddressClass {
            type Err = ParseError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($word => Ok(AddressClass::$variant),)+
                    _ => Err(ParseError::AddressClass(text.to_owned())),
                }
            }
        }
    };
}

address_classes! {
    ThisNetwork = "this_network",
    Private = "private",
    /// Shared address space (CGNAT).
    Shared = "shared",
    Loopback = "loopback",
    LinkLocal = "link_local",
    IetfProtocol = "ietf_protocol",
    Documentation = "documentation",
    Benchmarking = "benchmarking",
    Multicast = "multicast",
    Reserved = "reserved",
    Broadcast = "broadcast",
    /// A cloud metadata endpoint.
    Metadata = "metadata",
    /// IPv6 outside 2000::/3.
    V6NonGlobal = "v6_non_global",
    V6IetfProtocol = "v6_ietf_protocol",
    V6SixToFour = "v6_6to4",
    V6Documentation = "v6_documentation",
    /// One of the gateway host's own addresses (never admitted).
    SelfAddress = "self_address",
    /// Admitted by the policy but outside every `dial_allow` network.
    OutsideDialAllow = "outside_dial_allow",
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

wire_string!(AddressClass);

impl JsonSchema for AddressClass {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("AddressClass")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let words: Vec<&str> = AddressClass::ALL.iter().map(|class| class.as_str()).collect();
        json_schema!({
            "type": "string",
            "enum": words,
            "description": "Why a resolved address was not admitted (the <class> of address_denied:<class>)."
        })
    }
}

/// Declares [`GatewayReason`] from its classless words; `address_denied:<class>` is added.
macro_rules! reasons {
    ($($(#[$vmeta:meta])* $variant:ident = $word:literal,)+) => {
        /// The one reason code of a tunnel's decision line (docs/gateway.md §2): `allowed`, a
        /// refusal, or an abandonment. Serialised as its wire string (`host_not_allowlisted`,
        /// `address_denied:private`), which is also the `X-Gateway-Deny` value, and ordered by
        /// it, so maps keyed by reasons read as they always did.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum GatewayReason {
            $($(#[$vmeta])* $variant,)+
            /// `address_denied:<class>` (403): an answer of the one lookup was not admitted.
            AddressDenied(AddressClass),
        }

        impl GatewayReason {
            /// Every reason without a class.
            const CLASSLESS: &'static [GatewayReason] = &[$(GatewayReason::$variant,)+];

            /// The wire string.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(GatewayReason::$variant => $word,)+
                    GatewayReason::AddressDenied(class) => class.reason_code(),
                }
            }
        }

        impl FromStr for GatewayReason {
            type Err = ParseError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($word => Ok(GatewayReason::$variant),)+
                    _ => text
                        .strip_prefix("address_denied:")
                        .and_then(|class| class.parse().ok())
                        .map(GatewayReason::AddressDenied)
                        .ok_or_else(|| ParseError::Reason(text.to_owned())),
                }
            }
        }
    };
}

reasons! {
    /// Every check passed; the tunnel is spliced.
    Allowed = "allowed",
    /// 429: `max_tunnels` connections are already being handled.
    TunnelLimit = "tunnel_limit",
    /// 408: the head was not complete within the header timeout.
    HeaderTimeout = "header_timeout",
    BadRequestLine = "bad_request_line",
    HeadersTooLarge = "headers_too_large",
    MethodNotAllowed = "method_not_allowed",
    BadAuthority = "bad_authority",
    PortNotAllowed = "port_not_allowed",
    IpLiteral = "ip_literal",
    HostInvalid = "host_invalid",
    HostNotCanonical = "host_not_canonical",
    HostNotAllowlisted = "host_not_allowlisted",
    DnsTimeout = "dns_timeout",
    DnsNoRecords = "dns_no_records",
    DnsError = "dns_error",
    /// After `200`: the client is not speaking TLS (closed without an alert).
    NotTls = "not_tls",
    TlsRecordTooLarge = "tls_record_too_large",
    ClientHelloTooLarge = "client_hello_too_large",
    NotClientHello = "not_client_hello",
    ClientHelloMalformed = "client_hello_malformed",
    TlsVersionUnsupported = "tls_version_unsupported",
    DuplicateExtension = "duplicate_extension",
    EchPresent = "ech_present",
    SniMissing = "sni_missing",
    SniInvalid = "sni_invalid",
    SniMultiple = "sni_multiple",
    SniMismatch = "sni_mismatch",
    ClientHelloTimeout = "client_hello_timeout",
    UpstreamConnectFailed = "upstream_connect_failed",
    UpstreamConnectTimeout = "upstream_connect_timeout",
    /// The client closed or errored before a decision (abandoned, not denied).
    ClientEof = "client_eof",
    /// The gateway stopped before a decision (abandoned, not denied).
    GatewayShutdown = "gateway_shutdown",
}

impl GatewayReason {
    /// Every reason, each class of `address_denied` included.
    pub fn all() -> impl Iterator<Item = GatewayReason> {
        Self::CLASSLESS
            .iter()
            .copied()
            .chain(AddressClass::ALL.iter().map(|class| GatewayReason::AddressDenied(*class)))
    }

    /// Whether the tunnel was allowed.
    pub fn is_allowed(self) -> bool {
        self == GatewayReason::Allowed
    }

    /// Whether the tunnel ended before a decision without anybody being refused: logged as
    /// `deny`, counted as abandoned.
    pub fn is_abandoned(self) -> bool {
        matches!(self, GatewayReason::ClientEof | GatewayReason::GatewayShutdown)
    }

    /// The decision a line with this reason carries.
    pub fn decision(self) -> Decision {
        if self.is_allowed() { Decision::Allow } else { Decision::Deny }
    }
}

impl From<AddressClass> for GatewayReason {
    fn from(class: AddressClass) -> Self {
        GatewayReason::AddressDenied(class)
    }
}

impl fmt::Display for GatewayReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// By wire string, as the strings themselves were ordered.
impl Ord for GatewayReason {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for GatewayReason {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

wire_string!(GatewayReason);

impl JsonSchema for GatewayReason {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("GatewayReason")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let codes: Vec<&str> = GatewayReason::all().map(GatewayReason::as_str).collect();
        json_schema!({
            "type": "string",
            "enum": codes,
            "description": "An egress gateway reason code (docs/gateway.md §2): allowed, a refusal, or client_eof and gateway_shutdown (abandoned)."
        })
    }
}

/// The schema of a count per reason (`EgressCounters.denials`): an object whose property names
/// are [`GatewayReason`]s, by reference, so the type is named once in the schema.
pub(crate) fn counts_by_reason(generator: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "propertyNames": generator.subschema_for::<GatewayReason>(),
        "additionalProperties": generator.subschema_for::<u64>()
    })
}

/// A decision line's `decision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The tunnel is spliced.
    Allow,
    /// Refused or abandoned.
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Decision {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "allow" => Ok(Decision::Allow),
            "deny" => Ok(Decision::Deny),
            _ => Err(ParseError::Decision(text.to_owned())),
        }
    }
}

/// Why a spliced tunnel ended: a close line's `close_reason`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CloseReason {
    /// Both directions ended.
    Completed,
    /// No byte passed either way for the idle timeout.
    IdleTimeout,
    /// The gateway stopped.
    GatewayShutdown,
    /// A direction failed; written `error: <detail>`.
    Error(String),
}

const ERROR_PREFIX: &str = "error: ";

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::Completed => f.write_str("completed"),
            CloseReason::IdleTimeout => f.write_str("idle_timeout"),
            CloseReason::GatewayShutdown => f.write_str("gateway_shutdown"),
            CloseReason::Error(detail) => write!(f, "{ERROR_PREFIX}{detail}"),
        }
    }
}

impl FromStr for CloseReason {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "completed" => Ok(CloseReason::Completed),
            "idle_timeout" => Ok(CloseReason::IdleTimeout),
            "gateway_shutdown" => Ok(CloseReason::GatewayShutdown),
            _ => text
                .strip_prefix(ERROR_PREFIX)
                .map(|detail| CloseReason::Error(detail.to_owned()))
                .ok_or_else(|| ParseError::CloseReason(text.to_owned())),
        }
    }
}

wire_string!(CloseReason);

impl JsonSchema for CloseReason {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("CloseReason")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "anyOf": [
                {"enum": ["completed", "idle_timeout", "gateway_shutdown"]},
                {"pattern": "^error: "}
            ],
            "description": "Why a spliced tunnel ended: completed, idle_timeout, gateway_shutdown, or error: <detail>."
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_reason_round_trips_through_its_wire_string() {
        let mut seen = BTreeSet::new();
        for reason in GatewayReason::all() {
            let wire = reason.to_string();
            assert_eq!(wire, reason.as_str());
            assert!(seen.insert(wire.clone()), "{wire} twice");
            assert_eq!(wire.parse::<GatewayReason>(), Ok(reason));
            assert_eq!(serde_json::to_value(reason).expect("json"), serde_json::Value::String(wire.clone()));
            assert_eq!(serde_json::from_value::<GatewayReason>(wire.clone().into()).expect(&wire), reason);
        }
        assert_eq!(seen.len(), 32 + 18);
        assert_eq!(GatewayReason::AddressDenied(AddressClass::V6SixToFour).as_str(), "address_denied:v6_6to4");
        assert_eq!(GatewayReason::from(AddressClass::SelfAddress).as_str(), "address_denied:self_address");
    }

    #[test]
    fn unknown_strings_are_errors() {
        for text in
            ["", "Allowed", "allowed ", "address_denied", "address_denied:", "address_denied:public", "denied", "error"]
        {
            assert_eq!(text.parse::<GatewayReason>(), Err(ParseError::Reason(text.to_owned())), "{text:?}");
            assert!(serde_json::from_value::<GatewayReason>(text.into()).is_err(), "{text:?}");
        }
        assert!(serde_json::from_value::<GatewayReason>(serde_json::json!(1)).is_err());
        assert_eq!("public".parse::<AddressClass>(), Err(ParseError::AddressClass("public".into())));
        for text in ["", "Allow", "allowed", "denied"] {
            assert_eq!(text.parse::<Decision>(), Err(ParseError::Decision(text.to_owned())), "{text:?}");
            assert!(serde_json::from_value::<Decision>(text.into()).is_err(), "{text:?}");
        }
        for text in ["", "error", "error:x", "Completed", "idle", "client_eof"] {
            assert_eq!(text.parse::<CloseReason>(), Err(ParseError::CloseReason(text.to_owned())), "{text:?}");
            assert!(serde_json::from_value::<CloseReason>(text.into()).is_err(), "{text:?}");
        }
    }

    #[test]
    fn only_client_eof_and_gateway_shutdown_are_abandoned() {
        let abandoned: Vec<GatewayReason> = GatewayReason::all().filter(|reason| reason.is_abandoned()).collect();
        assert_eq!(abandoned, [GatewayReason::ClientEof, GatewayReason::GatewayShutdown]);
        let allowed: Vec<GatewayReason> = GatewayReason::all().filter(|reason| reason.is_allowed()).collect();
        assert_eq!(allowed, [GatewayReason::Allowed]);
        assert_eq!(GatewayReason::Allowed.decision(), Decision::Allow);
        assert_eq!(GatewayReason::ClientEof.decision(), Decision::Deny);
        assert_eq!(GatewayReason::HostNotAllowlisted.decision(), Decision::Deny);
    }

    #[test]
    fn decisions_and_close_reasons_round_trip() {
        for decision in [Decision::Allow, Decision::Deny] {
            assert_eq!(serde_json::to_value(decision).expect("json"), decision.as_str());
            assert_eq!(decision.as_str().parse::<Decision>(), Ok(decision));
            assert_eq!(serde_json::from_value::<Decision>(decision.as_str().into()).expect("json"), decision);
        }
        let closes = [
            (CloseReason::Completed, "completed"),
            (CloseReason::IdleTimeout, "idle_timeout"),
            (CloseReason::GatewayShutdown, "gateway_shutdown"),
            (
                CloseReason::Error("connection reset by peer (os error 104)".into()),
                "error: connection reset by peer (os error 104)",
            ),
            (CloseReason::Error(String::new()), "error: "),
        ];
        for (close, wire) in closes {
            assert_eq!(close.to_string(), wire);
            assert_eq!(serde_json::to_value(&close).expect("json"), wire);
            assert_eq!(wire.parse::<CloseReason>(), Ok(close.clone()));
            assert_eq!(serde_json::from_value::<CloseReason>(wire.into()).expect(wire), close);
        }
    }

    #[test]
    fn docs_gateway_md_lists_exactly_these_reasons() {
        let docs = include_str!("../../docs/gateway.md");
        let section = docs.split("## 2. Reason codes").nth(1).and_then(|rest| rest.split("## 3.").next());
        let listed: BTreeSet<&str> = section
            .expect("a section 2")
            .lines()
            .filter_map(|line| line.strip_prefix("| `")?.split('`').next())
            .filter(|code| *code != "address_denied:<class>")
            .collect();
        let classless: BTreeSet<&str> = GatewayReason::all()
            .filter(|reason| !matches!(reason, GatewayReason::AddressDenied(_)))
            .map(GatewayReason::as_str)
            .collect();
        assert_eq!(listed, classless);
        for class in AddressClass::ALL {
            assert!(docs.contains(&format!("`{class}`")), "{class} is not in docs/gateway.md");
        }
    }

    #[test]
    fn the_schema_lists_every_reason_as_a_string() {
        let schema = serde_json::to_value(schemars::schema_for!(GatewayReason)).expect("schema");
        assert_eq!(schema["type"], "string");
        let listed: Vec<&str> =
            schema["enum"].as_array().expect("enum").iter().filter_map(serde_json::Value::as_str).collect();
        let all: Vec<&str> = GatewayReason::all().map(GatewayReason::as_str).collect();
        assert_eq!(listed, all);
    }
}
