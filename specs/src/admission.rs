//! Admission as types: the receipt that proves (or refuses) an adapter's right to spawn, the
//! refusal reasons, the verdicts of each kind of evidence, and the decision the spawn-path gates
//! record. Receipts hash as canonical JSON, the same form the audit chain MACs.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::words::words;

/// The receipt format's version.
pub const RECEIPT_SCHEMA_VERSION: u32 = 1;
/// The `kind` of a receipt sealed by `admission check --seal` (the only kind the gate trusts).
pub const RECEIPT_KIND: &str = "AdmissionReceipt";

words! {
    /// Why admission refuses an adapter.
    RefusalReason {
        /// No contract pins the adapter's invocation surface.
        NoContract = "no_contract",
        /// The contract has no golden transcript to replay.
        NoTranscript = "no_transcript",
        /// The probe was inconclusive: the image has no such binary, or it printed nothing usable.
        ConformanceSkip = "conformance_skip",
        /// The installed CLI no longer advertises a required flag or subcommand.
        ConformanceFail = "conformance_fail",
        /// A golden transcript no longer replays through the planner and capture.
        ReplayDiverged = "replay_diverged",
        /// The canary attestation for this image is red.
        CanaryRed = "canary_red",
        /// The live evidence is green but no receipt is sealed here: none in the folder, or one
        /// whose id no entry of this project's audit chain records.
        NoReceipt = "no_receipt",
        /// The sealed receipt is past its TTL, counted from when the chain recorded it.
        ReceiptStale = "receipt_stale",
        /// The receipt does not parse, no longer hashes to its recorded id, or says it was
        /// generated after now.
        ReceiptTampered = "receipt_tampered",
        /// The image, CLI version, contract or transcripts changed after sealing.
        FingerprintMismatch = "fingerprint_mismatch",
        /// The sealed receipt itself records a refusal.
        StoredRefusal = "stored_refusal",
        /// A receipt is sealed but cannot be verified here: the command that asks has no audit
        /// key to read the chain with (a view's refusal; the daemon always has its key).
        ReceiptUnverified = "receipt_unverified",
    }
}

impl RefusalReason {
    /// What an operator runs (or changes) to clear this refusal for `adapter`.
    pub fn remediation(self, adapter: &str) -> String {
        let seal = format!("roundtable admission check {adapter} --seal");
        match self {
            RefusalReason::NoContract => format!(
                "write .roundtable/contracts/{}.yaml (see docs/admission.md), then run `{seal}`",
                crate::names::slug(adapter)
            ),
            RefusalReason::NoTranscript => {
                format!("add a golden transcript to the adapter's contract, then run `{seal}`")
            }
            RefusalReason::ConformanceSkip => format!(
                "check that the adapter's image has the CLI its contract probes (`roundtable admission check {adapter}` shows the probe output), then run `{seal}`"
            ),
            RefusalReason::ConformanceFail => {
                format!("pin an image whose CLI has the contract's flags, or update the contract; then run `{seal}`")
            }
            RefusalReason::ReplayDiverged => format!(
                "the launch plan or output capture no longer matches the contract's transcripts: update them, then run `{seal}`"
            ),
            RefusalReason::CanaryRed => {
                format!("run `roundtable admission canary {adapter}` against a fixed image, then `{seal}`")
            }
            RefusalReason::NoReceipt
            | RefusalReason::ReceiptStale
            | RefusalReason::ReceiptTampered
            | RefusalReason::FingerprintMismatch
            | RefusalReason::StoredRefusal => format!("run `{seal}`"),
            RefusalReason::ReceiptUnverified => {
                "pass the audit key the daemon uses (`--audit-key PATH` or ROUNDTABLE_AUDIT_KEY)".to_owned()
            }
        }
    }
}

words! {
    /// Admit or refuse.
    Verdict {
        Admit = "admit",
        Refuse = "refuse",
    }
}

words! {
    /// What the version and help probe found.
    ConformanceVerdict {
        /// Every required flag and subcommand is advertised.
        Ok = "ok",
        /// Some are missing.
        Fail = "fail",
        /// Inconclusive: nothing to match against.
        Skip = "skip",
    }
}

words! {
    /// The canary attestation for the adapter's image. Only `red` refuses.
    CanaryVerdict {
        Green = "green",
        Red = "red",
        /// An attestation exists but is past its TTL.
        Stale = "stale",
        Unknown = "unknown",
    }
}

/// Where the audit chain stood when a receipt was sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChainHead {
    pub seq: i64,
    pub mac: String,
}

/// The body of an admission receipt. Its id is the SHA-256 of its canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReceiptBody {
    pub schema_version: u32,
    pub kind: String,
    /// The adapter's name as declared (the file is named by its slug).
    pub adapter: String,
    /// The image reference the Adapter names (`null` for the built-in mock's empty image).
    pub image: Option<String>,
    /// The full image ID the probe ran in.
    pub image_id: String,
    /// The command the contract probes (its `versionCommand`'s first word).
    pub binary: String,
    pub installed_version: Option<String>,
    /// `sha256:` of the probed identity (binary, image ID, version).
    pub probe_hash: String,
    /// SHA-256 of the contract's bytes.
    pub contract_hash: String,
    /// `builtin` or the contract file's name.
    pub contract_source: String,
    /// SHA-256 of the capability profile (the sorted capability names).
    pub profile_hash: String,
    /// How the adapter's `credentialEnv` values reached the agent when sealed (`broker` or
    /// `env`; absent without credentials). Part of the replay fingerprint, so a receipt sealed
    /// for one mode does not admit the other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_mode: Option<crate::adapter::CredentialMode>,
    /// The OCI runtime the probes ran under and the adapter's sessions run under; a spawn under
    /// another one no longer matches the receipt. Absent in receipts sealed before runtime
    /// classes, which then match only a spawn under the engine's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class: Option<crate::names::RuntimeClass>,
    /// `sha256:` of the deterministic projection of contract, version, image and replay.
    pub replay_fingerprint: String,
    pub conformance_run_id: String,
    pub conformance_verdict: ConformanceVerdict,
    pub conformance_detail: String,
    pub transcripts: Vec<String>,
    pub canary_verdict: CanaryVerdict,
    pub verdict: Verdict,
    pub reason: Option<RefusalReason>,
    /// What the decision grants (`spawn` and the adapter's capabilities on an admit).
    pub allowed_capabilities: Vec<String>,
    /// What it withholds (everything, `spawn` included, on a refusal).
    pub forbidden_capabilities: Vec<String>,
    pub ttl_seconds: u64,
    /// RFC 3339, UTC.
    pub generated_at: String,
    pub remediation: String,
    /// The audit chain's head just before this receipt was anchored in it.
    pub audit_head: Option<ChainHead>,
}

/// A receipt file: the body and its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SealedReceipt {
    pub receipt: ReceiptBody,
    /// SHA-256 (hex) of the canonical JSON of `receipt`.
    pub id: String,
}

impl SealedReceipt {
    pub fn seal(receipt: ReceiptBody) -> Self {
        let id = crate::digest::canonical_digest(&receipt);
        Self { receipt, id }
    }

    /// Whether the body still hashes to its id (no key needed).
    pub fn intact(&self) -> bool {
        crate::digest::canonical_digest(&self.receipt) == self.id
    }
}

words! {
    /// Which spawn-path gate decided.
    GateKind {
        /// Receipt-gated admission: was the surface ever verified against this image?
        Admission = "admission",
        /// The security floor: is the installed CLI at least the minimum safe version?
        SecurityFloor = "securityFloor",
        /// Capability routing: does the adapter offer what the Assignment requires?
        CapabilityRouting = "capabilityRouting",
        /// The runtime class: does the engine have the OCI runtime the adapter runs under, fit
        /// for its session, and does the AdmissionPolicy allow it?
        RuntimeClass = "runtimeClass",
    }
}

impl GateKind {
    /// Whether its refusal blocks a spawn under every mode, not only `enforce`: a runtime the
    /// engine lacks cannot run anything, and a required runtime class is an isolation floor,
    /// not evidence to warn about.
    pub fn blocks_under_every_mode(self) -> bool {
        self == GateKind::RuntimeClass
    }
}

/// One gate's decision for one spawn (or one `admission check`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateDecision {
    pub gate: GateKind,
    pub adapter: String,
    pub verdict: Verdict,
    /// The refusal reason's word (admission reasons, `below_floor`, `capability_unmet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub remediation: String,
    /// The receipt the decision compared against, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

impl GateDecision {
    pub fn admitted(&self) -> bool {
        self.verdict == Verdict::Admit
    }

    /// Whether this decision stops the spawn under `mode`.
    pub fn blocks(&self, mode: crate::policy::AdmissionMode) -> bool {
        !self.admitted() && (mode == crate::policy::AdmissionMode::Enforce || self.gate.blocks_under_every_mode())
    }
}

impl fmt::Display for GateDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Some(reason) => write!(f, "{} refused ({reason}): {}", self.gate, self.message)?,
            None => write!(f, "{} admitted: {}", self.gate, self.message)?,
        }
        if !self.remediation.is_empty() {
            write!(f, "; {}", self.remediation)?;
        }
        Ok(())
    }
}

/// How one golden transcript replayed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptOutcome {
    pub name: String,
    pub passed: bool,
    /// What differed, one line per check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverged: Vec<String>,
}

/// The live evidence behind a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceSummary {
    pub image: Option<String>,
    pub image_id: String,
    pub installed_version: Option<String>,
    /// `builtin`, a file name in the contracts folder, or empty when there is none.
    pub contract: String,
    pub contract_hash: String,
    pub profile_hash: String,
    pub conformance: ConformanceVerdict,
    pub conformance_detail: String,
    pub transcripts: Vec<TranscriptOutcome>,
    pub canary: CanaryVerdict,
    pub replay_fingerprint: String,
}

/// What a session was admitted under, kept on the session: the image ID, contract and version
/// the spawn gate saw, and the receipt it compared them with. Provenance names these, so what an
/// accepted commit says about its run does not depend on the receipt still being current.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmittedUnder {
    pub image_id: String,
    pub contract_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_version: Option<String>,
    /// The receipt's id; none when the Adapter had none (admission under `warn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

impl AdmittedUnder {
    /// From the evidence the gate saw and the receipt it compared against.
    pub fn of(evidence: &EvidenceSummary, receipt: Option<&ReceiptSummary>) -> Self {
        Self {
            image_id: evidence.image_id.clone(),
            contract_hash: evidence.contract_hash.clone(),
            installed_version: evidence.installed_version.clone(),
            receipt: receipt.map(|r| r.id.clone()),
        }
    }
}

/// The current receipt, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptSummary {
    pub id: String,
    pub path: String,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<RefusalReason>,
    pub generated_at: String,
    /// When this project's audit chain recorded the receipt, plus the shorter of the receipt's
    /// and the policy's TTL; `null` when the chain does not record it.
    pub expires_at: Option<String>,
}

/// One adapter's admission, as `admission check` and `admission list` print it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionItem {
    pub adapter: String,
    pub mode: crate::policy::AdmissionMode,
    /// The AdmissionPolicy exempts it from the receipt gate.
    pub exempt: bool,
    /// Whether a spawn would go ahead now (admitted, exempt, or not enforced).
    pub spawn: bool,
    /// The admission gate's decision, then the security floor's.
    pub decisions: Vec<GateDecision>,
    pub evidence: EvidenceSummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<ReceiptSummary>,
}

impl crate::list::ListItem for AdmissionItem {
    const LIST_KIND: &'static str = "AdmissionList";
}

/// A canary attestation: the verdict of a real launch in an adapter's image, as the store keeps
/// it and the audit chain seals it (`admission.canary`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CanaryAttestation {
    pub adapter: String,
    pub image_id: String,
    /// `green` or `red`.
    pub verdict: String,
    pub detail: String,
    pub at: String,
    pub expires_at: String,
}

/// A canary attestation, as `admission canary` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanaryItem {
    pub adapter: String,
    pub image_id: String,
    pub verdict: CanaryVerdict,
    pub detail: String,
    pub argv: Vec<String>,
    pub exit_code: Option<i64>,
    /// The first lines of what the canary printed.
    pub output: String,
    pub at: String,
    pub expires_at: String,
}

impl crate::list::ListItem for CanaryItem {
    const LIST_KIND: &'static str = "CanaryList";
}
