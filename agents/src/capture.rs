//! Session-id and token-usage capture from each provider's machine-readable output, read by the
//! rules of its profile (`roundtable_specs::providers`): which events name the session, which
//! report usage, and whether the CLI also writes one JSON document.
//!
//! Pure: the captured stdout bytes in, a [`Capture`] out. Every provider's parser tolerates
//! unknown events and extra fields, skips blank and non-JSON lines (CLIs print diagnostics), and
//! never turns part of a line cut by the capture cap into an id. A session id only leaves this
//! module as an [`ExternalSessionId`], so nothing unchecked can reach a resume argv.

use roundtable_specs::adapter::Provider;
use roundtable_specs::providers::{Event, Found, ReadRule};
use roundtable_specs::resume::ExternalSessionId;
use roundtable_specs::session::TokenUsage;
use serde_json::Value;

/// What a provider's output said about its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    pub session_id: Result<ExternalSessionId, NotCaptured>,
    /// None when the output reports no usage.
    pub usage: Option<TokenUsage>,
}

impl Capture {
    fn nothing(why: NotCaptured) -> Self {
        Self { session_id: Err(why), usage: None }
    }
}

/// Why no session id was captured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotCaptured {
    #[error("the {0} adapter prints no machine-readable output, so it has no session id to capture")]
    Unsupported(Provider),
    #[error("the agent printed nothing on stdout")]
    Empty,
    #[error("no line of the output is a JSON object; is the provider's JSON output format switched on?")]
    NotJson,
    #[error("the output was read but holds no session id (looked for {looked_for})")]
    NoSessionId { looked_for: &'static str },
    #[error("the output was cut at the capture limit before a complete session id could be read")]
    Truncated,
    #[error("refused the session id {}: an id is 1 to 128 of A-Z, a-z, 0-9, '_' and '-'", shown(.value))]
    InvalidId { value: String },
    #[error(
        "the session id {} at the start differs from {} in the final result; neither is trusted",
        shown(.first),
        shown(.result)
    )]
    Inconsistent { first: String, result: String },
    #[error("the output looks like one JSON document but does not parse: {error}")]
    Malformed { error: String },
}

/// Reads `provider`'s stdout. `truncated`: the capture cap cut it, so a last line without its
/// newline is never read and a single document that does not parse is reported as truncated.
pub fn capture(provider: Provider, stdout: &[u8], truncated: bool) -> Capture {
    let Some(rule) = provider.profile().capture else {
        return Capture::nothing(NotCaptured::Unsupported(provider));
    };
    if stdout.trim_ascii().is_empty() {
        return Capture::nothing(NotCaptured::Empty);
    }
    let transcript = match Transcript::read(rule.document.is_some(), stdout, truncated) {
        Ok(transcript) => transcript,
        Err(why) => return Capture::nothing(why),
    };
    let read = match rule.document {
        Some(document) if transcript.document => document,
        _ => rule.stream,
    };
    Capture { session_id: transcript.session_id(&read), usage: read.usage.and_then(|usage| usage(&transcript.events)) }
}

// === reading the output ===

/// The JSON events of one output, in order.
#[derive(Debug)]
struct Transcript {
    events: Vec<Event>,
    /// The whole output was one JSON document (Claude's and Gemini's `json` forms).
    document: bool,
    truncated: bool,
}

impl Transcript {
    /// `has_document_form`: the CLI may write its output as one JSON document.
    fn read(has_document_form: bool, stdout: &[u8], truncated: bool) -> Result<Self, NotCaptured> {
        if has_document_form && looks_like_document(stdout) {
            match parse_document(stdout) {
                Ok(events) => return Ok(Self { events, document: true, truncated }),
                // A diagnostic such as `[info] …` also starts with a bracket: fall back to lines
                // when they hold JSON, and blame the document only when nothing else parses.
                Err(error) => {
                    let events = json_lines(stdout, truncated);
                    if events.is_empty() {
                        return Err(if truncated { NotCaptured::Truncated } else { NotCaptured::Malformed { error } });
                    }
                    return Ok(Self { events, document: false, truncated });
                }
            }
        }
        Ok(Self { events: json_lines(stdout, truncated), document: false, truncated })
    }

    /// The session id `read`'s rule finds, checked.
    fn session_id(&self, read: &ReadRule) -> Result<ExternalSessionId, NotCaptured> {
        match (read.session_id)(&self.events) {
            Found::Id(id) => checked(id),
            Found::Missing => Err(self.missing(read.looked_for)),
            Found::Inconsistent { first, result } => {
                Err(NotCaptured::Inconsistent { first: text_of(first), result: text_of(result) })
            }
        }
    }

    /// Why the rule for `looked_for` found nothing.
    fn missing(&self, looked_for: &'static str) -> NotCaptured {
        if self.truncated {
            NotCaptured::Truncated
        } else if self.events.is_empty() {
            NotCaptured::NotJson
        } else {
            NotCaptured::NoSessionId { looked_for }
        }
    }
}

/// The lines worth reading: when the cap cut the output, the text after the last newline is a
/// fragment (or nothing), and part of an id must never pass for an id. Without truncation a last
/// line lacking its newline is whole: some CLIs omit the final newline.
fn complete_lines(stdout: &[u8], truncated: bool) -> impl Iterator<Item = &[u8]> {
    let mut lines: Vec<&[u8]> = stdout.split(|&byte| byte == b'\n').collect();
    if truncated {
        lines.pop();
    }
    lines.into_iter()
}

/// The JSON objects among the complete lines; anything else is a diagnostic and skipped.
fn json_lines(stdout: &[u8], truncated: bool) -> Vec<Event> {
    complete_lines(stdout, truncated).filter_map(parse_event).collect()
}

/// One line as a JSON object, decoding invalid UTF-8 lossily: an id carrying a replacement
/// character is refused by [`ExternalSessionId`] anyway.
fn parse_event(line: &[u8]) -> Option<Event> {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// An array, or an object spread over several lines (pretty-printed): a line-by-line reading
/// cannot parse its first line.
fn looks_like_document(stdout: &[u8]) -> bool {
    let trimmed = stdout.trim_ascii_start();
    match trimmed.first() {
        Some(b'[') => true,
        Some(b'{') => {
            let first_line = trimmed.split(|&byte| byte == b'\n').next().unwrap_or_default();
            parse_event(first_line).is_none()
        }
        _ => false,
    }
}

/// The whole output as one JSON value: an object is one event, an array a list of them.
fn parse_document(stdout: &[u8]) -> Result<Vec<Event>, String> {
    let text = String::from_utf8_lossy(stdout);
    match serde_json::from_str::<Value>(&text).map_err(|error| error.to_string())? {
        Value::Object(event) => Ok(vec![event]),
        Value::Array(items) => Ok(items.into_iter().filter_map(into_event).collect()),
        other => Err(format!("expected an object or an array, found {}", kind(&other))),
    }
}

fn into_event(value: Value) -> Option<Event> {
    match value {
        Value::Object(event) => Some(event),
        _ => None,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

// === session ids ===

/// The id as the provider wrote it; a non-string is refused rather than converted.
fn checked(value: &Value) -> Result<ExternalSessionId, NotCaptured> {
    match value {
        Value::String(text) => text.parse().map_err(|_| NotCaptured::InvalidId { value: text.clone() }),
        other => Err(NotCaptured::InvalidId { value: other.to_string() }),
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

// === messages ===

/// Longest part of a refused value an operator sees: enough to recognise it, never a flood.
const SHOWN_CHARS: usize = 80;

/// A refused value for a message: quoted and escaped (no control characters reach a terminal),
/// and clipped.
fn shown(value: &str) -> String {
    let clipped: String = value.chars().take(SHOWN_CHARS).collect();
    let ellipsis = if value.chars().nth(SHOWN_CHARS).is_some() { "…" } else { "" };
    format!("{clipped:?}{ellipsis}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(stdout: &str, truncated: bool) -> Vec<String> {
        complete_lines(stdout.as_bytes(), truncated).map(|line| String::from_utf8_lossy(line).into_owned()).collect()
    }

    #[test]
    fn a_cut_output_loses_only_the_text_after_its_last_newline() {
        let cases: &[(&str, bool, &[&str])] = &[
            ("a\nb\n", false, &["a", "b", ""]),
            ("a\nb\n", true, &["a", "b"]),
            ("a\nb", false, &["a", "b"]),
            ("a\nb", true, &["a"]),
            ("partial", true, &[]),
            ("", true, &[]),
        ];
        for (stdout, truncated, expected) in cases {
            assert_eq!(lines(stdout, *truncated), *expected, "{stdout:?} truncated={truncated}");
        }
    }

    #[test]
    fn only_json_objects_are_events() {
        let cases: &[(&[u8], bool)] = &[
            (b"{\"type\":\"init\"}", true),
            (b"  {\"type\":\"init\"}\r", true),
            (b"", false),
            (b"   ", false),
            (b"Loaded cached credentials.", false),
            (b"[1,2]", false),
            (b"42", false),
            (b"{\"type\":", false),
            (b"{\"session_id\":\"a\xffb\"}", true),
        ];
        for (line, is_event) in cases {
            assert_eq!(parse_event(line).is_some(), *is_event, "{:?}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn document_form_is_an_array_or_an_object_spread_over_lines() {
        let cases: &[(&str, bool)] = &[
            ("[{\"type\":\"result\"}]\n", true),
            ("\n  [\n  {}\n]", true),
            ("{\n  \"session_id\": \"x\"\n}\n", true),
            ("{\"type\":\"result\",\"session_id\":\"x\"}\n", false),
            ("{\"type\":\"init\"}\n{\"type\":\"result\"}\n", false),
            ("Loaded cached credentials.\n{\n}", false),
        ];
        for (stdout, expected) in cases {
            assert_eq!(looks_like_document(stdout.as_bytes()), *expected, "{stdout:?}");
        }
    }

    #[test]
    fn a_bracketed_diagnostic_falls_back_to_lines() {
        let stdout = b"[warn] slow start\n{\"type\":\"init\",\"session_id\":\"g-1\"}\n";
        let capture = capture(Provider::Gemini, stdout, false);
        assert_eq!(capture.session_id, Ok("g-1".parse().expect("valid id")));
    }

    #[test]
    fn a_document_that_is_neither_object_nor_array_is_malformed() {
        assert_eq!(parse_document(b"\"text\""), Err("expected an object or an array, found a string".to_owned()));
    }

    #[test]
    fn ids_must_be_safe_strings() {
        let cases: &[(Value, Option<&str>)] = &[
            (Value::from("0199a213-81c0-7800-8aa1-bbab2a035a53"), Some("0199a213-81c0-7800-8aa1-bbab2a035a53")),
            (Value::from("ses_f86f2df67ffep5CKpMOXIyR44R"), Some("ses_f86f2df67ffep5CKpMOXIyR44R")),
            (Value::from("a; rm -rf /"), None),
            (Value::from(""), None),
            (Value::from("x".repeat(129)), None),
            (Value::from("a\u{fffd}b"), None),
            (Value::from(12345), None),
        ];
        for (value, expected) in cases {
            let got = checked(value);
            assert_eq!(got.as_ref().ok().map(ExternalSessionId::as_str), *expected, "{value}");
            if expected.is_none() {
                assert!(matches!(got, Err(NotCaptured::InvalidId { .. })), "{value}: {got:?}");
            }
        }
    }

    #[test]
    fn a_null_id_is_no_id() {
        let capture = capture(Provider::Opencode, b"{\"sessionID\":null,\"part\":{\"sessionID\":\"ses_1\"}}\n", false);
        assert_eq!(capture.session_id, Ok("ses_1".parse().expect("valid id")));
    }

    #[test]
    fn refused_values_are_escaped_and_clipped_in_messages() {
        assert_eq!(shown("a; rm -rf /"), "\"a; rm -rf /\"");
        assert_eq!(shown("\u{1b}[31m"), "\"\\u{1b}[31m\"");
        let long = "y".repeat(500);
        let message = NotCaptured::InvalidId { value: long }.to_string();
        assert!(message.contains(&format!("\"{}\"…", "y".repeat(SHOWN_CHARS))), "{message}");
        assert!(!message.contains(&"y".repeat(SHOWN_CHARS + 1)), "{message}");
    }

    #[test]
    fn mock_transcripts_name_their_session() {
        let stdout = concat!(
            "{\"type\":\"init\",\"session_id\":\"mock-0123456789abcdef\",\"agent\":\"roundtable-mock\"}\n",
            "{\"type\":\"edit\",\"path\":\"roundtable-mock.md\",\"bytes\":12}\n",
            "{\"type\":\"result\",\"session_id\":\"mock-0123456789abcdef\",\"status\":\"success\"}\n",
        );
        let capture = capture(Provider::Mock, stdout.as_bytes(), false);
        assert_eq!(capture.session_id, Ok("mock-0123456789abcdef".parse().expect("valid id")));
        assert_eq!(capture.usage, None);
    }
}
