//! Hostile tests of the webhook: a captured signed call replayed 300 times was accepted 300
//! times, and wrote 300 HMAC-sealed `hook.accepted` entries. Now the delivery id is acted on
//! once, the replays are answered as duplicates and fetch nothing, and signed calls reach the
//! audit chain at most once a second, counting those in between.

use std::time::{Duration, Instant};

use crate::hook::{Remote, SHARED_SECRET};

const PUSH: &str = r#"{"ref":"refs/heads/main","after":"4b825dc642cb6eb9a060e54bf8d69288fbee4904"}"#;
const DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";
const REPLAYS: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_replays_of_one_delivery_are_acted_on_once_and_cost_the_chain_a_few_entries() {
    let remote = Remote::start().await;
    let signature = roundtable_api::hook::HookSecret::from_bytes(SHARED_SECRET).signature(PUSH.as_bytes());
    let captured = [("X-Hub-Signature-256", signature.as_str()), ("X-GitHub-Delivery", DELIVERY)];

    let pushed = remote.push_adapter("two");
    let started = Instant::now();
    let first = remote.call(&captured, PUSH);
    assert_eq!(first.status, 202, "{}", first.text());
    crate::support::wait_until("the pushed commit", || remote.mirror_head().as_deref() == Some(pushed.as_str())).await;

    // Pushed after the delivery was acted on: a replay acted on again would fetch it.
    let unfetched = remote.push_adapter("three");
    for n in 1..=REPLAYS {
        let replay = remote.call(&captured, PUSH);
        assert_eq!(replay.status, 200, "replay {n}: {}", replay.text());
        let answer = replay.json();
        assert_eq!((&answer["fetch"], &answer["delivery"]), (&"duplicate".into(), &DELIVERY.into()), "replay {n}");
    }
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(remote.mirror_head().as_deref(), Some(pushed.as_str()), "a replay fetched {unfetched}");

    let entries = remote.hook_entries();
    // At most one a second, and the first call is always recorded.
    let bound = elapsed.as_secs() as usize + 2;
    assert!(!entries.is_empty() && entries.len() <= bound, "{} entries (bound {bound}): {entries:#?}", entries.len());
    assert!(entries.iter().all(|(kind, _)| kind == "hook.accepted"), "{entries:#?}");
    let (_, acted) = &entries[0];
    assert_eq!(
        (&acted["delivery"], &acted["duplicate"], &acted["fetchRequested"]),
        (&DELIVERY.into(), &false.into(), &true.into())
    );
    assert!(entries[1..].iter().all(|(_, record)| record["duplicate"] == true), "{entries:#?}");

    // One more call after the period: its entry counts every replay left unrecorded.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(remote.call(&captured, PUSH).status, 200);
    let entries = remote.hook_entries();
    let counted: u64 = entries.iter().filter_map(|(_, record)| record["unrecordedSinceLast"].as_u64()).sum();
    assert_eq!(entries.len() as u64 + counted, REPLAYS as u64 + 2, "every call recorded or counted: {entries:#?}");
    assert!(remote.chain_verifies());
}
