//! Excerpts of what a container printed, as an operator is shown them (diagnostics reports,
//! admission decisions): redacted first with the rule set every secret scanner shares, then cut
//! at a character boundary.

use super::redact;

/// The longest excerpt, in bytes.
pub const EXCERPT_LIMIT: usize = 2_000;

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

/// The longest quote of one line, in bytes.
pub const QUOTE_LIMIT: usize = 200;

/// The first non-empty line of `output`, redacted and cut to [`QUOTE_LIMIT`] bytes (`…` marks
/// a cut): what a one-line message says a command printed, however much it printed.
pub fn quote(output: &[u8]) -> String {
    let text = redact(output);
    let line = text.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or("");
    let cut = excerpt(line, QUOTE_LIMIT);
    if cut.truncated { format!("{}…", cut.text) } else { cut.text }
}

#[cfg(test)]
mod tests {
    use super::*;

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
