//! `status` and `plan`: drift computed from the specs on disk, the state store and observation,
//! without acting. They work with or without a running daemon. Each row is made by [`row`].

pub mod incremental;
pub mod row;

use std::collections::{BTreeMap, BTreeSet};

use roundtable_specs::field_changes::{FieldChange, changed_fields};
use roundtable_specs::output::{Condition, ConditionStatus, Health, ObjectStatus, PlannedChange, SyncStatus};
use roundtable_specs::session::SessionPhase;
use roundtable_specs::{Kind, ObjectKey, Spec};
use roundtable_store::{AgentOverride, ObjectRecord, SessionRecord, Store};

use crate::backend::{AuditSink, BackendError, Change, ExecutionBackend, ImageBackend, StatusBackend};
use crate::conditions::{self, READY};
use crate::desired::{Declared, Desired, declared};
use crate::reconcile::ObjectReconciler;
use roundtable_session_runtime::OwnedResource;
use roundtable_session_runtime::labels::{ASSIGNMENT, SESSION};
use roundtable_source::Scan;

/// What an Assignment row says while its execution is in flight: the latest session's own phase
/// and message. The Ready condition is written when the reconciler starts an execution (`Queued`)
/// and is not rewritten as the session moves on, so it would still say "queued" for a session
/// that is running.
fn in_flight_message(record: &ObjectRecord, sessions: &[SessionRecord], progressing: bool) -> Option<String> {
    let latest = sessions
        .iter()
        .find(|s| record.execution_generation.is_none_or(|generation| s.execution_generation == generation))?;
    // Interrupted (the daemon stopped): the condition it last wrote ("queued for a slot") is
    // stale until a daemon looks again.
    if latest.phase == SessionPhase::Interrupted && progressing {
        return Some(format!(
            "session {} Interrupted (attempt {}): {}; it is re-run when a daemon runs",
            latest.id, latest.attempt, latest.message
        ));
    }
    if latest.phase.is_finished() {
        return None;
    }
    let mut message = format!("session {} {} (attempt {})", latest.id, latest.phase, latest.attempt);
    if !latest.message.is_empty() {
        message.push_str(": ");
        message.push_str(&latest.message);
    }
    Some(message)
}

/// Every row of `status`: objects (declared or remembered), files that do not load, leftovers.
/// `leftovers`: what the runtime owns for this project; those nothing needs are listed.
pub async fn status(
    store: &Store,
    scan: &Scan,
    leftovers: &[OwnedResource],
) -> Result<Vec<ObjectStatus>, BackendError> {
    let mut objects = object_rows(store, scan).await?;
    objects.rows.extend(leftover_rows(store, &objects.assignments, leftovers).await?);
    Ok(objects.rows)
}

/// The rows of `status` that the spec files and the store decide: the source, objects (declared
/// or remembered, an Adapter's with an operator's override that its spec does not agree with),
/// files that do not load. Neither the engine nor time alone moves them.
#[derive(Debug, Clone, Default)]
pub struct ObjectRows {
    pub rows: Vec<ObjectStatus>,
    /// The declared Assignments' names: a leftover of one of them may still be needed.
    pub assignments: BTreeSet<String>,
    /// The sessions not finished when the rows were made (their sidecars report while they run).
    pub unfinished: Vec<SessionRecord>,
}

/// The rows of leftovers nothing needs among `leftovers` (what the runtime owns for this
/// project), given the declared Assignments' names.
pub async fn leftover_rows(
    store: &Store,
    assignments: &BTreeSet<String>,
    leftovers: &[OwnedResource],
) -> Result<Vec<ObjectStatus>, BackendError> {
    let mut rows = Vec::new();
    for leftover in leftovers {
        let (assignment, session_id) = (leftover.label(ASSIGNMENT), leftover.label(SESSION));
        let declared = assignment.is_some_and(|name| assignments.contains(name));
        let session = match session_id {
            Some(id) if declared => store.session(id).await?,
            _ => None,
        };
        let orphan = crate::prune::orphan_reason(assignment, declared, session_id, session.as_ref());
        if let Some(why) = orphan {
            rows.push(row::requires_pruning(leftover.kind.as_str(), leftover.name.clone(), &why));
        }
    }
    Ok(rows)
}

/// See [`ObjectRows`]: every object's row, read in a few queries for every object.
pub async fn object_rows(store: &Store, scan: &Scan) -> Result<ObjectRows, BackendError> {
    let declared = declared(scan);
    let whole = read_whole(store, scan, &declared).await?;
    let mut rows = sources_with_files(whole.sources, scan);
    rows.extend(whole.rows.into_iter().map(|(_, row)| row));
    rows.extend(file_rows(scan));
    let unfinished = whole.unfinished.into_values().flatten().collect();
    Ok(ObjectRows { rows, assignments: declared_assignments(&declared), unfinished: newest_first(unfinished) })
}

/// Every object's row, the source's rows, and the sessions not finished by Assignment name.
pub(crate) struct Whole {
    pub sources: Vec<ObjectStatus>,
    pub rows: Vec<(ObjectKey, ObjectStatus)>,
    pub unfinished: BTreeMap<String, Vec<SessionRecord>>,
}

/// Reads every object's inputs (two queries for every object, not two per object) and makes
/// every row.
pub(crate) async fn read_whole(
    store: &Store,
    scan: &Scan,
    declared: &BTreeMap<ObjectKey, Declared<'_>>,
) -> Result<Whole, BackendError> {
    let records: BTreeMap<ObjectKey, ObjectRecord> =
        store.objects().await?.into_iter().map(|r| (r.key.clone(), r)).collect();
    let keys: BTreeSet<&ObjectKey> = declared.keys().chain(records.keys()).collect();
    let mut all_conditions = store.all_conditions().await?;
    let mut sessions_of: BTreeMap<String, Vec<SessionRecord>> = BTreeMap::new();
    for session in store.sessions(None).await? {
        sessions_of.entry(session.assignment.clone()).or_default().push(session);
    }
    let overrides: BTreeMap<String, AgentOverride> =
        store.agent_overrides().await?.into_iter().map(|o| (o.adapter.clone(), o)).collect();
    let sources = store.source().await?.iter().map(source_row).collect();
    let mut rows = Vec::with_capacity(keys.len());
    for key in keys {
        let record = records.get(key);
        let inputs = RowInputs {
            declared: declared.get(key),
            record,
            conditions: if record.is_some() { all_conditions.remove(key).unwrap_or_default() } else { Vec::new() },
            sessions: sessions_of
                .get(&key.name)
                .filter(|_| key.kind == Kind::Assignment)
                .map_or(&[][..], Vec::as_slice),
            agent_override: overrides.get(&key.name).filter(|_| key.kind == Kind::Adapter),
        };
        if let Some(row) = object_row(key, inputs, scan) {
            rows.push((key.clone(), row));
        }
    }
    let unfinished = sessions_of
        .into_iter()
        .map(|(name, sessions)| (name, sessions.into_iter().filter(|s| !s.phase.is_finished()).collect::<Vec<_>>()))
        .filter(|(_, sessions)| !sessions.is_empty())
        .collect();
    Ok(Whole { sources, rows, unfinished })
}

/// The declared Assignments' names: a leftover of one of them may still be needed.
pub(crate) fn declared_assignments(declared: &BTreeMap<ObjectKey, Declared<'_>>) -> BTreeSet<String> {
    declared.keys().filter(|k| k.kind == Kind::Assignment).map(|k| k.name.clone()).collect()
}

/// `sessions` in the order the store lists every session: newest first, then by id.
pub(crate) fn newest_first(mut sessions: Vec<SessionRecord>) -> Vec<SessionRecord> {
    sessions.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| b.id.cmp(&a.id)));
    sessions
}

/// Everything one object's row depends on. This is the whole list: a row reads nothing else, so
/// a write to none of these leaves it as it is (`status/incremental.rs` relies on it).
pub(crate) struct RowInputs<'a> {
    /// Its declaration in the scan (the scan's broken files are the other input from it).
    pub declared: Option<&'a Declared<'a>>,
    /// Its record and, with one, its conditions.
    pub record: Option<&'a ObjectRecord>,
    pub conditions: Vec<Condition>,
    /// An Assignment's: the sessions recorded under its name, newest first.
    pub sessions: &'a [SessionRecord],
    /// An Adapter's: an operator's runtime override of `enabled`.
    pub agent_override: Option<&'a AgentOverride>,
}

/// One object's row; `None` when it is neither declared nor recorded.
pub(crate) fn object_row(key: &ObjectKey, inputs: RowInputs<'_>, scan: &Scan) -> Option<ObjectStatus> {
    let broken_files = &scan.broken_files;
    let RowInputs { declared, record, conditions, sessions, agent_override } = inputs;
    let (health, health_message) = conditions::health(&conditions);
    // Only a kind that is not reconciled yet is Unknown; Ready=Unknown while work runs is drift.
    let ready_unknown = conditions::find(&conditions, READY)
        .is_some_and(|c| c.status == ConditionStatus::Unknown && c.reason == conditions::reason::NOT_RECONCILED_YET);
    let progressing = conditions::find(&conditions, READY).is_some_and(|c| c.status == ConditionStatus::Unknown);
    let no_conditions = conditions.is_empty();
    let mut row = row::object(key, record, health, health_message, conditions);
    match (declared, record) {
        (Some(_), None) => {
            row.generation = Some(1);
            row.sync = SyncStatus::OutOfSync;
            row.message = "new: not recorded yet".into();
        }
        (Some(object), Some(record)) if record.deleted_at.is_some() || object.digest() != record.spec_digest => {
            row.generation = Some(record.generation + 1);
            row.sync = SyncStatus::OutOfSync;
            row.message = format!("spec changed: generation {} not recorded yet", record.generation + 1);
        }
        (None, Some(record)) if record.deleted_at.is_some() => {
            row.sync = SyncStatus::OutOfSync;
            row.health = Health::None;
            row.message = "removed: cleanup pending".into();
        }
        (None, Some(record)) if !broken_files.contains(&record.source_file) && !scan.contested.contains_key(key) => {
            row.sync = SyncStatus::OutOfSync;
            row.health = Health::None;
            row.message = format!("removed from {}: cleanup pending", record.source_file);
        }
        (_, Some(record)) => {
            row.sync = if record.observed_generation != Some(record.generation) {
                SyncStatus::OutOfSync
            } else if ready_unknown || no_conditions {
                SyncStatus::Unknown
            } else if progressing {
                SyncStatus::OutOfSync
            } else {
                SyncStatus::Synced
            };
            if key.kind == Kind::Assignment
                && let Some(message) = in_flight_message(record, sessions, progressing)
            {
                row.message = message;
            }
            if let Some(held) = scan.held(key) {
                row.message = format!("{held}; keeping generation {}", record.generation);
            } else if broken_files.contains(&record.source_file) && declared.is_none() {
                row.message =
                    format!("{} does not load; keeping the last valid spec. {}", record.source_file, row.message);
            }
        }
        (None, None) => return None,
    }
    if let (Some(found), Some(declared)) = (agent_override, declared) {
        override_drift(found, declared, &mut row);
    }
    Some(row)
}

/// An operator's runtime override of an Adapter's `enabled` that its spec (declared in a file)
/// does not agree with is drift, shown on the Adapter's row until the spec says the same.
fn override_drift(found: &AgentOverride, declared: &Declared<'_>, row: &mut ObjectStatus) {
    let roundtable_specs::Spec::Adapter(spec) = declared.spec() else { return };
    if declared.is_built_in() {
        return;
    }
    let spec_enabled = roundtable_specs::catalog::resolve_declared(&found.adapter, spec).enabled;
    if spec_enabled == found.state.allows_sessions() {
        return;
    }
    row.sync = SyncStatus::OutOfSync;
    row.message = format!(
        "{} by an operator through the API since {} (a runtime override); the spec says enabled: {spec_enabled}",
        found.state.as_str(),
        found.changed_at
    );
}

/// The rows of spec files that do not load: one per file, its first error and how many more.
pub fn file_rows(scan: &Scan) -> Vec<ObjectStatus> {
    let mut files: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for error in scan.errors() {
        let position = error.position();
        let path = if error.path.is_empty() { String::new() } else { format!("{}: ", error.path) };
        files.entry(&error.file).or_default().push(format!("{position}{path}{}", error.message));
    }
    files
        .into_iter()
        .map(|(file, errors)| {
            let more = if errors.len() > 1 { format!(" (+{} more)", errors.len() - 1) } else { String::new() };
            row::broken_file(file, format!("{}{more}", errors[0]))
        })
        .collect()
}

/// How `status` names where the desired state comes from: `working tree` (no source recorded),
/// `committed (HEAD) PATH`, or `git source URL@BRANCH`.
pub fn source_name(sync: &roundtable_store::SourceSync) -> String {
    match sync.mode.as_str() {
        "committed" => format!("committed (HEAD) {}", sync.url),
        _ => format!("git source {}@{}", sync.url, sync.branch),
    }
}

fn short(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}

/// The source's row: the commit synced and when it was fetched, or the last fetch's failure
/// beside the last good commit.
pub fn source_row(sync: &roundtable_store::SourceSync) -> ObjectStatus {
    let read = if sync.mode == "committed" { "read" } else { "fetched" };
    let good = match (&sync.commit, &sync.fetched_at) {
        (Some(commit), Some(at)) => format!("commit {} {read} at {at}", short(commit)),
        (Some(commit), None) => format!("commit {} (exported by an earlier run)", short(commit)),
        (None, _) => "no commit read yet: nothing is reconciled from it".to_owned(),
    };
    let message = match (&sync.error, &sync.error_at) {
        (Some(error), at) => {
            let at = at.as_deref().unwrap_or("?");
            let verb = if sync.mode == "committed" { "read" } else { "fetch" };
            match &sync.commit {
                Some(_) => format!("{verb} failed at {at}: {error}; reconciling the last good {good}"),
                None => format!("{verb} failed at {at}: {error}; {good}"),
            }
        }
        (None, _) => good,
    };
    row::source(source_name(sync), sync.error.is_some(), sync.fetched_at.clone(), message)
}

/// The source rows as the scan of their commit found it: a commit some of whose spec files do not
/// load is not a healthy one to be at, though what did load is reconciled.
pub fn sources_with_files(mut sources: Vec<ObjectStatus>, scan: &Scan) -> Vec<ObjectStatus> {
    let broken = scan.broken_files.len();
    if broken == 0 {
        return sources;
    }
    for source in sources.iter_mut().filter(|s| s.health == Health::Healthy) {
        source.health = Health::Degraded;
        let files =
            if broken == 1 { "1 spec file of it does".to_owned() } else { format!("{broken} spec files of it do") };
        source
            .message
            .push_str(&format!("; {files} not load (the File rows say why): their objects keep their last valid spec"));
    }
    sources
}

/// `status --exit-code`: 0 in sync, 2 drift (OutOfSync or Unknown), 1 error; error outranks drift.
pub fn exit_code(rows: &[ObjectStatus]) -> u8 {
    if rows.iter().any(|r| r.sync == SyncStatus::Error) {
        1
    } else if rows.iter().any(|r| matches!(r.sync, SyncStatus::OutOfSync | SyncStatus::Unknown)) {
        2
    } else {
        0
    }
}

/// For a status about to be recorded: which of its fields differ from the recorded one, old →
/// new (`status.evidence.canary: "unknown" → "clean"`), so a plan says why it would write.
fn status_fields_changed(change: &Change, recorded: Option<&str>) -> Vec<FieldChange> {
    let Change::RecordStatus(Some(status)) = change else { return Vec::new() };
    let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap_or_default();
    let wrap = |value: serde_json::Value| serde_json::json!({ "status": value });
    let recorded = wrap(recorded.map(parse).unwrap_or_default());
    changed_fields(&recorded, &wrap(parse(status)), &[])
}

fn describe_change(change: &Change) -> String {
    match change {
        Change::SetCondition(condition) => {
            let status = match condition.status {
                ConditionStatus::True => "True",
                ConditionStatus::False => "False",
                ConditionStatus::Unknown => "Unknown",
            };
            format!("condition {} = {status} ({})", condition.type_, condition.reason)
        }
        // The fields it records, not the whole document (a thousand characters for an Adapter):
        // `describe` shows the values.
        Change::RecordStatus(None) => "clear the recorded status".into(),
        Change::RecordStatus(Some(status)) => match serde_json::from_str::<serde_json::Value>(status) {
            Ok(serde_json::Value::Object(fields)) => {
                let names: Vec<&str> = fields.keys().map(String::as_str).collect();
                format!("record status ({})", names.join(", "))
            }
            _ => format!("record status ({} bytes)", status.len()),
        },
        Change::ObserveGeneration(generation) => format!("observe generation {generation}"),
        Change::Forget => "clean up and forget".into(),
        Change::PullImage { reference } => format!("pull image {reference} in the background"),
        Change::StartExecution { attempt } => format!("start execution attempt {attempt}"),
        Change::CancelExecution => "cancel the running execution".into(),
        Change::SupersedeExecution { by } => {
            format!("cancel the running execution: execution generation {by} replaces it")
        }
        Change::InterruptSession(id) => format!("mark session {id} Interrupted and remove what it left"),
    }
}

/// The fields of `object` that differ from its recorded spec; for an Assignment those whose
/// change starts a new execution are marked.
fn spec_fields_changed(record: &ObjectRecord, object: &Declared<'_>) -> Vec<FieldChange> {
    let recorded: serde_json::Value = serde_json::from_str(&record.spec_json).unwrap_or_default();
    let declared = roundtable_specs::resource::to_value(object.metadata(), object.spec());
    let replacing = match object.spec() {
        Spec::Assignment(spec) => spec.run_fields().paths(),
        _ => Vec::new(),
    };
    changed_fields(&recorded, &declared, &replacing)
}

/// `plan`: what reconciling now would change, terraform style, without changing anything.
pub async fn plan<S: StatusBackend, I: ImageBackend, A: AuditSink, X: ExecutionBackend>(
    store: &Store,
    reconciler: &ObjectReconciler<S, I, A, X>,
    scan: &Scan,
) -> Result<Vec<PlannedChange>, BackendError> {
    let declared = declared(scan);
    let records: BTreeMap<ObjectKey, ObjectRecord> =
        store.objects().await?.into_iter().map(|r| (r.key.clone(), r)).collect();
    let mut lines = Vec::new();
    let mut push = |op: &str, key: &ObjectKey, summary: String, fields: Vec<FieldChange>| {
        lines.push(PlannedChange { op: op.into(), object: key.to_string(), summary, fields });
    };
    for (key, object) in &declared {
        let record = records.get(key);
        let generation = match record {
            None => {
                push("+", key, "create at generation 1".into(), Vec::new());
                1
            }
            Some(record) if record.deleted_at.is_some() => {
                push("+", key, "declared again: a new object (a new uid) at generation 1".into(), Vec::new());
                1
            }
            Some(record) if object.digest() != record.spec_digest => {
                let replaced =
                    key.kind == Kind::Assignment && object.execution_digest() != record.execution_digest.as_deref();
                let fields = spec_fields_changed(record, object);
                let generations = format!("generation {} → {}", record.generation, record.generation + 1);
                if replaced {
                    let summary =
                        format!("run fields changed ({generations}): a new execution replaces the current one");
                    push("-/+", key, summary, fields);
                } else {
                    push("~", key, format!("spec changed: {generations}"), fields);
                }
                record.generation + 1
            }
            Some(record) => record.generation,
        };
        // An object not recorded yet (or recorded and deleted) has no uid: nothing recorded is its.
        let recorded = records.get(key).filter(|r| r.deleted_at.is_none());
        let desired = Desired {
            key: key.clone(),
            held: None,
            uid: recorded.map(|r| r.uid.clone()).unwrap_or_default(),
            generation,
            execution_digest: object.execution_digest().map(str::to_owned),
            rerun: false,
            execution_generation: recorded
                .and_then(|r| {
                    let changed = object.execution_digest() != r.execution_digest.as_deref();
                    r.execution_generation.map(|g| if changed { g + 1 } else { g })
                })
                .or(object.execution_digest().map(|_| 1)),
            metadata: object.metadata().clone(),
            spec: object.spec().clone(),
        };
        match reconciler.observe(&desired).await {
            Ok(observed) => {
                for change in ObjectReconciler::<S, I, A, X>::plan(&desired, &observed) {
                    let fields = status_fields_changed(&change, observed.status_json.as_deref());
                    push("~", key, describe_change(&change), fields);
                }
            }
            Err(error) => push("?", key, format!("cannot observe: {error}"), Vec::new()),
        }
    }
    for (key, record) in &records {
        if declared.contains_key(key) {
            continue;
        }
        if record.deleted_at.is_none() && scan.broken_files.contains(&record.source_file) {
            continue;
        }
        if let Some(held) = scan.held(key) {
            let recorded = if record.deleted_at.is_none() { "kept at its recorded spec" } else { "not recorded" };
            push("!", key, format!("{held} ({recorded})"), Vec::new());
            continue;
        }
        push("-", key, format!("no longer declared (was in {}): clean up and forget", record.source_file), Vec::new());
    }
    for key in scan.contested.keys().filter(|key| !records.contains_key(key)) {
        if let Some(held) = scan.held(key) {
            push("!", key, format!("{held} (not recorded)"), Vec::new());
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use roundtable_specs::session::SessionPhase;

    use super::*;

    #[test]
    fn a_status_to_record_says_which_fields_differ_from_the_recorded_one() {
        let recorded = r#"{"imageId":"sha256:a","evidence":{"canary":"unknown","conformance":"ok"}}"#;
        let change = Change::RecordStatus(Some(
            r#"{"imageId":"sha256:a","evidence":{"canary":"clean","conformance":"ok"}}"#.into(),
        ));
        let fields = status_fields_changed(&change, Some(recorded));
        let said: Vec<(&str, String)> =
            fields.iter().map(|f| (f.path.as_str(), format!("{:?} → {:?}", f.old, f.new))).collect();
        assert_eq!(said, [("status.evidence.canary", r#"Some(String("unknown")) → Some(String("clean"))"#.to_owned())]);
        assert!(status_fields_changed(&Change::Forget, Some(recorded)).is_empty());
    }
    use crate::conditions::desired;

    const ASSIGNMENT: &str = "apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata: {name: fix}\nspec:\n  adapter: mock\n  task: {id: T, prompt: p}\n  readablePaths: [README.md]\n";

    #[tokio::test]
    async fn a_running_session_is_not_reported_as_queued() {
        let project = tempfile::tempdir().expect("tempdir");
        let dir = project.path().join(".roundtable");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("fix.yaml"), ASSIGNMENT).expect("write");
        let store = Store::open_in_memory().await.expect("store");
        let scan = roundtable_source::scan(&roundtable_source::Project::resolve(&dir).expect("project"));
        crate::desired::sync(&store, &store, &scan).await.expect("sync");
        let key = ObjectKey::new(Kind::Assignment, "fix");
        // What the reconciler wrote when it started the execution.
        let queued = desired(READY, ConditionStatus::Unknown, "Queued", "execution generation 1 queued for a slot", 1);
        store.set_condition(&key, &queued).await.expect("condition");
        store.set_observed_generation(&key, 1).await.expect("observed");
        let row = |rows: Vec<ObjectStatus>| rows.into_iter().find(|r| r.kind == "Assignment").expect("the row");

        let mut session = SessionRecord {
            id: "s-1".into(),
            assignment: "fix".into(),
            execution_generation: 1,
            attempt: 1,
            controller_run: "run".into(),
            phase: SessionPhase::Queued,
            message: "waiting for an execution slot".into(),
            ..Default::default()
        };
        store.save_session(&session).await.expect("save");
        let shown = row(status(&store, &scan, &[]).await.expect("status"));
        assert_eq!(shown.message, "session s-1 Queued (attempt 1): waiting for an execution slot");

        // The session moved on; the condition did not.
        session.phase = SessionPhase::Running;
        session.message = "running".into();
        store.save_session(&session).await.expect("save");
        let shown = row(status(&store, &scan, &[]).await.expect("status"));
        assert_eq!(shown.message, "session s-1 Running (attempt 1): running");
        assert!(!shown.message.to_lowercase().contains("queued"), "{shown:?}");
        assert_eq!(shown.sync, SyncStatus::OutOfSync, "work in flight is drift");

        // Finished: the condition (rewritten by the next reconcile) speaks again.
        session.phase = SessionPhase::Succeeded;
        session.message = "no changes".into();
        store.save_session(&session).await.expect("save");
        let shown = row(status(&store, &scan, &[]).await.expect("status"));
        assert_eq!(shown.message, "execution generation 1 queued for a slot");
    }
}
