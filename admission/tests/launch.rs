//! No fallback runtime, through the admission authority over a fake engine that has only `runc`:
//! when the runtime class gate refuses an Adapter, nothing of its image is started (not the probe
//! behind `decide`, `check` and `seal`, not the canary); when it admits, every container is
//! created under the class it admitted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use roundtable_admission::Admitter;
use roundtable_admission::authority::AdmissionError;
use roundtable_session_runtime::{
    EngineRuntimes, Health, OwnedResource, ProbeOutcome, ProbePlan, RunOutcome, RuntimeError, SessionPlan,
    SessionRuntime,
};
use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::admission::GateKind;
use roundtable_specs::policy::{AdmissionMode, AdmissionPolicySpec};
use tokio::sync::watch;

/// An engine with `runc` alone that records the runtime of every probe container it is asked to
/// create.
#[derive(Default)]
struct RuncOnly {
    created: Mutex<Vec<Option<String>>>,
}

impl RuncOnly {
    fn created(&self) -> Vec<Option<String>> {
        self.created.lock().expect("created").clone()
    }
}

fn unreachable() -> RuntimeError {
    RuntimeError::Unavailable { reason: "not used by admission".into() }
}

impl SessionRuntime for RuncOnly {
    fn endpoint(&self) -> &str {
        "fake"
    }

    fn run(&self, _plan: SessionPlan, _stop: watch::Receiver<bool>) -> BoxFuture<'_, Result<RunOutcome, RuntimeError>> {
        Box::pin(async { Err(unreachable()) })
    }

    fn owned(&self, _project: &str) -> BoxFuture<'_, Result<Vec<OwnedResource>, RuntimeError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn remove(&self, _resource: &OwnedResource) -> BoxFuture<'_, Result<(), RuntimeError>> {
        Box::pin(async { Ok(()) })
    }

    fn remove_session(&self, _project: &str, _session: &str) -> BoxFuture<'_, Result<(), RuntimeError>> {
        Box::pin(async { Ok(()) })
    }

    fn inspect_image(
        &self,
        _reference: &str,
    ) -> BoxFuture<'_, Result<Option<roundtable_session_runtime::ImageDetails>, RuntimeError>> {
        let held = roundtable_session_runtime::ImageDetails { id: "sha256:0123".into(), repo_digests: Vec::new() };
        Box::pin(async { Ok(Some(held)) })
    }

    fn health(&self) -> BoxFuture<'_, Result<Health, RuntimeError>> {
        Box::pin(async { Err(unreachable()) })
    }

    fn runtimes(&self) -> BoxFuture<'_, Result<Option<EngineRuntimes>, RuntimeError>> {
        Box::pin(async {
            Ok(Some(EngineRuntimes {
                default: "runc".into(),
                registered: BTreeMap::from([("runc".to_owned(), Vec::new())]),
                host_kernel: Some("6.1.0".into()),
                ..EngineRuntimes::default()
            }))
        })
    }

    fn probe(&self, plan: ProbePlan) -> BoxFuture<'_, Result<ProbeOutcome, RuntimeError>> {
        self.created.lock().expect("created").push(plan.runtime.map(|class| class.to_string()));
        Box::pin(async { Ok(ProbeOutcome { image_id: "sha256:0123".into(), runs: Vec::new() }) })
    }
}

const CONTRACT: &str = "adapter: boxed\nversionCommand: [sh, -c, 'echo boxed 1.0.0']\nhelpCommand: [sh, -c, 'echo usage']\ntranscripts:\n  - name: run\n    prompt: echo hi\n    expect: {args: [-c, echo hi], stdin: empty, env: [HOME, PATH, TMPDIR]}\n    output: hi\n";

struct Fixture {
    engine: Arc<RuncOnly>,
    admitter: Admitter,
    adapter: ResolvedAdapter,
    _dir: tempfile::TempDir,
}

async fn fixture(required: &str) -> Fixture {
    fixture_under(required, AdmissionMode::Warn).await
}

async fn fixture_under(required: &str, mode: AdmissionMode) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("contracts")).expect("mkdir");
    std::fs::write(dir.path().join("contracts/boxed.yaml"), CONTRACT).expect("contract");
    let engine = Arc::new(RuncOnly::default());
    let store = roundtable_store::Store::open_in_memory().await.expect("store");
    let policy = AdmissionPolicySpec {
        mode,
        require_runtime_class: vec![required.parse().expect("class")],
        ..Default::default()
    };
    let admitter = Admitter::new(engine.clone(), store, dir.path().to_owned(), "/nonexistent".into(), "p".into(), None)
        .with_policy(policy);
    let mut adapter = roundtable_specs::builtins::template("generic").expect("generic").resolve("boxed");
    adapter.image = Some("registry.example/boxed:1".parse().expect("image"));
    Fixture { engine, admitter, adapter, _dir: dir }
}

#[tokio::test]
async fn a_refused_runtime_class_starts_nothing_of_the_image() {
    let f = fixture("gvisor").await;
    let policy = f.admitter.policy().await;
    let outcome = f.admitter.decide(&f.adapter, &[], &policy).await;
    let blocking = outcome.blocking().expect("refused");
    assert_eq!(blocking.gate, GateKind::RuntimeClass, "the runtime class refusal is the one shown: {blocking}");
    let evidence = outcome.evidence.expect("evidence");
    assert!(evidence.conformance_detail.starts_with("not probed: nothing of adapter boxed's image is started"));
    let check = f.admitter.check(&f.adapter, &policy).await;
    assert!(check.evidence.surface.detail.starts_with("not probed"), "{}", check.evidence.surface.detail);

    let canary = f.admitter.canary(&f.adapter, std::time::Duration::from_secs(60)).await;
    assert!(matches!(canary, Err(AdmissionError::RuntimeRefused(_))), "{canary:?}");
    assert!(f.admitter.launchable(&f.adapter, &policy).await.is_err());
    assert_eq!(f.engine.created(), Vec::<Option<String>>::new(), "no container of the image");
}

#[tokio::test]
async fn an_admitted_runtime_class_is_the_one_every_container_is_created_under() {
    let f = fixture("runc").await;
    let policy = f.admitter.policy().await;
    let outcome = f.admitter.decide(&f.adapter, &[], &policy).await;
    assert!(outcome.decisions.iter().any(|d| d.gate == GateKind::RuntimeClass && d.admitted()));
    let _ = f.admitter.canary(&f.adapter, std::time::Duration::from_secs(60)).await;
    let created = f.engine.created();
    assert_eq!(created.len(), 2, "the probe and the canary: {created:?}");
    assert!(created.iter().all(|class| class.as_deref() == Some("runc")), "{created:?}");
}

#[tokio::test]
async fn under_enforce_the_runtime_class_refusal_is_the_one_shown_ahead_of_the_receipts() {
    let f = fixture_under("gvisor", AdmissionMode::Enforce).await;
    let policy = f.admitter.policy().await;
    let outcome = f.admitter.decide(&f.adapter, &[], &policy).await;
    let first = outcome.decisions.iter().find(|d| d.blocks(AdmissionMode::Enforce)).expect("refused");
    assert_eq!(first.gate, GateKind::Admission, "the receipt's refusal comes first in the list: {first}");
    let shown = outcome.blocking().expect("refused");
    assert_eq!(shown.gate, GateKind::RuntimeClass, "{shown}");
    assert!(shown.message.contains("the engine has runc"), "{shown}");
    assert!(f.engine.created().is_empty());
}
