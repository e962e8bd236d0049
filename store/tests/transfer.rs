//! `state migrate`: a SQLite store's history copied into an empty store of each backend arrives
//! whole (objects, sessions, proposals, events), its audit chain verifies there with the same
//! key, the repository key comes along, new rows continue after the copied ones, and a target
//! that is not empty is refused.

mod support;

use roundtable_specs::events::EventReason;
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::audit::{AuditKey, AuditedEntry};
use roundtable_store::{NewEvent, ProposalRecord, SessionRecord, Severity, SpecSnapshot, Store};
use serde_json::json;

#[tokio::test]
async fn a_sqlite_history_arrives_whole_and_its_chain_verifies() {
    for backend in support::backends() {
        let source = support::Backend::Sqlite.fresh().await;
        let key = AuditKey::create(&source.dir.path().join("audit.key")).expect("key");
        let object = ObjectKey::new(Kind::Assignment, "fix");
        let snapshot = SpecSnapshot {
            key: &object,
            spec_digest: "d1",
            execution_digest: Some("r1"),
            spec_json: "{}",
            source_file: "a.yaml",
        };
        source.store.record_specs(&[snapshot]).await.expect("spec");
        let session = SessionRecord {
            id: "s1".into(),
            assignment: "fix".into(),
            execution_generation: 1,
            attempt: 1,
            controller_run: "run".into(),
            adapter: "generic".into(),
            message: "done".into(),
            ..SessionRecord::default()
        };
        source.store.save_session(&session).await.expect("session");
        let proposal = ProposalRecord {
            id: "p1".into(),
            session_id: "s1".into(),
            assignment: "fix".into(),
            execution_generation: 1,
            base_commit: "abc".into(),
            adapter: "generic".into(),
            patch_path: "/p1.patch".into(),
            sha256: "00".into(),
            ..ProposalRecord::default()
        };
        source.store.insert_proposal(&proposal).await.expect("proposal");
        for n in 0..5 {
            let entry = AuditedEntry { kind: "test.entry", subject: "s1", record: json!({"n": n}) };
            source.store.append_audited(&key, &entry).await.expect("append");
        }

        let target = backend.fresh().await;
        let copied = source.store.copy_into(&target.store).await.expect("migrate");
        let count = |table: &str| copied.iter().find(|c| c.table == table).map_or(0, |c| c.rows);
        assert_eq!(
            (count("objects"), count("sessions"), count("proposals"), count("events")),
            (1, 1, 1, 5),
            "{copied:?}"
        );
        assert_eq!(target.store.session("s1").await.expect("read"), source.store.session("s1").await.expect("read"));
        // The project's persistent homes are keyed by its repository id: it travels with the state.
        assert_eq!(
            target.store.repository_key().await.expect("target key"),
            source.store.repository_key().await.expect("source key")
        );
        assert_eq!(
            target.store.verify_chain(&key, None, None).await.expect("read").map(|v| v.head.map(|h| h.seq)),
            Ok(Some(5))
        );
        // New rows continue after the copied ones, on the chain too.
        let event = NewEvent {
            object: &object,
            severity: Severity::Normal,
            reason: EventReason::SpecChanged.into(),
            message: "m",
            record: None,
        };
        target.store.append_event(&event).await.expect("a new event");
        let entry = AuditedEntry { kind: "test.entry", subject: "s1", record: json!({"n": 5}) };
        assert_eq!(target.store.append_audited(&key, &entry).await.expect("append").seq, 6);
        assert_eq!(
            target.store.verify_chain(&key, None, None).await.expect("read").map(|v| v.head.map(|h| h.seq)),
            Ok(Some(6))
        );

        let refused = source.store.copy_into(&target.store).await.expect_err("not empty");
        assert!(refused.to_string().contains("not empty"), "{refused}");
        let _: &Store = &target.store;
    }
}
