//! Masking a provider's error body before the agent sees it: the real key, the forms providers
//! print of it (its first 3 to 8 characters, a run of `*`, `.` or `…`, its last 4, as in
//! `sk-proj-****…MxYA`), the request's placeholder in both forms, and anything else shaped like a
//! placeholder, each replaced by `[redacted]`. The key is masked percent-encoded too (either
//! case of hex), as a provider echoing the request target prints it.

use roundtable_specs::broker::PLACEHOLDER_PREFIX;

pub(crate) const MASK: &[u8] = b"[redacted]";
const ELLIPSIS: &[u8] = "\u{2026}".as_bytes();

/// The forms a key is echoed in whole: as is, and percent-encoded with upper or lower hex.
pub(crate) fn key_forms(secret: &str) -> Vec<Vec<u8>> {
    let mut forms = vec![secret.as_bytes().to_vec()];
    for upper in [true, false] {
        let encoded = percent_encode(secret, upper).into_bytes();
        if !forms.contains(&encoded) {
            forms.push(encoded);
        }
    }
    forms
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

/// Whether `haystack` holds `secret` in any of its [`key_forms`].
pub(crate) fn holds_key(haystack: &[u8], secret: &str) -> bool {
    key_forms(secret).iter().any(|form| !form.is_empty() && haystack.windows(form.len()).any(|window| window == form))
}

/// `body` with every echo of `secret` and `placeholder` masked.
pub(crate) fn redact(body: &[u8], secret: &str, placeholder: &str) -> Vec<u8> {
    let mut out = body.to_vec();
    for form in key_forms(secret) {
        out = replace_all(&out, &form);
    }
    out = replace_all(&out, placeholder.as_bytes());
    out = mask_shortened(&out, secret.as_bytes());
    out = mask_shortened(&out, placeholder.as_bytes());
    mask_placeholders(&out)
}

fn replace_all(body: &[u8], needle: &[u8]) -> Vec<u8> {
    if needle.is_empty() {
        return body.to_vec();
    }
    let mut out = Vec::with_capacity(body.len());
    let mut at = 0;
    while at < body.len() {
        if body[at..].starts_with(needle) {
            out.extend_from_slice(MASK);
            at += needle.len();
        } else {
            out.push(body[at]);
            at += 1;
        }
    }
    out
}

/// Masks `prefix + run + suffix` forms, where the prefix is the value's first 3 to 8 bytes, the
/// run is at least one `*`, `.` or `…`, and the suffix its last 4.
fn mask_shortened(body: &[u8], value: &[u8]) -> Vec<u8> {
    if value.len() < 8 {
        return body.to_vec();
    }
    let suffix = &value[value.len() - 4..];
    let mut out = Vec::with_capacity(body.len());
    let mut copied = 0;
    let mut at = 0;
    while at + suffix.len() <= body.len() {
        if !body[at..].starts_with(suffix) {
            at += 1;
            continue;
        }
        // Walk back over the run.
        let mut run_start = at;
        loop {
            if run_start > 0 && matches!(body[run_start - 1], b'*' | b'.') {
                run_start -= 1;
            } else if run_start >= ELLIPSIS.len() && body[..run_start].ends_with(ELLIPSIS) {
                run_start -= ELLIPSIS.len();
            } else {
                break;
            }
        }
        let prefixed = (run_start < at)
            .then(|| {
                (3..=8.min(value.len() - 4))
                    .rev()
                    .find(|k| run_start >= copied + k && body[run_start - k..run_start] == value[..*k])
            })
            .flatten();
        match prefixed {
            Some(k) => {
                out.extend_from_slice(&body[copied..run_start - k]);
                out.extend_from_slice(MASK);
                at += suffix.len();
                copied = at;
            }
            None => at += 1,
        }
    }
    out.extend_from_slice(&body[copied..]);
    out
}

/// Masks anything shaped like a placeholder: the prefix and the hex digits after it.
fn mask_placeholders(body: &[u8]) -> Vec<u8> {
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
    fn text_that_only_shares_the_last_four_characters_is_kept() {
        assert_eq!(
            masked("MxYA is a word; xx****MxYA has no known prefix"),
            "MxYA is a word; xx****MxYA has no known prefix"
        );
    }
}
