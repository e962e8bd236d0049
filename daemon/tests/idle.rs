//! An idle daemon asks its store nothing: with 10,000 objects in the idle shapes (suspended,
//! waiting for a disabled Adapter, finished, failed), once the first pass has reconciled them and
//! the Adapters have woken the Assignments naming them, no reconcile runs and no store round
//! trip is made until something changes or the periodic resync comes. Runs the daemon's loop and
//! reconciler in process, over a real SQLite store, with no engine.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use roundtable_daemon::{DaemonConfig, object_reconciler, run_with};
use roundtable_execution::{ExecutionConfig, ExecutionManager};
use roundtable_specs::session::{SessionCause, SessionPhase};
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::{SessionRecord, Store};

const ADAPTERS: usize = 2_000;
/// Assignments per shape; four shapes.
const PER_SHAPE: usize = 2_000;
const SHAPES: [&str; 4] = ["suspended", "waiting", "finished", "failed"];
const API: &str = "apiVersion: roundtable.dev/v1alpha1";

/// The spec files: disabled Adapters, then Assignments naming them, 100 objects per file.
fn write_specs(dir: &std::path::Path) {
    let mut docs: Vec<String> = (0..ADAPTERS)
        .map(|i| {
            format!(
                "{API}\nkind: Adapter\nmetadata: {{name: agent-{i:05}}}\nspec: {{command: agent, enabled: false}}\n"
            )
        })
        .collect();
    for (s, shape) in SHAPES.iter().enumerate() {
        for i in 0..PER_SHAPE {
            let suspend = *shape == "suspended";
            docs.push(format!(
                "{API}\nkind: Assignment\nmetadata: {{name: {shape}-{i:05}}}\nspec:\n  adapter: agent-{:05}\n  task: {{id: T{i}, prompt: p}}\n  readablePaths: [README.md]\n  suspend: {suspend}\n",
                (s * PER_SHAPE + i) % ADAPTERS
            ));
        }
    }
    for (n, chunk) in docs.chunks(100).enumerate() {
        std::fs::write(dir.join(format!("objects-{n:04}.yaml")), chunk.join("---\n")).expect("write specs");
    }
}

/// A finished session of an earlier controller run for each finished and failed Assignment.
async fn record_sessions(store: &Store) {
    for shape in ["finished", "failed"] {
        for i in 0..PER_SHAPE {
            let name = format!("{shape}-{i:05}");
            let key = ObjectKey::new(Kind::Assignment, name.clone());
            let record = store.object(&key).await.expect("read").expect("recorded by the first sync");
            let (phase, cause) = match shape {
                "finished" => (SessionPhase::Succeeded, None),
                _ => (SessionPhase::Failed, Some(SessionCause::Exited)),
            };
            let session = SessionRecord {
                id: format!("session-{name}"),
                assignment: name,
                assignment_uid: Some(record.uid),
                execution_generation: 1,
                attempt: 1,
                controller_run: "an-earlier-run".into(),
                adapter: "agent".into(),
                phase,
                cause,
                message: "done".into(),
                finished_at: Some(roundtable_store::now()),
                ..SessionRecord::default()
            };
            store.save_session(&session).await.expect("session");
        }
    }
}

fn execution_config(project: &roundtable_source::Project, base: &std::path::Path) -> ExecutionConfig {
    ExecutionConfig {
        max_executions: 4,
        project: project.clone(),
        execution_root: base.join("executions"),
        binary: base.join("roundtable"),
        controller_run: "idle-run".into(),
        socket_root: base.join("sockets"),
        secrets: HashMap::new(),
        egress: roundtable_execution::egress::EgressOptions::default(),
        audit_key: None,
        gates: false,
        lease_ttl: Duration::from_secs(3600),
    }
}

/// Waits until `store`'s round trips stop moving for two seconds in a row; panics, naming how
/// many the last second made, if that never happens within `within`.
async fn quiet(store: &Store, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    let (mut last, mut still) = (store.round_trips(), 0);
    while still < 2 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = store.round_trips();
        assert!(
            tokio::time::Instant::now() < deadline,
            "the daemon never went quiet: {} store round trips in the last second",
            now - last
        );
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_daemon_makes_no_store_round_trips_between_resyncs() {
    let base = tempfile::tempdir().expect("tempdir");
    let spec_dir = base.path().join("project/.roundtable");
    std::fs::create_dir_all(&spec_dir).expect("mkdir");
    std::fs::write(base.path().join("project/README.md"), "# idle\n").expect("write");
    write_specs(&spec_dir);
    let project = roundtable_source::Project::resolve(&spec_dir).expect("project");
    let store = Store::open(&project.state_dir).await.expect("store");
    // The first sync, so the finished and failed Assignments can be given their sessions; the
    // daemon's own first scan then finds every spec unchanged.
    let scanned = roundtable_source::scan(&project);
    roundtable_reconcilers::desired::sync(&store, &store, &scanned).await.expect("sync");
    record_sessions(&store).await;

    let runtime: Arc<dyn roundtable_session_runtime::SessionRuntime> =
        Arc::new(roundtable_session_runtime::Unavailable {
            endpoint: "none".into(),
            reason: "no engine in this test".into(),
        });
    let executions = ExecutionManager::new(store.clone(), runtime.clone(), execution_config(&project, base.path()));
    let reconciler = Arc::new(object_reconciler(&store, runtime, &executions, None, None));
    let dependents = reconciler.dependents.clone();
    let mut config = DaemonConfig::new(project.clone());
    config.resync = Duration::from_secs(3600);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(run_with(
        config,
        store.clone(),
        reconciler,
        move |handle| {
            dependents.wake_with(handle.clone());
            executions.wake_with(handle);
        },
        async move {
            let _ = stopped.await;
        },
    ));

    // The first pass: every object gets its Ready condition (read through a handle of its own,
    // whose round trips are not the daemon's).
    let observer = Store::open(&project.state_dir).await.expect("a second handle");
    let total = ADAPTERS + SHAPES.len() * PER_SHAPE;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    let conditions = loop {
        let all = observer.all_conditions().await.expect("conditions");
        let ready = all.values().filter(|c| c.iter().any(|c| c.type_ == "Ready")).count();
        if ready == total {
            break all;
        }
        assert!(tokio::time::Instant::now() < deadline, "only {ready} of {total} objects were reconciled");
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let reason = |kind: Kind, name: &str| {
        let key = ObjectKey::new(kind, name);
        conditions[&key].iter().find(|c| c.type_ == "Ready").map(|c| c.reason.clone()).unwrap_or_default()
    };
    assert_eq!(reason(Kind::Adapter, "agent-00000"), "Disabled");
    assert_eq!(reason(Kind::Assignment, "suspended-00000"), "Suspended");
    assert_eq!(reason(Kind::Assignment, "waiting-00000"), "AdapterNotReady");
    assert_eq!(reason(Kind::Assignment, "finished-00000"), "NoChanges");
    assert_eq!(reason(Kind::Assignment, "failed-00000"), "Exited");

    // Then the wakes from the Adapters' first reconciles settle, and nothing more happens.
    quiet(&store, Duration::from_secs(120)).await;
    let before = store.round_trips();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(store.round_trips() - before, 0, "an idle daemon made store round trips between resyncs");

    let _ = stop.send(());
    daemon.await.expect("the daemon task").expect("the daemon loop");
    observer.close().await;
    store.close().await;
}
