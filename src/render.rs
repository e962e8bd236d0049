//! Rendering for terminals: aligned tables and JSON envelopes, with control characters and
//! invisible formatting characters (bidi controls, zero-width characters) escaped so nothing from
//! a spec file or an agent can drive the operator's terminal or disguise what it shows.

use std::fmt::Write as _;

use serde::Serialize;

/// `n` and its noun, singular for one: "1 file", "2 files".
pub use roundtable_specs::units::count;

/// Replaces control characters (escape sequences included) and invisible formatting characters
/// (bidi controls such as U+202E, zero-width characters, the rest of Unicode's category Cf) with
/// visible escapes like `\u{202e}`.
pub fn sanitize(text: &str) -> String {
    roundtable_specs::names::escape_hidden(text)
}

/// Like [`sanitize`], but keeps line breaks and tabs of a multi-line block.
pub fn sanitize_block(text: &str) -> String {
    text.split('\n').map(|line| sanitize(&line.replace('\t', "    "))).collect::<Vec<_>>().join("\n")
}

/// How long ago an RFC 3339 time was, kubectl style: `45s`, `12m`, `3h`, `5d`.
pub fn age(rfc3339: &str) -> String {
    let Ok(then) = time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339) else {
        return "-".into();
    };
    let seconds = (time::OffsetDateTime::now_utc() - then).whole_seconds().max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// An RFC 3339 time to the second, in UTC (`2026-12-08T00:25:37Z`): what a reader needs of the
/// store's nanoseconds. Text that is not a time is returned as it is.
pub fn timestamp(rfc3339: &str) -> String {
    let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .ok()
        .and_then(|at| at.to_offset(time::UtcOffset::UTC).format(&format).ok())
        .unwrap_or_else(|| rfc3339.to_owned())
}

/// How long from one RFC 3339 time to another (to now without one): `45s`, `3m12s`, `2h5m`;
/// `-` when `from` does not parse.
pub fn duration(from: &str, to: Option<&str>) -> String {
    let parse = |text: &str| time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok();
    let Some(from) = parse(from) else { return "-".into() };
    let to = to.and_then(parse).unwrap_or_else(time::OffsetDateTime::now_utc);
    let seconds = (to - from).whole_seconds().max(0);
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{}s", s / 60, s % 60),
        s => format!("{}h{}m", s / 3600, (s % 3600) / 60),
    }
}

/// `headers` and each row's `cells`, with the wide-only columns (`wide_headers`, each row's
/// `wide`) put before the last column when `wide`: what `-o wide` adds to a listing.
pub fn table_maybe_wide(
    headers: &[&str],
    wide_headers: &[&str],
    rows: Vec<(Vec<String>, Vec<String>)>,
    wide: bool,
) -> String {
    let insert_at = headers.len().saturating_sub(1);
    let mut all_headers: Vec<&str> = headers.to_vec();
    if wide {
        all_headers.splice(insert_at..insert_at, wide_headers.iter().copied());
    }
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|(mut cells, extra)| {
            if wide {
                let at = insert_at.min(cells.len());
                cells.splice(at..at, extra);
            }
            cells
        })
        .collect();
    table(&all_headers, &rows)
}

/// A `kubectl get`-style table: upper-case headers, columns padded to their widest cell.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    Columns::fitting(headers, rows).render(headers, rows)
}

/// A table's column widths: fitted to a first set of rows, then kept for rows that come later (a
/// watch prints each change as a line of the table it started with, as `kubectl get -w` does).
#[derive(Debug, Clone)]
pub struct Columns {
    widths: Vec<usize>,
}

impl Columns {
    /// Wide enough for `headers` and every cell of `rows`.
    pub fn fitting(headers: &[&str], rows: &[Vec<String>]) -> Self {
        let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
        for row in rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(width) = widths.get_mut(i) {
                    *width = (*width).max(sanitize(cell).chars().count());
                }
            }
        }
        Self { widths }
    }

    /// The header line and every row.
    pub fn render(&self, headers: &[&str], rows: &[Vec<String>]) -> String {
        let mut out = self.line(headers);
        for row in rows {
            out.push_str(&self.line(row));
        }
        out
    }

    /// One line (a cell is sanitised; the last is not padded).
    pub fn line<S: AsRef<str>>(&self, cells: &[S]) -> String {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let cell = sanitize(cell.as_ref());
            if i + 1 == cells.len() {
                text.push_str(&cell);
            } else {
                let _ = write!(text, "{:width$}   ", cell, width = self.widths.get(i).copied().unwrap_or(0));
            }
        }
        let mut line = text.trim_end().to_owned();
        line.push('\n');
        line
    }
}

/// Pretty JSON with a trailing newline.
pub fn json<T: Serialize>(value: &T) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}

/// A command's document in the structured format asked for: JSON, the same as YAML, the names
/// of its objects, or a JSONPath template's text drawn from it.
pub fn document<T: Serialize>(format: crate::cli::Format, value: &T) -> anyhow::Result<String> {
    use crate::cli::Format;
    match format {
        Format::Yaml => Ok(yaml(&serde_json::to_value(value)?)),
        Format::Name => Ok(names(&serde_json::to_value(value)?)),
        Format::JsonPath(template) => {
            // The template prints values raw, and they carry what agents and spec files wrote (a
            // session's message, an audited record's fields): hidden characters escaped as
            // everywhere else, line breaks and tabs kept for the template's own layout.
            let rendered = template.render(&serde_json::to_value(value)?);
            let mut text: String = rendered
                .split_inclusive(['\n', '\t'])
                .map(|piece| {
                    let (body, end) = piece.split_at(piece.trim_end_matches(['\n', '\t']).len());
                    format!("{}{end}", sanitize(body))
                })
                .collect();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            Ok(text)
        }
        Format::Json | Format::Text | Format::Wide => json(value),
    }
}

/// `-o name`: each object of a list (or the one object) as `Kind/name`, one per line, as
/// kubectl prints them; an item named only by an id is `session/ID`, `proposal/ID`, after its
/// list's kind.
fn names(document: &serde_json::Value) -> String {
    let list_kind = document["kind"].as_str().unwrap_or_default();
    let items: Vec<&serde_json::Value> = match document["items"].as_array() {
        Some(items) if list_kind.ends_with("List") => items.iter().collect(),
        _ => vec![document],
    };
    let singular = list_kind.trim_end_matches("List").to_ascii_lowercase();
    items.into_iter().filter_map(|item| name_of(item, &singular)).map(|name| format!("{}\n", sanitize(&name))).collect()
}

fn name_of(item: &serde_json::Value, singular: &str) -> Option<String> {
    let text = |value: &serde_json::Value| value.as_str().map(str::to_owned);
    let kind_and_name =
        |object: &serde_json::Value| Some(format!("{}/{}", text(&object["kind"])?, text(&object["name"])?));
    kind_and_name(item)
        .or_else(|| kind_and_name(&item["status"]))
        .or_else(|| Some(format!("{}/{}", text(&item["kind"])?, text(&item["metadata"]["name"])?)))
        .or_else(|| Some(format!("{singular}/{}", text(&item["id"]).or_else(|| text(&item["name"]))?)))
}

/// `value` as block-style YAML. Every string is written in double quotes with JSON's escapes,
/// which YAML reads the same way, so no value is ever taken for another type (`no`, `1e3`,
/// `null`) or breaks the document (`: `, `#`, a leading `-`); keys are plain when they are
/// plainly safe.
pub fn yaml(value: &serde_json::Value) -> String {
    let mut out = String::new();
    match value {
        serde_json::Value::Object(map) if !map.is_empty() => yaml_block(value, 0, &mut out),
        serde_json::Value::Array(items) if !items.is_empty() => yaml_block(value, 0, &mut out),
        scalar => {
            out.push_str(&yaml_scalar(scalar));
            out.push('\n');
        }
    }
    out
}

/// A non-empty map or list at `indent`, each line ending in a newline.
fn yaml_block(value: &serde_json::Value, indent: usize, out: &mut String) {
    use serde_json::Value;
    let pad = " ".repeat(indent);
    let is_block =
        |v: &Value| matches!(v, Value::Object(m) if !m.is_empty()) || matches!(v, Value::Array(a) if !a.is_empty());
    match value {
        Value::Object(map) => {
            for (key, child) in in_reading_order(map) {
                out.push_str(&format!("{pad}{}:", yaml_key(key)));
                if is_block(child) {
                    out.push('\n');
                    // A list under a key sits at the key's own indent, as kubectl writes it.
                    yaml_block(child, if child.is_array() { indent } else { indent + 2 }, out);
                } else {
                    out.push_str(&format!(" {}\n", yaml_scalar(child)));
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                if is_block(item) {
                    // The item's first line starts after `- `; the rest sit two further in.
                    let mut inner = String::new();
                    yaml_block(item, indent + 2, &mut inner);
                    out.push_str(&format!("{pad}- {}", &inner[indent + 2..]));
                } else {
                    out.push_str(&format!("{pad}- {}\n", yaml_scalar(item)));
                }
            }
        }
        scalar => out.push_str(&format!("{pad}{}\n", yaml_scalar(scalar))),
    }
}

/// Keys a reader looks for first, as kubectl writes an object (`kind` and `metadata` before a
/// list's `items`, `spec` before `status`); the rest follow in key order.
const FIRST_KEYS: [&str; 6] = ["apiVersion", "kind", "metadata", "name", "spec", "status"];

fn in_reading_order(map: &serde_json::Map<String, serde_json::Value>) -> Vec<(&String, &serde_json::Value)> {
    let rank = |key: &str| FIRST_KEYS.iter().position(|first| *first == key).unwrap_or(FIRST_KEYS.len());
    let mut entries: Vec<_> = map.iter().collect();
    // Stable: keys of equal rank keep the map's (sorted) order.
    entries.sort_by_key(|(key, _)| rank(key));
    entries
}

fn yaml_scalar(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => Value::String(s.clone()).to_string(),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

fn yaml_key(key: &str) -> String {
    let plain = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !matches!(
            key.to_ascii_lowercase().as_str(),
            "y" | "n" | "yes" | "no" | "true" | "false" | "on" | "off" | "null"
        );
    if plain { key.to_owned() } else { serde_json::Value::String(key.to_owned()).to_string() }
}

/// An argv as one line a shell would split back into it, escaped for the terminal. For display
/// only; nothing Roundtable runs goes through a shell.
pub fn command_line(argv: &[String]) -> String {
    let quoted: Vec<String> = argv.iter().map(|arg| shell_quote(arg)).collect();
    sanitize(&quoted.join(" "))
}

/// `arg` as a POSIX shell word: bare when it is plainly safe, else single-quoted. For display
/// only; nothing Roundtable runs goes through a shell.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain { arg.to_owned() } else { format!("'{}'", arg.replace('\'', "'\\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(sanitize("a\u{1b}[31mb\nc"), "a\\u{1b}[31mb\\u{a}c");
        assert_eq!(sanitize("plain · text"), "plain · text");
    }

    #[test]
    fn bidi_controls_and_invisible_characters_never_reach_the_terminal() {
        // A file name that displays as `evilexe.txt` but ends in `.exe`: U+202E reverses what follows.
        assert_eq!(sanitize("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        for c in [
            '\u{202a}',
            '\u{2066}',
            '\u{2069}',
            '\u{200e}',
            '\u{200f}',
            '\u{061c}',
            '\u{200b}',
            '\u{200d}',
            '\u{2060}',
            '\u{feff}',
            '\u{00ad}',
            '\u{e0001}',
            '\u{e0041}',
            '\u{2028}',
        ] {
            let shown = sanitize(&format!("a{c}b"));
            assert_eq!(shown, format!("a\\u{{{:x}}}b", c as u32));
            let block = sanitize_block(&format!("+line{c}\n-other{c}"));
            assert!(!block.contains(c), "{block:?}");
            assert_eq!(block.lines().count(), 2, "{block:?}");
        }
        // Visible non-ASCII text is kept as it is.
        assert_eq!(sanitize("café 日本 ß → ✓"), "café 日本 ß → ✓");
        let cells = table(&["NAME"], &[vec!["a\u{202e}b".into()]]);
        assert!(!cells.contains('\u{202e}') && cells.contains("a\\u{202e}b"), "{cells}");
    }

    /// Hostile: `-o jsonpath=TEMPLATE` printed values raw, so an escape sequence in an event's
    /// message (an audited record's field, an agent's words) reached the operator's terminal.
    #[test]
    fn jsonpath_output_escapes_hidden_characters_and_keeps_its_lines() {
        let template = crate::jsonpath::Template::parse("{.items[*].message}{\"\\n\"}").expect("template");
        let format = crate::cli::Format::JsonPath(Box::leak(Box::new(template)));
        let events = serde_json::json!({"items": [{"message": "ok\u{1b}]0;pwned\u{7}\u{9b}2J\u{202e}x"}]});
        let text = document(format, &events).expect("rendered");
        assert_eq!(text, "ok\\u{1b}]0;pwned\\u{7}\\u{9b}2J\\u{202e}x\n");
    }

    #[test]
    fn tables_align_columns() {
        let text = table(&["NAME", "X"], &[vec!["a".into(), "1".into()], vec!["long".into(), "2".into()]]);
        assert_eq!(text, "NAME   X\na      1\nlong   2\n");
    }
}
