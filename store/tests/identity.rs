//! Object identity on every backend: a recreated object is a new object, what an object's life
//! recorded stays its own, a superseded proposal stays superseded, and a store from before
//! identity keeps its history when migrated.

mod support;

use roundtable_specs::events::EventReason;
use roundtable_specs::session::{ProposalState, SessionPhase};
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::{NewEvent, ProposalRecord, SessionRecord, Severity, SpecSnapshot, Store, StoreUrl};

fn snapshot<'a>(key: &'a ObjectKey, digest: &'a str, execution: Option<&'a str>) -> SpecSnapshot<'a> {
    SpecSnapshot { key, spec_digest: digest, execution_digest: execution, spec_json: "{}", source_file: "a.yaml" }
}

fn proposal(id: &str, uid: &str, generation: i64) -> ProposalRecord {
    ProposalRecord {
        id: id.into(),
        session_id: format!("s-{id}"),
        assignment: "new-task".into(),
        assignment_uid: Some(uid.into()),
        execution_generation: generation,
        base_commit: "c0ffee".into(),
        adapter: "generic".into(),
        patch_path: "/nowhere".into(),
        sha256: "0".repeat(64),
        ..ProposalRecord::default()
    }
}

async fn state_of(store: &Store, id: &str) -> ProposalState {
    store.proposal_by_id(id).await.expect("read").expect("the proposal").state
}

#[tokio::test]
async fn a_recreated_object_is_a_new_object_and_the_earlier_ones_results_stay_its_own() {
    for support::Scratch { store, .. } in support::each_store().await {
        let key = ObjectKey::new(Kind::Assignment, "new-task");
        let first = store.record_spec(&snapshot(&key, "haiku", Some("run-haiku"))).await.expect("record");
        assert_eq!(first.uid.len(), 32, "16 random bytes in hex");
        assert!(store.insert_proposal(&proposal("p-haiku", &first.uid, 1)).await.expect("insert"));
        let condition = roundtable_specs::output::Condition {
            type_: "Ready".into(),
            status: roundtable_specs::output::ConditionStatus::True,
            reason: "ProposalPending".into(),
            message: "pending proposal p-haiku".into(),
            last_transition_time: String::new(),
            observed_generation: 1,
        };
        store.set_condition(&key, &condition).await.expect("condition");
        let event = NewEvent {
            object: &key,
            severity: Severity::Normal,
            reason: EventReason::ExecutionQueued.into(),
            message: "m",
            record: None,
        };
        store.append_event(&event).await.expect("event");

        // Deleted, then declared again under the same name before its cleanup ran.
        assert!(store.tombstone(&key).await.expect("tombstone"));
        let second = store.record_spec(&snapshot(&key, "limerick", Some("run-limerick"))).await.expect("record");
        assert_ne!(second.uid, first.uid, "a new object gets a new uid");
        assert_eq!((second.generation, second.execution_generation), (1, Some(1)));
        assert_eq!(second.observed_generation, None);
        assert!(store.conditions(&key).await.expect("conditions").is_empty(), "the earlier object's conditions");
        assert_eq!(store.proposal_for(&second.uid, 1).await.expect("read"), None, "not the haiku proposal");
        assert!(store.events(&key, &second.uid, 10).await.expect("events").is_empty());
        assert_eq!(store.events(&key, &first.uid, 10).await.expect("events").len(), 1, "kept for the record");
        // Its own proposal for execution generation 1 is not refused as a duplicate.
        assert!(store.insert_proposal(&proposal("p-limerick", &second.uid, 1)).await.expect("insert"));
        assert_eq!(store.proposal_for(&first.uid, 1).await.expect("read").map(|p| p.id), Some("p-haiku".into()));

        // Forgotten after cleanup, then declared again: a third object.
        store.tombstone(&key).await.expect("tombstone");
        store.forget(&key).await.expect("forget");
        let third = store.record_spec(&snapshot(&key, "haiku", Some("run-haiku"))).await.expect("record");
        assert!(third.uid != first.uid && third.uid != second.uid);
        store.close().await;
    }
}

#[tokio::test]
async fn a_superseded_proposal_stays_superseded_through_a_deletion_and_a_rollback() {
    for support::Scratch { store, .. } in support::each_store().await {
        let key = ObjectKey::new(Kind::Assignment, "new-task");
        let uid = store.record_spec(&snapshot(&key, "a", Some("run-a"))).await.expect("record").uid;
        store.insert_proposal(&proposal("p1", &uid, 1)).await.expect("insert");
        // A change outside the run fields supersedes nothing.
        store.record_spec(&snapshot(&key, "a2", Some("run-a"))).await.expect("record");
        assert_eq!(state_of(&store, "p1").await, ProposalState::Pending);
        store.record_spec(&snapshot(&key, "b", Some("run-b"))).await.expect("record");
        assert_eq!(state_of(&store, "p1").await, ProposalState::Superseded);
        store.insert_proposal(&proposal("p2", &uid, 2)).await.expect("insert");
        // Back to the first run fields (a `git stash`): a new generation; p1 stays superseded.
        let back = store.record_spec(&snapshot(&key, "a", Some("run-a"))).await.expect("record");
        assert_eq!(back.execution_generation, Some(3));
        assert_eq!(
            (state_of(&store, "p1").await, state_of(&store, "p2").await),
            (ProposalState::Superseded, ProposalState::Superseded)
        );
        store.tombstone(&key).await.expect("tombstone");
        store.forget(&key).await.expect("forget");
        assert_eq!(state_of(&store, "p1").await, ProposalState::Superseded, "a deletion never turns it pending");
        store.close().await;
    }
}

#[tokio::test]
async fn a_run_that_finishes_after_its_fields_moved_on_records_its_proposal_superseded() {
    for support::Scratch { store, .. } in support::each_store().await {
        let key = ObjectKey::new(Kind::Assignment, "fix");
        let uid = store.record_spec(&snapshot(&key, "a", Some("run-a"))).await.expect("record").uid;
        // Generation 1 still runs when an edit moves the Assignment to generation 2.
        store.record_spec(&snapshot(&key, "b", Some("run-b"))).await.expect("record");
        assert!(store.insert_proposal(&proposal("late", &uid, 1)).await.expect("insert"));
        assert_eq!(state_of(&store, "late").await, ProposalState::Superseded);
        assert!(store.insert_proposal(&proposal("current", &uid, 2)).await.expect("insert"));
        assert_eq!(state_of(&store, "current").await, ProposalState::Pending);
        store.close().await;
    }
}

#[tokio::test]
async fn a_rerun_is_a_new_execution_generation_of_the_same_fields_that_supersedes_the_last() {
    for support::Scratch { store, .. } in support::each_store().await {
        let key = ObjectKey::new(Kind::Assignment, "fix");
        let uid = store.record_spec(&snapshot(&key, "a", Some("run-a"))).await.expect("record").uid;
        store.insert_proposal(&proposal("p1", &uid, 1)).await.expect("insert");
        assert_eq!(store.request_rerun("fix").await.expect("rerun"), Some(2));
        let record = store.object(&key).await.expect("read").expect("recorded");
        assert_eq!((record.execution_generation, record.rerun_generation), (Some(2), Some(2)));
        assert_eq!(record.execution_digest.as_deref(), Some("run-a"));
        assert_eq!(state_of(&store, "p1").await, ProposalState::Superseded);
        // The next scan of the unchanged spec keeps the rerun's generation.
        let again = store.record_spec(&snapshot(&key, "a", Some("run-a"))).await.expect("record");
        assert_eq!(again.execution_generation, Some(2));
        assert_eq!(store.request_rerun("nobody").await.expect("rerun"), None);
        store.close().await;
    }
}

#[tokio::test]
async fn a_reusable_session_is_a_success_of_the_same_object_fields_and_commit() {
    for support::Scratch { store, .. } in support::each_store().await {
        let session = |id: &str, uid: &str, digest: &str, commit: &str, phase: SessionPhase| SessionRecord {
            id: id.into(),
            assignment: "fix".into(),
            assignment_uid: Some(uid.into()),
            execution_digest: Some(digest.into()),
            execution_generation: 1,
            attempt: 1,
            phase,
            base_commit: Some(commit.into()),
            finished_at: Some(roundtable_store::now()),
            ..SessionRecord::default()
        };
        for record in [
            session("failed", "u1", "d", "c1", SessionPhase::Failed),
            session("other-object", "u2", "d", "c1", SessionPhase::Succeeded),
            session("other-commit", "u1", "d", "c2", SessionPhase::Succeeded),
            session("ran", "u1", "d", "c1", SessionPhase::Succeeded),
        ] {
            store.save_session(&record).await.expect("save");
        }
        let found = store.reusable_session("u1", "d", "c1").await.expect("read").map(|s| s.id);
        assert_eq!(found.as_deref(), Some("ran"));
        assert_eq!(store.reusable_session("u1", "other", "c1").await.expect("read"), None);
        assert_eq!(store.reusable_session("u3", "d", "c1").await.expect("read"), None);
        store.close().await;
    }
}

/// A store made by the release before identity (migrations up to 0010), with a history.
async fn legacy_store(backend: support::Backend, dir: &std::path::Path) -> StoreUrl {
    sqlx::any::install_default_drivers();
    let url = backend.new_url(dir).await;
    let (text, folder) = match &url {
        StoreUrl::Sqlite(path) => {
            std::fs::File::create(path).expect("create the database");
            (format!("sqlite://{}", path.display()), "sqlite")
        }
        StoreUrl::Postgres(url) => (url.clone(), "postgres"),
    };
    let old = dir.join("migrations-0010");
    std::fs::create_dir(&old).expect("mkdir");
    let all = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations").join(folder);
    for entry in std::fs::read_dir(&all).expect("migrations") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).expect("name").to_owned();
        if name.as_str() <= "0010_~" {
            std::fs::copy(&path, old.join(&name)).expect("copy");
        }
    }
    let pool = sqlx::AnyPool::connect(&text).await.expect("connect");
    sqlx::migrate::Migrator::new(old.as_path()).await.expect("migrator").run(&pool).await.expect("migrate to 0010");
    let object = "INSERT INTO objects (kind, name, generation, spec_digest, execution_digest, execution_generation, spec_json, source_file, created_at, updated_at) \
         VALUES ('Assignment', 'fix', 3, 'd3', 'run-b', 2, '{}', 'a.yaml', '2026-06-01T00:00:00.000000000Z', '2026-06-03T00:00:00.000000000Z')";
    let statements = [
        object,
        // An earlier object of the same name, deleted and forgotten before this one was declared
        // (it had reached execution generation 5: its generation 1 proposal would have stopped
        // this object's from being recorded at all, the bug identity fixes).
        "INSERT INTO sessions (id, assignment, execution_generation, attempt, controller_run, adapter, phase, message, created_at) \
         VALUES ('s-old', 'fix', 5, 1, 'r', 'generic', 'Succeeded', 'm', '2026-05-01T00:00:00.000000000Z')",
        "INSERT INTO proposals (id, session_id, assignment, execution_generation, base_commit, adapter, patch_path, sha256, files_changed, insertions, deletions, flags_json, state, created_at) \
         VALUES ('p-old', 's-old', 'fix', 5, 'c', 'generic', '/x', 'h', 1, 1, 0, '[]', 'pending', '2026-05-01T00:00:00.000000000Z')",
        // This object's generations 1 and 2.
        "INSERT INTO sessions (id, assignment, execution_generation, attempt, controller_run, adapter, phase, message, created_at) \
         VALUES ('s1', 'fix', 1, 1, 'r', 'generic', 'Succeeded', 'm', '2026-06-01T00:00:01.000000000Z')",
        "INSERT INTO sessions (id, assignment, execution_generation, attempt, controller_run, adapter, phase, message, created_at) \
         VALUES ('s2', 'fix', 2, 1, 'r', 'generic', 'Succeeded', 'm', '2026-06-02T00:00:00.000000000Z')",
        "INSERT INTO proposals (id, session_id, assignment, execution_generation, base_commit, adapter, patch_path, sha256, files_changed, insertions, deletions, flags_json, state, created_at) \
         VALUES ('p1', 's1', 'fix', 1, 'c', 'generic', '/x', 'h', 1, 1, 0, '[]', 'pending', '2026-06-01T00:00:02.000000000Z')",
        "INSERT INTO proposals (id, session_id, assignment, execution_generation, base_commit, adapter, patch_path, sha256, files_changed, insertions, deletions, flags_json, state, created_at) \
         VALUES ('p2', 's2', 'fix', 2, 'c', 'generic', '/x', 'h', 1, 1, 0, '[]', 'pending', '2026-06-02T00:00:01.000000000Z')",
        "INSERT INTO execution_leases (assignment, holder, fence, acquired_at, expires_at) VALUES ('fix', 'r', 4, '2026-06-02T00:00:00.000000000Z', '2026-06-02T00:01:00.000000000Z')",
        "INSERT INTO execution_leases (assignment, holder, fence, acquired_at, expires_at) VALUES ('gone', 'r', 1, '2026-06-02T00:00:00.000000000Z', '2026-06-02T00:01:00.000000000Z')",
        "INSERT INTO events (at, kind, name, severity, reason, message) VALUES ('2026-05-01T00:00:00.000000000Z', 'Assignment', 'fix', 'Normal', 'Old', 'the earlier object')",
        "INSERT INTO events (at, kind, name, severity, reason, message) VALUES ('2026-06-02T00:00:00.000000000Z', 'Assignment', 'fix', 'Normal', 'Mine', 'this object')",
    ];
    for statement in statements {
        sqlx::query(statement).execute(&pool).await.expect(statement);
    }
    pool.close().await;
    url
}

#[tokio::test]
async fn a_store_from_before_identity_keeps_its_history_under_the_right_objects() {
    for backend in support::backends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = legacy_store(backend, dir.path()).await;
        let store = Store::connect(&url).await.expect("migrate to identity");
        let key = ObjectKey::new(Kind::Assignment, "fix");
        let object = store.object(&key).await.expect("read").expect("kept");
        assert_eq!((object.generation, object.execution_generation), (3, Some(2)));
        assert_eq!(object.uid.len(), 32);
        let mine: Vec<String> =
            store.sessions_of(&object.uid).await.expect("sessions").into_iter().map(|s| s.id).collect();
        assert_eq!(mine, ["s2", "s1"], "the earlier object's session is not this one's");
        assert_eq!(store.sessions(Some("fix")).await.expect("sessions").len(), 3, "nothing is lost");
        let old = store.proposal_by_id("p-old").await.expect("read").expect("kept");
        assert_eq!((old.assignment_uid, old.state), (None, ProposalState::Pending));
        assert_eq!(state_of(&store, "p1").await, ProposalState::Superseded, "generation 2 had moved past it");
        assert_eq!(state_of(&store, "p2").await, ProposalState::Pending);
        assert_eq!(store.proposal_for(&object.uid, 2).await.expect("read").map(|p| p.id).as_deref(), Some("p2"));
        let lease = store.execution_lease(&object.uid).await.expect("read").expect("the lease moved to the uid");
        assert_eq!((lease.assignment.as_str(), lease.fence), ("fix", 4));
        assert_eq!(store.execution_leases().await.expect("leases").len(), 1, "a forgotten object's lease goes");
        let events: Vec<String> =
            store.events(&key, &object.uid, 10).await.expect("events").into_iter().map(|e| e.reason).collect();
        assert_eq!(events, ["Mine"]);
        store.close().await;
    }
}
