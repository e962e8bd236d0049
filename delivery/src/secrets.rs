//! The secrets gate's scanner: rules for the credentials that end up in repositories (cloud and
//! forge tokens, provider API keys, private keys, JWTs), the broker's placeholders, and
//! high-entropy values assigned to secret-like names. Each rule is a pattern plus, where a
//! pattern alone would be noisy, a check on the value; a finding names the rule and the line,
//! never the value.

use std::sync::OnceLock;

use regex::Regex;

/// A rule: its name and the pattern whose first group (or whole match) is the value.
struct Rule {
    name: &'static str,
    pattern: &'static str,
}

const RULES: &[Rule] = &[
    Rule { name: "aws-access-key", pattern: r"\b((?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16})\b" },
    Rule {
        name: "github-token",
        pattern: r"\b((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
    },
    Rule { name: "gitlab-token", pattern: r"\b(glpat-[A-Za-z0-9_\-]{20,})" },
    Rule { name: "slack-token", pattern: r"\b(xox[abposr]-[A-Za-z0-9\-]{10,})" },
    Rule { name: "anthropic-api-key", pattern: r"\b(sk-ant-(?:api|admin)[0-9]{2}-[A-Za-z0-9_\-]{20,})" },
    Rule {
        name: "openai-api-key",
        pattern: r"\b(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}|sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})",
    },
    Rule { name: "google-api-key", pattern: r"\b(AIza[0-9A-Za-z_\-]{35})\b" },
    Rule { name: "private-key", pattern: r"(-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----)" },
    Rule { name: "jwt", pattern: r"\b(eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,})" },
    Rule { name: "roundtable-placeholder", pattern: r"(rt-placeholder-[0-9a-f]{64})" },
];

/// `name = value`, `name: "value"`, `NAME=value`: the assignment the entropy rule reads.
const ASSIGNMENT: &str = r#"([A-Za-z0-9_.\-]{2,64})["']?\s*[:=]\s*["']?([A-Za-z0-9+/_\-=.~]{20,200})"#;
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
    "private_key",
    "credential",
];
/// Values that stand for a secret in examples and templates.
const STAND_INS: &[&str] =
    &["example", "changeme", "placeholder", "dummy", "xxxxx", "redacted", "your_", "your-", "<", "${"];

type Compiled = (Vec<(&'static str, Regex)>, Option<Regex>);

fn compiled() -> &'static Compiled {
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    COMPILED.get_or_init(|| {
        // The patterns are constants of this file, and a test shows each compiles.
        let rules = RULES.iter().filter_map(|rule| Regex::new(rule.pattern).ok().map(|re| (rule.name, re))).collect();
        (rules, Regex::new(ASSIGNMENT).ok())
    })
}

/// Shannon entropy of `value` in bits per byte.
fn entropy(value: &str) -> f64 {
    let mut counts = [0u32; 256];
    for byte in value.bytes() {
        counts[usize::from(byte)] += 1;
    }
    let length = value.len() as f64;
    counts.iter().filter(|&&c| c > 0).map(|&c| f64::from(c) / length).map(|p| -p * p.log2()).sum()
}

/// Whether `value`, assigned to `name`, looks like a real secret: a secret-like name, at least
/// 20 characters with letters and digits, high entropy, and no stand-in word.
fn secret_assignment(name: &str, value: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let lower = value.to_ascii_lowercase();
    SECRET_NAMES.iter().any(|fragment| name.contains(fragment))
        && value.bytes().any(|b| b.is_ascii_digit())
        && value.bytes().any(|b| b.is_ascii_alphabetic())
        && !STAND_INS.iter().any(|word| lower.contains(word))
        && entropy(value) >= 3.5
}

/// The rules `line` breaks, each once, in rule order.
pub fn scan_line(line: &str) -> Vec<&'static str> {
    let (rules, assignment) = compiled();
    let mut found: Vec<&'static str> =
        rules.iter().filter(|(_, re)| re.is_match(line)).map(|(name, _)| *name).collect();
    if found.is_empty()
        && let Some(assignment) = assignment
        && assignment.captures_iter(line).any(|c| {
            let (Some(name), Some(value)) = (c.get(1), c.get(2)) else { return false };
            secret_assignment(name.as_str(), value.as_str())
        })
    {
        found.push("secret-assignment");
    }
    found
}

/// Every rule name, for documentation and the corpus test.
pub fn rule_names() -> Vec<&'static str> {
    RULES.iter().map(|rule| rule.name).chain(["secret-assignment"]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(compiled().0.len(), RULES.len());
        assert!(Regex::new(ASSIGNMENT).is_ok());
    }

    /// Each rule with a line it must find. The values are made up and well-formed.
    const POSITIVES: &[(&str, &str)] = &[
        ("aws-access-key", "aws_access_key_id = AKIAIOSFODNN7EXAMPLF"),
        ("github-token", "token: ghp_0123456789abcdefghijABCDEFGHIJ0123456789"),
        ("github-token", "GH=github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"),
        ("gitlab-token", "export GITLAB=glpat-a1B2c3D4e5F6g7H8i9J0"),
        ("slack-token", "hook xoxb-123456789012-123456789012-abcdefABCDEF"),
        ("anthropic-api-key", "ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"),
        ("openai-api-key", "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345"),
        ("google-api-key", "key=AIzaSyA1234567890abcdefghijklmnopqrstuv"),
        ("private-key", "-----BEGIN RSA PRIVATE KEY-----"),
        ("private-key", "-----BEGIN OPENSSH PRIVATE KEY-----"),
        ("private-key", "-----BEGIN PRIVATE KEY-----"),
        (
            "jwt",
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        ),
        (
            "roundtable-placeholder",
            "key=rt-placeholder-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ),
        ("secret-assignment", "client_secret = \"q8Zr2LwX9vN4mT7pK1sB6dH3\""),
        ("secret-assignment", "DB_PASSWORD=Xk29sLq84Mzn0Pw7Vb3Ty6"),
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
}
