//! How an audited entry reads in the events table, derived from the MAC'd entry alone: what
//! `events`, `describe` and the API show (a summary of the record, which may be worded better in
//! a later version), and the columns an append writes and `audit verify` holds the stored ones
//! to (the same view without the summary, so they never change from version to version).

use roundtable_specs::units::count;

/// The event columns of an audited entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryView {
    pub at: String,
    pub kind: String,
    pub name: String,
    pub severity: String,
    pub reason: String,
    pub message: String,
}

/// The kind of a reconcile event sealed in the chain: it shows its own severity, reason and
/// message (carried in its record), not the entry kind.
pub const RECONCILE_EVENT: &str = roundtable_specs::audit::EntryKind::ReconcileEvent.as_str();

impl EntryView {
    /// The view of the canonical entry `entry` (as hashed) readers show, its record summarised;
    /// `None` when it is not an entry.
    pub fn of(entry: &str) -> Option<Self> {
        Self::drawn(entry, true)
    }

    fn drawn(entry: &str, summarised: bool) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(entry).ok()?;
        let text = |field: &str| value.get(field).and_then(serde_json::Value::as_str);
        let (at, kind, subject) = (text("at")?, text("kind")?, text("subject")?);
        let (object_kind, name) = subject.split_once('/').unwrap_or(("Session", subject));
        let record = &value["record"];
        let from_record = |field: &str| record.get(field).and_then(serde_json::Value::as_str).map(str::to_owned);
        let (severity, reason, message) = if kind == RECONCILE_EVENT {
            (from_record("severity")?, from_record("reason")?, from_record("message")?)
        } else {
            let said = if summarised { summary(kind, record) } else { None };
            let (warning, message) = said.unwrap_or_else(|| (false, format!("audited {kind}")));
            (if warning { "Warning" } else { "Normal" }.to_owned(), kind.to_owned(), message)
        };
        Some(Self { at: at.to_owned(), kind: object_kind.to_owned(), name: name.to_owned(), severity, reason, message })
    }

    /// The columns an append writes and `audit verify` compares them against: the view with an
    /// audited entry's summary left out (`Normal`, `audited KIND`; a reconcile event keeps its
    /// own words, which are its record). Drawn from the entry's kind alone, they stay the same
    /// whatever later code says of the entry, so a chain sealed by one version verifies under the
    /// next, and every column is still compared; readers show [`EntryView::of`], rebuilt from the
    /// MAC'd record, never the columns.
    pub fn columns_of(entry: &str) -> Option<Self> {
        Self::drawn(entry, false)
    }

    /// The first column of `stored` that differs from this view, by its column name.
    pub fn first_difference(&self, stored: &Self) -> Option<&'static str> {
        let columns: [(&'static str, &String, &String); 6] = [
            ("at", &self.at, &stored.at),
            ("kind", &self.kind, &stored.kind),
            ("name", &self.name, &stored.name),
            ("severity", &self.severity, &stored.severity),
            ("reason", &self.reason, &stored.reason),
            ("message", &self.message, &stored.message),
        ];
        columns.into_iter().find(|(_, sealed, column)| sealed != column).map(|(name, _, _)| name)
    }
}

/// What an audited entry says in a line, drawn from its record, and whether it is a warning;
/// `None` for a kind without a summary (or a record that does not have its fields).
fn summary(kind: &str, record: &serde_json::Value) -> Option<(bool, String)> {
    use roundtable_specs::audit::EntryKind;
    let text = |value: &serde_json::Value| value.as_str().map(str::to_owned);
    let short = |value: &serde_json::Value| value.as_str().map(|id| id.chars().take(12).collect::<String>());
    match kind.parse::<EntryKind>().ok()? {
        EntryKind::SessionStarted => Some((
            false,
            format!(
                "attempt {} of Assignment/{} (execution generation {}) started: adapter {}, image {}",
                record["attempt"],
                text(&record["assignment"])?,
                record["executionGeneration"],
                text(&record["adapter"])?,
                text(&record["image"]).map_or_else(|| "none".into(), |image| shortened_id(&image)),
            ),
        )),
        EntryKind::SessionEnded => {
            let phase = text(&record["phase"])?;
            let mut said = phase.clone();
            if let Some(ms) = record["durationMs"].as_i64() {
                said.push_str(&format!(" after {}", duration(ms)));
            }
            if let Some(code) = record["exitCode"].as_i64() {
                said.push_str(&format!(", exit code {code}"));
            }
            let message = text(&record["message"]).unwrap_or_default();
            let warning = !matches!(phase.as_str(), "Succeeded" | "Cancelled");
            Some((warning, if message.is_empty() { said } else { format!("{said}: {message}") }))
        }
        EntryKind::AdmissionGate => gates(record),
        EntryKind::AdmissionReceipt => {
            let refused = record["reason"].as_str().map(|reason| format!(" ({reason})")).unwrap_or_default();
            Some((
                !refused.is_empty(),
                format!(
                    "receipt {} sealed for adapter {}: {}{refused}",
                    short(&record["receipt"])?,
                    text(&record["adapter"])?,
                    text(&record["verdict"])?
                ),
            ))
        }
        EntryKind::ProposalSubmitted => {
            let flags = record["flags"].as_array().map_or(0, Vec::len);
            let flagged = if flags > 0 { format!(", {}", count(flags, "flag", "flags")) } else { String::new() };
            Some((
                false,
                format!(
                    "from Assignment/{} (execution generation {}) on base {}{flagged}",
                    text(&record["assignment"])?,
                    record["executionGeneration"],
                    short(&record["baseCommit"])?
                ),
            ))
        }
        _ => None,
    }
}

/// An `admission.gate` entry: every gate's decision in one entry, or (sealed before) one.
fn gates(record: &serde_json::Value) -> Option<(bool, String)> {
    let decisions: Vec<&serde_json::Value> = match record["decisions"].as_array() {
        Some(decisions) => decisions.iter().collect(),
        None => vec![record],
    };
    let gate = |d: &serde_json::Value| d["gate"].as_str().unwrap_or("?").to_owned();
    let refused: Vec<String> = decisions
        .iter()
        .filter(|d| d["verdict"] != "admit")
        .map(|d| {
            let blocked = if d["blocked"] == true { "" } else { ", not blocking" };
            format!(
                "{} refused ({}{blocked}): {}",
                gate(d),
                d["reason"].as_str().unwrap_or("?"),
                d["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    let mode = record["mode"].as_str().unwrap_or("?");
    let admitted: Vec<String> = decisions.iter().filter(|d| d["verdict"] == "admit").map(|d| gate(d)).collect();
    if refused.is_empty() {
        let gates = count(admitted.len(), "gate", "gates");
        return Some((false, format!("admitted by {} ({gates}; mode {mode})", admitted.join(", "))));
    }
    let others = if admitted.is_empty() { String::new() } else { format!("; admitted by {}", admitted.join(", ")) };
    // A refusal is a warning whether or not it blocked: under `warn` that is what it is for.
    Some((true, format!("{}{others} (mode {mode})", refused.join("; "))))
}

/// An image as a reader takes it: a reference whole, an image ID (`sha256:…`) cut to 12 hex
/// digits as the engine shows them.
fn shortened_id(image: &str) -> String {
    match image.strip_prefix("sha256:") {
        Some(hex) => format!("sha256:{}", hex.chars().take(12).collect::<String>()),
        None => image.to_owned(),
    }
}

/// Milliseconds as a reader takes them: `850ms`, `4.2s`, `3m12s`.
fn duration(ms: i64) -> String {
    match ms {
        ms if ms < 1000 => format!("{ms}ms"),
        ms if ms < 60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        ms => format!("{}m{}s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconcile_event_shows_its_own_words_and_other_entries_their_kind() {
        let event = r#"{"at":"t","kind":"reconcile.event","record":{"message":"m","reason":"R","severity":"Warning"},"seq":1,"subject":"Adapter/a"}"#;
        let view = EntryView::of(event).expect("view");
        assert_eq!((view.kind.as_str(), view.name.as_str()), ("Adapter", "a"));
        assert_eq!((view.severity.as_str(), view.reason.as_str(), view.message.as_str()), ("Warning", "R", "m"));
        let ended = r#"{"at":"t","kind":"session.ended","record":{},"seq":2,"subject":"s1"}"#;
        let view = EntryView::of(ended).expect("view");
        assert_eq!((view.kind.as_str(), view.name.as_str()), ("Session", "s1"));
        assert_eq!((view.reason.as_str(), view.message.as_str()), ("session.ended", "audited session.ended"));
        assert_eq!(EntryView::of("not json"), None);
    }

    #[test]
    fn a_session_end_says_how_it_ended_how_long_it_took_and_its_exit_code() {
        let ended = r#"{"at":"t","kind":"session.ended","record":{"phase":"Failed","exitCode":3,"durationMs":4210,"message":"the agent exited with code 3"},"seq":2,"subject":"s1"}"#;
        let view = EntryView::of(ended).expect("view");
        assert_eq!(view.message, "Failed after 4.2s, exit code 3: the agent exited with code 3");
        assert_eq!(view.severity, "Warning");
        // Sealed before durations were: said without one.
        let older = r#"{"at":"t","kind":"session.ended","record":{"phase":"Succeeded","exitCode":0,"message":"m"},"seq":2,"subject":"s1"}"#;
        assert_eq!(EntryView::of(older).expect("view").message, "Succeeded, exit code 0: m");
    }

    #[test]
    fn one_admission_entry_names_its_gates_and_a_refusal_is_a_warning() {
        let admitted = r#"{"at":"t","kind":"admission.gate","record":{"adapter":"a","mode":"enforce","blocked":false,"decisions":[{"gate":"admission","verdict":"admit","blocked":false},{"gate":"securityFloor","verdict":"admit","blocked":false}]},"seq":3,"subject":"s1"}"#;
        let view = EntryView::of(admitted).expect("view");
        assert_eq!(
            (view.severity.as_str(), view.message.as_str()),
            ("Normal", "admitted by admission, securityFloor (2 gates; mode enforce)")
        );
        let refused = r#"{"at":"t","kind":"admission.gate","record":{"adapter":"a","mode":"enforce","blocked":true,"decisions":[{"gate":"admission","verdict":"refuse","reason":"no_receipt","message":"no receipt","blocked":true}]},"seq":3,"subject":"s1"}"#;
        let view = EntryView::of(refused).expect("view");
        assert_eq!(
            (view.severity.as_str(), view.message.as_str()),
            ("Warning", "admission refused (no_receipt): no receipt (mode enforce)")
        );
        // One decision per entry, as sealed before.
        let single = r#"{"at":"t","kind":"admission.gate","record":{"gate":"admission","verdict":"refuse","reason":"no_receipt","message":"m","mode":"warn","blocked":false},"seq":3,"subject":"s1"}"#;
        let view = EntryView::of(single).expect("view");
        assert_eq!(
            (view.severity.as_str(), view.message.as_str()),
            ("Warning", "admission refused (no_receipt, not blocking): m (mode warn)")
        );
    }

    #[test]
    fn the_stored_columns_are_the_kind_alone_and_a_reconcile_event_its_own_words() {
        let ended = r#"{"at":"t","kind":"session.ended","record":{"phase":"Failed","exitCode":3,"message":"m"},"seq":2,"subject":"s1"}"#;
        let columns = EntryView::columns_of(ended).expect("view");
        assert_eq!((columns.severity.as_str(), columns.message.as_str()), ("Normal", "audited session.ended"));
        let event = r#"{"at":"t","kind":"reconcile.event","record":{"message":"m","reason":"R","severity":"Warning"},"seq":1,"subject":"Adapter/a"}"#;
        assert_eq!(EntryView::columns_of(event), EntryView::of(event));
    }

    #[test]
    fn the_first_edited_column_is_named() {
        let event = r#"{"at":"t","kind":"reconcile.event","record":{"message":"m","reason":"R","severity":"Normal"},"seq":1,"subject":"Adapter/a"}"#;
        let sealed = EntryView::of(event).expect("view");
        assert_eq!(sealed.first_difference(&sealed.clone()), None);
        let forged = EntryView { reason: "Forged".into(), message: "forged".into(), ..sealed.clone() };
        assert_eq!(sealed.first_difference(&forged), Some("reason"));
    }
}
