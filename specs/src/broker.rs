//! The credential broker's words as types (docs/broker.md): the per-session placeholder an agent
//! holds instead of a provider key, the provider schemes the broker knows, every reason a
//! brokered request can end with, one line of the broker log, token budgets and usage, and the
//! report a session keeps. Serialised here and nowhere else.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::sidecar::SidecarState;
use crate::words::words;

/// Every placeholder starts with this, so a scanner (and a person) recognises one anywhere.
pub const PLACEHOLDER_PREFIX: &str = "rt-placeholder-";

/// The placeholder made of 32 random bytes: the prefix and 64 lowercase hex digits. The caller
/// draws the bytes from the OS; this crate does no IO.
pub fn placeholder_from(random: &[u8; 32]) -> String {
    use std::fmt::Write as _;
    random.iter().fold(String::from(PLACEHOLDER_PREFIX), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

words! {
    /// How a provider host is spoken to: where its key goes, which paths are model endpoints
    /// and where a response says its token usage. Decided by the host alone ([`Scheme::of_host`]).
    Scheme {
        /// `api.openai.com`: `Authorization: Bearer`, the Responses API.
        Openai = "openai",
        /// `api.anthropic.com`: `x-api-key`, the Messages API.
        Anthropic = "anthropic",
        /// `generativelanguage.googleapis.com`: `x-goog-api-key` (or `?key=`), `generateContent`.
        Gemini = "gemini",
        /// Any other host: the placeholder is taken from wherever the client put it (bearer,
        /// `x-api-key`, `x-goog-api-key`, `?key=`) and the real value goes in the same place;
        /// no path list and no usage format is known.
        Custom = "custom",
    }
}

impl Scheme {
    /// The scheme a `credentialEnv` variable's name names (`*OPENAI*`/`*CODEX*`,
    /// `*ANTHROPIC*`/`*CLAUDE*`, `*GEMINI*`/`*GOOGLE*`), if any: which provider's key it holds.
    pub fn named_by(variable: &str) -> Option<Scheme> {
        let table: [(Scheme, &[&str]); 3] = [
            (Scheme::Openai, &["OPENAI", "CODEX"]),
            (Scheme::Anthropic, &["ANTHROPIC", "CLAUDE"]),
            (Scheme::Gemini, &["GEMINI", "GOOGLE"]),
        ];
        table.into_iter().find(|(_, words)| words.iter().any(|word| variable.contains(word))).map(|(scheme, _)| scheme)
    }

    pub fn of_host(host: &str) -> Scheme {
        match host {
            "api.openai.com" => Scheme::Openai,
            "api.anthropic.com" => Scheme::Anthropic,
            "generativelanguage.googleapis.com" => Scheme::Gemini,
            _ => Scheme::Custom,
        }
    }
}

words! {
    /// Why a brokered request ended as it did: `allowed`, or the one refusal (with the status
    /// the agent is answered).
    #[derive(Default)]
    BrokerReason {
        /// Passed to the provider; its status is the provider's.
        #[default]
        Allowed = "allowed",
        /// The first path segment names no provider host of the Adapter (404).
        UnknownRoute = "unknown_route",
        /// No placeholder of this session where the scheme puts the key (401).
        NoPlaceholder = "no_placeholder",
        /// Not a model endpoint of the provider (403).
        PathNotAllowed = "path_not_allowed",
        /// A method the provider's endpoints do not take (405).
        MethodNotAllowed = "method_not_allowed",
        /// A WebSocket or other upgrade (426: Codex falls back to HTTP at once).
        UpgradeRefused = "upgrade_refused",
        /// The request body is over the broker's cap (413).
        BodyTooLarge = "body_too_large",
        /// The session's token or request budget is spent (429).
        BudgetExhausted = "budget_exhausted",
        /// The request head did not arrive in time (408).
        HeaderTimeout = "header_timeout",
        /// The provider could not be resolved, was refused by the address policy, or did not
        /// answer the dial or the TLS handshake (502).
        UpstreamFailed = "upstream_failed",
        /// The provider did not answer in time (504).
        UpstreamTimeout = "upstream_timeout",
        /// Too many requests open at once for one session (429).
        TooManyRequests = "too_many_requests",
        /// The request is not HTTP/1.1 the broker can forward faithfully (400).
        BadRequest = "bad_request",
        /// A `CONNECT` to a host or port that is not one of the session's provider hosts on
        /// 443 (403): a brokered session reaches nothing else.
        TunnelRefused = "tunnel_refused",
    }
}

impl BrokerReason {
    /// The status the agent is answered with when the broker refuses (`Allowed` has none).
    pub fn status(self) -> Option<u16> {
        Some(match self {
            BrokerReason::Allowed => return None,
            BrokerReason::UnknownRoute => 404,
            BrokerReason::NoPlaceholder => 401,
            BrokerReason::PathNotAllowed | BrokerReason::TunnelRefused => 403,
            BrokerReason::MethodNotAllowed => 405,
            BrokerReason::UpgradeRefused => 426,
            BrokerReason::BodyTooLarge => 413,
            BrokerReason::BudgetExhausted | BrokerReason::TooManyRequests => 429,
            BrokerReason::HeaderTimeout => 408,
            BrokerReason::UpstreamFailed => 502,
            BrokerReason::UpstreamTimeout => 504,
            BrokerReason::BadRequest => 400,
        })
    }
}

/// Tokens counted from provider responses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
}

impl Tokens {
    pub fn total(self) -> u64 {
        self.input.saturating_add(self.output)
    }

    pub fn add(&mut self, other: Tokens) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
    }
}

/// `spec.budget` of an Assignment (or the default on its Adapter): what the broker lets one
/// session spend. Unset fields are unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// Input plus output tokens, as the provider's responses report them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub tokens: Option<u64>,
    /// Model requests passed to the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub requests: Option<u64>,
}

impl Budget {
    pub fn is_unlimited(&self) -> bool {
        self.tokens.is_none() && self.requests.is_none()
    }

    /// This budget where set, `fallback`'s otherwise, field by field.
    pub fn over(self, fallback: Budget) -> Budget {
        Budget { tokens: self.tokens.or(fallback.tokens), requests: self.requests.or(fallback.requests) }
    }
}

/// One line of a session's broker log (`broker.log`), one per request: never the key, the
/// placeholder or a header dump.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestLine {
    /// Per broker, from 1.
    pub id: u64,
    /// RFC 3339, when the request head arrived.
    pub at: String,
    /// The provider host (from the Adapter), when the route was known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<Scheme>,
    pub method: String,
    /// The path without its query, ids and model names replaced by `{…}` where the scheme
    /// knows them; at most 256 bytes.
    pub path: String,
    /// What the agent was answered (the provider's status when allowed).
    pub status: u16,
    pub reason: BrokerReason,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub duration_ms: u64,
    /// From the request head to the first response byte passed back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_ms: Option<u64>,
    /// The usage the response reported; `None` when it reported none the broker could read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    /// The provider's `x-request-id` / `request-id`, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_request_id: Option<String>,
    /// The name of the `credentialEnv` variable whose placeholder the request carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// A refusal's detail, or an upstream error; never a credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// It came through a `CONNECT` tunnel the broker terminated (the CLI ignored its base URL
    /// and used `HTTPS_PROXY`), not to the base URL.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intercepted: bool,
}

/// What `status` and `sessions show` say about a session's broker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerReport {
    pub state: SidecarState,
    /// The broker's socket on the host.
    pub socket: String,
    /// The provider hosts it brokers.
    pub hosts: Vec<String>,
    /// Requests passed to a provider.
    pub requests: u64,
    /// Refused requests by reason.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused: BTreeMap<BrokerReason, u64>,
    pub tokens: Tokens,
    /// Allowed responses whose usage could not be read (each ends a budgeted session).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unreadable_usage: u64,
    #[serde(default, skip_serializing_if = "Budget::is_unlimited")]
    pub budget: Budget,
    /// The budget was spent: the next model request was (or would have been) refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exhausted: bool,
    /// Log lines not written because the log's budget was spent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lines_dropped: u64,
}

impl BrokerReport {
    /// What is left of the budget: tokens and requests, `None` where unlimited.
    pub fn left(&self) -> (Option<u64>, Option<u64>) {
        (
            self.budget.tokens.map(|cap| cap.saturating_sub(self.tokens.total())),
            self.budget.requests.map(|cap| cap.saturating_sub(self.requests)),
        )
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placeholder_is_the_prefix_and_64_hex_digits() {
        let placeholder = placeholder_from(&[0xab; 32]);
        assert_eq!(placeholder.len(), PLACEHOLDER_PREFIX.len() + 64);
        assert!(placeholder.starts_with("rt-placeholder-abab"));
    }

    #[test]
    fn the_scheme_is_decided_by_the_host_alone() {
        assert_eq!(Scheme::of_host("api.openai.com"), Scheme::Openai);
        assert_eq!(Scheme::of_host("api.anthropic.com"), Scheme::Anthropic);
        assert_eq!(Scheme::of_host("generativelanguage.googleapis.com"), Scheme::Gemini);
        assert_eq!(Scheme::of_host("api.openai.com.evil.test"), Scheme::Custom);
    }

    #[test]
    fn a_variable_names_its_provider_by_a_word_in_it() {
        assert_eq!(Scheme::named_by("CODEX_API_KEY"), Some(Scheme::Openai));
        assert_eq!(Scheme::named_by("MY_ANTHROPIC_KEY"), Some(Scheme::Anthropic));
        assert_eq!(Scheme::named_by("GOOGLE_API_KEY"), Some(Scheme::Gemini));
        assert_eq!(Scheme::named_by("ACME_API_KEY"), None);
    }

    #[test]
    fn every_refusal_has_a_status_and_allowed_has_none() {
        for reason in BrokerReason::ALL {
            assert_eq!(reason.status().is_none(), *reason == BrokerReason::Allowed, "{reason}");
        }
    }

    #[test]
    fn a_budget_falls_back_field_by_field_and_reports_what_is_left() {
        let budget = Budget { tokens: Some(100), requests: None }.over(Budget { tokens: Some(5), requests: Some(3) });
        assert_eq!(budget, Budget { tokens: Some(100), requests: Some(3) });
        let report =
            BrokerReport { budget, requests: 4, tokens: Tokens { input: 60, output: 10 }, ..BrokerReport::default() };
        assert_eq!(report.left(), (Some(30), Some(0)));
    }
}
