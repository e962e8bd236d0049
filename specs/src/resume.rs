//! Resume patterns: split with shell-style quoting (no shell ever runs them) and the placeholder
//! rule: `{{external_session_id}}` exactly once, as a whole argument.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The one placeholder a resume pattern carries.
pub const PLACEHOLDER: &str = "{{external_session_id}}";

/// Why a resume pattern or a session id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    #[error("unterminated {0} quote")]
    UnterminatedQuote(&'static str),
    #[error("a trailing backslash escapes nothing")]
    TrailingBackslash,
    #[error("{0:?} is shell syntax, but no shell runs resume patterns; quote it if it is meant literally")]
    ShellSyntax(char),
    #[error("the pattern is empty")]
    Empty,
    #[error("the placeholder {PLACEHOLDER} must appear exactly once, found {0} times")]
    PlaceholderCount(usize),
    #[error("the placeholder {PLACEHOLDER} must be a whole argument, not part of {0:?}")]
    PlaceholderNotWhole(String),
    #[error("the placeholder cannot be the command itself")]
    PlaceholderAsCommand,
    #[error("invalid session id {0:?}: 1 to 128 of A-Z, a-z, 0-9, '_' and '-'")]
    InvalidSessionId(String),
}

/// One argument of a parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Arg {
    Literal(String),
    SessionId,
}

/// A parsed resume pattern, kept with its source text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumePattern {
    source: String,
    args: Vec<Arg>,
}

/// A provider's session id, checked before it is ever placed in an argv.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExternalSessionId(String);

impl ExternalSessionId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ExternalSessionId {
    type Err = ResumeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let ok = (1..=128).contains(&text.len())
            && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok { Ok(Self(text.to_owned())) } else { Err(ResumeError::InvalidSessionId(text.to_owned())) }
    }
}

/// Splits `text` into words with POSIX-shell quoting: single quotes are literal, double quotes
/// honour backslash before `\ " $` and `` ` ``, a bare backslash escapes the next character.
/// Unquoted operators and expansions are refused rather than silently taken literally.
pub fn split_words(text: &str) -> Result<Vec<String>, ResumeError> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(inner) => current.push(inner),
                        None => return Err(ResumeError::UnterminatedQuote("single")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(escaped @ ('\\' | '"' | '$' | '`')) => current.push(escaped),
                            Some(other) => {
                                current.push('\\');
                                current.push(other);
                            }
                            None => return Err(ResumeError::UnterminatedQuote("double")),
                        },
                        Some(inner @ ('$' | '`')) => return Err(ResumeError::ShellSyntax(inner)),
                        Some(inner) => current.push(inner),
                        None => return Err(ResumeError::UnterminatedQuote("double")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                current.push(chars.next().ok_or(ResumeError::TrailingBackslash)?);
            }
            '|' | '&' | ';' | '<' | '>' | '(' | ')' | '$' | '`' | '*' | '?' | '[' | '#' | '~' => {
                return Err(ResumeError::ShellSyntax(c));
            }
            other => {
                in_word = true;
                current.push(other);
            }
        }
    }
    if in_word {
        words.push(current);
    }
    Ok(words)
}

impl ResumePattern {
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The argv for resuming `session`: the placeholder replaced, nothing else touched.
    pub fn render(&self, session: &ExternalSessionId) -> Vec<String> {
        self.args
            .iter()
            .map(|arg| match arg {
                Arg::Literal(text) => text.clone(),
                Arg::SessionId => session.as_str().to_owned(),
            })
            .collect()
    }
}

impl FromStr for ResumePattern {
    type Err = ResumeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let words = split_words(text)?;
        if words.is_empty() {
            return Err(ResumeError::Empty);
        }
        let mentions = text.matches(PLACEHOLDER).count();
        if mentions != 1 {
            return Err(ResumeError::PlaceholderCount(mentions));
        }
        let args: Vec<Arg> = words
            .into_iter()
            .map(|word| {
                if word == PLACEHOLDER {
                    Ok(Arg::SessionId)
                } else if word.contains(PLACEHOLDER) {
                    Err(ResumeError::PlaceholderNotWhole(word))
                } else {
                    Ok(Arg::Literal(word))
                }
            })
            .collect::<Result<_, _>>()?;
        if args.first() == Some(&Arg::SessionId) {
            return Err(ResumeError::PlaceholderAsCommand);
        }
        Ok(Self { source: text.to_owned(), args })
    }
}

impl fmt::Display for ResumePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl Serialize for ResumePattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.source)
    }
}

impl<'de> Deserialize<'de> for ResumePattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(|e| serde::de::Error::custom(format!("invalid resume pattern: {e}")))
    }
}

impl JsonSchema for ResumePattern {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("ResumePattern")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A command split with shell-style quoting (never run by a shell) in which {{external_session_id}} appears exactly once as a whole argument.",
            "pattern": "\\{\\{external_session_id\\}\\}"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str) -> ExternalSessionId {
        id.parse().expect("valid id")
    }

    #[test]
    fn renders_the_id_as_one_argument() {
        let pattern: ResumePattern = "codex exec resume {{external_session_id}}".parse().expect("valid");
        assert_eq!(pattern.render(&session("abc-123")), ["codex", "exec", "resume", "abc-123"]);
    }

    #[test]
    fn quoting_keeps_spaces_inside_one_argument() {
        let pattern: ResumePattern =
            r#"my-cli --note 'two words' "say \"hi\"" a\ b {{external_session_id}}"#.parse().expect("valid");
        assert_eq!(pattern.render(&session("x")), ["my-cli", "--note", "two words", r#"say "hi""#, "a b", "x"]);
    }

    #[test]
    fn quoted_placeholder_is_still_whole() {
        let pattern: ResumePattern = "cli --resume '{{external_session_id}}'".parse().expect("valid");
        assert_eq!(pattern.render(&session("s1")), ["cli", "--resume", "s1"]);
    }

    #[test]
    fn refuses_broken_patterns() {
        let cases: [(&str, ResumeError); 8] = [
            ("codex resume", ResumeError::PlaceholderCount(0)),
            ("c {{external_session_id}} {{external_session_id}}", ResumeError::PlaceholderCount(2)),
            ("c --id={{external_session_id}}", ResumeError::PlaceholderNotWhole("--id={{external_session_id}}".into())),
            ("{{external_session_id}} go", ResumeError::PlaceholderAsCommand),
            ("c 'open {{external_session_id}}", ResumeError::UnterminatedQuote("single")),
            ("c {{external_session_id}}; rm -rf /", ResumeError::ShellSyntax(';')),
            ("c $(id) {{external_session_id}}", ResumeError::ShellSyntax('$')),
            ("", ResumeError::Empty),
        ];
        for (text, expected) in cases {
            assert_eq!(text.parse::<ResumePattern>(), Err(expected), "{text:?}");
        }
    }

    #[test]
    fn session_ids_are_checked() {
        assert!("ses_ABC-123".parse::<ExternalSessionId>().is_ok());
        for bad in ["", "a b", "x;y", "../x", &"a".repeat(129)] {
            assert!(bad.parse::<ExternalSessionId>().is_err(), "{bad:?}");
        }
    }
}
