//! Controllers and execution leases on both backends: a claim is won by exactly one contender,
//! a lease that moved on fences every write of its former holder, an expired or released lease
//! can be taken over, and a stale view of the lease claims nothing.

mod support;

use std::time::Duration;

use roundtable_store::{Registration, SessionRecord, Store};

const TTL: Duration = Duration::from_secs(30);

async fn register(store: &Store, id: &str, ttl: Duration) {
    let me = Registration { id, host: "test", pid: 1, checkout: "/checkout" };
    store.register_controller(&me, ttl).await.expect("register");
}

fn session(id: &str) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        assignment: "fix".into(),
        execution_generation: 1,
        attempt: 1,
        controller_run: "a".into(),
        adapter: "generic".into(),
        message: "queued".into(),
        ..SessionRecord::default()
    }
}

#[tokio::test]
async fn of_many_contenders_for_one_execution_exactly_one_wins() {
    for support::Scratch { store, url, .. } in support::each_store().await {
        let mut contenders = Vec::new();
        for n in 0..8 {
            let id = format!("c{n}");
            // Each contender on its own connection pool, as separate controllers would be.
            let own = Store::connect(&url).await.expect("second handle");
            register(&own, &id, TTL).await;
            contenders.push(tokio::spawn(async move {
                let seen = own.execution_lease("fix").await.expect("read");
                own.claim_execution(&named("fix"), &id, seen.as_ref(), TTL).await.expect("claim")
            }));
        }
        let mut won = Vec::new();
        for contender in contenders {
            won.extend(contender.await.expect("task"));
        }
        assert_eq!(won.len(), 1, "{:?}: winners {won:?}", store.url());
        let lease = store.execution_lease("fix").await.expect("read").expect("a lease");
        assert_eq!((lease.holder.as_str(), lease.fence), (won[0].holder.as_str(), won[0].fence));
        assert!(lease.is_held(&roundtable_store::now()));
    }
}

#[tokio::test]
async fn a_taken_over_lease_fences_its_former_holder() {
    for support::Scratch { store, .. } in support::each_store().await {
        register(&store, "a", Duration::from_millis(300)).await;
        register(&store, "b", TTL).await;
        let a = store.claim_execution(&named("fix"), "a", None, TTL).await.expect("claim").expect("a wins");
        store.start_session(&session("s1"), Some(&a)).await.expect("a records its session");
        // While a heartbeats, b cannot take it.
        let seen = store.execution_lease("fix").await.expect("read");
        assert!(store.claim_execution(&named("fix"), "b", seen.as_ref(), TTL).await.expect("claim").is_none());
        // a stops heartbeating; its registration expires, and b takes over.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let seen = store.execution_lease("fix").await.expect("read").expect("lease");
        assert!(!seen.is_held(&roundtable_store::now()), "{seen:?}");
        let b =
            store.claim_execution(&named("fix"), "b", Some(&seen), TTL).await.expect("claim").expect("b takes over");
        assert!(b.fence > a.fence);
        // a wakes up: nothing it writes about the execution lands.
        let mut finished = session("s1");
        finished.phase = roundtable_specs::session::SessionPhase::Succeeded;
        let refused = store.save_session_fenced(&finished, &a).await.expect("store");
        assert!(refused.is_err(), "the stale holder's write was refused");
        assert_eq!(
            store.session("s1").await.expect("read").expect("s1").phase,
            roundtable_specs::session::SessionPhase::Queued
        );
        assert!(store.start_session(&session("s9"), Some(&a)).await.is_err());
        assert!(store.controller_heartbeat("a", TTL).await.expect("heartbeat").is_empty(), "a holds nothing now");
        // b's writes land, and its release lets the next claim in only with a fresh view.
        store.save_session_fenced(&finished, &b).await.expect("store").expect("b records");
        assert!(store.release_execution(&b).await.expect("release"));
        assert!(store.save_session_fenced(&finished, &b).await.expect("store").is_err(), "released: fenced too");
        assert!(
            store.claim_execution(&named("fix"), "a", Some(&seen), TTL).await.expect("claim").is_none(),
            "stale view"
        );
        let fresh = store.execution_lease("fix").await.expect("read");
        assert!(store.claim_execution(&named("fix"), "a", fresh.as_ref(), TTL).await.expect("claim").is_some());
    }
}

#[tokio::test]
async fn a_stopped_controller_releases_at_once_and_is_listed_as_stopped() {
    for support::Scratch { store, .. } in support::each_store().await {
        register(&store, "a", TTL).await;
        register(&store, "b", TTL).await;
        store.claim_execution(&named("fix"), "a", None, TTL).await.expect("claim").expect("a wins");
        assert_eq!(store.controller_heartbeat("a", TTL).await.expect("heartbeat"), vec![("fix".to_owned(), 1)]);
        store.deregister_controller("a").await.expect("stop");
        let seen = store.execution_lease("fix").await.expect("read").expect("lease");
        assert!(!seen.is_held(&roundtable_store::now()));
        assert!(store.claim_execution(&named("fix"), "b", Some(&seen), TTL).await.expect("claim").is_some());
        let listed = store.controllers().await.expect("list");
        let at = roundtable_store::now();
        assert_eq!(
            listed.iter().map(|c| (c.id.as_str(), c.is_live(&at))).collect::<Vec<_>>(),
            [("b", true), ("a", false)]
        );
        // Old registrations are forgotten; live ones stay.
        let cutoff = roundtable_store::later(Duration::from_secs(1));
        assert_eq!(store.forget_controllers_before(&cutoff).await.expect("forget"), 1);
        assert_eq!(store.controllers().await.expect("list").len(), 1);
    }
}

/// An Assignment's identity whose uid is its name (leases are keyed by uid).
fn named(name: &str) -> roundtable_store::Identity {
    roundtable_store::Identity { name: name.into(), uid: name.into() }
}
