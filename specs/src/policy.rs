//! The AdmissionPolicy kind: how admission receipts gate adapters (at most one per project).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::{RuntimeClass, VersionFloor};
use crate::units::Duration;

/// `spec` of the AdmissionPolicy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionPolicySpec {
    #[serde(default)]
    pub mode: AdmissionMode,
    #[serde(default = "AdmissionPolicySpec::default_receipt_ttl")]
    #[schemars(extend("not" = {"pattern": crate::field_patterns::ZERO_DURATION}))]
    pub receipt_ttl: Duration,
    /// Adapters that spawn without a receipt; only `mock` by default.
    #[serde(default = "AdmissionPolicySpec::default_exempt")]
    pub exempt: Vec<String>,
    /// A tag instead of a digest is an error rather than a warning.
    #[serde(default)]
    pub require_digest: bool,
    /// Version floors per adapter name.
    #[serde(default)]
    pub min_versions: BTreeMap<String, VersionFloor>,
    /// The review gates a proposal passes on its way to a branch (docs/delivery.md).
    #[serde(default)]
    pub proposals: crate::delivery::ProposalGates,
    /// The OCI runtime of every Adapter that names none (docs/runtime-classes.md); unset: the
    /// engine's default runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class: Option<RuntimeClass>,
    /// The only runtime classes an agent may run under: a spawn under any other is refused
    /// before anything of it exists, whatever the `mode`. Empty: any the engine has.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub require_runtime_class: Vec<RuntimeClass>,
}

impl AdmissionPolicySpec {
    fn default_receipt_ttl() -> Duration {
        Duration::from_secs(24 * 3600)
    }

    fn default_exempt() -> Vec<String> {
        vec!["mock".into()]
    }
}

impl Default for AdmissionPolicySpec {
    /// The policy in force when no AdmissionPolicy exists.
    fn default() -> Self {
        Self {
            mode: AdmissionMode::default(),
            receipt_ttl: Self::default_receipt_ttl(),
            exempt: Self::default_exempt(),
            require_digest: false,
            min_versions: BTreeMap::new(),
            proposals: Default::default(),
            runtime_class: None,
            require_runtime_class: Vec::new(),
        }
    }
}

/// `off` skips admission; `warn` decides and records but never blocks; `enforce` blocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AdmissionMode {
    Off,
    #[default]
    Warn,
    Enforce,
}

impl AdmissionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AdmissionMode::Off => "off",
            AdmissionMode::Warn => "warn",
            AdmissionMode::Enforce => "enforce",
        }
    }
}
