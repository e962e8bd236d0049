//! Redaction of what a container printed, before anyone is shown it: every secret-shaped value
//! becomes `[REDACTED]` (keys and surrounding text kept, so the output still reads), then an
//! excerpt is cut at a character boundary. Pure: bytes in, text out.
//!
//! Each rule finds byte ranges in the whole text first and the ranges are replaced together, so
//! the rules cannot interfere with each other, and a secret is redacted before any cut could
//! leave a piece of it too short for its rule to recognise.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The longest excerpt, in bytes.
pub const EXCERPT_LIMIT: usize = 2_000;

/// Key words whose value is a secret, in `key=value`, `key: value` and `"key": "value"` forms,
/// matched in lower case with any identifier around them (`GITHUB_TOKEN`, `x-api-key`,
/// `accessToken`). A suffix must follow a separator, so `max_tokens: 5` is left alone.
const KEY_VALUE: &str = concat!(
    r#"[a-z0-9_.-]*(?:token|secret|passwd|password|api[_-]?key|access[_-]?key|private[_-]?key|authorization|credentials?)"#,
    r#"(?:[_-][a-z0-9_-]*)?["']?[ \t]*[=:][ \t]*(?:(?:bearer|basic|token)[ \t]+)?"#,
    r#"(?:"((?:[^"\\\n]|\\.)+)"|'([^'\n]+)'|([^\s"',;&<>]+))"#,
);

/// One way a secret shows up.
struct Rule {
    /// Matched against the ASCII-lowercased text (same byte offsets), not the original.
    lowercase: bool,
    regex: Regex,
    /// Which span of a match is the secret.
    secret: Secret,
}

#[derive(Clone, Copy)]
enum Secret {
    /// The whole match (a token recognisable by its shape).
    Whole,
    /// The first capture group that matched (a value after its key).
    Group,
    /// The second group, when the first (a JSON key) names a credential.
    JsonValue,
}

fn rule(lowercase: bool, pattern: &str, secret: Secret) -> Rule {
    // The patterns are constants; the unit tests compile every one of them.
    let regex = Regex::new(pattern).unwrap_or_else(|error| panic!("redaction pattern {pattern:?}: {error}"));
    Rule { lowercase, regex, secret }
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        rule(true, KEY_VALUE, Secret::Group),
        // `Bearer <token>` anywhere (headers, curl commands); short words are prose.
        rule(true, r"\bbearer[ \t]+([a-z0-9._~+/-]{8,}=*)", Secret::Group),
        // `"anyKey": "value"` where the key names a credential (checked by `credential_key`).
        rule(false, r#""((?:[^"\\\n]|\\.)*)"[ \t]*:[ \t]*"((?:[^"\\\n]|\\.)+)""#, Secret::JsonValue),
        // The password in `scheme://user:password@host`.
        rule(true, r"[a-z][a-z0-9+.-]*://[^/\s:@]+:([^/\s@]+)@", Secret::Group),
        // OpenAI and Anthropic keys: `sk-…`, `sk-proj-…`, `sk-ant-…`.
        rule(false, r"\bsk-[A-Za-z0-9_-]{16,}", Secret::Whole),
        // AWS access key IDs (long-term and temporary).
        rule(false, r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", Secret::Whole),
        // GitHub tokens: personal, OAuth, server, user-to-server, refresh, fine-grained.
        rule(false, r"\b(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{20,}", Secret::Whole),
        rule(false, r"\bgithub_pat_[A-Za-z0-9_]{20,}", Secret::Whole),
        // Google API keys (the Gemini CLI's).
        rule(false, r"\bAIza[0-9A-Za-z_-]{35}", Secret::Whole),
        // Slack tokens.
        rule(false, r"\bxox[abprs]-[A-Za-z0-9-]{10,}", Secret::Whole),
        // A PEM private key, to its end line (or the end of the text when cut off).
        rule(
            false,
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\z)",
            Secret::Whole,
        ),
    ]
});

/// Whether a JSON key names a credential: the usual names, and any key ending in `_token`,
/// `_key`, `secret` or `password` (or `Token`/`Key` in camelCase).
fn credential_key(key: &str) -> bool {
    const EXACT: [&str; 13] = [
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "password",
        "passwd",
        "secret",
        "api_key",
        "apikey",
        "authorization",
        "client_secret",
        "private_key",
        "credentials",
    ];
    const SUFFIXES: [&str; 6] = ["_token", "-token", "_key", "-key", "secret", "password"];
    let lower = key.to_ascii_lowercase();
    EXACT.contains(&lower.as_str())
        || SUFFIXES.iter().any(|suffix| lower.ends_with(suffix))
        || key.ends_with("Token")
        || key.ends_with("Key")
}

/// The byte ranges of every secret in `text`, sorted and merged.
fn secret_spans(text: &str) -> Vec<Range<usize>> {
    let lowered = text.to_ascii_lowercase();
    let mut spans = Vec::new();
    for rule in RULES.iter() {
        let haystack = if rule.lowercase { lowered.as_str() } else { text };
        for captures in rule.regex.captures_iter(haystack) {
            let found = match rule.secret {
                Secret::Whole => captures.get(0),
                Secret::Group => captures.iter().skip(1).flatten().next(),
                Secret::JsonValue => match captures.get(1) {
                    Some(key) if credential_key(key.as_str()) => captures.get(2),
                    _ => None,
                },
            };
            if let Some(found) = found.filter(|m| !m.is_empty()) {
                spans.push(found.range());
            }
        }
    }
    spans.sort_by_key(|span| (span.start, span.end));
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    merged
}

/// `output` as text (invalid UTF-8 becomes U+FFFD) with every secret replaced by [`REDACTED`].
pub fn redact(output: &[u8]) -> String {
    let text = String::from_utf8_lossy(output);
    let mut redacted = String::with_capacity(text.len());
    let mut kept = 0;
    // Every span starts and ends on a character boundary: the rules match UTF-8 text, and the
    // lowercased copy has the same boundaries (only ASCII letters change).
    for span in secret_spans(&text) {
        redacted.push_str(&text[kept..span.start]);
        redacted.push_str(REDACTED);
        kept = span.end;
    }
    redacted.push_str(&text[kept..]);
    redacted
}

/// A piece of text at most some bytes long, and whether it is shorter than the whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excerpt {
    pub text: String,
    pub truncated: bool,
}

/// The start of `text`, at most `limit` bytes, cut at a character boundary.
pub fn excerpt(text: &str, limit: usize) -> Excerpt {
    if text.len() <= limit {
        return Excerpt { text: text.to_owned(), truncated: false };
    }
    let cut = text.floor_char_boundary(limit);
    Excerpt { text: text[..cut].to_owned(), truncated: true }
}

/// [`redact`], then [`excerpt`] of at most [`EXCERPT_LIMIT`] bytes: a secret is redacted whole
/// before the cut, so no part of it survives.
pub fn redacted_excerpt(output: &[u8]) -> Excerpt {
    excerpt(&redact(output), EXCERPT_LIMIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(text: &str) -> String {
        redact(text.as_bytes())
    }

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(RULES.len(), 11);
    }

    /// One case per secret form: what is printed, what must be gone, what must stay.
    #[test]
    fn each_secret_form_is_redacted_and_its_surroundings_kept() {
        let cases: &[(&str, &str, &str)] = &[
            ("token=abc123 next", "abc123", "token=[REDACTED] next"),
            ("TOKEN=abc123", "abc123", "TOKEN=[REDACTED]"),
            ("GITHUB_TOKEN=abc123", "abc123", "GITHUB_TOKEN=[REDACTED]"),
            ("password=hunter2", "hunter2", "password=[REDACTED]"),
            ("Password: hunter2", "hunter2", "Password: [REDACTED]"),
            ("secret=s3cr3t", "s3cr3t", "secret=[REDACTED]"),
            ("client_secret: s3cr3t", "s3cr3t", "client_secret: [REDACTED]"),
            ("api_key=k-123", "k-123", "api_key=[REDACTED]"),
            ("APIKEY=k123", "k123", "APIKEY=[REDACTED]"),
            ("apikey: k123", "k123", "apikey: [REDACTED]"),
            ("x-api-key: k123", "k123", "x-api-key: [REDACTED]"),
            ("https://host/?token=abc&page=2", "abc", "https://host/?token=[REDACTED]&page=2"),
            ("password=\"two words\"", "two words", "password=\"[REDACTED]\""),
            ("password='two words'", "two words", "password='[REDACTED]'"),
            ("Authorization: Bearer abc.def.ghi", "abc.def.ghi", "Authorization: Bearer [REDACTED]"),
            ("authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "authorization: Basic [REDACTED]"),
            ("curl -H 'X: Bearer eyJhbGciOiJIUzI1NiJ9'", "eyJhbGciOiJIUzI1NiJ9", "Bearer [REDACTED]"),
            (r#"{"token": "abc"}"#, "abc", r#"{"token": "[REDACTED]"}"#),
            (r#"{"access_token":"abc","x":1}"#, "abc", r#"{"access_token":"[REDACTED]","x":1}"#),
            (r#"{"refresh_token": "abc"}"#, "abc", r#""refresh_token": "[REDACTED]""#),
            (r#"{"password": "abc"}"#, "abc", r#""password": "[REDACTED]""#),
            (r#"{"secret": "abc"}"#, "abc", r#""secret": "[REDACTED]""#),
            (r#"{"api_key": "abc"}"#, "abc", r#""api_key": "[REDACTED]""#),
            (r#"{"apiKey": "abc"}"#, "abc", r#""apiKey": "[REDACTED]""#),
            (r#"{"authorization": "Bearer abc"}"#, "abc", r#""authorization": "[REDACTED]""#),
            (r#"{"client_secret": "abc"}"#, "abc", r#""client_secret": "[REDACTED]""#),
            (r#"{"session_token": "abc"}"#, "abc", r#""session_token": "[REDACTED]""#),
            (r#"{"signing_key": "abc"}"#, "abc", r#""signing_key": "[REDACTED]""#),
            (r#"{"webhookSecret": "abc"}"#, "abc", r#""webhookSecret": "[REDACTED]""#),
            (r#"{"privateKey": "abc"}"#, "abc", r#""privateKey": "[REDACTED]""#),
            (r#"{"token": "a\"b"}"#, r#"a\"b"#, r#""token": "[REDACTED]""#),
            ("key sk-abcdefghijklmnopqrstuv here", "sk-abcdefghijklmnopqrstuv", "key [REDACTED] here"),
            ("sk-proj-abcdefghijklmnop1234", "abcdefghijklmnop1234", "[REDACTED]"),
            ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz", "[REDACTED]"),
            ("id AKIAABCDEFGHIJKLMNOP.", "AKIAABCDEFGHIJKLMNOP", "id [REDACTED]."),
            ("ASIAABCDEFGHIJKLMNOP", "ASIAABCDEFGHIJKLMNOP", "[REDACTED]"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abc", "[REDACTED]"),
            ("gho_abcdefghijklmnopqrstuvwxyz0123456789", "gho_abc", "[REDACTED]"),
            ("ghs_abcdefghijklmnopqrstuvwxyz0123456789", "ghs_abc", "[REDACTED]"),
            ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG", "[REDACTED]"),
            ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSy", "[REDACTED]"),
            ("xoxb-1234567890-abcdefghij", "xoxb-", "[REDACTED]"),
            ("git clone https://user:pa55w0rd@host/repo", "pa55w0rd", "https://user:[REDACTED]@host/repo"),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nafter",
                "MIIEow",
                "[REDACTED]\nafter",
            ),
            ("-----BEGIN PRIVATE KEY-----\nMIIEow (cut off", "MIIEow", "[REDACTED]"),
        ];
        for (printed, gone, kept) in cases {
            let out = redacted(printed);
            assert!(!out.contains(gone), "{printed:?} → {out:?} still shows {gone:?}");
            assert!(out.contains(REDACTED), "{printed:?} → {out:?}");
            assert!(out.contains(kept), "{printed:?} → {out:?} lost {kept:?}");
        }
    }

    #[test]
    fn the_brief_s_example_line_loses_every_secret() {
        let out = redacted(
            "token=abc123 sk-ant-xyzxyzxyzxyzxyzxyz AKIAABCDEFGHIJKLMNOP ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        );
        assert_eq!(out, "token=[REDACTED] [REDACTED] [REDACTED] [REDACTED]");
    }

    #[test]
    fn ordinary_output_is_left_alone() {
        for text in [
            "codex-cli 0.171.0",
            "Usage: codex [OPTIONS] [PROMPT]\n  --model <MODEL>  the model\n",
            "max_tokens: 5, input_tokens=12",
            r#"{"type":"usage","input_tokens":12,"name":"task.get","keyboard":"us"}"#,
            "a bearer token is read from the environment",
            "sk-short",
            "AKIA1234",
            "ask-me-anything-about-this-thing",
            "",
        ] {
            assert_eq!(redacted(text), text, "{text:?}");
        }
    }

    #[test]
    fn overlapping_matches_become_one_marker() {
        // The key rule and the shape rule both find this value.
        assert_eq!(redacted("api_key=sk-abcdefghijklmnopqrstuv"), "api_key=[REDACTED]");
        assert_eq!(redacted(r#""token": "ghp_abcdefghijklmnopqrstuvwxyz0123""#), r#""token": "[REDACTED]""#);
    }

    #[test]
    fn invalid_utf8_becomes_the_replacement_character() {
        let out = redact(b"caf\xc3 token=abc \xff end");
        assert_eq!(out, "caf\u{fffd} token=[REDACTED] \u{fffd} end");
    }

    #[test]
    fn an_excerpt_is_cut_at_a_character_boundary() {
        // "é" is two bytes: a limit inside it falls back before it.
        let text = "aé";
        assert_eq!(excerpt(text, 2), Excerpt { text: "a".into(), truncated: true });
        assert_eq!(excerpt(text, 3), Excerpt { text: "aé".into(), truncated: false });
        let long = "€".repeat(1000); // 3,000 bytes
        let cut = excerpt(&long, EXCERPT_LIMIT);
        assert!(cut.truncated);
        assert_eq!(cut.text.len(), 1998, "666 whole characters");
        assert!(cut.text.chars().all(|c| c == '€'));
        assert_eq!(excerpt("", 0), Excerpt { text: String::new(), truncated: false });
    }

    #[test]
    fn a_secret_across_the_excerpt_limit_is_redacted_before_the_cut() {
        let mut printed = "x".repeat(EXCERPT_LIMIT - 8);
        printed.push_str(" ghp_abcdefghijklmnopqrstuvwxyz0123456789");
        let cut = redacted_excerpt(printed.as_bytes());
        assert!(cut.truncated);
        assert!(cut.text.len() <= EXCERPT_LIMIT);
        assert!(!cut.text.contains("ghp_"), "no piece of the token survives the cut: {:?}", &cut.text[1980..]);
    }

    #[test]
    fn a_short_output_is_whole() {
        assert_eq!(redacted_excerpt(b"codex 1.0\n"), Excerpt { text: "codex 1.0\n".into(), truncated: false });
    }
}
