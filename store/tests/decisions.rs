//! An operator's decisions on every backend: an accept's claim is a compare-and-set that one
//! decider wins, only its holder can end it, a reject wins only a pending proposal, a claim
//! released after its Assignment moved on leaves the proposal superseded, and a generation that
//! reused a decided result stands as that decision.

mod support;

use roundtable_specs::delivery::Decision;
use roundtable_specs::session::{ProposalState, ReusedRun, SessionPhase};
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::{ClaimOutcome, ProposalRecord, SessionRecord, SpecSnapshot, Store};

fn snapshot<'a>(key: &'a ObjectKey, execution: &'a str) -> SpecSnapshot<'a> {
    SpecSnapshot {
        key,
        spec_digest: execution,
        execution_digest: Some(execution),
        spec_json: "{}",
        source_file: "a.yaml",
    }
}

fn proposal(id: &str, uid: &str, generation: i64) -> ProposalRecord {
    ProposalRecord {
        id: id.into(),
        session_id: format!("s-{id}"),
        assignment: "task".into(),
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

fn decision(reason: &str) -> Decision {
    Decision { at: "2026-12-07T00:00:00Z".into(), by: "olive".into(), reason: reason.into(), ..Decision::default() }
}

#[tokio::test]
async fn one_decider_wins_and_only_the_claims_holder_ends_it() {
    for support::Scratch { store, .. } in support::each_store().await {
        let key = ObjectKey::new(Kind::Assignment, "task");
        let uid = store.record_spec(&snapshot(&key, "run-a")).await.expect("record").uid;
        assert!(store.insert_proposal(&proposal("p1", &uid, 1)).await.expect("insert"));

        assert_eq!(store.claim_accept("p1", "one", "{}").await.expect("claim"), ClaimOutcome::Won);
        for lost in [store.claim_accept("p1", "two", "{}").await, store.reject_pending("p1", &decision("no")).await] {
            assert_eq!(lost.expect("cas"), ClaimOutcome::Lost(Some(ProposalState::Accepting)));
        }
        let claim = store.accept_claim("p1").await.expect("read").expect("held");
        assert_eq!((claim.holder.as_str(), claim.detail.as_str()), ("one", "{}"));
        assert_eq!(store.accept_claims().await.expect("list").len(), 1);
        assert!(!store.release_accept("p1", "two").await.expect("release"), "not its claim");
        assert!(!store.finish_accept("p1", "two", &decision(""), "{}").await.expect("finish"), "not its claim");
        assert!(store.release_accept("p1", "one").await.expect("release"));
        assert_eq!(state_of(&store, "p1").await, ProposalState::Pending);
        assert_eq!(store.accept_claim("p1").await.expect("read"), None);

        assert_eq!(store.claim_accept("p1", "three", "{}").await.expect("claim"), ClaimOutcome::Won);
        assert!(store.finish_accept("p1", "three", &decision(""), "{\"payload\":\"\"}").await.expect("finish"));
        let accepted = store.proposal_by_id("p1").await.expect("read").expect("p1");
        assert_eq!(
            (accepted.state, accepted.provenance.as_deref()),
            (ProposalState::Accepted, Some("{\"payload\":\"\"}"))
        );
        assert_eq!(
            store.reject_pending("p1", &decision("late")).await.expect("cas"),
            ClaimOutcome::Lost(Some(ProposalState::Accepted))
        );
        assert_eq!(store.claim_accept("nope", "x", "{}").await.expect("claim"), ClaimOutcome::Lost(None));

        let other = ObjectKey::new(Kind::Assignment, "other");
        let other = store.record_spec(&snapshot(&other, "run-o")).await.expect("record").uid;
        assert!(store.insert_proposal(&proposal("p2", &other, 1)).await.expect("insert"));
        assert_eq!(store.reject_pending("p2", &decision("no")).await.expect("cas"), ClaimOutcome::Won);
        assert_eq!(
            store.claim_accept("p2", "four", "{}").await.expect("claim"),
            ClaimOutcome::Lost(Some(ProposalState::Rejected))
        );
        store.close().await;
    }
}

#[tokio::test]
async fn a_claim_released_after_the_assignment_moved_on_leaves_the_proposal_superseded() {
    for support::Scratch { store, .. } in support::each_store().await {
        let key = ObjectKey::new(Kind::Assignment, "task");
        let uid = store.record_spec(&snapshot(&key, "run-a")).await.expect("record").uid;
        assert!(store.insert_proposal(&proposal("p1", &uid, 1)).await.expect("insert"));
        assert_eq!(store.claim_accept("p1", "one", "{}").await.expect("claim"), ClaimOutcome::Won);
        store.record_spec(&snapshot(&key, "run-b")).await.expect("generation 2");
        assert_eq!(state_of(&store, "p1").await, ProposalState::Accepting, "a held claim is not superseded");
        assert!(store.release_accept("p1", "one").await.expect("release"));
        assert_eq!(state_of(&store, "p1").await, ProposalState::Superseded);
        store.close().await;
    }
}

#[tokio::test]
async fn a_generation_that_reused_a_decided_result_stands_as_that_decision() {
    for support::Scratch { store, .. } in support::each_store().await {
        let key = ObjectKey::new(Kind::Assignment, "task");
        let uid = store.record_spec(&snapshot(&key, "run-a")).await.expect("record").uid;
        assert!(store.insert_proposal(&proposal("p1", &uid, 1)).await.expect("insert"));
        assert_eq!(store.reject_pending("p1", &decision("no")).await.expect("cas"), ClaimOutcome::Won);
        let mut reused = SessionRecord {
            id: "s3".into(),
            assignment: "task".into(),
            assignment_uid: Some(uid.clone()),
            execution_generation: 3,
            attempt: 1,
            adapter: "generic".into(),
            phase: SessionPhase::Succeeded,
            created_at: roundtable_store::now(),
            finished_at: Some(roundtable_store::now()),
            ..SessionRecord::default()
        };
        reused.detail.reused =
            Some(ReusedRun { session: "s-p1".into(), execution_generation: 1, proposal: Some("p1".into()) });
        store.save_session(&reused).await.expect("save");
        let stands = store.proposal_for(&uid, 3).await.expect("read").expect("the decided proposal");
        assert_eq!((stands.id.as_str(), stands.state), ("p1", ProposalState::Rejected));
        assert_eq!(store.proposals().await.expect("list").len(), 1, "no copy");

        // A reuse of an undecided proposal has its own copy, and nothing else stands for it.
        assert!(store.insert_proposal(&proposal("p4", &uid, 4)).await.expect("insert"));
        reused.id = "s5".into();
        reused.execution_generation = 5;
        reused.detail.reused =
            Some(ReusedRun { session: "s-p4".into(), execution_generation: 4, proposal: Some("p4".into()) });
        store.save_session(&reused).await.expect("save");
        assert_eq!(store.proposal_for(&uid, 5).await.expect("read"), None, "pending is never borrowed");
        store.close().await;
    }
}
