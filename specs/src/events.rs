//! Why an event was recorded, as types: every reason an event of its own carries (one word
//! list, `EventReason`), and `Reason`, what an event is recorded with: one of those words, or
//! the reason of the `Ready` condition whose transition it records. Serialised once, here;
//! `docs/cli.md` lists the words.

use std::fmt;

use crate::words::words;

words! {
    /// The reason of every event that is not a condition's transition, as `events`, `describe`
    /// and `GET /v1/events` show it.
    EventReason {
        /// A spec was recorded at a new generation.
        SpecChanged = "SpecChanged",
        /// A spec is no longer declared: its object is tombstoned and cleaned up.
        SpecRemoved = "SpecRemoved",
        /// A tombstoned object was cleaned up and forgotten.
        CleanedUp = "CleanedUp",
        /// A reconcile failed; the message says when it is retried, or that the key stalled.
        ReconcileFailed = "ReconcileFailed",
        /// An attempt of an Assignment's execution was queued.
        ExecutionQueued = "ExecutionQueued",
        /// A running execution was cancelled because a newer execution generation replaces it.
        Superseded = "Superseded",
        /// A controller cut off from the store stopped the execution before its lease expired.
        ExecutionFenced = "ExecutionFenced",
        /// An Adapter's image was pulled from its registry, and what the engine holds is what
        /// its reference names.
        ImagePulled = "ImagePulled",
        /// Pulling an Adapter's image failed (the registry, the engine, the time bound), or what
        /// came is not what its digest names and was removed.
        ImagePullFailed = "ImagePullFailed",
        /// An operator enabled an adapter through the API.
        OperatorEnabled = "OperatorEnabled",
        /// An operator disabled an adapter through the API while sessions of it still run.
        OperatorDraining = "OperatorDraining",
        /// An operator disabled an adapter through the API.
        OperatorDisabled = "OperatorDisabled",
        /// The last session of a draining adapter ended: the adapter is disabled.
        DrainCompleted = "DrainCompleted",
        /// A proposal adds the value of a credential the daemon injected.
        CredentialCanary = "CredentialCanary",
        /// Shown, never recorded: an audited event whose sealed entry does not read.
        AuditEntryUnreadable = "AuditEntryUnreadable",
    }
}

/// The reason an event is recorded with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// An event of its own.
    Event(EventReason),
    /// A `Ready` condition changed: the event carries the condition's own reason (a condition
    /// reason of the reconcilers, or a session cause), so the two never read differently.
    Ready(String),
}

impl Reason {
    /// The reason as stored and shown.
    pub fn as_str(&self) -> &str {
        match self {
            Reason::Event(reason) => reason.as_str(),
            Reason::Ready(reason) => reason,
        }
    }
}

impl From<EventReason> for Reason {
    fn from(reason: EventReason) -> Self {
        Reason::Event(reason)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_reason_reads_back_as_itself() {
        for reason in EventReason::ALL {
            assert_eq!(reason.as_str().parse::<EventReason>(), Ok(*reason));
            assert_eq!(serde_json::to_value(reason).expect("json"), reason.as_str());
            assert_eq!(Reason::from(*reason).as_str(), reason.as_str());
        }
        assert_eq!(Reason::Ready("ImageMissing".into()).to_string(), "ImageMissing");
    }

    #[test]
    fn docs_cli_md_lists_exactly_these_reasons() {
        let docs = include_str!("../../docs/cli.md");
        let section = docs.split("Event reasons").nth(1).and_then(|rest| rest.split("\n\n").nth(1));
        let listed: BTreeSet<&str> = section
            .expect("a table of event reasons after `Event reasons`")
            .lines()
            .filter_map(|line| line.strip_prefix("| `")?.split('`').next())
            .collect();
        let all: BTreeSet<&str> = EventReason::ALL.iter().map(|reason| reason.as_str()).collect();
        assert_eq!(listed, all, "docs/cli.md's table of event reasons and `EventReason` differ");
    }
}
