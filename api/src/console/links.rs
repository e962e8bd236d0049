//! Messages as the console shows them: a CLI command quoted in one (`` `roundtable sessions logs
//! ID` ``) that a console page answers becomes a link to that page; any other quoted command stays
//! code. The CLI's words are not changed: the messages are the ones it prints, linked only here.

use std::fmt;

use super::pages::percent;
use super::view::{html_escape, shown};

/// A message as markup: every text in it escaped, hidden characters as the CLI shows them, each
/// quoted command linked to its page or set as code. Templates include it as it is (`|safe`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Linked(String);

impl fmt::Display for Linked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Linked {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The page that answers `command` (the text between backticks), and the words its link reads.
fn page_of(command: &str) -> Option<(String, String)> {
    let words: Vec<&str> = command.split_whitespace().collect();
    // A segment of `.` or `..` (which encoding leaves as it is) is a step up or nowhere to the
    // browser: `/ui/sessions/..` is `/ui/`, a page the link's words do not name.
    if words.iter().skip(2).flat_map(|word| word.split('/')).any(|segment| segment == "." || segment == "..") {
        return None;
    }
    let link = |path: String, text: String| Some((path, text));
    match words[..] {
        ["roundtable", "proposals", "show" | "diff", id] => {
            link(format!("/ui/proposals/{}", percent(id)), format!("proposal {id}"))
        }
        ["roundtable", "sessions", "show", id] => {
            link(format!("/ui/sessions/{}", percent(id)), format!("session {id}"))
        }
        ["roundtable", "sessions", "logs", id] => {
            link(format!("/ui/sessions/{}#output", percent(id)), format!("the output of session {id}"))
        }
        ["roundtable", "describe", object] => {
            let (kind, name) = object.split_once('/')?;
            kind.eq_ignore_ascii_case("assignment")
                .then(|| (format!("/ui/assignments/{}", percent(name)), format!("Assignment {name}")))
        }
        ["roundtable", "status"] => link("/ui/".into(), "the status page".into()),
        ["roundtable", "proposals", "list"] => link("/ui/proposals".into(), "the proposals".into()),
        _ => None,
    }
}

/// `message` with its quoted commands linked where a page answers them.
pub(crate) fn linked(message: &str) -> Linked {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find('`') {
        let Some(length) = rest[open + 1..].find('`') else { break };
        let (before, quoted) = (&rest[..open], &rest[open + 1..open + 1 + length]);
        out.push_str(&html_escape(&shown(before)));
        match page_of(quoted) {
            Some((href, text)) => {
                out.push_str(&format!(r#"<a href="{}">{}</a>"#, html_escape(&href), html_escape(&shown(&text))))
            }
            None => out.push_str(&format!("<code>{}</code>", html_escape(&shown(quoted)))),
        }
        rest = &rest[open + length + 2..];
    }
    out.push_str(&html_escape(&shown(rest)));
    Linked(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_commands_with_a_page_become_links() {
        let said = linked("agent exited 1; its output: `roundtable sessions logs s-1`");
        assert_eq!(
            said.to_string(),
            r#"agent exited 1; its output: <a href="/ui/sessions/s-1#output">the output of session s-1</a>"#
        );
        let review = linked("pending; awaits review: `roundtable proposals show p 2`, then accept or reject");
        assert_eq!(
            review.to_string(),
            "pending; awaits review: <code>roundtable proposals show p 2</code>, then accept or reject"
        );
        let review = linked("awaits review: `roundtable proposals show p-2`, then accept");
        assert!(review.to_string().contains(r#"<a href="/ui/proposals/p-2">proposal p-2</a>"#), "{review}");
        let described = linked("see `roundtable describe Assignment/fix`");
        assert!(described.to_string().contains(r#"<a href="/ui/assignments/fix">Assignment fix</a>"#), "{described}");
    }

    #[test]
    fn everything_else_is_escaped_text_or_code() {
        let said = linked("run `roundtable doctor` <b>now</b> & `unclosed");
        assert_eq!(said.to_string(), "run <code>roundtable doctor</code> &lt;b&gt;now&lt;/b&gt; &amp; `unclosed");
        let hostile = linked("`roundtable sessions show \"><script>x</script>` \u{202e}");
        assert!(!hostile.to_string().contains("<script>"), "{hostile}");
        assert!(hostile.to_string().ends_with("\\u{202e}"), "{hostile}");
        let id = linked("`roundtable sessions show a\"b`");
        assert_eq!(id.to_string(), r#"<a href="/ui/sessions/a%22b">session a&quot;b</a>"#);
        let id = linked("`roundtable sessions show javascript:alert(1)`");
        assert_eq!(
            id.to_string(),
            r#"<a href="/ui/sessions/javascript%3Aalert%281%29">session javascript:alert(1)</a>"#
        );
    }

    /// Hostile: an id of `..` (or `.`) in a message made a link the browser resolves elsewhere:
    /// `/ui/proposals/..` is `/ui/`, not the proposal the link names.
    #[test]
    fn a_dot_segment_id_is_not_linked() {
        for command in [
            "roundtable proposals show ..",
            "roundtable sessions logs ..",
            "roundtable sessions show .",
            "roundtable describe Assignment/..",
            "roundtable describe ../..",
        ] {
            let said = linked(&format!("see `{command}`")).to_string();
            assert_eq!(said, format!("see <code>{command}</code>"), "{command}");
        }
        assert!(linked("`roundtable proposals show p..1`").to_string().contains(r#"href="/ui/proposals/p..1""#));
    }
}
