//! What each write made through a store handle touched (an object, an Assignment's sessions, an
//! Adapter's override, the source), kept in a bounded journal beside the write count, so a view
//! of the status rebuilds only the rows those writes can change instead of every row (it reads
//! them back with `Store::read_touched`, in `observe.rs`).

use std::collections::{BTreeSet, VecDeque};

use roundtable_specs::ObjectKey;

/// Entries the journal keeps; older ones are forgotten and a reader that has not caught up with
/// them is told [`Changed::Everything`]. A first scan of 10,000 objects overflows it at once,
/// which is right: it changes every row anyway. Bounded whatever the readers do: nothing waits
/// for a reader to take an entry.
const KEPT: usize = 8192;

/// What one write touched, in the words of the tables `status` reads, not of its rows: which rows
/// each changes is the status computation's to say (`reconcilers/src/status.rs`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Touched {
    /// An object's record or conditions.
    Object(ObjectKey),
    /// The sessions recorded under an Assignment's name.
    Sessions(String),
    /// An operator's runtime override of an Adapter (by its name).
    Override(String),
    /// Where the desired state comes from (`source_sync`).
    Source,
}

/// What was written after a write count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// More than the journal keeps, or from before it began: read everything again.
    Everything,
    /// Exactly these (possibly none: writes `status`'s objects do not show, such as events).
    Touched(BTreeSet<Touched>),
}

/// The journal: each entry is the write count its write ended at and what it touched.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    entries: VecDeque<(u64, Touched)>,
    /// Entries of writes up to this count may have been forgotten.
    complete_after: u64,
}

impl Journal {
    /// Records what write `count` touched.
    pub(crate) fn record(&mut self, count: u64, touched: impl IntoIterator<Item = Touched>) {
        for touched in touched {
            if self.entries.len() == KEPT
                && let Some((forgotten, _)) = self.entries.pop_front()
            {
                self.complete_after = forgotten;
            }
            self.entries.push_back((count, touched));
        }
    }

    /// What the writes after count `after` (up to the latest) touched.
    pub(crate) fn since(&self, after: u64) -> Changed {
        if after < self.complete_after {
            return Changed::Everything;
        }
        // Newest last: walk back only over what is newer.
        let newer = self.entries.iter().rev().take_while(|(count, _)| *count > after);
        Changed::Touched(newer.map(|(_, touched)| touched.clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use roundtable_specs::Kind;

    use super::*;

    fn object(name: &str) -> Touched {
        Touched::Object(ObjectKey::new(Kind::Adapter, name))
    }

    #[test]
    fn a_reader_gets_what_was_written_after_it_read_and_everything_once_forgotten() {
        let mut journal = Journal::default();
        journal.record(1, [object("a")]);
        journal.record(2, []);
        journal.record(3, [object("b"), Touched::Sessions("x".into())]);
        assert_eq!(
            journal.since(0),
            Changed::Touched([object("a"), object("b"), Touched::Sessions("x".into())].into())
        );
        assert_eq!(journal.since(2), Changed::Touched([object("b"), Touched::Sessions("x".into())].into()));
        assert_eq!(journal.since(3), Changed::Touched(BTreeSet::new()));
        journal.record(4, (0..KEPT).map(|i| object(&format!("n{i}"))));
        assert_eq!(journal.entries.len(), KEPT, "bounded");
        assert_eq!(journal.since(2), Changed::Everything, "what write 3 touched is forgotten");
        assert!(matches!(journal.since(3), Changed::Touched(t) if t.len() == KEPT));
    }
}
