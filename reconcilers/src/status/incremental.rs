//! The rows of objects kept up to date between refreshes: after a write, only the rows that what
//! the store says was written ([`roundtable_store::Store::changes_since`]) and what the scan moved
//! can change are rebuilt, not every object's. Which rows a change can change is decided in
//! [`affected`] and nowhere else; a row reads nothing but its [`RowInputs`].
//!
//! A row reads no other object's state: an Adapter that changes moves the rows of the
//! Assignments naming it only through their own conditions, which their reconciles write when
//! the Adapter's wakes them (`dependents.rs`), and those writes touch their own keys.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash as _, Hasher as _};

use roundtable_source::Scan;
use roundtable_specs::output::ObjectStatus;
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::{Changed, SessionRecord, Store, Touched, TouchedReads};

use super::{
    RowInputs, declared_assignments, file_rows, newest_first, object_row, read_whole, source_row, sources_with_files,
};
use crate::backend::BackendError;
use crate::desired::{Declared, declared};

/// Beyond this many rows to rebuild, every row is read at once instead (a few queries for every
/// object beat a few per object well before this).
const MOST_READ_ONE_BY_ONE: usize = 512;

/// What the kept rows were made from, to tell what moved since. Holds no row: the caller keeps
/// them (as JSON, the status view).
#[derive(Debug, Default)]
pub struct KeptRows {
    /// The store's write count the rows show; `None`: read every row next time.
    count: Option<u64>,
    /// Each declared object's spec digest (hashed) and whether it is a referenced built-in.
    declared: HashMap<ObjectKey, u64>,
    broken_files: BTreeSet<String>,
    /// The sessions not finished, by Assignment name (their sidecars report while they run).
    unfinished: BTreeMap<String, Vec<SessionRecord>>,
    assignments: BTreeSet<String>,
    sources: Vec<ObjectStatus>,
}

/// What a refresh made.
#[derive(Debug, Default)]
pub struct Refreshed {
    /// Every object row was made: `rows` holds them all, and a key not among them has no row.
    pub whole: bool,
    /// The rows rebuilt, by key, in key order; `None`: the object has no row any more.
    pub rows: Vec<(ObjectKey, Option<ObjectStatus>)>,
    /// The source's rows (at most one), before the objects'.
    pub sources: Vec<ObjectStatus>,
    /// The rows of spec files that do not load, after the objects'.
    pub files: Vec<ObjectStatus>,
}

/// Which rows the changes since the last refresh can change.
#[derive(Debug, Default, PartialEq, Eq)]
struct Affected {
    /// Objects whose rows are rebuilt.
    objects: BTreeSet<ObjectKey>,
    /// Assignment names whose sessions are read (their rows, and which of them still run).
    sessions: BTreeSet<String>,
    /// The source's row.
    source: bool,
}

/// The one place that says which rows a change can change:
///
/// | changed | rows rebuilt |
/// |---|---|
/// | an object's record or conditions | that object's |
/// | the sessions under an Assignment's name | that Assignment's (its in-flight message) |
/// | an Adapter's operator override | that Adapter's (drift from its spec) |
/// | the source | the source's |
/// | an object's declaration (digest, built-in or not, gone) | that object's |
/// | whether a spec file loads | every object recorded from it (`files`, read by the caller) |
///
/// The rows of files that do not load are made from the scan every time.
fn affected(touched: &BTreeSet<Touched>, declarations: &BTreeSet<ObjectKey>, recorded_in: &[ObjectKey]) -> Affected {
    let mut affected = Affected::default();
    for touched in touched {
        match touched {
            Touched::Object(key) => {
                affected.objects.insert(key.clone());
            }
            Touched::Sessions(name) => {
                affected.objects.insert(ObjectKey::new(Kind::Assignment, name.clone()));
                affected.sessions.insert(name.clone());
            }
            Touched::Override(name) => {
                affected.objects.insert(ObjectKey::new(Kind::Adapter, name.clone()));
            }
            Touched::Source => affected.source = true,
        }
    }
    affected.objects.extend(declarations.iter().cloned());
    affected.objects.extend(recorded_in.iter().cloned());
    // An Assignment's row reads its sessions, whatever moved it.
    affected.sessions.extend(affected.objects.iter().filter(|k| k.kind == Kind::Assignment).map(|k| k.name.clone()));
    affected
}

/// A declaration as far as its row reads it: its spec digest and whether it is a built-in.
fn signature(declared: &Declared<'_>) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    declared.digest().hash(&mut hasher);
    declared.is_built_in().hash(&mut hasher);
    hasher.finish()
}

impl KeptRows {
    /// Nothing kept: the first refresh makes every row.
    pub fn new() -> Self {
        Self::default()
    }

    /// The declared Assignments' names, as of the last refresh.
    pub fn assignments(&self) -> &BTreeSet<String> {
        &self.assignments
    }

    /// The sessions not finished as of the last refresh, newest first.
    pub fn unfinished(&self) -> Vec<SessionRecord> {
        newest_first(self.unfinished.values().flatten().cloned().collect())
    }

    /// The next refresh makes every row (what the caller did with the last one was lost).
    pub fn forget(&mut self) {
        self.count = None;
    }

    /// Brings the rows up to `scan` and the store's writes since the last refresh; with `whole`
    /// (writes the journal does not see, such as other controllers' on a shared store), every
    /// row. Nothing kept changes unless every read succeeds.
    pub async fn refresh(&mut self, store: &Store, scan: &Scan, whole: bool) -> Result<Refreshed, BackendError> {
        // Taken before anything is read: a write after it is read again next time.
        let (count, changed) = store.changes_since(self.count.unwrap_or(0));
        let declared = declared(scan);
        let signatures: HashMap<ObjectKey, u64> = declared.iter().map(|(k, d)| (k.clone(), signature(d))).collect();
        let touched = match changed {
            Changed::Touched(touched) if !whole && self.count.is_some() => touched,
            _ => return self.refresh_whole(store, scan, &declared, signatures, count).await,
        };
        let mut declarations: BTreeSet<ObjectKey> =
            signatures.iter().filter(|(k, s)| self.declared.get(*k) != Some(*s)).map(|(k, _)| k.clone()).collect();
        declarations.extend(self.declared.keys().filter(|k| !signatures.contains_key(*k)).cloned());
        let files: BTreeSet<String> = self.broken_files.symmetric_difference(&scan.broken_files).cloned().collect();
        let recorded_in = if files.is_empty() { Vec::new() } else { store.object_keys_in(&files).await? };
        let affected = affected(&touched, &declarations, &recorded_in);
        if affected.objects.len() > MOST_READ_ONE_BY_ONE {
            return self.refresh_whole(store, scan, &declared, signatures, count).await;
        }
        let adapters: BTreeSet<String> =
            affected.objects.iter().filter(|k| k.kind == Kind::Adapter).map(|k| k.name.clone()).collect();
        let read = store
            .read_touched(TouchedReads {
                objects: &affected.objects,
                sessions: &affected.sessions,
                overrides: &adapters,
                source: affected.source,
            })
            .await?;
        let mut rows = Vec::with_capacity(affected.objects.len());
        for (key, (record, conditions)) in read.objects {
            let sessions = match key.kind {
                Kind::Assignment => read.sessions.get(&key.name).map_or(&[][..], Vec::as_slice),
                _ => &[],
            };
            let agent_override = match key.kind {
                Kind::Adapter => read.overrides.get(&key.name).and_then(Option::as_ref),
                _ => None,
            };
            let inputs = RowInputs {
                declared: declared.get(&key),
                record: record.as_ref(),
                conditions,
                sessions,
                agent_override,
            };
            let row = object_row(&key, inputs, scan);
            rows.push((key, row));
        }
        // Everything is read: what is kept moves on.
        for (name, sessions) in &read.sessions {
            let running: Vec<SessionRecord> = sessions.iter().filter(|s| !s.phase.is_finished()).cloned().collect();
            if running.is_empty() {
                self.unfinished.remove(name);
            } else {
                self.unfinished.insert(name.clone(), running);
            }
        }
        if let Some(source) = read.source {
            self.sources = source.iter().map(source_row).collect();
        }
        self.count = Some(count);
        self.declared = signatures;
        self.broken_files.clone_from(&scan.broken_files);
        self.assignments = declared_assignments(&declared);
        Ok(Refreshed {
            whole: false,
            rows,
            sources: sources_with_files(self.sources.clone(), scan),
            files: file_rows(scan),
        })
    }

    async fn refresh_whole(
        &mut self,
        store: &Store,
        scan: &Scan,
        declared: &BTreeMap<ObjectKey, Declared<'_>>,
        signatures: HashMap<ObjectKey, u64>,
        count: u64,
    ) -> Result<Refreshed, BackendError> {
        let whole = read_whole(store, scan, declared).await?;
        self.count = Some(count);
        self.declared = signatures;
        self.broken_files.clone_from(&scan.broken_files);
        self.unfinished = whole.unfinished;
        self.assignments = declared_assignments(declared);
        self.sources = whole.sources;
        let rows = whole.rows.into_iter().map(|(key, row)| (key, Some(row))).collect();
        Ok(Refreshed {
            whole: true,
            rows,
            sources: sources_with_files(self.sources.clone(), scan),
            files: file_rows(scan),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_change_rebuilds_the_rows_that_read_it() {
        let adapter = ObjectKey::new(Kind::Adapter, "a");
        let assignment = ObjectKey::new(Kind::Assignment, "t");
        let touched =
            [Touched::Override("a".into()), Touched::Sessions("t".into()), Touched::Source].into_iter().collect();
        let found = affected(&touched, &BTreeSet::new(), &[]);
        assert_eq!(found.objects, [adapter.clone(), assignment.clone()].into());
        assert_eq!(found.sessions, ["t".to_owned()].into());
        assert!(found.source);
        // An Assignment rebuilt for any reason reads its sessions; an Adapter's change alone
        // rebuilds no Assignment's row (their own reconciles write what moves them).
        let found = affected(&[Touched::Object(adapter.clone())].into(), &[assignment.clone()].into(), &[]);
        assert_eq!(found.objects, [adapter, assignment].into());
        assert_eq!(found.sessions, ["t".to_owned()].into());
        assert!(!found.source);
    }
}
