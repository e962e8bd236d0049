//! The shapes of secrets: one table of named rules, each recognising a secret by how it looks (a
//! token's prefix, a key block, a key word and its value), and the two ways every scanner reads
//! it. [`redact`] masks: it errs towards hiding, so it replaces anything that may be a secret with
//! `[REDACTED]` (keys and surrounding text kept, so the output still reads). [`find`] and
//! [`scan_line`] judge: a gate that blocks a commit must be precise and name what it found, so a
//! rule whose shape alone is too loose (a value after a key word) also checks the value (length,
//! letters and digits, entropy, no stand-in word). Both read the same rows; values the daemon
//! itself injected are found by [`super::known`] instead. Pure: text in, ranges and names out.
//!
//! Each rule finds byte ranges in the whole text first and the ranges are replaced together, so
//! the rules cannot interfere with each other, and a secret is redacted before any cut could
//! leave a piece of it too short for its rule to recognise.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::LazyLock;

use regex::{Captures, Regex};

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

/// `name = value`, `name: "value"`, `secretKey=value`: an identifier (camelCase included) and a
/// token-like value; kept only when both pass [`assigned_secret`].
const ASSIGNMENT: &str = r#"([A-Za-z0-9_.\-]{2,64})["']?\s*[:=]\s*["']?([A-Za-z0-9+/_\-=.~]{20,200})"#;

/// One way a secret shows up: a row of the table every scanner reads.
struct Rule {
    /// The name a finding carries (`aws-access-key`); several rows may share one.
    name: &'static str,
    pattern: &'static str,
    /// Matched against the ASCII-lowercased text (same byte offsets), not the original.
    lowercase: bool,
    /// Lower-case fragments one of which the lowercased text must hold for the rule to match at
    /// all: a quick test that spares most lines the pattern (the workspace builds `regex` without
    /// its literal and DFA optimisations).
    hints: &'static [&'static str],
    /// Whether a match is masked by [`redact`].
    masks: When,
    /// Whether a match is a finding of [`find`].
    finds: When,
}

/// When a match counts.
#[derive(Clone, Copy)]
enum When {
    Always,
    Never,
    /// When the check passes on the match, read in the original text.
    If(fn(&Candidate<'_>) -> bool),
}

/// A match as a check sees it: the text before the secret (`API_KEY=`, `"apiKey": "`) and the
/// secret itself, both from the original (not lowercased) text.
struct Candidate<'a> {
    key: &'a str,
    value: &'a str,
}

/// One secret [`find`] found: its rule and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub rule: &'static str,
    pub span: Range<usize>,
}

// === the table ===

/// What a key word names a secret by, as [`KEY_VALUE`] and [`ASSIGNMENT`] read it: the hint
/// both need.
const SECRET_WORDS: &[&str] = &["token", "secret", "passw", "api", "access", "private", "credential", "authorization"];

/// Specific shapes first: where two rows find the same text, [`find`] names the earlier.
const RULES: &[Rule] = &[
    // AWS access key IDs (long-term, temporary, and the other documented prefixes).
    Rule {
        name: "aws-access-key",
        pattern: r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
        lowercase: false,
        hints: &["akia", "asia", "abia", "acca"],
        masks: When::Always,
        finds: When::If(real_token),
    },
    // GitHub tokens: personal, OAuth, server, user-to-server, refresh, fine-grained.
    Rule {
        name: "github-token",
        pattern: r"\b(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}",
        lowercase: false,
        hints: &["ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_"],
        masks: When::Always,
        finds: When::If(real_token),
    },
    // GitLab tokens: personal, deploy, runner, trigger, OAuth secret, CI job, feed, service
    // account, incoming mail, agent; and runner registration tokens.
    Rule {
        name: "gitlab-token",
        pattern: r"\bgl(?:pat|dt|rt|ptt|oas|cbt|ft|soat|imt|agent)-[A-Za-z0-9_-]{20,}|\bGR1348941[A-Za-z0-9_-]{20,}",
        lowercase: false,
        hints: &[
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "gloas-",
            "glcbt-",
            "glft-",
            "glsoat-",
            "glimt-",
            "glagent-",
            "gr1348941",
        ],
        masks: When::Always,
        finds: When::If(real_token),
    },
    Rule {
        name: "slack-token",
        pattern: r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
        lowercase: false,
        hints: &["xox"],
        masks: When::Always,
        finds: When::If(real_token),
    },
    Rule {
        name: "slack-webhook",
        pattern: r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]{6,}/B[A-Za-z0-9_]{6,}/[A-Za-z0-9_]{12,}",
        lowercase: false,
        hints: &["hooks.slack.com"],
        masks: When::Always,
        finds: When::If(real_token),
    },
    Rule {
        name: "anthropic-api-key",
        pattern: r"\bsk-ant-(?:api|admin|oat|ort)[0-9]{2}-[A-Za-z0-9_-]{20,}",
        lowercase: false,
        hints: &["sk-ant-"],
        masks: When::Always,
        finds: When::If(real_token),
    },
    Rule {
        name: "openai-api-key",
        pattern: r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}",
        lowercase: false,
        hints: &["sk-"],
        masks: When::Always,
        finds: When::If(real_token),
    },
    // Every other `sk-…` provider key (OpenAI's older keys, DeepSeek, …): masked on shape, found
    // when it is long and mixes letters and digits (so `sk-ant-is-not-a-key` is prose).
    Rule {
        name: "sk-api-key",
        pattern: r"\bsk-[A-Za-z0-9_-]{16,}",
        lowercase: false,
        hints: &["sk-"],
        masks: When::Always,
        finds: When::If(plain_sk_key),
    },
    // Stripe secret and restricted keys (live and test); `pk_` keys are public.
    Rule {
        name: "stripe-secret-key",
        pattern: r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}",
        lowercase: false,
        hints: &["_live_", "_test_"],
        masks: When::Always,
        finds: When::If(real_token),
    },
    // Google API keys (the Gemini CLI's).
    Rule {
        name: "google-api-key",
        pattern: r"\bAIza[0-9A-Za-z_-]{35}",
        lowercase: false,
        hints: &["aiza"],
        masks: When::Always,
        finds: When::If(real_token),
    },
    Rule {
        name: "pypi-token",
        pattern: r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        lowercase: false,
        hints: &["pypi-"],
        masks: When::Always,
        finds: When::If(real_token),
    },
    Rule {
        name: "npm-token",
        pattern: r"\bnpm_[A-Za-z0-9]{36}\b",
        lowercase: false,
        hints: &["npm_"],
        masks: When::Always,
        finds: When::If(real_token),
    },
    Rule {
        name: "sendgrid-api-key",
        pattern: r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b",
        lowercase: false,
        hints: &["sg."],
        masks: When::Always,
        finds: When::If(real_token),
    },
    // A JSON Web Token (header and payload are base64url JSON, so both start `eyJ`), wherever
    // it stands: a cookie, a query string, a log line.
    Rule {
        name: "jwt",
        pattern: r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        lowercase: false,
        hints: &["eyj"],
        masks: When::Always,
        finds: When::Always,
    },
    // A PEM or PGP private key, to its end line (or the end of the text when cut off); a public
    // key block is public.
    Rule {
        name: "private-key",
        pattern: r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        lowercase: false,
        hints: &["private key"],
        masks: When::Always,
        finds: When::Always,
    },
    // The broker's placeholders stand for a key: one written into a repository is a finding, but
    // a log that shows one shows no secret.
    Rule {
        name: "roundtable-placeholder",
        pattern: r"rt-placeholder-[0-9a-f]{64}",
        lowercase: false,
        hints: &["rt-placeholder-"],
        masks: When::Never,
        finds: When::Always,
    },
    // `Bearer <token>` anywhere (headers, curl commands); short words are prose.
    Rule {
        name: "bearer-token",
        pattern: r"\bbearer[ \t]+([a-z0-9._~+/-]{8,}=*)",
        lowercase: true,
        hints: &["bearer"],
        masks: When::Always,
        finds: When::If(random_value),
    },
    // `"anyKey": "value"` where the key names a credential.
    Rule {
        name: "secret-assignment",
        pattern: r#""((?:[^"\\\n]|\\.)*)"[ \t]*:[ \t]*"((?:[^"\\\n]|\\.)+)""#,
        lowercase: false,
        hints: &["auth", "token", "key", "secret", "passw", "credential"],
        masks: When::If(json_credential),
        finds: When::If(json_secret),
    },
    Rule {
        name: "secret-assignment",
        pattern: KEY_VALUE,
        lowercase: true,
        hints: SECRET_WORDS,
        masks: When::Always,
        finds: When::If(assigned_secret),
    },
    Rule {
        name: "secret-assignment",
        pattern: ASSIGNMENT,
        lowercase: false,
        hints: SECRET_WORDS,
        masks: When::If(assigned_secret),
        finds: When::If(assigned_secret),
    },
    // The password in `scheme://user:password@host`.
    Rule {
        name: "url-password",
        pattern: r"[a-z][a-z0-9+.-]*://[^/\s:@]+:([^/\s@]+)@",
        lowercase: true,
        hints: &["://"],
        masks: When::Always,
        finds: When::If(url_password),
    },
    // A `Cookie:`/`Set-Cookie:` header's value (session cookies are bearer credentials); only a
    // value holding `name=value`, so prose such as "cookie: see below" is left alone. A JWT in
    // one is found by its own rule; any other cookie in code is a fixture.
    Rule {
        name: "cookie",
        pattern: r#"\b(?:set-)?cookie[ \t]*:[ \t]*([^\s=;'"]+=[^\r\n'"]+)"#,
        lowercase: true,
        hints: &["cookie"],
        masks: When::Always,
        finds: When::Never,
    },
    // A command-line option given its secret as the next word: `--password VALUE`, `--api-key
    // VALUE`. `--password-file PATH` and `--password-stdin` name no secret.
    Rule {
        name: "password-option",
        pattern: r"(?:^|[\s'\x22])--?[a-z0-9-]*(?:password|passwd|token|secret|api-key)['\x22]?[ \t]+['\x22]?([^\s'\x22-][^\s'\x22]*)",
        lowercase: true,
        hints: &["passw", "token", "secret", "api-key"],
        masks: When::Always,
        finds: When::If(random_value),
    },
];

// === the checks a loose shape needs ===

/// Lower-case fragments of a name that holds a secret.
const SECRET_NAMES: &[&str] = &[
    "secret",
    "token",
    "password",
    "passwd",
    "apikey",
    "api_key",
    "api-key",
    "accesskey",
    "access_key",
    "access-key",
    "private_key",
    "privatekey",
    "credential",
    "authorization",
];

/// Values that stand for a secret in examples and templates.
const STAND_INS: &[&str] =
    &["example", "changeme", "placeholder", "dummy", "xxxxx", "redacted", "your_", "your-", "<", "${", "{{"];

/// Shannon entropy of `value` in bits per byte.
fn entropy(value: &str) -> f64 {
    let mut counts = [0u32; 256];
    for byte in value.bytes() {
        counts[usize::from(byte)] += 1;
    }
    let length = value.len() as f64;
    counts.iter().filter(|&&c| c > 0).map(|&c| f64::from(c) / length).map(|p| -p * p.log2()).sum()
}

fn has_letters_and_digits(value: &str) -> bool {
    value.bytes().any(|b| b.is_ascii_digit()) && value.bytes().any(|b| b.is_ascii_alphabetic())
}

fn stands_in(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    STAND_INS.iter().any(|word| lower.contains(word))
}

/// Whether `value` reads as a generated secret rather than a word, a path or a template: 20 to
/// 200 token characters with letters and digits, high entropy (≥ 3.5 bits per byte), no stand-in.
fn random_value(candidate: &Candidate<'_>) -> bool {
    let value = candidate.value;
    (20..=200).contains(&value.len())
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"+/_-=.~".contains(&b))
        && has_letters_and_digits(value)
        && !stands_in(value)
        && entropy(value) >= 3.5
}

/// The name a value is assigned to: what stands before the last `=` or `:` of the key part,
/// without quotes or spaces (`"apiKey": "` → `apiKey`, `DB_PASSWORD=` → `DB_PASSWORD`).
fn bare_key(key: &str) -> &str {
    let before = key.rfind(['=', ':']).map_or(key, |at| &key[..at]);
    before.trim_matches(|c: char| c.is_ascii_whitespace() || c == '"' || c == '\'')
}

/// Whether a key names a secret.
fn secret_name(key: &str) -> bool {
    let name = bare_key(key).to_ascii_lowercase();
    SECRET_NAMES.iter().any(|fragment| name.contains(fragment))
}

/// A random value assigned to a secret-like name.
fn assigned_secret(candidate: &Candidate<'_>) -> bool {
    secret_name(candidate.key) && random_value(candidate)
}

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

fn json_credential(candidate: &Candidate<'_>) -> bool {
    credential_key(bare_key(candidate.key))
}

fn json_secret(candidate: &Candidate<'_>) -> bool {
    json_credential(candidate) && random_value(candidate)
}

/// A token of a known shape that is not a documented stand-in (`AKIAIOSFODNN7EXAMPLE`,
/// `ghp_xxxxxxxx…`, `xoxb-your-token`).
fn real_token(candidate: &Candidate<'_>) -> bool {
    !stands_in(candidate.value)
}

/// `sk-` and at least 20 more characters mixing letters and digits.
fn plain_sk_key(candidate: &Candidate<'_>) -> bool {
    real_token(candidate)
        && candidate.value.strip_prefix("sk-").is_some_and(|tail| tail.len() >= 20 && has_letters_and_digits(tail))
}

/// A URL's password that is neither a template nor a stand-in.
fn url_password(candidate: &Candidate<'_>) -> bool {
    let value = candidate.value;
    value.len() >= 8 && has_letters_and_digits(value) && !stands_in(value) && !value.contains(['{', '%', '$'])
}

// === the two readings ===

static COMPILED: LazyLock<Vec<(&'static Rule, Regex)>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|rule| {
            // The patterns are constants; the unit tests compile every one of them.
            let regex = Regex::new(rule.pattern)
                .unwrap_or_else(|error| panic!("secret rule {} {:?}: {error}", rule.name, rule.pattern));
            (rule, regex)
        })
        .collect()
});

/// Whether a reader does not see `c`: a control character other than tab and line ends (ESC
/// among them, which starts an escape sequence), or an invisible character (zero-width spaces
/// and joiners, soft hyphens, byte order marks). The one definition every reader of text uses:
/// the rules through [`visible`], the gate's reader of binary files through [`shown`].
pub fn invisible(c: char) -> bool {
    (c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{00ad}')
}

/// `text` as the rules read it: escape sequences and [`invisible`] characters left out. Other
/// scanners of the same text (the held credentials' comparison) read this, so a secret split by
/// a zero-width space or coloured by an escape is one token to every one of them.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    visible(text).map_or(std::borrow::Cow::Borrowed(text), |(shown, _)| std::borrow::Cow::Owned(shown))
}

/// `text` as a reader sees it, when that differs: terminal escape sequences (colours, titles),
/// other control bytes and invisible characters (zero-width spaces and joiners, soft hyphens, byte
/// order marks) left out, so that a coloured or zero-width-split secret is still one token to the
/// rules. With it, where each of its bytes stands in `text` (one more entry for the end).
fn visible(text: &str) -> Option<(String, Vec<usize>)> {
    if !text.chars().any(invisible) {
        return None;
    }
    let mut shown = String::with_capacity(text.len());
    let mut offsets = Vec::with_capacity(text.len() + 1);
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c == '\u{1b}' {
            skip_escape(&mut chars);
            continue;
        }
        if invisible(c) {
            continue;
        }
        shown.push(c);
        offsets.extend(at..at + c.len_utf8());
    }
    offsets.push(text.len());
    Some((shown, offsets))
}

/// Skips the rest of an escape sequence whose ESC was just read: CSI (`ESC [ … final`), OSC and
/// the other string sequences (`ESC ] … BEL` or `… ESC \\`), or one more character.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) {
    match chars.next() {
        Some((_, '[')) => {
            for (_, c) in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
        Some((_, ']' | 'P' | '_' | '^' | 'X')) => {
            while let Some((_, c)) = chars.next() {
                if c == '\u{7}' || (c == '\u{1b}' && chars.next_if(|(_, next)| *next == '\\').is_some()) {
                    break;
                }
            }
        }
        _ => {}
    }
}

/// Every match of the rules `select` keeps, in table order: the rule's row and the secret's byte
/// range in `text` (the last capture group that matched, or the whole match). The rules read the
/// text as it shows ([`visible`]); a secret's range covers whatever hid inside it.
fn matching(text: &str, select: impl Fn(&Rule) -> When) -> Vec<(usize, Range<usize>)> {
    let Some((shown, offsets)) = visible(text) else {
        return matching_shown(text, &select);
    };
    matching_shown(&shown, &select)
        .into_iter()
        // Each shown byte maps to its own byte in `text`, so the range ends after the last one.
        .map(|(row, span)| (row, offsets[span.start]..offsets[span.end - 1] + 1))
        .collect()
}

fn matching_shown(text: &str, select: &impl Fn(&Rule) -> When) -> Vec<(usize, Range<usize>)> {
    let lowered = text.to_ascii_lowercase();
    let mut found = Vec::new();
    for (row, (rule, regex)) in COMPILED.iter().enumerate() {
        let when = select(rule);
        if matches!(when, When::Never) || !rule.hints.iter().any(|hint| lowered.contains(hint)) {
            continue;
        }
        let haystack = if rule.lowercase { lowered.as_str() } else { text };
        for captures in regex.captures_iter(haystack) {
            let Some((whole, span)) = secret_of(&captures) else { continue };
            // Same byte offsets in both texts: only ASCII letters change case.
            let counts = match when {
                When::Always => true,
                When::Never => false,
                When::If(check) => {
                    check(&Candidate { key: &text[whole.start..span.start], value: &text[span.clone()] })
                }
            };
            if counts {
                found.push((row, span));
            }
        }
    }
    found
}

/// The whole match and the secret's range in it; none for an empty secret.
fn secret_of(captures: &Captures<'_>) -> Option<(Range<usize>, Range<usize>)> {
    let whole = captures.get(0)?;
    let secret = captures.iter().skip(1).flatten().last().unwrap_or(whole);
    (!secret.is_empty()).then(|| (whole.range(), secret.range()))
}

/// The byte ranges [`redact`] masks in `text`, sorted and merged.
pub fn secret_spans(text: &str) -> Vec<Range<usize>> {
    let mut spans: Vec<Range<usize>> = matching(text, |rule| rule.masks).into_iter().map(|(_, span)| span).collect();
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

/// Every secret in `text` a gate should refuse, in order of position. Where rules overlap, the
/// earlier row of the table names the secret (a GitHub token assigned to `TOKEN=` is a
/// `github-token`, not also a `secret-assignment`).
pub fn find(text: &str) -> Vec<Found> {
    // Kept spans never overlap, so ordered by start they are ordered by end too.
    let mut kept: BTreeMap<usize, (usize, &'static str)> = BTreeMap::new();
    for (row, span) in matching(text, |rule| rule.finds) {
        let overlaps = kept.range(..span.end).next_back().is_some_and(|(_, (end, _))| *end > span.start);
        if !overlaps {
            kept.insert(span.start, (span.end, RULES[row].name));
        }
    }
    kept.into_iter().map(|(start, (end, rule))| Found { rule, span: start..end }).collect()
}

/// The rules `line` breaks, each once, in table order.
pub fn scan_line(line: &str) -> Vec<&'static str> {
    let found = find(line);
    rule_names().into_iter().filter(|name| found.iter().any(|f| f.rule == *name)).collect()
}

/// Every rule name, once each, in table order: for documentation and the corpus test.
pub fn rule_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for rule in RULES {
        if !names.contains(&rule.name) && !matches!(rule.finds, When::Never) {
            names.push(rule.name);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(text: &str) -> String {
        redact(text.as_bytes())
    }

    #[test]
    fn every_hint_is_lower_case_as_the_text_it_is_looked_for_in() {
        for rule in RULES {
            assert!(!rule.hints.is_empty(), "{}", rule.name);
            assert!(rule.hints.iter().all(|hint| hint.to_ascii_lowercase() == *hint), "{}", rule.name);
        }
    }

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(COMPILED.len(), RULES.len());
        assert_eq!(RULES.len(), 23);
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

    // === the gate's reading: precise and named ===

    /// Each rule with a line it must find. The values are made up and well-formed.
    const POSITIVES: &[(&str, &str)] = &[
        ("aws-access-key", "aws_access_key_id = AKIAIOSFODNN7EXAMPLF"),
        ("github-token", "token: ghp_0123456789abcdefghijABCDEFGHIJ0123456789"),
        ("github-token", "GH=github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"),
        ("gitlab-token", "export GITLAB=glpat-a1B2c3D4e5F6g7H8i9J0"),
        ("gitlab-token", "deploy: gldt-Zx8vQm3nR5tY7uP1wK9s"),
        ("slack-token", "hook xoxb-123456789012-123456789012-abcdefABCDEF"),
        ("slack-webhook", "url = https://hooks.slack.com/services/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"),
        ("anthropic-api-key", "ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"),
        ("openai-api-key", "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345"),
        ("sk-api-key", "client = Client(\"sk-4f9Qm2Zr8LwX1vN7tK3pB6dH0sJ5yC2e\")"),
        ("stripe-secret-key", "Stripe.api = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'"),
        ("google-api-key", "key=AIzaSyA1234567890abcdefghijklmnopqrstuv"),
        (
            "pypi-token",
            "password = pypi-AgEIcHlwaS5vcmcCJGE3ZjM1YzA0LTQ5ZTEtNDk0Ny1iMzA2LWUwMzQ1ZGU2ZGY3NgACKlszLCJlNjQ",
        ),
        ("npm-token", "//registry.npmjs.org/:_authToken=npm_q8Zr2LwX9vN4mT7pK1sB6dH3aF5gJ0cE2iU4"),
        ("sendgrid-api-key", "SENDGRID=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"),
        ("private-key", "-----BEGIN RSA PRIVATE KEY-----"),
        ("private-key", "-----BEGIN OPENSSH PRIVATE KEY-----"),
        ("private-key", "-----BEGIN PRIVATE KEY-----"),
        ("private-key", "-----BEGIN PGP PRIVATE KEY BLOCK-----"),
        (
            "jwt",
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        ),
        (
            "roundtable-placeholder",
            "key=rt-placeholder-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ),
        ("bearer-token", "curl -H 'Authorization: Bearer q8Zr2LwX9vN4mT7pK1sB6dH3aF5g'"),
        ("secret-assignment", "client_secret = \"q8Zr2LwX9vN4mT7pK1sB6dH3\""),
        ("secret-assignment", "DB_PASSWORD=Xk29sLq84Mzn0Pw7Vb3Ty6"),
        ("secret-assignment", "{\"webhookSecret\": \"Xk29sLq84Mzn0Pw7Vb3Ty6\"}"),
        ("secret-assignment", "const secretKey = 'Xk29sLq84Mzn0Pw7Vb3Ty6';"),
        ("url-password", "DATABASE_URL=postgres://app:Xk29sLq8@db.internal:5432/app"),
        ("password-option", "mysql --user root --password Xk29sLq84Mzn0Pw7Vb3Ty6 db"),
    ];

    /// Lines that look like secrets and are not.
    const LOOK_ALIKES: &[&str] = &[
        "aws_access_key_id = AKIA_YOUR_KEY_HERE",
        "token: ${GITHUB_TOKEN}",
        "password = \"changeme-changeme-changeme\"",
        "api_key: <your-api-key-goes-here-1234>",
        "-----BEGIN PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----",
        "sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"",
        "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        "let skip_key_checks = true;",
        "secret_name = \"production-database-credentials\"",
        "TOKEN_URL=https://oauth2.googleapis.com/token",
        "password_min_length = 12",
        "const PLACEHOLDER_PREFIX: &str = \"rt-placeholder-\";",
        "sk-ant-is-not-a-key",
        "eyJhbGciOiJIUzI1NiJ9",
        "pk_live_51H8abcdefghijklmnop is the publishable key",
        "Cookie: theme=dark; lang=en",
        "DATABASE_URL=postgres://app:${DB_PASSWORD}@db/app",
        "mysql --password-file /run/secrets/db",
    ];

    #[test]
    fn each_rule_finds_its_positive() {
        for (rule, line) in POSITIVES {
            assert_eq!(scan_line(line), [*rule], "{line}");
        }
        let covered: std::collections::BTreeSet<&str> = POSITIVES.iter().map(|(rule, _)| *rule).collect();
        assert_eq!(covered, rule_names().into_iter().collect(), "every rule has a positive");
    }

    #[test]
    fn look_alikes_are_not_found() {
        for line in LOOK_ALIKES {
            assert_eq!(scan_line(line), Vec::<&str>::new(), "{line}");
        }
    }

    /// What the gate finds it also masks: masking errs on hiding, never the other way.
    #[test]
    fn everything_found_is_masked() {
        for (_, line) in POSITIVES.iter().filter(|(rule, _)| *rule != "roundtable-placeholder") {
            let masked = secret_spans(line);
            for found in find(line) {
                let covered = masked.iter().any(|m| m.start <= found.span.start && found.span.end <= m.end);
                assert!(covered, "{line}: {found:?} found but not masked ({masked:?})");
            }
        }
    }

    /// The keys a hostile pass got past the gate's old rule set (issue 48, item 7).
    #[test]
    fn stripe_plain_sk_and_gitlab_deploy_tokens_are_found() {
        assert_eq!(scan_line("STRIPE=sk_live_51Hq8Zr2LwX9vN4mT7pK1sB6dH3"), ["stripe-secret-key"]);
        assert_eq!(scan_line("key = \"sk-q8Zr2LwX9vN4mT7pK1sB6dH3aF5gJ0cE2iU4oY6tR8\""), ["sk-api-key"]);
        assert_eq!(scan_line("token gldt-q8Zr2LwX9vN4mT7pK1sB"), ["gitlab-token"]);
    }

    #[test]
    fn find_names_each_secret_once_with_its_place() {
        let text = "a AKIAIOSFODNN7EXAMPLF b\nTOKEN=ghp_0123456789abcdefghijABCDEFGHIJ0123456789\n";
        let found: Vec<(&str, &str)> = find(text).iter().map(|f| (f.rule, &text[f.span.clone()])).collect();
        assert_eq!(
            found,
            [
                ("aws-access-key", "AKIAIOSFODNN7EXAMPLF"),
                ("github-token", "ghp_0123456789abcdefghijABCDEFGHIJ0123456789")
            ]
        );
    }

    /// Colours and invisible characters do not hide a secret from the rules (a CLI that colours
    /// its output, or an agent splitting a key with a zero-width space), and whatever hid inside
    /// a secret is masked with it.
    #[test]
    fn colours_and_invisible_characters_hide_no_secret() {
        let cases: &[(&str, &str)] = &[
            ("\x1b[1;31msk_live_4eC39HqLyjWDarjtT1zdp7dc\x1b[0m", "4eC39HqLyjWDarjtT1zdp7dc"),
            ("\x1b[34;1mCookie:\x1b[0m session=abcdef0123456789", "abcdef0123456789"),
            ("\x1b[32mglpat-xY9zAbCdEfGhIjKlMnOp\x1b[0m", "xY9zAbCdEfGhIjKlMnOp"),
            ("\x1b[1m--password\x1b[0m hunter2hunter2", "hunter2hunter2"),
            ("\x1b[34;1m\"auth\"\x1b[0m: \x1b[0;32m\"dXNlcjpodW50ZXIy\"\x1b[0m", "dXNlcjpodW50ZXIy"),
            ("-----BEGIN PGP \x1b[1mPRIVATE\x1b[0m KEY BLOCK-----\nlQOYBF0AAAAB\n", "lQOYBF0AAAAB"),
            ("\x1b]0;title\x07ghp_abcdefghij\u{200b}klmnopqrstuvwxyz0123456789", "klmnopqrst"),
            ("AKIA\u{00ad}IOSFODNN7EXAMPLF", "IOSFODNN7"),
        ];
        for (printed, gone) in cases {
            let out = redacted(printed);
            assert!(!out.contains(gone), "{printed:?} → {out:?} still shows {gone:?}");
        }
        assert_eq!(redacted("\x1b[1mtoken=abc\x1b[0m ok"), "\x1b[1mtoken=[REDACTED]\x1b[0m ok");
        assert_eq!(scan_line("key \x1b[1mAKIAIOSFODNN7EXAMPLF\x1b[0m"), ["aws-access-key"]);
        assert_eq!(redacted("plain \x1b[1mbold\x1b[0m text"), "plain \x1b[1mbold\x1b[0m text");
        // Ranges found in the shown text land on the original's characters, wide ones included.
        assert_eq!(
            redacted("é \x1b[1mghp_abcdefghij\u{200b}klmnopqrstuvwxyz0123456789\x1b[0m — ok"),
            "é \x1b[1m[REDACTED]\x1b[0m — ok"
        );
    }
}
