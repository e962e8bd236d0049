//! How an audited entry reads in the events table, derived from the MAC'd entry alone: the
//! columns an append writes, what `describe` and the API show, and what `audit verify` compares
//! the stored columns against are this one mapping.

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
    /// The view of the canonical entry `entry` (as hashed); `None` when it is not an entry.
    pub fn of(entry: &str) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(entry).ok()?;
        let text = |field: &str| value.get(field).and_then(serde_json::Value::as_str);
        let (at, kind, subject) = (text("at")?, text("kind")?, text("subject")?);
        let (object_kind, name) = subject.split_once('/').unwrap_or(("Session", subject));
        let record = &value["record"];
        let from_record = |field: &str| record.get(field).and_then(serde_json::Value::as_str).map(str::to_owned);
        let (severity, reason, message) = if kind == RECONCILE_EVENT {
            (from_record("severity")?, from_record("reason")?, from_record("message")?)
        } else {
            ("Normal".to_owned(), kind.to_owned(), format!("audited {kind}"))
        };
        Some(Self { at: at.to_owned(), kind: object_kind.to_owned(), name: name.to_owned(), severity, reason, message })
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
    fn the_first_edited_column_is_named() {
        let event = r#"{"at":"t","kind":"reconcile.event","record":{"message":"m","reason":"R","severity":"Normal"},"seq":1,"subject":"Adapter/a"}"#;
        let sealed = EntryView::of(event).expect("view");
        assert_eq!(sealed.first_difference(&sealed.clone()), None);
        let forged = EntryView { reason: "Forged".into(), message: "forged".into(), ..sealed.clone() };
        assert_eq!(sealed.first_difference(&forged), Some("reason"));
    }
}
