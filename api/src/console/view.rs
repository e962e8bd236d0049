//! How the console shows things: names with hidden characters escaped exactly as the CLI escapes
//! them (the templates then escape HTML), times relative with the absolute kept for a tooltip, a
//! session's phases as an inline SVG timeline, and any record as flat `key: value` rows.

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

/// Where the timeline's bars start and how wide all of them are together, in SVG units; the
/// script that grows a running phase (`tail.js`) reads them from the drawing.
const BARS_LEFT: f64 = 140.0;
const BARS_WIDTH: f64 = 600.0;

/// A session's phases as an SVG timeline: one bar per phase, its width its share of the whole,
/// labelled with its name and milliseconds. `running` is the phase under way and how long it has
/// run so far, drawn last, marked as running; on a live page the script grows it with the clock.
/// Every text in it is escaped here: the template includes it as markup.
pub(crate) fn timeline_svg(timings: &BTreeMap<String, u64>, running: Option<(&str, u64)>) -> String {
    let mut phases: Vec<(&str, u64, bool)> =
        roundtable_specs::session::in_phase_order(timings).into_iter().map(|(name, ms)| (name, ms, false)).collect();
    phases.extend(running.map(|(name, ms)| (name, ms, true)));
    if phases.is_empty() {
        return String::new();
    }
    let total: u64 = phases.iter().map(|(_, ms, _)| *ms).sum::<u64>().max(1);
    let row = 22.0_f64;
    let height = row * phases.len() as f64 + 4.0;
    let live = if running.is_some() { r#" data-running="true""# } else { "" };
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 {} {height}" role="img" aria-label="session phases, {total} ms in all" data-left="{BARS_LEFT}" data-width="{BARS_WIDTH}"{live}>"#,
        BARS_WIDTH + 220.0
    );
    let mut at = 0u64;
    for (i, (name, ms, under_way)) in phases.iter().enumerate() {
        let x = BARS_LEFT + BARS_WIDTH * at as f64 / total as f64;
        let w = (BARS_WIDTH * *ms as f64 / total as f64).max(1.0);
        let y = row * i as f64 + 2.0;
        let name = html_escape(&shown(name));
        let (class, label, title) = if *under_way {
            ("bar running", format!("{ms} ms so far"), format!("{name}: running, {ms} ms so far"))
        } else {
            ("bar", format!("{ms} ms"), format!("{name}: {ms} ms"))
        };
        let _ = write!(
            svg,
            r#"<text x="0" y="{}" class="phase">{name}</text><rect x="{x:.1}" y="{y}" width="{w:.1}" height="{}" class="{class}" data-ms="{ms}"><title>{title}</title></rect><text x="{:.1}" y="{}" class="ms">{label}</text>"#,
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

/// How long the phase under way of a session that started at `started` (RFC 3339) has run at
/// `now`: the time since it started less the phases already recorded (a phase's time is recorded
/// when it ends, so this is the agent's time with the launch and self-check in it until then).
pub(crate) fn running_for(started: &str, recorded: &BTreeMap<String, u64>, now: time::OffsetDateTime) -> Option<u64> {
    let started = time::OffsetDateTime::parse(started, &time::format_description::well_known::Rfc3339).ok()?;
    let elapsed = u64::try_from((now - started).whole_milliseconds()).ok()?;
    Some(elapsed.saturating_sub(recorded.values().sum()))
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
        let svg = timeline_svg(&timings, None);
        let (provision, agent) = (svg.find(">provision<").expect("provision"), svg.find(">agent<").expect("agent"));
        assert!(provision < agent, "{svg}");
        assert!(svg.contains("&lt;x&gt;") && !svg.contains("<x>"), "{svg}");
        assert!(svg.contains("405 ms in all"), "{svg}");
        assert!(!svg.contains("data-running") && !svg.contains("running"), "{svg}");
    }

    #[test]
    fn a_running_phase_is_drawn_last_with_the_time_so_far() {
        let now = time::OffsetDateTime::parse("2026-12-03T12:00:10Z", &time::format_description::well_known::Rfc3339)
            .expect("time");
        let recorded = BTreeMap::from([("provision".to_owned(), 2_000)]);
        let so_far = running_for("2026-12-03T12:00:00Z", &recorded, now).expect("so far");
        assert_eq!(so_far, 8_000);
        assert_eq!(running_for("2026-12-03T12:00:20Z", &recorded, now), None, "a start after now is no time");
        let svg = timeline_svg(&recorded, Some(("agent", so_far)));
        assert!(svg.contains(r#"data-running="true""#), "{svg}");
        let (provision, agent) = (svg.find(">provision<").expect("provision"), svg.find(">agent<").expect("agent"));
        assert!(provision < agent, "{svg}");
        assert!(svg.contains(r#"class="bar running" data-ms="8000""#) && svg.contains("8000 ms so far"), "{svg}");
        // The agent's share of the width: 8 of 10 seconds.
        assert!(svg.contains(r#"width="480.0" height="16" class="bar running""#), "{svg}");
    }
}
