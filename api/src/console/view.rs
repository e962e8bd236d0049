//! How the console shows things: names with hidden characters escaped exactly as the CLI escapes
//! them (the templates then escape HTML), times relative with the absolute kept for a tooltip, a
//! patch as classified lines, a session's phases as an inline SVG timeline, and any record as
//! flat `key: value` rows.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Control and invisible formatting characters as visible escapes (`\u{202e}`), as the CLI shows
/// them; HTML escaping is the template's.
pub(crate) fn shown(text: &str) -> String {
    roundtable_specs::names::escape_hidden(text)
}

/// A time as a page shows it: `3m ago`, with the RFC 3339 original as its tooltip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct When {
    pub relative: String,
    pub absolute: String,
}

impl When {
    pub(crate) fn of(rfc3339: &str) -> Self {
        Self::at(rfc3339, time::OffsetDateTime::now_utc())
    }

    fn at(rfc3339: &str, now: time::OffsetDateTime) -> Self {
        let parsed = time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339);
        let relative = match parsed {
            Ok(then) => {
                let seconds = (now - then).whole_seconds();
                let (amount, ago) = (seconds.unsigned_abs(), seconds >= 0);
                let span = match amount {
                    s if s < 60 => format!("{s}s"),
                    s if s < 7200 => format!("{}m", s / 60),
                    s if s < 172_800 => format!("{}h", s / 3600),
                    s => format!("{}d", s / 86_400),
                };
                if ago { format!("{span} ago") } else { format!("in {span}") }
            }
            Err(_) => "-".into(),
        };
        Self { relative, absolute: shown(rfc3339) }
    }
}

/// One line of a patch, with how it is coloured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiffLine {
    /// `add`, `del`, `hunk`, `file` or `ctx`.
    pub class: &'static str,
    pub text: String,
}

/// The lines of a patch, each escaped as the CLI escapes `proposals diff`.
pub(crate) fn diff_lines(patch: &[u8]) -> Vec<DiffLine> {
    let text = String::from_utf8_lossy(patch);
    text.lines()
        .map(|line| {
            let class = if line.starts_with("diff --git") || line.starts_with("+++") || line.starts_with("---") {
                "file"
            } else if line.starts_with("@@") {
                "hunk"
            } else if line.starts_with('+') {
                "add"
            } else if line.starts_with('-') {
                "del"
            } else {
                "ctx"
            };
            DiffLine { class, text: shown(&line.replace('\t', "    ")) }
        })
        .collect()
}

/// A session's phases as an SVG timeline: one bar per phase, its width its share of the whole,
/// labelled with its name and milliseconds. Every text in it is escaped here: the template
/// includes it as markup.
pub(crate) fn timeline_svg(timings: &BTreeMap<String, u64>) -> String {
    let phases = roundtable_specs::session::in_phase_order(timings);
    if phases.is_empty() {
        return String::new();
    }
    let total: u64 = phases.iter().map(|(_, ms)| *ms).sum::<u64>().max(1);
    let (width, row) = (600.0_f64, 22.0_f64);
    let height = row * phases.len() as f64 + 4.0;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 {} {height}" role="img" aria-label="session phases, {total} ms in all">"#,
        width + 220.0
    );
    let mut at = 0u64;
    for (i, (name, ms)) in phases.iter().enumerate() {
        let x = 140.0 + width * at as f64 / total as f64;
        let w = (width * *ms as f64 / total as f64).max(1.0);
        let y = row * i as f64 + 2.0;
        let name = html_escape(&shown(name));
        let _ = write!(
            svg,
            r#"<text x="0" y="{}" class="phase">{name}</text><rect x="{x:.1}" y="{y}" width="{w:.1}" height="{}" class="bar"><title>{name}: {ms} ms</title></rect><text x="{:.1}" y="{}" class="ms">{ms} ms</text>"#,
            y + 15.0,
            row - 6.0,
            x + w + 6.0,
            y + 15.0,
        );
        at += ms;
    }
    svg.push_str("</svg>");
    svg
}

/// `&`, `<`, `>`, `"` and `'` as entities, for markup built outside a template.
pub(crate) fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An enum's wire word (`OutOfSync`, `pending`): what the CLI's JSON says.
pub(crate) fn word(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => shown(&text),
        Ok(other) => other.to_string(),
        Err(_) => "-".into(),
    }
}

/// A record as flat rows: nested keys joined with `.`, arrays by index, each value escaped.
pub(crate) fn rows_of(value: &impl serde::Serialize) -> Vec<(String, String)> {
    fn walk(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
        let key = |k: &str| if prefix.is_empty() { k.to_owned() } else { format!("{prefix}.{k}") };
        match value {
            serde_json::Value::Object(map) => map.iter().for_each(|(k, v)| walk(&key(k), v, out)),
            serde_json::Value::Array(items) => {
                items.iter().enumerate().for_each(|(i, v)| walk(&key(&i.to_string()), v, out))
            }
            serde_json::Value::Null => {}
            serde_json::Value::String(text) => out.push((shown(prefix), shown(text))),
            other => out.push((shown(prefix), other.to_string())),
        }
    }
    let mut out = Vec::new();
    if let Ok(value) = serde_json::to_value(value) {
        walk("", &value, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_are_shown_as_the_cli_shows_them() {
        let lines = diff_lines("+++ b/evil\u{202e}txt.md\n+ok\u{1b}[2J\n-gone\n@@ -1 +1 @@\n".as_bytes());
        let classes: Vec<&str> = lines.iter().map(|l| l.class).collect();
        assert_eq!(classes, ["file", "add", "del", "hunk"]);
        assert_eq!(lines[0].text, "+++ b/evil\\u{202e}txt.md");
        assert_eq!(lines[1].text, "+ok\\u{1b}[2J");
    }

    #[test]
    fn times_are_relative_with_the_absolute_kept() {
        let now = time::OffsetDateTime::parse("2026-12-03T12:00:00Z", &time::format_description::well_known::Rfc3339)
            .expect("time");
        assert_eq!(When::at("2026-12-03T11:57:00Z", now).relative, "3m ago");
        assert_eq!(When::at("2026-12-01T12:00:00Z", now).relative, "2d ago");
        assert_eq!(When::at("2026-12-03T11:57:00Z", now).absolute, "2026-12-03T11:57:00Z");
        assert_eq!(When::at("yesterday", now).relative, "-");
    }

    #[test]
    fn the_timeline_draws_each_phase_in_order_and_escapes_names() {
        let timings = BTreeMap::from([("agent".to_owned(), 300), ("provision".to_owned(), 100), ("<x>".to_owned(), 5)]);
        let svg = timeline_svg(&timings);
        let (provision, agent) = (svg.find(">provision<").expect("provision"), svg.find(">agent<").expect("agent"));
        assert!(provision < agent, "{svg}");
        assert!(svg.contains("&lt;x&gt;") && !svg.contains("<x>"), "{svg}");
        assert!(svg.contains("405 ms in all"), "{svg}");
    }
}
