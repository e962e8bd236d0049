//! The audit chain's contract: every entry kind the product writes, with its wire string, and
//! the record each kind seals. The store hashes whatever JSON a record serialises to (keys
//! sorted), so a record's field names, and which of its fields are `null` rather than absent,
//! are decided here and nowhere else; `audit verify` over an old chain depends on them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::admission::{CanaryAttestation, GateDecision, RefusalReason, Verdict};
use crate::assignment::Role;
use crate::diagnostics::DiagnosticStatus;
use crate::output::AgentState;
use crate::policy::AdmissionMode;
use crate::session::{EgressReport, ProposalFlag, SessionCause, SessionPhase};
use crate::words::words;

words! {
    /// What an audited entry records: its `kind` in the chain.
    EntryKind {
        /// An execution passed the spawn-path gates and is being provisioned.
        SessionStarted = "session.started",
        /// A session ended, however it ended.
        SessionEnded = "session.ended",
        /// The session's egress gateway's final counters.
        EgressSummary = "egress.summary",
        /// A session's MCP capability was handed out.
        CapabilityIssued = "capability.issued",
        /// ... and revoked, with what was done with it.
        CapabilityRevoked = "capability.revoked",
        /// A session's changes became a pending proposal.
        ProposalSubmitted = "proposal.submitted",
        /// A proposal adds the value of an injected credential.
        ProposalCredentialCanary = "proposal.credentialCanary",
        /// An operator accepted a proposal: the branch, the commit, overrides and provenance.
        ProposalAccepted = "proposal.accepted",
        /// An operator rejected a proposal, with the reason.
        ProposalRejected = "proposal.rejected",
        /// An accept the review gates refused, with what they found.
        ProposalAcceptRefused = "proposal.acceptRefused",
        /// An accept made its branch (before the decision is recorded).
        ProposalBranchMade = "proposal.branchMade",
        /// An accept pushed its branch and the provenance notes to a remote.
        ProposalPushed = "proposal.pushed",
        /// An accept that failed after its claim undid what it made, and the proposal is
        /// pending again; or a stale claim was rolled back.
        ProposalAcceptRolledBack = "proposal.acceptRolledBack",
        /// One spawn-path gate's decision for one spawn.
        AdmissionGate = "admission.gate",
        /// A canary attestation for an adapter's image.
        AdmissionCanary = "admission.canary",
        /// A sealed admission receipt; the entry is what makes the receipt valid in this project.
        AdmissionReceipt = "admission.receipt",
        /// A reconcile event (a Ready transition, a failure), sealed with its own words.
        ReconcileEvent = "reconcile.event",
        /// The first entry under a new key, in place of a lost one.
        AuditKeyReplaced = "audit.key.replaced",
        /// An operator recorded a session run elsewhere.
        OperatorRegister = "operator.register",
        /// An operator asked for a reconcile.
        OperatorReconcile = "operator.reconcile",
        /// An operator ran retention by hand.
        OperatorPrune = "operator.prune",
        /// An operator enabled an adapter at runtime.
        OperatorEnable = "operator.enable",
        /// An operator disabled an adapter at runtime.
        OperatorDisable = "operator.disable",
        /// An operator ran an adapter's diagnostics.
        OperatorDiagnostics = "operator.diagnostics",
        /// A forge's webhook call carried a valid signature.
        HookAccepted = "hook.accepted",
        /// A webhook call did not: it was refused, and nothing was fetched.
        HookRefused = "hook.refused",
    }
}

/// A record the chain seals: the kind it is written under and, through `Serialize`, its fields.
pub trait AuditRecord: Serialize {
    fn kind(&self) -> EntryKind;
}

// === sessions ===

/// `session.started`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStarted<'a> {
    pub assignment: &'a str,
    pub execution_generation: i64,
    pub attempt: i64,
    pub adapter: &'a str,
    /// `null` for an adapter without an image (the built-in mock).
    pub image: Option<String>,
    pub controller_run: &'a str,
}

impl AuditRecord for SessionStarted<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::SessionStarted
    }
}

/// `session.ended`; every optional field is written, `null` when unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEnded<'a> {
    pub assignment: &'a str,
    pub execution_generation: i64,
    pub attempt: i64,
    pub adapter: &'a str,
    pub image: Option<&'a str>,
    pub phase: SessionPhase,
    pub cause: Option<SessionCause>,
    pub exit_code: Option<i64>,
    pub external_session_id: Option<&'a str>,
    pub message: &'a str,
    /// From start to end, in milliseconds; `null` when it never started. Entries sealed before
    /// this field was added lack it.
    pub duration_ms: Option<i64>,
}

impl AuditRecord for SessionEnded<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::SessionEnded
    }
}

/// `egress.summary`: the gateway's final report as `sessions show` shows it (its fields at the
/// top, as before the broker), and the credential broker's under `broker`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EgressSummary<'a> {
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<&'a EgressReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker: Option<&'a crate::broker::BrokerReport>,
}

impl AuditRecord for EgressSummary<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::EgressSummary
    }
}

/// `capability.issued`: the session's MCP endpoint, by its socket in the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CapabilityIssued<'a> {
    pub assignment: &'a str,
    pub role: Role,
    pub socket: &'a str,
}

impl AuditRecord for CapabilityIssued<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::CapabilityIssued
    }
}

/// `capability.revoked`: the tool calls made with it, by tool, and how many were refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityRevoked<'a> {
    pub assignment: &'a str,
    pub tool_calls: &'a BTreeMap<String, u64>,
    pub refused: u64,
}

impl AuditRecord for CapabilityRevoked<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::CapabilityRevoked
    }
}

// === proposals ===

/// `proposal.submitted`, under `Proposal/<id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposalSubmitted<'a> {
    pub assignment: &'a str,
    pub execution_generation: i64,
    pub base_commit: &'a str,
    pub sha256: &'a str,
    pub flags: &'a [ProposalFlag],
}

impl AuditRecord for ProposalSubmitted<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::ProposalSubmitted
    }
}

/// `proposal.credentialCanary`: where the proposal adds which credentials' values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CredentialCanary<'a> {
    pub assignment: &'a str,
    pub session: &'a str,
    pub found: Vec<CanaryFound<'a>>,
}

/// One changed file that holds credential values, by the variables' names (never the values).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CanaryFound<'a> {
    pub path: &'a str,
    pub variables: &'a [String],
}

impl AuditRecord for CredentialCanary<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::ProposalCredentialCanary
    }
}

/// `proposal.accepted`, `proposal.rejected` and `proposal.acceptRefused`: the decision as stored
/// (or, for a refusal, what stood in the way), for proposal `proposal` of `assignment`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposalDecided<'a> {
    #[serde(skip)]
    pub kind: EntryKind,
    pub proposal: &'a str,
    pub assignment: &'a str,
    pub session: &'a str,
    pub decision: &'a crate::delivery::Decision,
    /// An accept's provenance: the signing key's id and the statement's SHA-256.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<(String, String)>,
    /// A refusal: each finding the gates did not let through, as the operator was told.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unmet: Vec<String>,
}

impl AuditRecord for ProposalDecided<'_> {
    fn kind(&self) -> EntryKind {
        self.kind
    }
}

/// `proposal.branchMade`, `proposal.pushed` and `proposal.acceptRolledBack`: one step of an
/// accept in git, for proposal `proposal` of `assignment`, by the claim `holder`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AcceptStep<'a> {
    #[serde(skip)]
    pub kind: EntryKind,
    pub proposal: &'a str,
    pub assignment: &'a str,
    pub holder: &'a str,
    /// The ref made (or removed), where it was made.
    pub reference: &'a str,
    /// `null` when a rollback found no commit of this proposal.
    pub commit: Option<&'a str>,
    /// Where it was pushed (credentials redacted); `null` without a push.
    pub remote: Option<&'a str>,
    /// A rollback's cause; empty otherwise.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub reason: &'a str,
}

impl AuditRecord for AcceptStep<'_> {
    fn kind(&self) -> EntryKind {
        self.kind
    }
}

// === admission ===

/// `admission.gate`: one spawn's (or one refusal's) admission, every gate's decision in one
/// entry, with the mode. Entries sealed before this shape held one decision each, flattened
/// beside `mode` and `blocked`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateRecorded<'a> {
    pub adapter: &'a str,
    pub mode: AdmissionMode,
    /// Whether any decision kept the spawn from starting.
    pub blocked: bool,
    pub decisions: Vec<DecisionRecorded<'a>>,
}

/// One gate's decision as [`GateRecorded`] seals it, with whether it blocked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecisionRecorded<'a> {
    #[serde(flatten)]
    pub decision: &'a GateDecision,
    pub blocked: bool,
}

impl<'a> GateRecorded<'a> {
    /// The record of `decisions` taken under `mode` for `adapter`.
    pub fn of(adapter: &'a str, mode: AdmissionMode, decisions: &'a [GateDecision]) -> Self {
        let decisions: Vec<DecisionRecorded<'a>> =
            decisions.iter().map(|decision| DecisionRecorded { decision, blocked: decision.blocks(mode) }).collect();
        let blocked = decisions.iter().any(|d| d.blocked);
        Self { adapter, mode, blocked, decisions }
    }
}

impl AuditRecord for GateRecorded<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::AdmissionGate
    }
}

/// `admission.canary` is the attestation as the store keeps it.
impl AuditRecord for CanaryAttestation {
    fn kind(&self) -> EntryKind {
        EntryKind::AdmissionCanary
    }
}

/// `admission.receipt`: what a sealed receipt decided. `receipt` (its id) is the field the
/// store finds the anchor by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptSealed<'a> {
    pub adapter: &'a str,
    pub receipt: &'a str,
    pub verdict: Verdict,
    pub reason: Option<RefusalReason>,
    pub image_id: &'a str,
    pub installed_version: Option<&'a str>,
    pub contract_hash: &'a str,
    pub replay_fingerprint: &'a str,
    pub conformance_run_id: &'a str,
    pub allowed_capabilities: &'a [String],
    pub forbidden_capabilities: &'a [String],
}

impl AuditRecord for ReceiptSealed<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::AdmissionReceipt
    }
}

// === the store's own ===

/// `reconcile.event`: the event's severity, reason and message, which is what `describe`
/// shows of the entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReconcileEvent<'a> {
    pub severity: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
}

impl AuditRecord for ReconcileEvent<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::ReconcileEvent
    }
}

/// `audit.key.replaced`: where the new key is. The append adds `previousHead` (the seq and
/// MAC it follows), read inside its own transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyReplaced {
    pub key_path: String,
}

impl AuditRecord for KeyReplaced {
    fn kind(&self) -> EntryKind {
        EntryKind::AuditKeyReplaced
    }
}

// === operators ===

/// An operator's action, as the chain records it with who did it ([`Operated`]).
pub trait OperatorAction: Serialize {
    fn kind(&self) -> EntryKind;
}

/// An operator action and its origin, flattened into one record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Operated<A> {
    #[serde(flatten)]
    pub action: A,
    #[serde(flatten)]
    pub by: Operator,
}

impl<A: OperatorAction> AuditRecord for Operated<A> {
    fn kind(&self) -> EntryKind {
        self.action.kind()
    }
}

/// Who did an operator action: a client of the daemon's API (`"via": "api"`), or the CLI, by
/// its process and user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Operator {
    Api { via: Via },
    Cli { pid: u32, user: String },
}

impl Operator {
    /// Through the daemon's API.
    pub const API: Operator = Operator::Api { via: Via::Api };
}

words! {
    /// The channel an [`Operator::Api`] action came through.
    Via {
        Api = "api",
    }
}

/// `operator.register`. The API and the CLI have always recorded different fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum SessionRegistered<'a> {
    /// Through the API: the new session's id, its Assignment and adapter.
    Api { session: &'a str, assignment: &'a str, adapter: &'a str },
    /// By the CLI: its Assignment and adapter, and the provider's session id (`null` without).
    Cli {
        assignment: &'a str,
        adapter: &'a str,
        #[serde(rename = "externalSessionId")]
        external_session_id: Option<&'a str>,
    },
}

impl OperatorAction for SessionRegistered<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::OperatorRegister
    }
}

words! {
    /// How a requested reconcile was carried out: queued through the API or the MCP endpoint,
    /// or run once by the CLI when no daemon runs.
    ReconcileHow {
        Api = "api",
        Mcp = "mcp",
        InProcess = "in-process",
    }
}

/// `operator.reconcile`, under the object's key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReconcileRequested {
    pub object: String,
    pub how: ReconcileHow,
    /// `reconcile --rerun`: the execution generation made to run the agent afresh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun: Option<i64>,
}

impl OperatorAction for ReconcileRequested {
    fn kind(&self) -> EntryKind {
        EntryKind::OperatorReconcile
    }
}

/// `operator.prune`: what retention removed (`Kind/name`), and the retention it ran with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pruned<'a> {
    pub removed: &'a [String],
    pub retention_seconds: u64,
}

impl OperatorAction for Pruned<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::OperatorPrune
    }
}

/// `operator.enable` or `operator.disable` (by `enabled`): the adapter's state after and before,
/// and the sessions it found active.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentChanged<'a> {
    #[serde(skip)]
    pub enabled: bool,
    pub agent: &'a str,
    pub state: AgentState,
    pub previous: Option<AgentState>,
    pub force: bool,
    pub active_sessions: &'a [String],
    pub cancelled: usize,
}

impl OperatorAction for AgentChanged<'_> {
    fn kind(&self) -> EntryKind {
        if self.enabled { EntryKind::OperatorEnable } else { EntryKind::OperatorDisable }
    }
}

/// `operator.diagnostics`: which report a diagnostic run stored, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiagnosticsRan<'a> {
    pub agent: &'a str,
    pub diagnostic: &'a str,
    pub status: DiagnosticStatus,
}

impl OperatorAction for DiagnosticsRan<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::OperatorDiagnostics
    }
}

// === webhooks ===

/// `hook.accepted`, under `Hook/NAME`: a signed call, whether the daemon had a git source to
/// fetch (`fetchRequested`), the forge's delivery id when it sent one, whether that id had been
/// seen already (`duplicate`: answered, not acted on), and how many more signed calls went
/// unrecorded since the previous such entry (signed calls are recorded at most once a second,
/// so replays of one captured call cannot grow the chain faster than that).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookAccepted<'a> {
    pub hook: &'a str,
    pub fetch_requested: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<&'a str>,
    pub duplicate: bool,
    pub unrecorded_since_last: u64,
}

impl AuditRecord for HookAccepted<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::HookAccepted
    }
}

words! {
    /// Why a webhook call was refused.
    HookRefusal {
        /// No signature header at all.
        MissingSignature = "missingSignature",
        /// A signature header that is not `sha256=` and 64 hex digits.
        MalformedSignature = "malformedSignature",
        /// A well-formed signature of other bytes, or under another secret.
        BadSignature = "badSignature",
    }
}

/// `hook.refused`, under `Hook/NAME`: why, and how many more refusals went unrecorded since the
/// previous such entry (refusals are recorded at most once a second, so unauthenticated calls
/// cannot grow the chain faster than that).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRefused<'a> {
    pub hook: &'a str,
    pub reason: HookRefusal,
    pub unrecorded_since_last: u64,
}

impl AuditRecord for HookRefused<'_> {
    fn kind(&self) -> EntryKind {
        EntryKind::HookRefused
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn value(record: &impl AuditRecord) -> serde_json::Value {
        serde_json::to_value(record).expect("a record serialises")
    }

    #[test]
    fn every_kind_has_its_own_word() {
        let words: std::collections::BTreeSet<&str> = EntryKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(words.len(), EntryKind::ALL.len());
        assert_eq!("admission.receipt".parse::<EntryKind>(), Ok(EntryKind::AdmissionReceipt));
    }

    #[test]
    fn unknown_fields_are_null_not_absent() {
        let ended = SessionEnded {
            assignment: "a",
            execution_generation: 1,
            attempt: 2,
            adapter: "mock",
            image: None,
            phase: SessionPhase::Failed,
            cause: None,
            exit_code: None,
            external_session_id: None,
            message: "m",
            duration_ms: None,
        };
        assert_eq!(
            value(&ended),
            json!({"assignment": "a", "executionGeneration": 1, "attempt": 2, "adapter": "mock", "image": null,
                "phase": "Failed", "cause": null, "exitCode": null, "externalSessionId": null, "message": "m",
                "durationMs": null})
        );
    }

    /// The fields each record wrote when it was a `json!` literal, `null`s included.
    #[test]
    fn each_record_writes_the_fields_it_always_wrote() {
        let started = SessionStarted {
            assignment: "a",
            execution_generation: 1,
            attempt: 1,
            adapter: "mock",
            image: None,
            controller_run: "run",
        };
        assert_eq!(
            value(&started),
            json!({"assignment": "a", "executionGeneration": 1, "attempt": 1, "adapter": "mock", "image": null,
                "controllerRun": "run"})
        );
        let issued = CapabilityIssued { assignment: "a", role: Role::Reviewer, socket: "/s" };
        assert_eq!(value(&issued), json!({"assignment": "a", "role": "reviewer", "socket": "/s"}));
        let calls = BTreeMap::from([("task.get".to_owned(), 2)]);
        let revoked = CapabilityRevoked { assignment: "a", tool_calls: &calls, refused: 1 };
        assert_eq!(value(&revoked), json!({"assignment": "a", "toolCalls": {"task.get": 2}, "refused": 1}));
        let flags: [ProposalFlag; 1] = ["protectedPath: .github/x".parse().expect("flag")];
        let submitted = ProposalSubmitted {
            assignment: "a",
            execution_generation: 2,
            base_commit: "c",
            sha256: "h",
            flags: &flags,
        };
        assert_eq!(
            value(&submitted),
            json!({"assignment": "a", "executionGeneration": 2, "baseCommit": "c", "sha256": "h",
                "flags": ["protectedPath: .github/x"]})
        );
        let names = ["TOKEN".to_owned()];
        let canary = CredentialCanary {
            assignment: "a",
            session: "s",
            found: vec![CanaryFound { path: "f", variables: &names }],
        };
        assert_eq!(
            value(&canary),
            json!({"assignment": "a", "session": "s", "found": [{"path": "f", "variables": ["TOKEN"]}]})
        );
        let decision = GateDecision {
            gate: crate::admission::GateKind::Admission,
            adapter: "a".into(),
            verdict: Verdict::Refuse,
            reason: Some("no_contract".into()),
            message: "m".into(),
            remediation: String::new(),
            receipt: None,
        };
        let decisions = [decision];
        let gate = GateRecorded::of("a", AdmissionMode::Enforce, &decisions);
        assert_eq!(
            value(&gate),
            json!({"adapter": "a", "mode": "enforce", "blocked": true, "decisions": [
                {"gate": "admission", "adapter": "a", "verdict": "refuse", "reason": "no_contract", "message": "m",
                 "blocked": true}]})
        );
        let audited = GateRecorded::of("a", AdmissionMode::Warn, &decisions);
        assert!(!audited.blocked, "a warn-mode refusal of the admission gate does not block");
        let receipt = ReceiptSealed {
            adapter: "a",
            receipt: "id",
            verdict: Verdict::Admit,
            reason: None,
            image_id: "sha256:aa",
            installed_version: None,
            contract_hash: "ch",
            replay_fingerprint: "rf",
            conformance_run_id: "cr",
            allowed_capabilities: &names,
            forbidden_capabilities: &[],
        };
        assert_eq!(
            value(&receipt),
            json!({"adapter": "a", "receipt": "id", "verdict": "admit", "reason": null, "imageId": "sha256:aa",
                "installedVersion": null, "contractHash": "ch", "replayFingerprint": "rf", "conformanceRunId": "cr",
                "allowedCapabilities": ["TOKEN"], "forbiddenCapabilities": []})
        );
        let event = ReconcileEvent { severity: "Warning", reason: "R", message: "m" };
        assert_eq!(value(&event), json!({"severity": "Warning", "reason": "R", "message": "m"}));
        let replaced = KeyReplaced { key_path: "/k".into() };
        assert_eq!(value(&replaced), json!({"keyPath": "/k"}));
        let removed = ["Assignment/a".to_owned()];
        let pruned = Operated {
            action: Pruned { removed: &removed, retention_seconds: 60 },
            by: Operator::Cli { pid: 1, user: String::new() },
        };
        assert_eq!(value(&pruned), json!({"removed": ["Assignment/a"], "retentionSeconds": 60, "pid": 1, "user": ""}));
        let registered = Operated {
            action: SessionRegistered::Api { session: "s", assignment: "a", adapter: "mock" },
            by: Operator::API,
        };
        assert_eq!(value(&registered), json!({"session": "s", "assignment": "a", "adapter": "mock", "via": "api"}));
        let diagnosed = Operated {
            action: DiagnosticsRan { agent: "a", diagnostic: "diag-1", status: DiagnosticStatus::Passed },
            by: Operator::API,
        };
        assert_eq!(value(&diagnosed), json!({"agent": "a", "diagnostic": "diag-1", "status": "passed", "via": "api"}));
    }

    #[test]
    fn an_operator_record_carries_its_origin_beside_the_action() {
        let by_api = Operated {
            action: ReconcileRequested { object: "Adapter/a".into(), how: ReconcileHow::Mcp, rerun: None },
            by: Operator::API,
        };
        assert_eq!(by_api.kind(), EntryKind::OperatorReconcile);
        assert_eq!(value(&by_api), json!({"object": "Adapter/a", "how": "mcp", "via": "api"}));
        let by_cli = Operated {
            action: SessionRegistered::Cli { assignment: "a", adapter: "mock", external_session_id: None },
            by: Operator::Cli { pid: 7, user: "u".into() },
        };
        assert_eq!(
            value(&by_cli),
            json!({"assignment": "a", "adapter": "mock", "externalSessionId": null, "pid": 7, "user": "u"})
        );
        let disabled = AgentChanged {
            enabled: false,
            agent: "a",
            state: AgentState::Draining,
            previous: Some(AgentState::Enabled),
            force: false,
            active_sessions: &[],
            cancelled: 0,
        };
        let disabled = Operated { action: disabled, by: Operator::API };
        assert_eq!(disabled.kind(), EntryKind::OperatorDisable);
        assert_eq!(
            value(&disabled),
            json!({"agent": "a", "state": "draining", "previous": "enabled", "force": false, "activeSessions": [],
                "cancelled": 0, "via": "api"})
        );
    }
}
