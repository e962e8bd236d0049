//! The audit chain on a real SQLite file and a real PostgreSQL database: every kind of tampering is found at the right
//! sequence number, concurrent writers never fork it, and an exported slice verifies offline.

mod support;

use roundtable_specs::events::Reason;
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::audit::{
    AuditKey, AuditedEntry, ChainBreak, KEY_REPLACED, KeyChoice, KeyError, RECEIPT_ENTRY, Unverified, verify_rows,
};
use roundtable_store::{NewEvent, Severity, Store};
use serde_json::json;
use support::Backend;

struct Chain {
    scratch: support::Scratch,
    store: Store,
    key: AuditKey,
}

async fn chain_of(backend: Backend, entries: usize) -> Chain {
    let scratch = backend.fresh().await;
    let store = scratch.store.clone();
    let key = AuditKey::create(&scratch.dir.path().join("keys/audit.key")).expect("key");
    for n in 1..=entries {
        let entry =
            AuditedEntry { kind: "session.ended", subject: "s1", record: json!({"n": n, "phase": "Succeeded"}) };
        store.append_audited(&key, &entry).await.expect("append");
    }
    Chain { scratch, store, key }
}

impl Chain {
    async fn tamper(&self, sql: &'static str) {
        self.scratch.tamper(sql).await;
    }

    async fn verify(&self) -> Result<i64, ChainBreak> {
        self.store.verify_chain(&self.key, None, None).await.expect("read").map(|v| v.head.map_or(0, |h| h.seq))
    }
}

#[tokio::test]
async fn an_intact_chain_verifies_and_its_head_is_checkpointed_beside_the_key() {
    for backend in support::backends() {
        let chain = chain_of(backend, 5).await;
        assert_eq!(chain.verify().await, Ok(5));
        assert_eq!(chain.key.read_head().map(|h| h.seq), Some(5));
        let key_mode =
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(chain.key.path()).expect("key").permissions());
        assert_eq!(key_mode & 0o777, 0o600);
        assert_eq!(
            chain.store.verify_chain(&chain.key, Some(2), Some(4)).await.expect("read").map(|v| v.head.map(|h| h.seq)),
            Ok(Some(4))
        );
    }
}

#[tokio::test]
async fn each_kind_of_tampering_names_the_first_bad_entry() {
    for backend in support::backends() {
        let edited = chain_of(backend, 5).await;
        edited.tamper("UPDATE events SET record = replace(record, 'Succeeded', 'Failed') WHERE seq = 3").await;
        assert_eq!(edited.verify().await, Err(ChainBreak::BadMac { seq: 3 }));

        let deleted = chain_of(backend, 5).await;
        deleted.tamper("DELETE FROM events WHERE seq = 3").await;
        assert_eq!(deleted.verify().await, Err(ChainBreak::BadLink { seq: 4, previous: 2 }));

        let inserted = chain_of(backend, 5).await;
        inserted.tamper("UPDATE events SET seq = -seq - 1 WHERE seq >= 3").await;
        inserted.tamper("UPDATE events SET seq = -seq WHERE seq < 0").await;
        inserted
            .tamper("INSERT INTO events (at, kind, name, severity, reason, message, record, audited, seq, prev_mac, mac) SELECT at, kind, name, severity, reason, message, record, 1, 3, mac, mac FROM events WHERE seq = 2")
            .await;
        assert!(matches!(inserted.verify().await, Err(ChainBreak::BadMac { seq: 3 })), "{:?}", inserted.verify().await);

        let reordered = chain_of(backend, 5).await;
        reordered.tamper("UPDATE events SET seq = -1 WHERE seq = 2").await;
        reordered.tamper("UPDATE events SET seq = 2 WHERE seq = 3").await;
        reordered.tamper("UPDATE events SET seq = 3 WHERE seq = -1").await;
        assert_eq!(reordered.verify().await, Err(ChainBreak::BadLink { seq: 2, previous: 1 }));

        let truncated = chain_of(backend, 5).await;
        truncated.tamper("DELETE FROM events WHERE seq >= 4").await;
        assert_eq!(truncated.verify().await, Err(ChainBreak::Truncated { seq: 4, last: 3, seq_head: 5 }));
    }
}

#[tokio::test]
async fn a_checkpoint_of_another_chain_is_named_as_such_not_as_truncation() {
    for backend in support::backends() {
        let chain = chain_of(backend, 5).await;
        // The state is recreated while the key (and its checkpoint) are kept.
        let fresh = Store::connect(&backend.new_url(chain.scratch.dir.path()).await).await.expect("store");
        let entry = AuditedEntry { kind: "session.ended", subject: "s9", record: json!({}) };
        let head = fresh.append_audited(&chain.key, &entry).await.expect("append");
        assert_eq!(head.seq, 1);
        // The old chain's checkpoint was overwritten by the new chain's first append: the old store
        // now reads as belonging to another chain.
        assert_eq!(chain.verify().await, Err(ChainBreak::OtherChain));
        assert_eq!(
            fresh.verify_chain(&chain.key, None, None).await.expect("read").map(|v| v.head.map(|h| h.seq)),
            Ok(Some(1))
        );
    }
}

#[tokio::test]
async fn two_writers_on_one_database_never_fork_the_chain() {
    for backend in support::backends() {
        let chain = chain_of(backend, 0).await;
        let other = Store::connect(&chain.scratch.url).await.expect("second handle");
        let key_path = chain.key.path().to_owned();
        let write = |store: Store, who: &'static str| {
            let key_path = key_path.clone();
            tokio::spawn(async move {
                let key = AuditKey::load(&key_path).expect("key");
                for n in 0..40 {
                    let entry = AuditedEntry { kind: "test.append", subject: who, record: json!({"n": n}) };
                    store.append_audited(&key, &entry).await.expect("append");
                }
            })
        };
        let (a, b) = (write(chain.store.clone(), "daemon"), write(other, "cli"));
        a.await.expect("daemon");
        b.await.expect("cli");
        assert_eq!(chain.verify().await, Ok(80));
    }
}

#[tokio::test]
async fn an_exported_slice_verifies_offline_with_the_key_and_fails_with_another() {
    for backend in support::backends() {
        let chain = chain_of(backend, 6).await;
        let slice = chain.store.chain(3, 5).await.expect("slice");
        let start = slice[0].prev_mac.clone();
        assert_eq!(verify_rows(&chain.key, &slice, start.clone(), None).map(|v| v.head.map(|h| h.seq)), Ok(Some(5)));
        let other = AuditKey::create(&chain.scratch.dir.path().join("other.key")).expect("other key");
        assert_eq!(verify_rows(&other, &slice, start, None), Err(ChainBreak::BadMac { seq: 3 }));
    }
}

#[test]
fn a_key_others_can_read_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.key");
    std::fs::write(&path, format!("{}\n", "ab".repeat(32))).expect("write");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).expect("chmod");
    let error = AuditKey::load(&path).expect_err("refused");
    assert!(error.to_string().contains("chmod 600"), "{error}");
}

#[tokio::test]
async fn an_edited_event_column_is_caught_and_readers_show_what_the_mac_covers() {
    for backend in support::backends() {
        let chain = chain_of(backend, 0).await;
        let object = ObjectKey::new(Kind::Adapter, "codex");
        let spec = roundtable_store::SpecSnapshot {
            key: &object,
            spec_digest: "d",
            execution_digest: None,
            spec_json: "{}",
            source_file: "a.yaml",
        };
        let uid = chain.store.record_spec(&spec).await.expect("record").uid;
        let event = NewEvent {
            object: &object,
            severity: Severity::Warning,
            reason: Reason::Ready("ImageMissing".into()),
            message: "pull the image",
            record: None,
        };
        chain.store.append_audited_events(&chain.key, &[event]).await.expect("append");
        assert_eq!(chain.verify().await, Ok(1));
        chain.tamper("UPDATE events SET reason = 'AllClear', message = 'forged text' WHERE seq = 1").await;
        assert_eq!(chain.verify().await, Err(ChainBreak::ColumnEdited { seq: 1, column: "reason" }));
        for shown in [
            chain.store.events(&object, &uid, 10).await.expect("events"),
            chain.store.recent_events(None, 10).await.expect("events"),
        ] {
            assert_eq!(shown.len(), 1);
            assert_eq!((shown[0].reason.as_str(), shown[0].message.as_str()), ("ImageMissing", "pull the image"));
            assert_eq!(shown[0].severity, "Warning");
        }
        chain.tamper("UPDATE events SET reason = 'ImageMissing', severity = 'Normal' WHERE seq = 1").await;
        assert_eq!(chain.verify().await, Err(ChainBreak::ColumnEdited { seq: 1, column: "severity" }));
    }
}

#[tokio::test]
async fn a_lost_key_is_refused_and_replaced_only_when_the_operator_asks() {
    for backend in support::backends() {
        let chain = chain_of(backend, 3).await;
        let path = chain.key.path().to_owned();
        let old_head = chain.key.read_head().expect("head");
        std::fs::remove_file(&path).expect("lose the key");

        let refused = chain.store.audit_key(&path, KeyChoice::Existing).await.expect_err("refused");
        assert!(matches!(refused, KeyError::Lost { entries: 3, .. }), "{refused}");
        let message = refused.to_string();
        assert!(message.contains(&path.display().to_string()) && message.contains("--new-audit-key"), "{message}");
        assert!(!path.exists(), "no key was created in its place");

        let key = chain.store.audit_key(&path, KeyChoice::ReplaceLost).await.expect("replaced");
        let replaced = chain.store.chain(4, 4).await.expect("chain").pop().expect("entry 4");
        let entry: serde_json::Value = serde_json::from_str(&replaced.entry).expect("json");
        assert_eq!(entry["kind"], KEY_REPLACED);
        assert_eq!(entry["record"]["previousHead"], json!({"seq": 3, "mac": old_head.mac}));
        let after = AuditedEntry { kind: "session.ended", subject: "s2", record: json!({}) };
        chain.store.append_audited(&key, &after).await.expect("append");

        let verified = chain.store.verify_chain(&key, None, None).await.expect("read").expect("verifies");
        assert_eq!(verified.head.map(|h| h.seq), Some(5));
        assert_eq!(verified.unverified, Some(Unverified { first: 1, last: 3, replaced_at: 4 }));
        // A range before the replacement verifies nothing.
        let early = chain.store.verify_chain(&key, Some(1), Some(2)).await.expect("read").expect("linked");
        assert_eq!((early.head, early.unverified), (None, Some(Unverified { first: 1, last: 2, replaced_at: 4 })));
        // What follows the replacement is still checked, and so are the old entries' links.
        chain.tamper("UPDATE events SET record = replace(record, 's2', 's3') WHERE seq = 5").await;
        assert_eq!(chain.store.verify_chain(&key, None, None).await.expect("read"), Err(ChainBreak::BadMac { seq: 5 }));
        chain.tamper("UPDATE events SET record = replace(record, 's3', 's2') WHERE seq = 5").await;
        chain.tamper("DELETE FROM events WHERE seq = 2").await;
        assert_eq!(
            chain.store.verify_chain(&key, None, None).await.expect("read"),
            Err(ChainBreak::BadLink { seq: 3, previous: 1 })
        );

        let kept = chain.store.audit_key(&path, KeyChoice::ReplaceLost).await.expect_err("the key exists");
        assert!(matches!(kept, KeyError::NotLost { .. }), "{kept}");
    }
}

#[tokio::test]
async fn the_first_key_of_an_empty_chain_is_created() {
    for backend in support::backends() {
        let scratch = backend.fresh().await;
        let path = scratch.dir.path().join("keys/project.key");
        scratch.store.audit_key(&path, KeyChoice::Existing).await.expect("created");
        assert!(path.is_file());
        scratch.store.audit_key(&path, KeyChoice::Existing).await.expect("loaded");
    }
}

#[tokio::test]
async fn controllers_creating_the_first_key_at_once_all_get_the_one_key() {
    // Controllers of one shared store start together on an empty chain: each sees no key and
    // an empty chain, and each must end up with the same key, not a refusal.
    for backend in support::backends() {
        let scratch = backend.fresh().await;
        let path = scratch.dir.path().join("keys/project.key");
        let tries: Vec<_> = (0..8)
            .map(|_| {
                let (store, path) = (scratch.store.clone(), path.clone());
                tokio::spawn(async move { store.audit_key(&path, KeyChoice::Existing).await })
            })
            .collect();
        let mut macs = std::collections::BTreeSet::new();
        for try_ in tries {
            macs.insert(try_.await.expect("joined").expect("a key").mac("", "entry"));
        }
        assert_eq!(macs.len(), 1, "one key for all: {macs:?}");
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().expect("folder"))
            .expect("keys folder")
            .filter_map(Result::ok)
            .map(|entry| entry.file_name())
            .collect();
        assert_eq!(leftovers, [std::ffi::OsString::from("project.key")], "no staged file is left");
    }
}

#[tokio::test]
async fn a_receipt_is_anchored_only_by_its_own_entry_verified_under_the_key() {
    for backend in support::backends() {
        let chain = chain_of(backend, 2).await;
        let id = "a".repeat(64);
        let receipt = |id: &str| AuditedEntry {
            kind: RECEIPT_ENTRY,
            subject: "Adapter/codex",
            record: json!({"adapter": "codex", "receipt": id, "verdict": "admit"}),
        };
        assert_eq!(chain.store.receipt_anchor(&chain.key, &id).await.expect("read"), None, "nothing sealed yet");
        let head = chain.store.append_audited(&chain.key, &receipt(&id)).await.expect("append");
        let anchor = chain.store.receipt_anchor(&chain.key, &id).await.expect("read").expect("anchored");
        assert_eq!(anchor.seq, head.seq);
        let entry = chain.store.chain(head.seq, head.seq).await.expect("chain").pop().expect("entry");
        let at: serde_json::Value = serde_json::from_str(&entry.entry).expect("json");
        assert_eq!(Some(anchor.at.as_str()), at["at"].as_str(), "the time the chain recorded");

        // Another id, a prefix of it, or a LIKE wildcard anchors nothing.
        for other in ["b".repeat(64), "a".repeat(63), "%".into(), "a_".repeat(32)] {
            assert_eq!(chain.store.receipt_anchor(&chain.key, &other).await.expect("read"), None, "{other}");
        }
        // The same record under another kind is not an anchor.
        let gate = AuditedEntry { kind: "admission.gate", ..receipt("c") };
        chain.store.append_audited(&chain.key, &gate).await.expect("append");
        assert_eq!(chain.store.receipt_anchor(&chain.key, "c").await.expect("read"), None);

        // Another project's key does not verify this chain's entry.
        let other_key = AuditKey::create(&chain.scratch.dir.path().join("keys/other.key")).expect("key");
        assert_eq!(chain.store.receipt_anchor(&other_key, &id).await.expect("read"), None);

        // A row written without the key (copied in with a forged MAC) anchors nothing.
        let forged = "d".repeat(64);
        chain
            .tamper(
                "INSERT INTO events (at, kind, name, severity, reason, message, record, audited, seq, prev_mac, mac) \
                 SELECT at, kind, name, severity, reason, message, replace(record, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd'), 1, 100, prev_mac, mac FROM events WHERE seq = 3",
            )
            .await;
        assert_eq!(chain.store.receipt_anchor(&chain.key, &forged).await.expect("read"), None);
    }
}
