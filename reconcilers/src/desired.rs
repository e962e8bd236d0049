//! Desired state: what the latest scan declares, merged into the state store. New and changed
//! objects get generations; objects of files that stop loading keep their last valid spec;
//! objects that disappeared become tombstones that drive a cleanup.

use std::collections::BTreeMap;

use roundtable_specs::adapter::AdapterSpec;
use roundtable_specs::digest::{run_digest, spec_digest};
use roundtable_specs::parse::Spec;
use roundtable_specs::{Kind, ObjectKey, ObjectMeta, builtins};
use roundtable_store::{FileError, ObjectRecord, SpecSnapshot, Store};

use crate::backend::{AuditEvent, AuditSink, BackendError};
use crate::source::Scan;

/// An object as reconcilers see it: key, generation and spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub key: ObjectKey,
    pub generation: i64,
    pub metadata: ObjectMeta,
    pub spec: Spec,
}

impl Desired {
    /// The stored last valid spec of a record.
    pub fn from_record(record: &ObjectRecord) -> Result<Self, String> {
        let (metadata, spec) =
            roundtable_specs::resource::from_json(&record.spec_json).map_err(|error| {
                format!("stored spec of {} does not read back: {error}", record.key)
            })?;
        Ok(Self {
            key: record.key.clone(),
            generation: record.generation,
            metadata,
            spec,
        })
    }
}

/// An object the specs declare: from a file that loads, or a built-in Adapter that an
/// Assignment references (built-ins become objects only when declared or referenced).
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    pub key: ObjectKey,
    pub metadata: ObjectMeta,
    pub spec: Spec,
    /// The declaring file, or how a built-in came to be referenced.
    pub source: String,
}

impl Declared {
    pub fn digest(&self) -> String {
        spec_digest(&self.metadata, &self.spec)
    }

    pub fn execution_digest(&self) -> Option<String> {
        run_digest(&self.spec)
    }
}

/// Every declared object, by key: the first accepted declaration of each, then the built-in
/// Adapters that Assignments reference without declaring.
pub fn declared(scan: &Scan) -> BTreeMap<ObjectKey, Declared> {
    let mut map = BTreeMap::new();
    for object in scan.accepted() {
        map.entry(object.key()).or_insert_with(|| Declared {
            key: object.key(),
            metadata: object.metadata.clone(),
            spec: object.spec.clone(),
            source: object.origin.file.to_string(),
        });
    }
    let references: Vec<(String, String)> = scan
        .objects
        .iter()
        .filter_map(|object| match &object.spec {
            Spec::Assignment(spec) => Some((spec.adapter.clone(), object.metadata.name.clone())),
            _ => None,
        })
        .collect();
    for (adapter, assignment) in references {
        let key = ObjectKey::new(Kind::Adapter, adapter.clone());
        if map.contains_key(&key) || builtins::template(&adapter).is_none() {
            continue;
        }
        map.insert(
            key.clone(),
            Declared {
                key,
                metadata: ObjectMeta {
                    name: adapter,
                    labels: Default::default(),
                    annotations: Default::default(),
                },
                spec: Spec::Adapter(AdapterSpec::default()),
                source: format!("built-in, referenced by Assignment/{assignment}"),
            },
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
    /// Objects kept at their last valid spec because their file does not load.
    pub kept: Vec<ObjectKey>,
}

/// Merges a scan into the store.
pub async fn sync<A: AuditSink>(
    store: &Store,
    audit: &A,
    scan: &Scan,
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
    store.replace_file_errors(&file_errors).await?;

    let before: BTreeMap<ObjectKey, ObjectRecord> = store
        .objects()
        .await?
        .into_iter()
        .map(|record| (record.key.clone(), record))
        .collect();
    let mut outcome = SyncOutcome::default();
    let declared = declared(scan);
    for (key, object) in &declared {
        let spec_json =
            roundtable_specs::resource::to_value(&object.metadata, &object.spec).to_string();
        let digest = object.digest();
        let execution = object.execution_digest();
        let snapshot = SpecSnapshot {
            key,
            spec_digest: &digest,
            execution_digest: execution.as_deref(),
            spec_json: &spec_json,
            source_file: &object.source,
        };
        let after = store.record_spec(&snapshot).await?;
        let moved = match before.get(key) {
            None => true,
            Some(previous) => {
                previous.generation != after.generation || previous.deleted_at.is_some()
            }
        };
        if moved {
            let message = format!(
                "spec recorded at generation {} from {}",
                after.generation, object.source
            );
            audit
                .record(AuditEvent {
                    object: key.clone(),
                    warning: false,
                    reason: "SpecChanged".into(),
                    message,
                })
                .await?;
            outcome.changed.push(key.clone());
        }
        outcome.live.push(key.clone());
    }
    for (key, record) in &before {
        if declared.contains_key(key) || record.deleted_at.is_some() {
            continue;
        }
        if scan.broken_files.contains(&record.source_file) {
            outcome.kept.push(key.clone());
            outcome.live.push(key.clone());
            continue;
        }
        if store.tombstone(key).await? {
            let message = format!(
                "no longer declared (was in {}); cleaning up",
                record.source_file
            );
            audit
                .record(AuditEvent {
                    object: key.clone(),
                    warning: false,
                    reason: "SpecRemoved".into(),
                    message,
                })
                .await?;
            outcome.removed.push(key.clone());
        }
    }
    Ok(outcome)
}
