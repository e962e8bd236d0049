//! Sessions and proposals as types: the phase a session is in, why it ended, what its detail
//! records (manifest, withheld files, self-check, export, egress counters, timings), and the
//! flags a proposal carries. Serialised once, here; nothing compares them as strings.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::words::{UnknownWord, words};

words! {
    /// Where one session (one execution attempt) is.
    #[derive(Default)]
    SessionPhase {
        /// Waiting for an execution slot.
        #[default]
        Queued = "Queued",
        Running = "Running",
        /// The agent exited 0 and its changes (if any) became a pending proposal.
        Succeeded = "Succeeded",
        Failed = "Failed",
        /// Stopped on purpose: `suspend`, or the Assignment was removed or changed.
        Cancelled = "Cancelled",
        /// Cut short by the infrastructure (the controller stopped or crashed, the engine went
        /// away); re-run outside the `retries` budget.
        Interrupted = "Interrupted",
    }
}

impl SessionPhase {
    /// Whether the session has ended (it will not change again).
    pub fn is_finished(self) -> bool {
        !matches!(self, SessionPhase::Queued | SessionPhase::Running)
    }
}

words! {
    /// Why a session ended the way it did.
    SessionCause {
        // Sessions recorded before causes were typed spelled the agent's own endings in
        // camelCase; they still read.
        /// The agent exited on its own (its exit code says how).
        Exited = "Exited" | "exited",
        TimedOut = "TimedOut" | "timedOut",
        Cancelled = "Cancelled" | "cancelled",
        OutOfMemory = "OutOfMemory" | "outOfMemory",
        /// The in-container self-check found the sandbox not as requested; the agent never ran.
        SelfCheckFailed = "SelfCheckFailed" | "selfCheckFailed",
        /// The session's egress gateway or in-container proxy did not come up.
        EgressUnavailable = "EgressUnavailable" | "egressUnavailable",
        /// Resolving the revision or exporting the readable paths failed.
        ProvisionFailed = "ProvisionFailed",
        /// `source.repo` resolves outside the project root.
        SourceOutsideProjectRoot = "SourceOutsideProjectRoot",
        /// No container engine could be reached when the session started.
        EngineUnavailable = "EngineUnavailable",
        /// The engine went away mid-run (stopped or restarted).
        EngineLost = "EngineLost",
        /// The Adapter has no image and is not one the controller runs itself.
        ImageNotConfigured = "ImageNotConfigured",
        SocketPathTooLong = "SocketPathTooLong",
        SocketDirFailed = "SocketDirFailed",
        /// The session's MCP endpoint could not be started (socket, handover, capability).
        McpUnavailable = "McpUnavailable",
        /// Not run by Roundtable: an operator registered a session the CLI ran elsewhere, so
        /// `resume` can find it.
        Registered = "Registered",
        /// A spawn-path gate (admission, the security floor, capability routing) refused the
        /// spawn under `enforce`; no agent container was created.
        AdmissionRefused = "AdmissionRefused",
        /// The engine refused or failed a step of the lifecycle.
        RuntimeError = "RuntimeError",
        /// The agent's workspace could not be exported within its caps; nothing is proposed.
        ExportFailed = "ExportFailed",
        /// The patch could not be made, verified or stored.
        PatchFailed = "PatchFailed",
        /// The daemon stopped (SIGTERM/SIGINT) before the session finished.
        ControllerStopped = "ControllerStopped",
        /// An earlier controller run ended (crashed or was killed) before the session finished.
        ControllerRunEnded = "ControllerRunEnded",
        /// The Assignment's run fields changed while it ran: a newer execution generation
        /// replaces it.
        Superseded = "Superseded",
        /// The session's token or request budget was spent (`spec.budget`): the broker refused
        /// the next model request and the session was stopped.
        BudgetExceeded = "BudgetExceeded",
        /// The session's credential broker could not be started; without it no session runs.
        BrokerUnavailable = "BrokerUnavailable",
    }
}

/// Whose doing a failed session's cause is, which decides what the failure costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The agent's: the session spends an attempt of the Assignment's `retries`.
    Agent,
    /// The place it runs in (the engine, a sidecar, the sandbox, the host): no attempt is spent;
    /// the Assignment waits and tries again, as a Kubernetes Pod waits Pending for capacity.
    Environment,
    /// The spec or the repository it names (a revision that does not exist, a path outside the
    /// project): no attempt is spent; the Assignment waits for a fix, trying again now and then.
    Configuration,
    /// A spawn-path gate refused the spawn: no attempt is spent; the refusal is looked at again.
    Gate,
}

impl SessionCause {
    /// See [`Blame`]. Every cause is placed here, so a new one must be.
    pub fn blame(self) -> Blame {
        match self {
            SessionCause::Exited
            | SessionCause::TimedOut
            | SessionCause::OutOfMemory
            | SessionCause::BudgetExceeded
            // Caps on what the agent left, and a patch of it that does not verify: the agent's.
            | SessionCause::ExportFailed
            | SessionCause::PatchFailed
            | SessionCause::Cancelled
            | SessionCause::Superseded
            | SessionCause::Registered => Blame::Agent,
            SessionCause::EngineUnavailable
            | SessionCause::EngineLost
            | SessionCause::RuntimeError
            | SessionCause::SelfCheckFailed
            | SessionCause::EgressUnavailable
            | SessionCause::BrokerUnavailable
            | SessionCause::McpUnavailable
            | SessionCause::SocketDirFailed
            | SessionCause::ControllerStopped
            | SessionCause::ControllerRunEnded => Blame::Environment,
            SessionCause::ProvisionFailed
            | SessionCause::SourceOutsideProjectRoot
            | SessionCause::ImageNotConfigured
            | SessionCause::SocketPathTooLong => Blame::Configuration,
            SessionCause::AdmissionRefused => Blame::Gate,
        }
    }

    /// Whether the cause comes before any container of the session exists, where nothing the
    /// agent does (in this session or an earlier one) can bring it about: the engine not
    /// reachable, the configuration. Such a failure is waited out however long it lasts; any
    /// other not the agent's is tried again a bounded number of times, since an agent can end its
    /// own container in ways that read as the engine's (stopping the sandbox's PID 1).
    pub fn before_any_container(self) -> bool {
        matches!(self, SessionCause::EngineUnavailable | SessionCause::SocketDirFailed)
            || self.blame() == Blame::Configuration
    }
}

words! {
    /// Where an Assignment is, as its status reports it.
    #[derive(Default)]
    AssignmentPhase {
        /// Waiting for something outside it (its Adapter not ready).
        #[default]
        Pending = "Pending",
        Queued = "Queued",
        Running = "Running",
        Succeeded = "Succeeded",
        Failed = "Failed",
        Suspended = "Suspended",
        /// A spawn-path gate refuses its adapter under `enforce`: nothing runs until it admits.
        Refused = "Refused",
    }
}

words! {
    /// Where a proposal stands. Roundtable never applies one: applying is a person's decision,
    /// made outside the controller.
    #[derive(Default)]
    ProposalState {
        #[default]
        Pending = "pending",
        /// Made for an execution generation the Assignment has moved past (its run fields
        /// changed since): kept for the record, not what the Assignment asks for now.
        Superseded = "superseded",
        /// An accept holds its claim: the gates, the branch, the note and the push are under
        /// way. It ends `accepted`, or back to `pending` with whatever it made removed; a claim
        /// whose holder is gone or that is older than the bound is rolled back by the next
        /// accept or reject (docs/delivery.md).
        Accepting = "accepting",
        /// An operator accepted it: a commit on a new branch holds it (`proposals accept`).
        Accepted = "accepted",
        /// An operator rejected it, with a reason (`proposals reject`).
        Rejected = "rejected",
    }
}

words! {
    /// What a proposal flag says about a path it touches.
    ProposalFlagKind {
        /// Outside the Assignment's `readablePaths`.
        OutsideReadablePaths = "outsideReadablePaths",
        /// Changes CI, hooks, agent configuration or specs.
        ProtectedPath = "protectedPath",
        /// A package manifest or build script that runs code on install or build.
        PackageScripts = "packageScripts",
        /// The agent replaced a file it was given by something the controller does not carry back
        /// (a symbolic link, a FIFO, a `.git` entry, …): the file is kept unchanged, not deleted.
        RejectedEntry = "rejectedEntry",
        /// The agent wrote a file it was not given that exists at the base (a withheld secret, a
        /// path outside `readablePaths`): the write is not proposed.
        NotGiven = "notGiven",
        /// An extra name of a hard-linked file: proposed with the content of the file it links to.
        HardLink = "hardLink",
        /// Another live session claimed this path (MCP `claims.acquire`) when the proposal was made.
        ClaimedElsewhere = "claimedElsewhere",
        /// The change adds a value the daemon injected into the session (a `credentialEnv`
        /// value): applying it would commit a live credential. The patch keeps it, byte for byte.
        CredentialCanary = "credentialCanary",
    }
}

/// One flag on a proposal: a reviewer should look at `path` for the reason `kind` names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
#[schemars(
    with = "String",
    description = "`<kind>: <path>`, kind one of outsideReadablePaths, protectedPath, packageScripts, rejectedEntry, notGiven, hardLink, claimedElsewhere, credentialCanary"
)]
pub struct ProposalFlag {
    pub kind: ProposalFlagKind,
    pub path: String,
}

impl fmt::Display for ProposalFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.path)
    }
}

impl FromStr for ProposalFlag {
    type Err = UnknownWord;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (kind, path) =
            text.split_once(": ").ok_or_else(|| UnknownWord { what: "ProposalFlag", word: text.to_owned() })?;
        Ok(ProposalFlag { kind: kind.parse()?, path: path.to_owned() })
    }
}

// The wire form stays `kind: path`, as proposals have always been shown and stored.
crate::wire::wire_string!(ProposalFlag);

/// One file given to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ManifestEntry {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    pub executable: bool,
}

/// A file under `readablePaths` that was not given to the agent, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct WithheldFile {
    pub path: String,
    pub reason: String,
}

// Sessions recorded before this type existed stored `[path, reason]` pairs.
impl<'de> Deserialize<'de> for WithheldFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Named { path: String, reason: String },
            Pair(String, String),
        }
        Ok(match Wire::deserialize(deserializer)? {
            Wire::Named { path, reason } | Wire::Pair(path, reason) => WithheldFile { path, reason },
        })
    }
}

/// One item the in-container self-check verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckItem {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

/// The whole self-check, as `sandbox check` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    pub ok: bool,
    pub items: Vec<CheckItem>,
}

impl CheckReport {
    pub fn failures(&self) -> impl Iterator<Item = &CheckItem> {
        self.items.iter().filter(|item| !item.ok)
    }
}

/// An entry of the exported workspace that was not extracted, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rejected {
    /// The entry's path below the workspace, control characters and invalid UTF-8 escaped.
    pub path: String,
    pub reason: String,
    /// `path` is the entry's exact name (nothing was escaped), so it can be matched against the
    /// files the agent was given: a rejected entry that replaced one of them leaves it unchanged.
    #[serde(default)]
    pub exact: bool,
}

/// What extracting the agent's workspace did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Extracted {
    pub files: u64,
    pub bytes: u64,
    pub rejected: Vec<Rejected>,
    /// Files whose setuid, setgid or sticky bits were dropped.
    pub stripped_bits: Vec<String>,
    /// Extra names of hard-linked files: each keeps the content of the file it links to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hard_links: Vec<String>,
}

words! {
    /// What kind of entry the workspace holds, as seen from inside the container.
    EntryKind {
        File = "file",
        Folder = "folder",
        Link = "link",
        Fifo = "fifo",
        Socket = "socket",
        Device = "device",
    }
}

impl EntryKind {
    /// Why the extractor refuses an entry of this kind, in the words it uses for the same entry
    /// in an archive; `None` for what it carries back.
    pub fn refusal(self) -> Option<&'static str> {
        match self {
            EntryKind::File | EntryKind::Folder => None,
            EntryKind::Link => Some("a symbolic link"),
            EntryKind::Fifo => Some("a FIFO"),
            EntryKind::Device => Some("a device"),
            EntryKind::Socket => Some("not a regular file or folder"),
        }
    }
}

/// One entry of the agent's workspace as `sandbox inventory` saw it from inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryEntry {
    /// The path below the workspace, its bytes in lowercase hex (names need not be UTF-8).
    pub path_hex: String,
    pub kind: EntryKind,
    /// When its inode last changed (ctime), in nanoseconds since the Unix epoch.
    pub changed_ns: i128,
}

/// What `sandbox inventory` found: every entry (up to its cap) and how many more there were.
/// The export is checked against it: an engine whose archive silently stops short (Podman's of
/// a paused container, at a path too long for it) fails the export instead of proposing the
/// missing files as deleted, and what gVisor keeps in its own kernel (FIFOs, sockets) is listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    pub entries: Vec<InventoryEntry>,
    #[serde(default)]
    pub truncated: u64,
}

/// A session's egress gateway counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EgressCounters {
    pub allowed: u64,
    /// Refused by policy or bounds.
    pub denied: u64,
    /// Ended by the client leaving or the gateway stopping before a decision.
    pub abandoned: u64,
    /// Journal lines not written because their budget was spent.
    pub lines_dropped: u64,
    pub active: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Accept-loop restarts after a crash.
    pub restarts: u64,
    /// Denials by reason code (keys are the reasons' wire strings).
    #[schemars(schema_with = "crate::egress::counts_by_reason")]
    pub denials: BTreeMap<crate::egress::GatewayReason, u64>,
}

pub use crate::sidecar::SidecarState;

/// What `status` and `sessions show` say about a session's egress gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EgressReport {
    pub state: SidecarState,
    /// The gateway's socket on the host.
    pub socket: String,
    /// The exact hosts it allows.
    pub hosts: Vec<String>,
    /// The `allowCidrs` exceptions in force.
    pub allow_cidrs: Vec<String>,
    pub counters: EgressCounters,
}

/// What a session recorded besides its row: what the agent was given and held back, how the
/// sandbox checked out, what came back, what the gateway saw, and how long each phase took.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionDetail {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifest: Vec<ManifestEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<WithheldFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_check: Option<CheckReport>,
    /// The OCI runtime its container ran under and the kernel its self-check had to see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<crate::runtime_class::ResolvedRuntime>,
    /// The container was paused before its workspace was exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_for_export: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<Extracted>,
    /// Files the agent wrote at paths it was not given that exist at the base: not proposed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_given: Vec<Rejected>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressReport>,
    /// What the credential broker passed, refused and counted (docs/broker.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker: Option<crate::broker::BrokerReport>,
    /// The provider side of the session: plan, captured id, usage, MCP activity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentSession>,
    /// What the spawn-path gates decided before anything was created (empty under `off`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission: Vec<crate::admission::GateDecision>,
    /// The image ID, contract hash and receipt the admission gate saw (absent under `off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admitted_under: Option<crate::admission::AdmittedUnder>,
    /// Milliseconds per phase: `provision`, `launch`, `selfCheck`, `proxy`, `agent`, `export`,
    /// `cleanup`, `patch` (shown in that order: [`in_phase_order`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub timings_ms: BTreeMap<String, u64>,
    /// The earlier run whose result this session took instead of running the agent: the same
    /// run fields at the same base commit had already succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused: Option<ReusedRun>,
}

/// The run a session reused: the session that ran the agent, its execution generation, and the
/// proposal it made (none when the agent changed nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReusedRun {
    pub session: String,
    pub execution_generation: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<String>,
}

/// An MCP client as it named itself in `initialize`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpClient {
    pub name: String,
    pub version: String,
    pub protocol_version: String,
}

// What a profile's capture rules produce, so it is declared beside them.
pub use crate::providers::TokenUsage;

/// What the agent CLI's side of a session recorded: how it was launched (names, never values),
/// what its output said about itself, and how to resume it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentSession {
    /// The MCP clients that completed `initialize` on the session's authenticated endpoint (the
    /// CLI's own name and version, e.g. `codex-mcp-client` 0.171.0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_clients: Vec<McpClient>,
    /// How many times a client listed the tools.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tools_listed: u64,
    /// `codex`, `claude`, `gemini`, `opencode`, `generic` or `mock`.
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The argv the agent ran with (the prompt, when it is an argument, elided).
    #[serde(default)]
    pub argv: Vec<String>,
    /// Names of the variables in the agent's environment; values are never recorded.
    #[serde(default)]
    pub env_names: Vec<String>,
    pub working_dir: String,
    /// The MCP socket inside the container, when the session had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_socket: Option<String>,
    /// Why no external session id was captured (`capturesSessionId` set, nothing usable found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// The provider session this one resumed (`persistentHome` adapters re-running an Assignment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<String>,
    /// The command that resumes this session, when the adapter supports resume and an id was captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_command: Option<Vec<String>>,
    /// MCP tool calls the agent made, by tool name (refused ones included).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_calls: BTreeMap<String, u64>,
    /// MCP calls refused (role, revoked or expired capability).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_calls_refused: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<String>,
    /// Free-form labels given when the session was registered.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The phases a session's timings name, in the order they happen. `cleanup` is only in the
/// timings of sessions recorded when the container's removal was still one of the session's
/// phases, before the patch; it now follows the outcome, off the session's way.
pub const TIMING_PHASES: &[&str] =
    &["provision", "launch", "selfCheck", "proxy", "agent", "export", "cleanup", "patch"];

/// `timings` in the order the phases happen; a phase [`TIMING_PHASES`] does not name comes after.
pub fn in_phase_order(timings: &BTreeMap<String, u64>) -> Vec<(&str, u64)> {
    let mut ordered: Vec<(&str, u64)> =
        TIMING_PHASES.iter().filter_map(|phase| timings.get(*phase).map(|ms| (*phase, *ms))).collect();
    let unnamed = timings.iter().filter(|(name, _)| !TIMING_PHASES.contains(&name.as_str()));
    ordered.extend(unnamed.map(|(name, ms)| (name.as_str(), *ms)));
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::{AddressClass, GatewayReason};

    #[test]
    fn words_round_trip_and_unknown_words_are_errors() {
        for phase in SessionPhase::ALL {
            assert_eq!(phase.as_str().parse::<SessionPhase>(), Ok(*phase));
            assert_eq!(serde_json::to_value(phase).expect("json"), phase.as_str());
        }
        for cause in SessionCause::ALL {
            assert_eq!(cause.as_str().parse::<SessionCause>(), Ok(*cause));
        }
        assert!("Exploded".parse::<SessionPhase>().is_err());
        assert_eq!("timedOut".parse::<SessionCause>(), Ok(SessionCause::TimedOut), "stored before causes were typed");
        assert_eq!(serde_json::from_str::<SessionCause>("\"outOfMemory\"").ok(), Some(SessionCause::OutOfMemory));
        assert!(SessionPhase::Interrupted.is_finished() && !SessionPhase::Queued.is_finished());
    }

    #[test]
    fn flags_keep_their_kind_path_wire_form() {
        let flag = ProposalFlag { kind: ProposalFlagKind::ProtectedPath, path: ".github/workflows/ci.yml".into() };
        let json = serde_json::to_string(&flag).expect("json");
        assert_eq!(json, "\"protectedPath: .github/workflows/ci.yml\"");
        assert_eq!(serde_json::from_str::<ProposalFlag>(&json).expect("parse"), flag);
        assert!("sneaky: x".parse::<ProposalFlag>().is_err());
        // A path may itself hold ": ".
        let odd: ProposalFlag = "packageScripts: a: b/package.json".parse().expect("parse");
        assert_eq!(odd.path, "a: b/package.json");
    }

    #[test]
    fn details_stored_before_they_were_typed_still_read() {
        let stored = r#"{"manifest":[{"path":"README.md","size":3,"sha256":"ab","executable":false}],"withheld":[["docs/.env","sensitive: matches .env*"]],"timingsMs":{"provision":4},"pausedForExport":true}"#;
        let detail: Result<SessionDetail, _> = serde_json::from_str(stored);
        // Withheld files were stored as pairs; the typed form reads both.
        let detail = detail.expect("reads");
        assert_eq!(
            detail.withheld,
            [WithheldFile { path: "docs/.env".into(), reason: "sensitive: matches .env*".into() }]
        );
        assert_eq!(detail.timings_ms.get("provision"), Some(&4));
    }

    #[test]
    fn counters_keep_their_string_keys_in_string_order() {
        let mut denials = BTreeMap::new();
        denials.insert(GatewayReason::TunnelLimit, 3);
        denials.insert(GatewayReason::AddressDenied(AddressClass::Private), 1);
        denials.insert(GatewayReason::HostNotAllowlisted, 2);
        denials.insert(GatewayReason::SniMismatch, 4);
        let counters = EgressCounters { denied: 10, denials, ..EgressCounters::default() };
        let text = serde_json::to_string(&counters).expect("json");
        assert!(
            text.ends_with(
                r#""denials":{"address_denied:private":1,"host_not_allowlisted":2,"sni_mismatch":4,"tunnel_limit":3}}"#
            ),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<EgressCounters>(&text).expect("back"), counters);
        // As stored before reasons were typed.
        let stored = r#"{"allowed":1,"denied":2,"abandoned":0,"linesDropped":0,"active":0,"bytesIn":0,"bytesOut":0,"restarts":0,"denials":{"host_not_allowlisted":1,"address_denied:metadata":1}}"#;
        let read: EgressCounters = serde_json::from_str(stored).expect("stored counters");
        assert_eq!(read.denials.get(&GatewayReason::HostNotAllowlisted), Some(&1));
        assert_eq!(read.denials.get(&GatewayReason::AddressDenied(AddressClass::Metadata)), Some(&1));
        assert!(serde_json::from_str::<EgressCounters>(&stored.replace("host_not_allowlisted", "nonsense")).is_err());
    }

    #[test]
    fn counters_name_the_gateway_reason_type_for_their_keys() {
        let schema = serde_json::to_value(schemars::schema_for!(GatewayReason)).expect("schema");
        let counters = serde_json::to_value(schemars::schema_for!(EgressCounters)).expect("schema");
        let denials = &counters["properties"]["denials"];
        assert_eq!(denials["propertyNames"]["$ref"], "#/$defs/GatewayReason", "{counters}");
        assert_eq!(counters["$defs"]["GatewayReason"]["enum"], schema["enum"], "{counters}");
    }
}
