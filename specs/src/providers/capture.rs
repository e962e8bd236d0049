//! What a profile's capture rules read: where a provider's JSON events name the session and
//! report token usage, and the JSON helpers those rules share. `roundtable-agents` turns the
//! output into events, checks the id and says why none was captured.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One JSON event (a line of a JSON-lines stream, or an element of a single document).
pub type Event = Map<String, Value>;

/// Tokens a provider reported spending, summed over the run. Fields a provider does not report
/// are absent rather than zero.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// How a provider's output is read.
#[derive(Debug, Clone, Copy)]
pub struct CaptureRule {
    /// A JSON-lines stream (what the plan asks every CLI for).
    pub stream: ReadRule,
    /// The whole output as one JSON document (an array, or an object over several lines), for a
    /// CLI that has such a form; `None`: its output is read as lines only.
    pub document: Option<ReadRule>,
}

/// A rule that totals a run's token usage from its events; `None` when they report none.
pub type UsageRule = fn(&[Event]) -> Option<TokenUsage>;

/// Where one form of a provider's output names its session and reports its usage.
#[derive(Debug, Clone, Copy)]
pub struct ReadRule {
    pub session_id: fn(&[Event]) -> Found<'_>,
    /// What `session_id` looks for, as the reason says when it finds nothing.
    pub looked_for: &'static str,
    /// The usage over the run; `None`: the output reports none.
    pub usage: Option<UsageRule>,
}

/// What a session id rule found, before the id is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found<'a> {
    /// The id as the provider wrote it.
    Id(&'a Value),
    /// No event carries it.
    Missing,
    /// The id at the start and the one in the final result differ; neither is trusted.
    Inconsistent { first: &'a Value, result: &'a Value },
}

impl<'a> Found<'a> {
    pub(super) fn from(id: Option<&'a Value>) -> Self {
        id.map_or(Found::Missing, Found::Id)
    }
}

// === reading events ===

pub(super) fn is_type(event: &Event, kind: &str) -> bool {
    event.get("type").and_then(Value::as_str) == Some(kind)
}

/// A field that is present and not `null` (a `null` id means "none yet", not an id).
pub(super) fn field<'a>(object: &'a Event, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|value| !value.is_null())
}

/// The `field` of the first event of type `kind`.
pub(super) fn first_of_type<'a>(events: &'a [Event], kind: &str, key: &str) -> Found<'a> {
    let event = events.iter().find(|event| is_type(event, kind));
    Found::from(event.and_then(|event| field(event, key)))
}

/// `session_id` on every message (Claude, the mock): the first one names the session and the
/// final `result` must agree. A run cut short has no result; its first id still stands.
pub(super) fn first_confirmed_by_result(events: &[Event]) -> Found<'_> {
    let Some(first) = events.iter().find_map(|event| field(event, "session_id")) else {
        return Found::Missing;
    };
    let result = events.iter().rev().find(|event| is_type(event, "result"));
    match result.and_then(|event| field(event, "session_id")) {
        Some(confirmed) if confirmed != first => Found::Inconsistent { first, result: confirmed },
        _ => Found::Id(first),
    }
}

// === token usage ===

pub(super) fn count(object: &Value, key: &str) -> u64 {
    object.get(key).and_then(Value::as_u64).unwrap_or(0)
}

pub(super) fn optional_count(object: &Value, key: &str) -> Option<u64> {
    object.get(key).and_then(Value::as_u64)
}

/// A count reported by either side is kept; one reported by neither stays absent.
fn add_optional(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        _ => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

/// Two reports of one run summed, for a provider that reports per turn or per step.
pub(super) fn add(a: TokenUsage, b: TokenUsage) -> TokenUsage {
    TokenUsage {
        input_tokens: a.input_tokens.saturating_add(b.input_tokens),
        output_tokens: a.output_tokens.saturating_add(b.output_tokens),
        cached_input_tokens: add_optional(a.cached_input_tokens, b.cached_input_tokens),
        reasoning_tokens: add_optional(a.reasoning_tokens, b.reasoning_tokens),
    }
}

pub(super) fn object_at<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    value.get(key).filter(|inner| inner.is_object())
}

pub(super) fn last_of_type<'a>(events: &'a [Event], kind: &str) -> Option<&'a Event> {
    events.iter().rev().find(|event| is_type(event, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_counts_stay_absent_only_when_nobody_reports_them() {
        assert_eq!(add_optional(None, None), None);
        assert_eq!(add_optional(Some(3), None), Some(3));
        assert_eq!(add_optional(None, Some(4)), Some(4));
        assert_eq!(add_optional(Some(3), Some(4)), Some(7));
        assert_eq!(add_optional(Some(u64::MAX), Some(1)), Some(u64::MAX));
    }
}
