//! The item types inside the list envelope (`list`) that every JSON output uses.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::adapter::{Capability, CredentialMode, Resources};
use crate::list::ListItem;

// === adapters ===

/// One row of `adapters list`: a built-in, a declared Adapter, or one over the other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdapterItem {
    pub name: String,
    pub slug: String,
    /// A built-in template exists under this name.
    pub builtin: bool,
    /// `file:line` of the declaring document, when the adapter is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_in: Option<String>,
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    pub pinned: bool,
    pub command: String,
    pub args: Vec<String>,
    pub capabilities: Vec<Capability>,
    pub provider_hosts: Vec<String>,
    pub credential_env: Vec<String>,
    /// How the `credentialEnv` values reach the agent: `broker` (a placeholder; the value stays
    /// with the daemon) or `env` (the raw values in its environment). Absent without credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_mode: Option<CredentialMode>,
    pub resources: Resources,
    pub output_limit: String,
    pub timeout: String,
}

impl ListItem for AdapterItem {
    const LIST_KIND: &'static str = "AdapterList";
}

// === agents (the HTTP API's view of adapters) ===

/// Whether an adapter may start sessions, as an operator's runtime override leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AgentState {
    Enabled,
    /// Disabled while its active sessions finish: no new session starts; `disabled` when the
    /// last one ends.
    Draining,
    Disabled,
}

impl AgentState {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentState::Enabled => "enabled",
            AgentState::Draining => "draining",
            AgentState::Disabled => "disabled",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "enabled" => Some(AgentState::Enabled),
            "draining" => Some(AgentState::Draining),
            "disabled" => Some(AgentState::Disabled),
            _ => None,
        }
    }

    /// Whether a new session may start.
    pub fn allows_sessions(self) -> bool {
        self == AgentState::Enabled
    }
}

/// An operator's runtime override of an adapter's `spec.enabled`, made through the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentOverrideItem {
    pub state: AgentState,
    pub changed_at: String,
    pub message: String,
}

/// An agent: an adapter (built-in or declared) with what it can do, what its image holds, and
/// what it is doing now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentItem {
    /// The adapter's name.
    pub id: String,
    pub slug: String,
    pub provider: String,
    pub builtin: bool,
    /// Declared under `.roundtable/` (a built-in that is not declared never runs).
    pub declared: bool,
    /// What `spec.enabled` says.
    pub spec_enabled: bool,
    /// What applies now: the override when there is one, else the spec.
    pub state: AgentState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#override: Option<AgentOverrideItem>,
    /// From the adapter's resolved configuration (its template merged with its declaration).
    pub capabilities: Vec<Capability>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// The executable's version as admission's last probe of the image read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable_version: Option<String>,
    /// Queued or running sessions, oldest first.
    pub active_sessions: Vec<String>,
    /// The newest heartbeat any of its sessions sent through MCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<String>,
    /// The Adapter's `status` health (`None` when it is not declared: a built-in template only).
    pub health: Health,
    pub message: String,
}

impl ListItem for AgentItem {
    const LIST_KIND: &'static str = "AgentList";
}

// === status ===

/// `True`, `False` or `Unknown`, as in Kubernetes conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// A condition on an object's status; `lastTransitionTime` changes only when `status` does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    /// CamelCase, like `ImageMissing`.
    pub reason: String,
    pub message: String,
    /// RFC 3339.
    pub last_transition_time: String,
    pub observed_generation: i64,
}

/// Whether the observed world matches the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SyncStatus {
    Synced,
    OutOfSync,
    /// Cannot tell: the kind is not reconciled yet, or the object was never observed.
    Unknown,
    /// The file declaring it does not load (for `File` rows).
    Error,
}

/// How the object is doing, from its conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Health {
    Healthy,
    Degraded,
    Unhealthy,
    /// Stopped on purpose: an Assignment with `suspend: true`, an Adapter disabled by its spec or
    /// by an operator. Nothing is wrong; nothing runs until someone says so.
    Suspended,
    /// Retries stopped after the error budget or a permanent error.
    Stalled,
    /// Work is under way: an Assignment queued or running, an image being pulled (`Ready` is
    /// `Unknown` while it goes on, as Argo CD's `Progressing`).
    Progressing,
    Unknown,
    /// Not applicable (removed objects, file rows, leftovers).
    None,
}

/// One row of `status`: an object, a file that does not load, a labelled leftover, something past
/// retention, or a running egress sidecar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStatus {
    /// `Adapter`, `Assignment`, `AdmissionPolicy`, `File`, `Container`, `Volume`, `Session`,
    /// `Proposal` (past retention), `Gateway` (a running session's egress sidecar) or `Broker` (its credential broker).
    pub kind: String,
    pub name: String,
    /// The generation the current spec has (or would have once recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    pub sync: SyncStatus,
    pub health: Health,
    /// RFC 3339 time the object was first recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl ListItem for ObjectStatus {
    const LIST_KIND: &'static str = "ObjectStatusList";
}

/// One line of `plan`, terraform style.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedChange {
    /// `+` create, `~` update, `-` delete, `-/+` replace, `?` cannot tell.
    pub op: String,
    /// `KIND/NAME`.
    pub object: String,
    pub summary: String,
    /// For a changed object: each field that changed, old → new.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<crate::field_changes::FieldChange>,
}

impl ListItem for PlannedChange {
    const LIST_KIND: &'static str = "PlannedChangeList";
}

/// A session's captured output (`sessions logs --format json`, `GET /v1/sessions/{id}/logs`).
/// Invalid UTF-8 shows as U+FFFD here; the API's `?stream=stdout|stderr` returns one stream's
/// bytes as captured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionLogsBody {
    pub session: String,
    pub stdout: String,
    pub stdout_truncated: bool,
    pub stderr: String,
    pub stderr_truncated: bool,
}

/// One line of a followed session's output (`sessions logs -f --format json`, the `line` events
/// of `GET /v1/sessions/{id}/logs?follow=true`): its number, and its text masked of every
/// credential the session holds, `stderr: ` before a line of standard error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogLine {
    pub line: u64,
    pub text: String,
}

/// An event, `kubectl get events` style.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventItem {
    pub at: String,
    pub object: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
}

impl ListItem for EventItem {
    const LIST_KIND: &'static str = "EventList";
}

/// What `describe KIND/NAME` shows: the status row, the stored spec, events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DescribeItem {
    pub status: ObjectStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_file: Option<String>,
    /// The last valid spec, as recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<serde_json::Value>,
    /// Kind-specific observed status (for an Adapter: the resolved image ID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<serde_json::Value>,
    pub events: Vec<EventItem>,
}

// === executions ===

/// One session: an execution attempt of an Assignment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionItem {
    pub id: String,
    pub assignment: String,
    pub execution_generation: i64,
    pub attempt: i64,
    pub adapter: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    pub phase: crate::session::SessionPhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<crate::session::SessionCause>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_bytes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_bytes: Option<i64>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub controller_run: String,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Manifest, withheld files, self-check report, export outcome, egress, timings.
    #[serde(default)]
    pub detail: crate::session::SessionDetail,
}

impl ListItem for SessionItem {
    const LIST_KIND: &'static str = "SessionList";
}

/// A pending proposal: a patch nothing applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProposalItem {
    pub id: String,
    pub assignment: String,
    pub execution_generation: i64,
    pub session: String,
    pub adapter: String,
    pub base_commit: String,
    pub sha256: String,
    pub files_changed: i64,
    pub insertions: i64,
    pub deletions: i64,
    /// `outsideReadablePaths: …`, `protectedPath: …`, `packageScripts: …`.
    pub flags: Vec<crate::session::ProposalFlag>,
    /// What the proposal could not carry back from the agent's workspace, and why.
    #[serde(default)]
    pub rejected: Vec<crate::session::Rejected>,
    /// `pending`; `superseded` once the Assignment's run fields moved on (stored, and kept);
    /// `accepted` or `rejected` by an operator. Roundtable never applies a proposal by itself.
    pub state: crate::session::ProposalState,
    pub created_at: String,
    /// The proposal of an earlier execution generation whose result this one reuses (the same
    /// run fields at the same base commit), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<String>,
    /// An operator's accept (branch, commit, overrides, findings) or reject (reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<crate::delivery::Decision>,
}

impl ListItem for ProposalItem {
    const LIST_KIND: &'static str = "ProposalList";
}

// === doctor ===

/// Whether one hardening feature the sandbox relies on is available on the engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureCheck {
    pub name: String,
    pub available: bool,
    pub detail: String,
    /// How it is known: tried on a throw-away container, or only what the engine's `info` says
    /// (which an engine can claim and not enforce: rootless Podman on cgroup v1 reports memory
    /// limits it cannot apply).
    pub basis: FeatureBasis,
}

/// How a [`FeatureCheck`] is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FeatureBasis {
    /// Done once by `doctor`'s trial.
    Tried,
    /// Taken from the engine's word.
    EngineReported,
}

/// What `doctor` found about the container engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoctorReport {
    /// Where the engine was reached (socket or `DOCKER_HOST`).
    pub endpoint: String,
    pub reachable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
    /// The API version negotiated with the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_driver: Option<String>,
    pub features: Vec<FeatureCheck>,
}

impl ListItem for DoctorReport {
    const LIST_KIND: &'static str = "DoctorReportList";
}
