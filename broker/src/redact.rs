//! Masking a provider's error body before the agent sees it: every echo of the real key and of
//! the request's placeholder that [`crate::mask`] finds (whole or in the shortened
//! `sk-proj-****…MxYA` forms providers print, in any encoding), each replaced by `[redacted]`,
//! and anything else shaped like a placeholder.

use roundtable_specs::broker::PLACEHOLDER_PREFIX;

use crate::mask::{Echoes, MASK};

/// What is masked in a body or header the broker passes back: the one list.
pub(crate) fn echoes(secret: &str, placeholder: &str) -> Echoes {
    Echoes::of(&[secret.as_bytes(), placeholder.as_bytes()])
}

/// Percent-encodes all but the unreserved characters.
pub(crate) fn percent_encode(value: &str, upper: bool) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else if upper {
            out.push_str(&format!("%{byte:02X}"));
        } else {
            out.push_str(&format!("%{byte:02x}"));
        }
    }
    out
}

/// `body` with every echo of `secret` and `placeholder` masked.
#[cfg(test)]
pub(crate) fn redact(body: &[u8], secret: &str, placeholder: &str) -> Vec<u8> {
    without_placeholders(&echoes(secret, placeholder).mask(body))
}

/// `body` (already masked of this request's echoes) with anything shaped like a placeholder
/// masked too, the prefix and the hex digits after it: no session's placeholder is passed back.
pub(crate) fn without_placeholders(body: &[u8]) -> Vec<u8> {
    let prefix = PLACEHOLDER_PREFIX.as_bytes();
    let mut out = Vec::with_capacity(body.len());
    let mut at = 0;
    while at < body.len() {
        if body[at..].len() >= prefix.len() && body[at..at + prefix.len()].eq_ignore_ascii_case(prefix) {
            out.extend_from_slice(MASK);
            at += prefix.len();
            while at < body.len() && body[at].is_ascii_hexdigit() {
                at += 1;
            }
        } else {
            out.push(body[at]);
            at += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-proj-abcdefghijklmnopqrstuvwxyzMxYA";
    const PLACEHOLDER: &str = "rt-placeholder-00ff00ff";

    fn masked(body: &str) -> String {
        String::from_utf8(redact(body.as_bytes(), KEY, PLACEHOLDER)).expect("utf-8")
    }

    #[test]
    fn every_echo_of_the_key_is_masked() {
        assert_eq!(masked(&format!("bad key {KEY}.")), "bad key [redacted].");
        assert_eq!(
            masked("Incorrect API key provided: sk-proj-****\u{2026}MxYA."),
            "Incorrect API key provided: [redacted]."
        );
        assert_eq!(masked("key sk-****MxYA and sk-pro...MxYA"), "key [redacted] and [redacted]");
        assert_eq!(masked(&format!("you sent {PLACEHOLDER}")), "you sent [redacted]");
        assert_eq!(masked("you sent rt-placeholder-ab12 and RT-PLACEHOLDER-cd"), "you sent [redacted] and [redacted]");
        assert_eq!(masked("rt-p***00ff"), "[redacted]");
    }

    #[test]
    fn the_percent_encoded_key_is_masked() {
        let key = "abc+def/ghi=jkl";
        let body = "no route for /v1/x?key=abc%2Bdef%2Fghi%3Djkl nor abc%2bdef%2fghi%3djkl";
        let out = String::from_utf8(redact(body.as_bytes(), key, PLACEHOLDER)).expect("utf-8");
        assert_eq!(out, "no route for /v1/x?key=[redacted] nor [redacted]");
    }

    #[test]
    fn a_json_escaped_key_is_masked() {
        let key = "abc+def/ghi=jkl";
        let body = r#"{"echo":"abc+def\/ghi=jkl","u":"abc\u002Bdef\u002fghi\u003djkl"}"#;
        let out = String::from_utf8(redact(body.as_bytes(), key, PLACEHOLDER)).expect("utf-8");
        assert_eq!(out, r#"{"echo":"[redacted]","u":"[redacted]"}"#);
    }

    #[test]
    fn text_that_only_shares_the_last_four_characters_is_kept() {
        assert_eq!(
            masked("MxYA is a word; xx****MxYA has no known prefix"),
            "MxYA is a word; xx****MxYA has no known prefix"
        );
    }
}
