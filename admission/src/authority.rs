//! The admission authority: gathers the evidence for an adapter (its contract, a probe in its
//! image through the session runtime, cached by image ID and contract hash, the canary
//! attestation), reads its receipt, decides, seals, and anchors every receipt and gate decision
//! in the audit chain. The CLI, the reconcilers and the execution manager all go through it.

use std::borrow::Borrow;
use std::path::PathBuf;
use std::sync::Arc;

use roundtable_session_runtime::{ProbeOutcome, ProbePlan, RuntimeError, SessionRuntime};
use roundtable_specs::adapter::{Capability, ResolvedAdapter};
use roundtable_specs::admission::{
    ChainHead, EvidenceSummary, GateDecision, GateKind, ReceiptSummary, SealedReceipt, TranscriptOutcome, Verdict,
};
use roundtable_specs::audit::{AuditRecord, GateRecorded, ReceiptSealed};
use roundtable_specs::policy::{AdmissionMode, AdmissionPolicySpec};
use roundtable_specs::runtime_class::ResolvedRuntime;
use roundtable_store::Store;
use roundtable_store::audit::{AuditKey, AuditedEntry, RECEIPT_ENTRY};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::contracts;
use crate::evidence::Evidence;
use crate::gate::{self, Anchor, Stored};
use crate::launch::{self, LaunchError, Launchable, RuntimeRefused};
use crate::receipts::{ReceiptError, ReceiptFolder};
use crate::surface::Surface;

/// How long one probe command may run.
pub(crate) const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What can go wrong beyond a refusal.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    #[error(transparent)]
    Receipt(#[from] ReceiptError),
    #[error(transparent)]
    Store(#[from] roundtable_store::Error),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("sealing anchors the receipt in the audit chain, and there is no audit key to append with")]
    NoAuditKey,
    #[error("adapter {0} has no image to run a canary in")]
    NoImage(String),
    #[error("adapter {adapter}: {why}")]
    Canary { adapter: String, why: String },
    #[error(transparent)]
    RuntimeRefused(#[from] RuntimeRefused),
}

/// The clock admission decides by (tests pause it).
pub type Clock = Arc<dyn Fn() -> OffsetDateTime + Send + Sync>;

/// One adapter's admission as `admission check` and `status` show it.
#[derive(Debug, Clone)]
pub struct Check {
    pub evidence: Evidence,
    pub stored: Stored,
    /// Where this project's chain records the stored receipt.
    pub anchor: Anchor,
    pub decision: GateDecision,
    /// The policy exempts the adapter: it spawns whatever the decision says.
    pub exempt: bool,
}

impl Check {
    /// The evidence as listings show it.
    pub fn evidence_summary(&self) -> EvidenceSummary {
        let evidence = &self.evidence;
        EvidenceSummary {
            image: evidence.image.clone(),
            image_id: evidence.image_id.clone(),
            installed_version: evidence.surface.version.clone(),
            contract: match &evidence.contract {
                Ok(Some(loaded)) => loaded.source_text(),
                _ => String::new(),
            },
            contract_hash: evidence.contract_hash(),
            profile_hash: evidence.profile_hash(),
            conformance: evidence.surface.verdict,
            conformance_detail: evidence.surface.detail.clone(),
            transcripts: evidence
                .replay
                .iter()
                .map(|r| TranscriptOutcome {
                    name: r.transcript.clone(),
                    passed: r.passed,
                    diverged: r.diverged.clone(),
                })
                .collect(),
            canary: evidence.canary,
            replay_fingerprint: evidence.fingerprint(),
        }
    }

    /// The stored receipt as listings show it, its expiry under the policy's `ttl_seconds`.
    pub fn receipt_summary(&self, receipts: &ReceiptFolder, ttl_seconds: u64) -> Option<ReceiptSummary> {
        let Stored::Found(sealed) = &self.stored else { return None };
        let body = &sealed.receipt;
        Some(ReceiptSummary {
            id: sealed.id.clone(),
            path: receipts.path(&body.adapter).map(|p| p.display().to_string()).unwrap_or_default(),
            verdict: body.verdict,
            reason: body.reason,
            generated_at: body.generated_at.clone(),
            expires_at: gate::receipt_expiry(sealed, &self.anchor, ttl_seconds).and_then(|at| at.format(&Rfc3339).ok()),
        })
    }
}

/// What the spawn-path gates decided for one spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateOutcome {
    pub mode: AdmissionMode,
    pub decisions: Vec<GateDecision>,
    /// The evidence the admission gate saw (absent under `off`).
    pub evidence: Option<EvidenceSummary>,
    /// The receipt it compared against.
    pub receipt: Option<ReceiptSummary>,
    /// The runtime the spawn is created under and must prove, when the runtime class gate
    /// admitted it; `None`: the engine's default, unchecked.
    pub runtime: Option<ResolvedRuntime>,
}

impl GateOutcome {
    /// The refusal that blocks the spawn: any under `enforce`, the runtime class's under every
    /// mode ([`blocking_refusal`]).
    pub fn blocking(&self) -> Option<&GateDecision> {
        blocking_refusal(&self.decisions, self.mode)
    }
}

/// Which of `decisions` to show as the one that blocks under `mode`: the runtime class gate's
/// refusal first, since with it nothing of the image ran and the evidence gates' refusals ("not
/// probed") only follow from it; else the first that blocks.
pub fn blocking_refusal<D>(decisions: &[D], mode: AdmissionMode) -> Option<&GateDecision>
where
    D: Borrow<GateDecision>,
{
    let blocking = || decisions.iter().map(|d| -> &GateDecision { d.borrow() }).filter(|d| d.blocks(mode));
    blocking().find(|d| d.gate == GateKind::RuntimeClass).or_else(|| blocking().next())
}

/// The admission authority of one project.
#[derive(Clone)]
pub struct Admitter {
    pub(crate) runtime: Arc<dyn SessionRuntime>,
    pub(crate) store: Store,
    pub(crate) contracts: PathBuf,
    pub(crate) receipts: ReceiptFolder,
    pub(crate) binary: PathBuf,
    pub(crate) project: String,
    pub(crate) audit_key: Option<Arc<AuditKey>>,
    /// The key receipts' anchors are verified under when nothing is appended (read-only
    /// commands); the writer's key serves when there is one.
    pub(crate) anchor_key: Option<Arc<AuditKey>>,
    /// Why there is no key at all, where it was looked for (said when a receipt cannot be
    /// verified).
    pub(crate) missing_key: Option<String>,
    pub(crate) clock: Clock,
    /// The controller run probes are labelled with: the daemon's (its lease tells `status` and
    /// `prune` elsewhere that they are in use), or `probe` for a CLI command's.
    pub(crate) controller_run: String,
    /// The policy to decide by instead of the one recorded in the store (the CLI's `plan`
    /// reads the spec directory, which may be ahead of the store).
    pub(crate) policy: Option<AdmissionPolicySpec>,
}

impl std::fmt::Debug for Admitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admitter")
            .field("contracts", &self.contracts)
            .field("receipts", &self.receipts)
            .finish_non_exhaustive()
    }
}

impl Admitter {
    /// `spec_dir` holds `contracts/` and `admission/`; `binary` is mounted into probes.
    pub fn new(
        runtime: Arc<dyn SessionRuntime>,
        store: Store,
        spec_dir: PathBuf,
        binary: PathBuf,
        project: String,
        audit_key: Option<Arc<AuditKey>>,
    ) -> Self {
        Self {
            runtime,
            store,
            contracts: spec_dir.join("contracts"),
            receipts: ReceiptFolder::new(spec_dir.join("admission")),
            binary,
            project,
            audit_key,
            anchor_key: None,
            missing_key: None,
            clock: Arc::new(OffsetDateTime::now_utc),
            controller_run: "probe".into(),
            policy: None,
        }
    }

    /// Decides by `policy` rather than the one recorded in the store.
    pub fn with_policy(mut self, policy: AdmissionPolicySpec) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Labels probes with `run` (the daemon's controller run).
    pub fn with_controller_run(mut self, run: String) -> Self {
        self.controller_run = run;
        self
    }

    /// Verifies receipts' anchors under `key` without appending to the chain (`plan`,
    /// `admission check` without `--seal`, `admission list`).
    pub fn with_anchor_key(mut self, key: Option<Arc<AuditKey>>, missing: Option<String>) -> Self {
        self.anchor_key = key;
        self.missing_key = missing;
        self
    }

    /// Decides by `clock` instead of the wall clock.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The policy recorded in this project's state store.
    pub async fn policy(&self) -> AdmissionPolicySpec {
        match &self.policy {
            Some(policy) => policy.clone(),
            None => Self::recorded_policy(&self.store).await,
        }
    }

    pub fn receipts(&self) -> &ReceiptFolder {
        &self.receipts
    }

    pub(crate) fn now(&self) -> OffsetDateTime {
        (self.clock)()
    }

    /// The policy recorded in the state store (the default when there is none).
    pub async fn recorded_policy(store: &Store) -> AdmissionPolicySpec {
        let Ok(records) = store.live_objects_of(roundtable_specs::Kind::AdmissionPolicy).await else {
            return AdmissionPolicySpec::default();
        };
        records
            .iter()
            .find_map(|r| match roundtable_specs::resource::from_json(&r.spec_json) {
                Ok((_, roundtable_specs::Spec::AdmissionPolicy(spec))) => Some(spec),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The live evidence for `adapter` under `policy`: probed under the runtime its sessions run
    /// under, or not at all when the runtime class gate refuses it.
    pub async fn evidence(&self, adapter: &ResolvedAdapter, policy: &AdmissionPolicySpec) -> Evidence {
        let launch = self.launchable(adapter, policy).await;
        let class = launch.as_ref().ok().and_then(Launchable::class);
        let contract = contracts::load(&self.contracts, adapter);
        let (image_id, surface) = match &contract {
            Ok(Some(loaded)) => self.probe(adapter, loaded, &launch).await,
            Ok(None) => (String::new(), Surface::skipped("no contract to probe with")),
            Err(why) => {
                let why = roundtable_telemetry::error_chain(why);
                (String::new(), Surface::skipped(format!("the contract does not load: {why}")))
            }
        };
        let canary = self.canary_verdict(&adapter.name, &image_id).await;
        Evidence::gather(adapter, image_id, contract, surface, canary, class.cloned())
    }

    /// The runtime class gate for `adapter` under `policy`, with what the engine says it has
    /// (unknown when it cannot be asked: the launch then fails on the engine, and the
    /// self-check still proves the kernel of a declared class).
    pub async fn runtime(
        &self,
        adapter: &ResolvedAdapter,
        policy: &AdmissionPolicySpec,
    ) -> (GateDecision, Option<ResolvedRuntime>) {
        let engine = self.runtime.runtimes().await.ok().flatten();
        gate::runtime_class(adapter, policy, engine.as_ref())
    }

    /// The runtime containers of `adapter`'s image start under, under `policy`, or the refusal.
    pub async fn launchable(
        &self,
        adapter: &ResolvedAdapter,
        policy: &AdmissionPolicySpec,
    ) -> Result<Launchable, RuntimeRefused> {
        let (decision, runtime) = self.runtime(adapter, policy).await;
        launch::launchable(decision, runtime)
    }

    /// Starts `plan`, a container of an Adapter's image, under `launchable`'s runtime, whatever
    /// runtime the plan named.
    pub(crate) async fn launch_under(
        &self,
        launchable: &Launchable,
        mut plan: ProbePlan,
    ) -> Result<ProbeOutcome, RuntimeError> {
        plan.runtime = launchable.class.clone();
        self.runtime.probe(plan).await
    }

    /// Starts `plan`, a container of `adapter`'s image, under the runtime the runtime class gate
    /// decides for it under `policy`; refused, it starts nothing.
    pub async fn launch(
        &self,
        adapter: &ResolvedAdapter,
        policy: &AdmissionPolicySpec,
        plan: ProbePlan,
    ) -> Result<ProbeOutcome, LaunchError> {
        let launchable = self.launchable(adapter, policy).await?;
        Ok(self.launch_under(&launchable, plan).await?)
    }

    /// The admission gate for `adapter` now, under `policy`.
    pub async fn check(&self, adapter: &ResolvedAdapter, policy: &AdmissionPolicySpec) -> Check {
        let evidence = self.evidence(adapter, policy).await;
        let stored = self.receipts.load(&adapter.name);
        let anchor = self.anchor(&stored).await;
        let ttl = policy.receipt_ttl.as_std().as_secs();
        let decision = gate::admission(&evidence, &stored, &anchor, ttl, self.now());
        let exempt = policy.exempt.iter().any(|name| name == &adapter.name);
        Check { evidence, stored, anchor, decision, exempt }
    }

    /// Where this project's chain records `stored`: its `admission.receipt` entry, verified
    /// under the project's key. A receipt that only exists as a file anchors nowhere.
    pub async fn anchor(&self, stored: &Stored) -> Anchor {
        let Stored::Found(sealed) = stored else { return Anchor::Missing("there is no receipt".into()) };
        let Some(key) = self.audit_key.as_ref().or(self.anchor_key.as_ref()) else {
            let why = self.missing_key.clone().unwrap_or_else(|| "there is no audit key to read the chain with".into());
            return Anchor::Unverifiable(why);
        };
        match self.store.receipt_anchor(key, &sealed.id).await {
            Ok(Some(found)) => match OffsetDateTime::parse(&found.at, &Rfc3339) {
                Ok(at) => Anchor::Recorded { seq: found.seq, at },
                Err(_) => Anchor::Missing(format!("entry {} has an unreadable time {:?}", found.seq, found.at)),
            },
            Ok(None) => {
                Anchor::Missing(format!("no {RECEIPT_ENTRY} entry names it under the key {}", key.path().display()))
            }
            Err(error) => {
                Anchor::Missing(format!("the chain cannot be read: {}", roundtable_telemetry::error_chain(&error)))
            }
        }
    }

    /// Seals a receipt from the live evidence (an admit or a refusal) and anchors it: the
    /// entry in the chain is what makes the receipt valid here, so failing to append fails.
    pub async fn seal(
        &self,
        adapter: &ResolvedAdapter,
        policy: &AdmissionPolicySpec,
    ) -> Result<(SealedReceipt, PathBuf), AdmissionError> {
        let key = self.audit_key.clone().ok_or(AdmissionError::NoAuditKey)?;
        let evidence = self.evidence(adapter, policy).await;
        let head = key.read_head().map(|h| ChainHead { seq: h.seq, mac: h.mac });
        let generated_at = self.now().format(&Rfc3339).unwrap_or_default();
        let body = evidence.receipt(policy.receipt_ttl.as_std().as_secs(), generated_at, head);
        let (sealed, path) = self.receipts.seal(body)?;
        let r = &sealed.receipt;
        let record = ReceiptSealed {
            adapter: &r.adapter,
            receipt: &sealed.id,
            verdict: r.verdict,
            reason: r.reason,
            image_id: &r.image_id,
            installed_version: r.installed_version.as_deref(),
            contract_hash: &r.contract_hash,
            replay_fingerprint: &r.replay_fingerprint,
            conformance_run_id: &r.conformance_run_id,
            allowed_capabilities: &r.allowed_capabilities,
            forbidden_capabilities: &r.forbidden_capabilities,
        };
        let subject = format!("Adapter/{}", adapter.name);
        let entry = AuditedEntry::of(&subject, &record).map_err(roundtable_store::Error::Record)?;
        self.store.append_audited(&key, &entry).await?;
        Ok((sealed, path))
    }

    /// The three spawn-path gates for `adapter` requiring `requires`, decided without recording
    /// anything (what `status` and the Assignment reconciler look at). `off` decides nothing.
    pub async fn decide(
        &self,
        adapter: &ResolvedAdapter,
        requires: &[Capability],
        policy: &AdmissionPolicySpec,
    ) -> GateOutcome {
        let mode = policy.mode;
        // The runtime class is decided under every mode: `off` turns off receipts, not isolation.
        let (runtime_decision, runtime) = self.runtime(adapter, policy).await;
        if mode == AdmissionMode::Off {
            return GateOutcome { mode, decisions: vec![runtime_decision], evidence: None, receipt: None, runtime };
        }
        let check = self.check(adapter, policy).await;
        let evidence = Some(check.evidence_summary());
        let receipt = check.receipt_summary(&self.receipts, policy.receipt_ttl.as_std().as_secs());
        let admission = if check.exempt {
            GateDecision {
                gate: GateKind::Admission,
                adapter: adapter.name.clone(),
                verdict: Verdict::Admit,
                reason: None,
                message: "exempt by the AdmissionPolicy".into(),
                remediation: String::new(),
                receipt: None,
            }
        } else {
            check.decision
        };
        let floor = gate::floor_of(policy.min_versions.get(&adapter.name), adapter.min_version.as_ref());
        let decisions = vec![
            admission,
            gate::security_floor(&adapter.name, check.evidence.surface.version.as_deref(), floor),
            gate::capability_routing(adapter, requires),
            runtime_decision,
        ];
        GateOutcome { mode, decisions, evidence, receipt, runtime }
    }

    /// The gates for one spawn, each decision anchored in the audit chain under `subject` (the
    /// session), with the mode and whether it blocked.
    pub async fn gate(
        &self,
        adapter: &ResolvedAdapter,
        requires: &[Capability],
        policy: &AdmissionPolicySpec,
        subject: &str,
    ) -> GateOutcome {
        let outcome = self.decide(adapter, requires, policy).await;
        self.record(&outcome, subject).await;
        outcome
    }

    /// Anchors `outcome`'s decisions in the audit chain under `subject`, as one entry, with the
    /// mode and which blocked.
    pub async fn record(&self, outcome: &GateOutcome, subject: &str) {
        let Some(first) = outcome.decisions.first() else { return };
        self.audit(subject, &GateRecorded::of(&first.adapter, outcome.mode, &outcome.decisions)).await;
    }

    /// Appends `record` to the chain, when there is a key. The chain is evidence here, not a
    /// gate: a failed append is logged.
    pub(crate) async fn audit(&self, subject: &str, record: &impl AuditRecord) {
        let Some(key) = &self.audit_key else { return };
        let kind = record.kind().as_str();
        let appended = match AuditedEntry::of(subject, record) {
            Ok(entry) => self.store.append_audited(key, &entry).await,
            Err(error) => Err(roundtable_store::Error::Record(error)),
        };
        if let Err(error) = appended {
            tracing::error!(%error, kind, subject, "cannot append to the audit chain");
        }
    }
}
