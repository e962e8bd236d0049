//! The shapes of secrets: every rule that recognises a secret by how it looks (a key word and its
//! value, a token's prefix, a key block), and [`redact`], which replaces each with `[REDACTED]`
//! (keys and surrounding text kept, so the output still reads). Pure: bytes in, text out. Every
//! place that *masks* secrets by their shape uses these rules; values the daemon itself injected
//! are found by [`super::known`] instead. The proposal gate (`delivery/src/secrets.rs`) has its
//! own named rules on purpose: masking errs towards hiding anything that may be a secret, while a
//! gate that blocks a commit must be precise and name what it found.
//!
//! Each rule finds byte ranges in the whole text first and the ranges are replaced together, so
//! the rules cannot interfere with each other, and a secret is redacted before any cut could
//! leave a piece of it too short for its rule to recognise.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

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
        // Stripe secret and restricted keys (live and test); `pk_` keys are public.
        rule(false, r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}", Secret::Whole),
        // GitLab tokens: personal, deploy, runner, project/group, OAuth secret, CI job.
        rule(false, r"\bgl(?:pat|dt|rt|ptt|oas|cbt)-[A-Za-z0-9_-]{20,}", Secret::Whole),
        // A JSON Web Token (header and payload are base64url JSON, so both start `eyJ`), wherever
        // it stands: a cookie, a query string, a log line.
        rule(false, r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", Secret::Whole),
        // A `Cookie:`/`Set-Cookie:` header's value (session cookies are bearer credentials); only
        // a value holding `name=value`, so prose such as "cookie: see below" is left alone.
        rule(true, r#"\b(?:set-)?cookie[ \t]*:[ \t]*([^\s=;'"]+=[^\r\n'"]+)"#, Secret::Group),
        // A command-line option given its secret as the next word: `--password VALUE`,
        // `--api-key VALUE`. `--password-file PATH` and `--password-stdin` name no secret.
        rule(
            true,
            r"(?:^|[\s'\x22])--?[a-z0-9-]*(?:password|passwd|token|secret|api-key)['\x22]?[ \t]+['\x22]?([^\s'\x22-][^\s'\x22]*)",
            Secret::Group,
        ),
        // A PEM or PGP private key, to its end line (or the end of the text when cut off); a
        // public key block is public.
        rule(
            false,
            r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
            Secret::Whole,
        ),
    ]
});

/// Whether a JSON key names a credential: the usual names, and any key ending in `_token`,
/// `_key`, `secret` or `password` (or `Token`/`Key` in camelCase).
fn credential_key(key: &str) -> bool {
    const EXACT: [&str; 14] = [
        "token",
        // A Docker or registry config's `"auth"`: base64 of `user:password`.
        "auth",
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
pub fn secret_spans(text: &str) -> Vec<Range<usize>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(text: &str) -> String {
        redact(text.as_bytes())
    }

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(RULES.len(), 16);
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
            // The formats a hostile pass found missing.
            (
                "Cookie: session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
                "Cookie: [REDACTED]",
            ),
            ("Set-Cookie: sid=31d4d96e407aad42; Path=/", "31d4d96e407aad42", "Set-Cookie: [REDACTED]"),
            (
                "curl -H 'cookie: jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0xx.c2lnbmF0dXJl' https://x",
                "eyJzdWIiOiJ4In0xx",
                "cookie: [REDACTED]' https://x",
            ),
            (
                "?id_token=eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJodHRwcyJ9.sig-nature_1",
                "eyJpc3MiOiJodHRwcyJ9",
                "?id_token=[REDACTED]",
            ),
            ("jwt eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJodHRwcyJ9.c2ln done", "eyJpc3MiOiJodHRwcyJ9", "jwt [REDACTED] done"),
            ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc", "stripe [REDACTED]"),
            ("rk_live_51H8abcdefghijklmnop", "51H8abcdefghijklmnop", "[REDACTED]"),
            ("key=sk_test_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc", "key=[REDACTED]"),
            ("STRIPE sk_test_4eC39HqLyjWDarjtT1zdp7dc.", "sk_test_", "STRIPE [REDACTED]."),
            (
                r#"{"auths": {"registry.example.com": {"auth": "dXNlcjpodW50ZXIy"}}}"#,
                "dXNlcjpodW50ZXIy",
                r#"{"auth": "[REDACTED]"}"#,
            ),
            (
                "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0AAAAB\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----\nnext",
                "lQOYBF0AAAAB",
                "[REDACTED]\nnext",
            ),
            ("remote: glpat-xY9zAbCdEfGhIjKlMnOp done", "xY9zAbCdEfGhIjKlMnOp", "remote: [REDACTED] done"),
            ("glrt-abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx", "[REDACTED]"),
            ("mysql --user root --password hunter2 db", "hunter2", "--password [REDACTED] db"),
            ("mysql --password=hunter2 db", "hunter2", "--password=[REDACTED] db"),
            ("login -u me --api-key k3y-v4lue", "k3y-v4lue", "--api-key [REDACTED]"),
            ("cmd '--token' abcdef123", "abcdef123", "'--token' [REDACTED]"),
            ("--password s3cret", "s3cret", "--password [REDACTED]"),
        ];
        // Every leak at once, so a rule change shows all it lost.
        let leaked: Vec<&str> = cases.iter().filter(|(p, g, _)| redacted(p).contains(g)).map(|(p, _, _)| *p).collect();
        assert!(leaked.is_empty(), "leaked: {leaked:#?}");
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

    /// Look-alikes: text that mentions secrets or has a secret's length, and holds none.
    #[test]
    fn ordinary_output_is_left_alone() {
        for text in [
            "codex-cli 0.171.0",
            "Usage: codex [OPTIONS] [PROMPT]\n  --model <MODEL>  the model\n",
            "max_tokens: 5, input_tokens=12",
            "max_tokens: 5",
            r#"{"type":"usage","input_tokens":12,"name":"task.get","keyboard":"us"}"#,
            "a bearer token is read from the environment",
            "sk-short",
            "AKIA1234",
            "ask-me-anything-about-this-thing",
            "The password is checked by the server; a wrong password locks the account.",
            "Forgot your password? Reset it from the settings page.",
            "mysql --password-file /run/secrets/db --user root",
            "docker login --password-stdin registry.example.com",
            "--token-file PATH  read the token from PATH",
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBF0AAAAB\n=abcd\n-----END PGP PUBLIC KEY BLOCK-----",
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----",
            "<img src=\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==\">",
            "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
            "HEAD is now at 9fceb02 fix the cookie banner",
            "pk_live_51H8abcdefghijklmnop is the publishable key",
            "sk_live_",
            "glpat-short",
            "eyJhbGciOiJIUzI1NiJ9 alone is only a header",
            "the cookie: chocolate chip",
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
}
