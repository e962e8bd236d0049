//! The words of delivering a proposal (docs/delivery.md): the review gates a proposal passes on
//! its way to a branch, what each finds, the policy that says which block, and what an operator's
//! accept or reject records.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::Quantity;
use crate::words::words;

words! {
    /// A review gate.
    ProposalGate {
        /// Secrets in added lines: cloud and forge tokens, provider API keys, private keys, JWTs,
        /// high-entropy values assigned to secret-like names, the broker's placeholders, and the
        /// daemon's own credential values (the `credentialCanary` flag).
        Secrets = "secrets",
        /// A change to a protected path (CI, hooks, agent configuration, specs).
        ProtectedPaths = "protectedPaths",
        /// More files, or more added bytes, than the policy's caps.
        Size = "size",
    }
}

words! {
    /// What a gate's finding does at accept.
    #[derive(Default)]
    GateAction {
        /// Refused, even with `--override`, unless the policy's `allowOverride` names the gate.
        Block = "block",
        /// Refused unless the operator passes `--override GATE --reason TEXT`.
        #[default]
        Review = "review",
        /// Not checked.
        Off = "off",
    }
}

/// `AdmissionPolicy.spec.proposals`: what each review gate does at accept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProposalGates {
    #[serde(default = "ProposalGates::block")]
    pub secrets: GateAction,
    #[serde(default)]
    pub protected_paths: GateAction,
    #[serde(default)]
    pub size: GateAction,
    /// The most files one proposal may change before the size gate finds it.
    #[serde(default = "ProposalGates::default_max_files")]
    pub max_files: u64,
    /// The most bytes of added lines before the size gate finds it.
    #[serde(default = "ProposalGates::default_max_added_bytes")]
    pub max_added_bytes: Quantity,
    /// `block` gates an operator may still override (with a reason); none by default.
    #[serde(default)]
    pub allow_override: Vec<ProposalGate>,
}

impl ProposalGates {
    fn block() -> GateAction {
        GateAction::Block
    }

    fn default_max_files() -> u64 {
        1000
    }

    fn default_max_added_bytes() -> Quantity {
        Quantity::from_bytes(10 << 20)
    }

    pub fn action(&self, gate: ProposalGate) -> GateAction {
        match gate {
            ProposalGate::Secrets => self.secrets,
            ProposalGate::ProtectedPaths => self.protected_paths,
            ProposalGate::Size => self.size,
        }
    }
}

impl Default for ProposalGates {
    fn default() -> Self {
        Self {
            secrets: Self::block(),
            protected_paths: GateAction::Review,
            size: GateAction::Review,
            max_files: Self::default_max_files(),
            max_added_bytes: Self::default_max_added_bytes(),
            allow_override: Vec::new(),
        }
    }
}

/// One thing a gate found. Never carries the secret itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub gate: ProposalGate,
    /// The rule that matched (`aws-access-key`, `private-key`, `protected-path`, `max-files`, …).
    pub rule: String,
    /// The file, as in the patch; empty for a finding about the whole proposal.
    pub path: String,
    /// The line in the new file, when the finding is in an added line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.path.is_empty(), self.line) {
            (true, _) => write!(f, "{}: {}", self.gate, self.rule),
            (false, Some(line)) => write!(f, "{}: {} at {}:{line}", self.gate, self.rule, self.path),
            (false, None) => write!(f, "{}: {} at {}", self.gate, self.rule, self.path),
        }
    }
}

/// An operator's override of one gate at accept, with the reason (audited, and a trailer on the
/// commit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateOverride {
    pub gate: ProposalGate,
    pub reason: String,
}

/// What an accepted or rejected proposal records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// RFC 3339.
    pub at: String,
    /// Who decided: the operator's git identity (accept) or the OS user (reject).
    pub by: String,
    /// A reject's reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// An accept's branch (`refs/heads/…`) and commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Where `--push` pushed the branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed_to: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<GateOverride>,
    /// What the gates found at accept (each passed, or was overridden).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
}
