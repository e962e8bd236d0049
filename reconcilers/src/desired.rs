//! Desired state: what the latest scan declares, merged into the state store. New and changed
//! objects get generations; objects of files that stop loading keep their last valid spec;
//! objects that disappeared become tombstones that drive a cleanup.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use roundtable_specs::Spec;
use roundtable_specs::adapter::AdapterSpec;
use roundtable_specs::digest::{run_digest, spec_digest};
use roundtable_specs::events::EventReason;
use roundtable_specs::{Kind, Object, ObjectKey, ObjectMeta, builtins};
use roundtable_store::{FileError, IndexEntry, ObjectRecord, SpecSnapshot, Store};

use crate::backend::{AuditEvent, AuditSink, BackendError};
use roundtable_source::{ObjectDigests, Scan};

/// An object as reconcilers see it: key, generation and spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub key: ObjectKey,
    /// Which object this is: sessions, proposals and leases are its by uid, never by name.
    pub uid: String,
    pub generation: i64,
    /// Assignments: the counter of run-field changes; one execution (and at most one proposal)
    /// per execution generation.
    pub execution_generation: Option<i64>,
    /// Assignments: the digest of the run fields, which keys what a run may reuse.
    pub execution_digest: Option<String>,
    /// The execution generation is an operator's `reconcile --rerun`: it runs afresh.
    pub rerun: bool,
    /// Why nothing runs for the object (it is declared more than once), when it is held.
    pub held: Option<String>,
    pub metadata: ObjectMeta,
    pub spec: Spec,
}

impl Desired {
    pub fn identity(&self) -> roundtable_store::Identity {
        roundtable_store::Identity { name: self.key.name.clone(), uid: self.uid.clone() }
    }

    /// The stored last valid spec of a record.
    pub fn from_record(record: &ObjectRecord) -> Result<Self, CorruptSpec> {
        let (metadata, spec) = roundtable_specs::resource::from_json(&record.spec_json)
            .map_err(|source| CorruptSpec { key: record.key.clone(), source })?;
        Ok(Self {
            key: record.key.clone(),
            uid: record.uid.clone(),
            generation: record.generation,
            execution_generation: record.execution_generation,
            execution_digest: record.execution_digest.clone(),
            rerun: record.rerun_generation.is_some() && record.rerun_generation == record.execution_generation,
            held: record.held.clone(),
            metadata,
            spec,
        })
    }
}

/// A stored spec that does not read back (written by a newer controller, or damaged).
#[derive(Debug, thiserror::Error)]
#[error("stored spec of {key} does not read back")]
pub struct CorruptSpec {
    pub key: ObjectKey,
    #[source]
    pub source: serde_json::Error,
}

/// An object the specs declare: from a file that loads, or a built-in Adapter that an
/// Assignment references (built-ins become objects only when declared or referenced).
/// Declared objects borrow from the scan: a rescan of 10,000 objects copies none of them. Its key
/// is the map's ([`declared`]).
#[derive(Debug, Clone)]
pub struct Declared<'a> {
    body: Body<'a>,
    /// The declaring file, or how a built-in came to be referenced.
    pub source: Arc<str>,
    pub digests: Cow<'a, ObjectDigests>,
}

/// Where a declared object's metadata and spec live. Both variants are a pointer wide, so a map
/// of 10,000 of them moves little when it grows.
#[derive(Debug, Clone)]
enum Body<'a> {
    Scanned(&'a Object),
    BuiltIn(Box<(ObjectMeta, Spec)>),
}

impl Declared<'_> {
    pub fn metadata(&self) -> &ObjectMeta {
        match &self.body {
            Body::Scanned(object) => &object.metadata,
            Body::BuiltIn(built_in) => &built_in.0,
        }
    }

    pub fn spec(&self) -> &Spec {
        match &self.body {
            Body::Scanned(object) => &object.spec,
            Body::BuiltIn(built_in) => &built_in.1,
        }
    }

    pub fn digest(&self) -> &str {
        &self.digests.spec
    }

    /// Whether it is a built-in Adapter an Assignment references without a file declaring it.
    pub fn is_built_in(&self) -> bool {
        matches!(self.body, Body::BuiltIn(_))
    }

    pub fn execution_digest(&self) -> Option<&str> {
        self.digests.execution.as_deref()
    }
}

/// Every declared object, by key: the first accepted declaration of each, then the built-in
/// Adapters that Assignments reference without declaring.
pub fn declared(scan: &Scan) -> BTreeMap<ObjectKey, Declared<'_>> {
    // Built in one go from a sorted list, which is cheaper than 10,000 inserts; the sort is
    // stable, so of two declarations of a key the first is kept.
    let mut accepted: Vec<(ObjectKey, Declared<'_>)> = scan
        .accepted_with_digests()
        .map(|(object, digests)| {
            let declared = Declared {
                body: Body::Scanned(object),
                source: object.origin.file.clone(),
                digests: Cow::Borrowed(digests),
            };
            (object.key(), declared)
        })
        .collect();
    accepted.sort_by(|a, b| a.0.cmp(&b.0));
    accepted.dedup_by(|later, earlier| later.0 == earlier.0);
    let mut map: BTreeMap<ObjectKey, Declared<'_>> = accepted.into_iter().collect();
    for object in &scan.objects {
        let Spec::Assignment(spec) = &object.spec else { continue };
        let adapter = &spec.adapter;
        if !builtins::BUILTIN_NAMES.contains(&adapter.as_str()) {
            continue;
        }
        let key = ObjectKey::new(Kind::Adapter, adapter.clone());
        // A built-in's name declared twice is neither declaration, nor the built-in.
        if map.contains_key(&key) || scan.contested.contains_key(&key) || builtins::template(adapter).is_none() {
            continue;
        }
        let metadata =
            ObjectMeta { name: adapter.clone(), labels: Default::default(), annotations: Default::default() };
        let spec = Spec::Adapter(AdapterSpec::default());
        let digests = ObjectDigests { spec: spec_digest(&metadata, &spec), execution: run_digest(&spec) };
        let source = format!("built-in, referenced by Assignment/{}", object.metadata.name).into();
        map.insert(
            key,
            Declared { body: Body::BuiltIn(Box::new((metadata, spec))), source, digests: Cow::Owned(digests) },
        );
    }
    map
}

/// What a sync changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SyncOutcome {
    /// Created, changed or revived: their generation moved.
    pub changed: Vec<ObjectKey>,
    /// Tombstoned by this sync.
    pub removed: Vec<ObjectKey>,
    /// Every object with a live spec after the sync.
    pub live: Vec<ObjectKey>,
    /// Objects kept at their last valid spec because their file does not load, or because they
    /// are declared more than once.
    pub kept: Vec<ObjectKey>,
    /// Objects held or released by this sync (see [`Scan::contested`]): their generation did not
    /// move, but what their reconcile decides did.
    pub holds_moved: Vec<ObjectKey>,
}

/// Merges a scan into the store.
pub async fn sync<A: AuditSink>(store: &Store, audit: &A, scan: &Scan) -> Result<SyncOutcome, BackendError> {
    sync_with(store, audit, scan, &mut SyncCache::default()).await
}

/// What the daemon, the only writer of specs while it runs, remembers between syncs so that a
/// rescan does not read the store's index or rewrite unchanged file errors.
#[derive(Debug, Default)]
pub struct SyncCache {
    index: Option<BTreeMap<ObjectKey, IndexEntry>>,
    file_errors: Option<Vec<FileError>>,
}

/// Says in the daemon's log what a broken file's errors are, each once when it appears (not a
/// bare count on every scan), and when a file that did not load loads again.
fn log_file_errors(before: &[FileError], now: &[FileError]) {
    for error in now.iter().filter(|error| !before.contains(error)) {
        let field = if error.path.is_empty() { "-" } else { error.path.as_str() };
        // A file-wide error (too large, unreadable) has no position.
        let at = match error.line {
            0 => error.file.clone(),
            line => format!("{}:{line}:{}", error.file, error.column),
        };
        tracing::warn!(
            file = %error.file, line = error.line, column = error.column, field,
            "spec file does not load ({at}): {}; its objects keep their last valid spec", error.message
        );
    }
    let broken: BTreeSet<&str> = now.iter().map(|error| error.file.as_str()).collect();
    let mended: BTreeSet<&str> =
        before.iter().map(|error| error.file.as_str()).filter(|file| !broken.contains(file)).collect();
    for file in mended {
        tracing::info!(file, "spec file loads again");
    }
}

/// [`sync`] with a cache kept across calls.
pub async fn sync_with<A: AuditSink>(
    store: &Store,
    audit: &A,
    scan: &Scan,
    cache: &mut SyncCache,
) -> Result<SyncOutcome, BackendError> {
    let file_errors: Vec<FileError> = scan
        .errors()
        .map(|e| FileError {
            file: e.file.clone(),
            line: e.line as i64,
            column: e.column as i64,
            path: e.path.clone(),
            message: e.message.clone(),
        })
        .collect();
    if cache.file_errors.as_ref() != Some(&file_errors) {
        log_file_errors(cache.file_errors.as_deref().unwrap_or_default(), &file_errors);
        store.replace_file_errors(&file_errors).await?;
        cache.file_errors = Some(file_errors);
    }

    let mut index = match cache.index.take() {
        Some(index) => index,
        None => store.object_index().await?.into_iter().map(|entry| (entry.key.clone(), entry)).collect(),
    };
    let mut outcome = SyncOutcome::default();
    let declared = declared(scan);
    // Only what differs from the store is written, all in one transaction. Both maps are sorted
    // by key, so one walk through them in step finds what changed and what is no longer declared.
    // Records that nothing declares any more, unless tombstoned already, are gone.
    let mut pending = Vec::new();
    let mut gone: Vec<ObjectKey> = Vec::new();
    let mut records = index.iter().peekable();
    for (key, object) in &declared {
        while let Some((stale, record)) = records.next_if(|(recorded, _)| *recorded < key) {
            if !record.deleted {
                gone.push(stale.clone());
            }
        }
        let record = records.next_if(|(recorded, _)| *recorded == key).map(|(_, record)| record);
        outcome.live.push(key.clone());
        let unchanged = record.is_some_and(|r| r.spec_digest == object.digest() && !r.deleted);
        if !unchanged {
            pending.push((key, object));
        }
    }
    gone.extend(records.filter(|(_, record)| !record.deleted).map(|(stale, _)| stale.clone()));
    let spec_jsons: Vec<String> = pending
        .iter()
        .map(|(_, object)| roundtable_specs::resource::to_value(object.metadata(), object.spec()).to_string())
        .collect();
    let snapshots: Vec<SpecSnapshot<'_>> = pending
        .iter()
        .zip(&spec_jsons)
        .map(|((key, object), spec_json)| SpecSnapshot {
            key,
            spec_digest: object.digest(),
            execution_digest: object.execution_digest(),
            spec_json,
            source_file: &object.source,
        })
        .collect();
    // On any error below the index is dropped, so the next sync reads it from the store again.
    let recorded = store.record_specs(&snapshots).await?;
    // A first sync serializes every object: the specs go before the audit events are made, so
    // the two never take memory at once.
    drop(snapshots);
    drop(spec_jsons);
    let mut events = Vec::new();
    for (recorded, (_, object)) in recorded.into_iter().zip(&pending) {
        index.insert(
            recorded.key.clone(),
            IndexEntry {
                key: recorded.key.clone(),
                generation: recorded.generation,
                spec_digest: object.digest().to_owned(),
                source_file: object.source.to_string(),
                deleted: false,
                held: index.get(&recorded.key).and_then(|entry| entry.held.clone()),
            },
        );
        if recorded.moved {
            let message = format!("spec recorded at generation {} from {}", recorded.generation, object.source);
            events.push(AuditEvent {
                object: recorded.key.clone(),
                warning: false,
                reason: EventReason::SpecChanged.into(),
                message,
            });
            outcome.changed.push(recorded.key);
        }
    }
    for key in gone {
        let Some(record) = index.get_mut(&key) else { continue };
        if scan.broken_files.contains(&record.source_file) || scan.contested.contains_key(&key) {
            outcome.kept.push(key.clone());
            outcome.live.push(key);
            continue;
        }
        record.deleted = true;
        let source_file = record.source_file.clone();
        if store.tombstone(&key).await? {
            let message = format!("no longer declared (was in {source_file}); cleaning up");
            let reason = EventReason::SpecRemoved.into();
            events.push(AuditEvent { object: key.clone(), warning: false, reason, message });
            outcome.removed.push(key);
        }
    }
    // Holds follow the scan: a live object declared more than once is held, one declared once
    // (or not at all) is not. Few objects are ever held, so this writes one row at a time.
    for (key, record) in index.iter_mut().filter(|(_, record)| !record.deleted) {
        let wanted = scan.held(key);
        if record.held != wanted {
            store.set_held(key, wanted.as_deref()).await?;
            record.held = wanted;
            outcome.holds_moved.push(key.clone());
        }
    }
    if !events.is_empty() {
        audit.record_all(events).await?;
    }
    cache.index = Some(index);
    Ok(outcome)
}
