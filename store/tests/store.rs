//! The state store's contract, on a real SQLite file and a real PostgreSQL database: generations,
//! tombstones, conditions, events, claims, overrides, idempotency.

mod support;

use roundtable_specs::events::EventReason;
use roundtable_specs::output::{Condition, ConditionStatus};
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::{NewEvent, NoteQuota, NoteRefused, Severity, SpecSnapshot, Store};

fn snapshot<'a>(key: &'a ObjectKey, digest: &'a str, execution: Option<&'a str>) -> SpecSnapshot<'a> {
    SpecSnapshot { key, spec_digest: digest, execution_digest: execution, spec_json: "{}", source_file: "a.yaml" }
}

#[tokio::test]
async fn creates_the_state_dir_with_a_gitignore_and_wal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let store = Store::open(&state).await.expect("open");
    assert!(state.join(".gitignore").is_file());
    assert!(state.join("state.db").is_file());
    store.close().await;
    // Reopening applies no migration twice.
    Store::open(&state).await.expect("reopen").close().await;
    assert!(state.join("state.db-wal").exists() || state.join("state.db").exists());
}

#[tokio::test]
async fn generations_follow_digests_and_run_fields() {
    for support::Scratch { store, .. } in support::each_store().await {
        let key = ObjectKey::new(Kind::Assignment, "fix");
        let first = store.record_spec(&snapshot(&key, "d1", Some("r1"))).await.expect("record");
        assert_eq!((first.generation, first.execution_generation), (1, Some(1)));
        let same = store.record_spec(&snapshot(&key, "d1", Some("r1"))).await.expect("record");
        assert_eq!((same.generation, same.execution_generation), (1, Some(1)));
        let relabelled = store.record_spec(&snapshot(&key, "d2", Some("r1"))).await.expect("record");
        assert_eq!((relabelled.generation, relabelled.execution_generation), (2, Some(1)));
        let rerun = store.record_spec(&snapshot(&key, "d3", Some("r2"))).await.expect("record");
        assert_eq!((rerun.generation, rerun.execution_generation), (3, Some(2)));
    }
}

#[tokio::test]
async fn tombstones_are_revived_or_forgotten() {
    for support::Scratch { store, .. } in support::each_store().await {
        let key = ObjectKey::new(Kind::Adapter, "codex");
        store.record_spec(&snapshot(&key, "d1", None)).await.expect("record");
        assert!(store.tombstone(&key).await.expect("tombstone"));
        assert!(!store.tombstone(&key).await.expect("second tombstone is a no-op"));
        assert!(store.object(&key).await.expect("read").and_then(|o| o.deleted_at).is_some());
        let revived = store.record_spec(&snapshot(&key, "d1", None)).await.expect("revive");
        assert_eq!((revived.deleted_at, revived.generation), (None, 1));
        store.tombstone(&key).await.expect("tombstone");
        store.forget(&key).await.expect("forget");
        assert!(store.object(&key).await.expect("read").is_none());
    }
}

#[tokio::test]
async fn condition_transition_time_moves_only_with_status() {
    for support::Scratch { store, .. } in support::each_store().await {
        let key = ObjectKey::new(Kind::Adapter, "codex");
        let condition = |status, reason: &str| Condition {
            type_: "Ready".into(),
            status,
            reason: reason.into(),
            message: String::new(),
            last_transition_time: String::new(),
            observed_generation: 1,
        };
        let first = store.set_condition(&key, &condition(ConditionStatus::False, "ImageMissing")).await.expect("set");
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        let same_status =
            store.set_condition(&key, &condition(ConditionStatus::False, "ImageNotPinned")).await.expect("set");
        assert_eq!(first.last_transition_time, same_status.last_transition_time);
        let flipped = store.set_condition(&key, &condition(ConditionStatus::True, "Ready")).await.expect("set");
        assert_ne!(first.last_transition_time, flipped.last_transition_time);
        let stored = store.conditions(&key).await.expect("read");
        assert_eq!(stored.len(), 1);
        assert_eq!((stored[0].status, stored[0].reason.as_str()), (ConditionStatus::True, "Ready"));
    }
}

#[tokio::test]
async fn events_are_kept_per_object_in_order() {
    for support::Scratch { store, .. } in support::each_store().await {
        let key = ObjectKey::new(Kind::Adapter, "codex");
        let other = ObjectKey::new(Kind::Adapter, "claude");
        let uid = store.record_spec(&snapshot(&key, "d", None)).await.expect("record").uid;
        store.record_spec(&snapshot(&other, "d", None)).await.expect("record");
        for i in 0..5 {
            let message = format!("event {i}");
            let event = NewEvent {
                object: &key,
                severity: Severity::Normal,
                reason: EventReason::SpecChanged.into(),
                message: &message,
                record: None,
            };
            store.append_event(&event).await.expect("append");
        }
        let noise = NewEvent {
            object: &other,
            severity: Severity::Warning,
            reason: EventReason::ReconcileFailed.into(),
            message: "x",
            record: None,
        };
        store.append_event(&noise).await.expect("append");
        let recent = store.events(&key, &uid, 3).await.expect("read");
        let messages: Vec<&str> = recent.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(messages, ["event 2", "event 3", "event 4"]);
        assert!(recent.iter().all(|e| e.seq.is_none()), "plain events are not audited");
    }
}

#[tokio::test]
async fn file_errors_are_replaced_by_each_scan() {
    use roundtable_store::FileError;
    for support::Scratch { store, .. } in support::each_store().await {
        let error = |file: &str| FileError {
            file: file.into(),
            line: 3,
            column: 1,
            path: "spec".into(),
            message: "bad".into(),
        };
        store.replace_file_errors(&[error("a.yaml"), error("b.yaml")]).await.expect("replace");
        store.replace_file_errors(&[error("b.yaml")]).await.expect("replace");
        let errors = store.file_errors().await.expect("read");
        assert_eq!(errors.iter().map(|e| e.file.as_str()).collect::<Vec<_>>(), ["b.yaml"]);
    }
}

#[tokio::test]
async fn large_batches_record_the_same_generations_as_small_ones() {
    for support::Scratch { store, .. } in support::each_store().await {
        let keys: Vec<ObjectKey> = (0..150).map(|i| ObjectKey::new(Kind::Assignment, format!("a{i}"))).collect();
        let first: Vec<SpecSnapshot> = keys.iter().map(|k| snapshot(k, "d1", Some("r1"))).collect();
        let recorded = store.record_specs(&first).await.expect("bulk insert");
        assert!(recorded.iter().all(|r| r.moved && r.generation == 1));
        let mut second: Vec<SpecSnapshot> = keys.iter().map(|k| snapshot(k, "d1", Some("r1"))).collect();
        second[7] = snapshot(&keys[7], "d2", Some("r2"));
        let recorded = store.record_specs(&second).await.expect("bulk update");
        assert_eq!(recorded.iter().filter(|r| r.moved).count(), 1);
        assert_eq!((recorded[7].generation, recorded[7].execution_generation), (2, Some(2)));
        assert_eq!(store.object_index().await.expect("index").len(), 150);
        let events: Vec<NewEvent> = keys
            .iter()
            .map(|k| NewEvent {
                object: k,
                severity: Severity::Normal,
                reason: EventReason::SpecChanged.into(),
                message: "m",
                record: None,
            })
            .collect();
        store.append_events(&events).await.expect("batch events");
        let uid = store.object(&keys[149]).await.expect("read").expect("recorded").uid;
        assert_eq!(store.events(&keys[149], &uid, 10).await.expect("read").len(), 1);
    }
}

/// A session record in `phase`, as the execution manager writes it.
fn session_in(
    id: &str,
    assignment: &str,
    phase: roundtable_specs::session::SessionPhase,
) -> roundtable_store::SessionRecord {
    roundtable_store::SessionRecord {
        id: id.into(),
        assignment: assignment.into(),
        adapter: "codex".into(),
        phase,
        ..roundtable_store::SessionRecord::default()
    }
}

const QUOTA: NoteQuota = NoteQuota { notes: 3, bytes: 16 };

#[tokio::test]
async fn claims_never_let_two_sessions_hold_one_path_and_notes_keep_their_order() {
    use roundtable_specs::session::SessionPhase::Running;
    for support::Scratch { store, .. } in support::each_store().await {
        for (id, assignment) in [("sess-a", "fix"), ("sess-b", "other"), ("sess-old", "old")] {
            store.save_session(&session_in(id, assignment, Running)).await.expect("session");
        }
        let later = "2999-01-01T00:00:00.000000000Z";
        let a = store.acquire_claims("fix", "sess-a", &["docs/".into()], later).await.expect("claim");
        assert_eq!(a.granted, ["docs/"]);
        let b = store
            .acquire_claims("other", "sess-b", &["docs/guide.md".into(), "README.md".into()], later)
            .await
            .expect("claim");
        assert_eq!(b.granted, ["README.md"]);
        assert_eq!(b.refused.len(), 1);
        assert_eq!((b.refused[0].0.as_str(), b.refused[0].1.session_id.as_str()), ("docs/guide.md", "sess-a"));
        // An expired claim holds nothing.
        let past = "2000-01-01T00:00:00.000000000Z";
        store.acquire_claims("old", "sess-old", &["src/".into()], past).await.expect("claim");
        let live: Vec<String> =
            store.live_claims(&roundtable_store::now()).await.expect("live").into_iter().map(|c| c.path).collect();
        assert_eq!(live, ["README.md", "docs/"]);
        assert_eq!(store.release_claims("sess-a", &[]).await.expect("release"), 1);
        let c = store.acquire_claims("other", "sess-b", &["docs/guide.md".into()], later).await.expect("claim");
        assert_eq!(c.granted, ["docs/guide.md"], "released claims hold nothing");

        for text in ["first", "second"] {
            store.append_note("fix", "sess-a", text, QUOTA).await.expect("note").expect("within the quota");
        }
        store.append_note("other", "sess-b", "elsewhere", QUOTA).await.expect("note").expect("within the quota");
        let notes: Vec<String> = store.notes("fix").await.expect("notes").into_iter().map(|n| n.text).collect();
        assert_eq!(notes, ["first", "second"]);
        store.heartbeat("sess-a", "reading").await.expect("beat");
        store.heartbeat("sess-a", "editing").await.expect("beat");
        assert_eq!(store.last_heartbeat("sess-a").await.expect("beat").map(|b| b.1).as_deref(), Some("editing"));
    }
}

/// A claim is live only while its session is: a session that ended (or whose record is gone)
/// holds nothing, even with an hour of TTL left and no release recorded.
#[tokio::test]
async fn a_claim_of_an_ended_session_holds_nothing_without_a_release() {
    use roundtable_specs::session::SessionPhase;
    for support::Scratch { store, .. } in support::each_store().await {
        let hour = roundtable_store::later(std::time::Duration::from_secs(3600));
        let readme = ["README.md".to_owned()];
        for ended in [SessionPhase::Succeeded, SessionPhase::Failed, SessionPhase::Cancelled, SessionPhase::Interrupted]
        {
            let (holder, other) = (format!("holder-{ended}"), format!("other-{ended}"));
            store.save_session(&session_in(&holder, "a", SessionPhase::Running)).await.expect("session");
            store.save_session(&session_in(&other, "b", SessionPhase::Running)).await.expect("session");
            assert_eq!(store.acquire_claims("a", &holder, &readme, &hour).await.expect("claim").granted, readme);
            let refused = store.acquire_claims("b", &other, &readme, &hour).await.expect("claim");
            assert_eq!(refused.refused.len(), 1, "a running session's claim holds");

            store.save_session(&session_in(&holder, "a", ended)).await.expect("the session ends");
            let live = store.live_claims(&roundtable_store::now()).await.expect("live");
            assert!(live.iter().all(|c| c.session_id != holder), "{ended}: {live:?}");
            let granted = store.acquire_claims("b", &other, &readme, &hour).await.expect("claim");
            assert_eq!(
                granted.granted, readme,
                "{ended}: the ended session's claim was not released but holds nothing"
            );
            store.release_claims(&other, &[]).await.expect("release");
        }
        // No record at all (a pruned session, a row written by hand): not live either.
        store.acquire_claims("a", "nobody", &readme, &hour).await.expect("claim");
        assert!(store.live_claims(&roundtable_store::now()).await.expect("live").is_empty());
    }
}

/// A session's notes stop at its quota, in count and in bytes; another session has its own.
#[tokio::test]
async fn notes_past_a_sessions_quota_are_refused() {
    for support::Scratch { store, .. } in support::each_store().await {
        store.append_note("fix", "sess-a", "0123456789", QUOTA).await.expect("note").expect("10 of 16 bytes");
        let over = store.append_note("fix", "sess-a", "0123456", QUOTA).await.expect("note");
        assert_eq!(over, Err(NoteRefused::Bytes { note: 7, total: 17, limit: 16 }));
        store.append_note("fix", "sess-a", "a", QUOTA).await.expect("note").expect("2 of 3 notes");
        store.append_note("fix", "sess-a", "b", QUOTA).await.expect("note").expect("3 of 3 notes");
        let over = store.append_note("fix", "sess-a", "c", QUOTA).await.expect("note");
        assert_eq!(over, Err(NoteRefused::Count { limit: 3 }));
        store.append_note("fix", "sess-b", "c", QUOTA).await.expect("note").expect("a quota per session");
        assert_eq!(store.notes("fix").await.expect("notes").len(), 4);
    }
}

/// A disable sees the adapter's running session and drains; a session start sees the disable
/// and is refused; the drain completes when the last session ends.
#[tokio::test]
async fn a_disable_drains_and_refuses_new_sessions_until_enabled() {
    use roundtable_specs::session::SessionPhase;
    use roundtable_store::{OverrideState, SessionRecord, StartRefused};
    for support::Scratch { store, .. } in support::each_store().await {
        let session = |id: &str| SessionRecord {
            id: id.into(),
            assignment: "a".into(),
            adapter: "codex".into(),
            phase: SessionPhase::Running,
            ..SessionRecord::default()
        };
        store.start_session(&session("s1"), None).await.expect("starts while enabled");
        let change = store.set_agent_enabled("codex", false, "by a test").await.expect("disable");
        assert_eq!((change.before, change.after.state), (None, OverrideState::Draining));
        assert_eq!(change.active_sessions, ["s1"]);
        let refused = store.start_session(&session("s2"), None).await.expect_err("draining refuses");
        assert!(matches!(refused, StartRefused::Overridden { state: OverrideState::Draining, .. }), "{refused}");
        assert!(store.session("s2").await.expect("read").is_none(), "nothing recorded");

        let still = store.complete_drain("codex").await.expect("drain").expect("an override");
        assert_eq!(still.state, OverrideState::Draining, "s1 still runs");
        let mut ended = session("s1");
        ended.phase = SessionPhase::Succeeded;
        store.save_session(&ended).await.expect("end");
        let done = store.complete_drain("codex").await.expect("drain").expect("an override");
        assert_eq!(done.state, OverrideState::Disabled);
        assert!(store.start_session(&session("s3"), None).await.is_err(), "disabled refuses");
        // Another adapter is not concerned.
        store
            .start_session(&SessionRecord { adapter: "claude".into(), ..session("s4") }, None)
            .await
            .expect("other adapter");

        let enabled = store.set_agent_enabled("codex", true, "by a test").await.expect("enable");
        assert_eq!((enabled.before, enabled.after.state), (Some(OverrideState::Disabled), OverrideState::Enabled));
        store.start_session(&session("s5"), None).await.expect("enabled again");
    }
}

/// A key claimed once replays its stored response; another request under it is refused; a
/// released key acts again.
#[tokio::test]
async fn idempotency_keys_replay_refuse_reuse_and_release() {
    use roundtable_store::idempotency::{Claimed, StoredResponse};
    for support::Scratch { store, .. } in support::each_store().await {
        assert_eq!(store.claim_idempotency_key("k", "h1").await.expect("claim"), Claimed::New);
        assert_eq!(store.claim_idempotency_key("k", "h1").await.expect("claim"), Claimed::InFlight);
        let response =
            StoredResponse { status: 201, content_type: "application/json".into(), body: b"{\"x\":1}\n".to_vec() };
        store.finish_idempotent("k", &response).await.expect("finish");
        assert_eq!(store.claim_idempotency_key("k", "h1").await.expect("claim"), Claimed::Replay(response));
        assert_eq!(store.claim_idempotency_key("k", "h2").await.expect("claim"), Claimed::Reused);
        assert_eq!(store.claim_idempotency_key("j", "h1").await.expect("claim"), Claimed::New);
        store.release_idempotency_key("j").await.expect("release");
        assert_eq!(store.claim_idempotency_key("j", "h1").await.expect("claim"), Claimed::New);
    }
}

/// What one reconcile reads, in one round trip: the same as the reads one by one, and each
/// statement or transaction counted once.
#[tokio::test]
async fn observe_reads_an_assignment_and_its_adapter_in_one_round_trip() {
    use roundtable_specs::session::SessionPhase::Succeeded;
    use roundtable_store::{ExecutionReads, Identity, ProposalRecord, Reads};
    for support::Scratch { store, .. } in support::each_store().await {
        let task = ObjectKey::new(Kind::Assignment, "fix");
        let agent = ObjectKey::new(Kind::Adapter, "codex");
        let record = store.record_spec(&snapshot(&task, "d1", Some("r1"))).await.expect("record");
        store.record_spec(&snapshot(&agent, "d1", None)).await.expect("record");
        let ready = Condition {
            type_: "Ready".into(),
            status: ConditionStatus::False,
            reason: "Disabled".into(),
            message: "off".into(),
            last_transition_time: String::new(),
            observed_generation: 1,
        };
        store.set_condition(&agent, &ready).await.expect("condition");
        store
            .set_condition(&task, &Condition { reason: "AdapterNotReady".into(), ..ready.clone() })
            .await
            .expect("set");
        store.set_agent_enabled("codex", false, "by a test").await.expect("override");
        let identity = Identity { name: "fix".into(), uid: record.uid.clone() };
        store.claim_execution(&identity, "me", None, std::time::Duration::from_secs(60)).await.expect("claim");
        let mut session = session_in("sess-1", "fix", Succeeded);
        session.assignment_uid = Some(record.uid.clone());
        session.execution_generation = 1;
        store.save_session(&session).await.expect("session");
        let proposal = ProposalRecord {
            id: "prop-1".into(),
            session_id: "sess-1".into(),
            assignment: "fix".into(),
            assignment_uid: Some(record.uid.clone()),
            execution_generation: 1,
            ..ProposalRecord::default()
        };
        assert!(store.insert_proposal(&proposal).await.expect("proposal"));

        let before = store.round_trips();
        let reads = Reads {
            key: &task,
            adapter: Some("codex"),
            execution: Some(ExecutionReads { uid: &record.uid, generation: 1 }),
        };
        let found = store.observe(reads).await.expect("observe");
        assert_eq!(store.round_trips(), before + 1, "one round trip");
        assert_eq!(found.record, store.object(&task).await.expect("read"));
        assert_eq!(found.conditions, store.conditions(&task).await.expect("read"));
        let adapter = found.adapter.expect("the adapter");
        assert_eq!(adapter.record, store.object(&agent).await.expect("read"));
        assert_eq!(adapter.conditions, store.conditions(&agent).await.expect("read"));
        assert_eq!(adapter.agent_override, store.agent_override("codex").await.expect("read"));
        let execution = found.execution.expect("the execution");
        let lease = execution.lease.expect("the lease");
        assert_eq!((lease.holder.as_str(), lease.fence), ("me", 1));
        assert_eq!(execution.sessions, store.sessions_of(&record.uid).await.expect("read"));
        assert_eq!(execution.proposal.map(|p| p.id), Some("prop-1".to_owned()));

        // What to read beside the object can be decided from its record, in the same round trip.
        let before = store.round_trips();
        let (found, seen) = store
            .observe_with(&task, |record| {
                let further = roundtable_store::Further {
                    adapter: Some("codex".into()),
                    execution: record.map(|r| (r.uid.clone(), 1)),
                };
                (further, record.map(|r| r.generation))
            })
            .await
            .expect("observe");
        assert_eq!(store.round_trips(), before + 1, "one round trip");
        assert_eq!(seen, Some(1));
        assert_eq!(found.execution.expect("the execution").proposal.map(|p| p.id), Some("prop-1".to_owned()));
        assert!(found.adapter.expect("the adapter").agent_override.is_some());

        // An Adapter reads itself once; nothing is read of an execution it does not have.
        let before = store.round_trips();
        let found = store.observe(Reads { key: &agent, adapter: Some("codex"), execution: None }).await.expect("read");
        assert_eq!(store.round_trips(), before + 1);
        assert_eq!(found.adapter.expect("itself").record, found.record);
        assert!(found.execution.is_none());
    }
}
