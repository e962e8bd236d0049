//! The legacy `.roundtable/config.yaml` format: a top-level `adapters:` map with snake_case keys,
//! read as Adapter resources.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::adapter::AdapterSpec;
use crate::names::{EnvVarName, HostName, ImageRef};
use crate::resume::ResumePattern;

/// The whole legacy file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LegacyConfig {
    #[serde(default)]
    pub adapters: BTreeMap<String, LegacyAdapter>,
}

/// One entry of the legacy `adapters:` map.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LegacyAdapter {
    #[serde(default)]
    pub image: Option<ImageRef>,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub supports_resume: Option<bool>,
    #[serde(default)]
    pub resume_pattern: Option<ResumePattern>,
    #[serde(default)]
    pub supports_mcp: Option<bool>,
    #[serde(default)]
    pub supports_readonly_workspace: Option<bool>,
    #[serde(default)]
    pub captures_session_id: Option<bool>,
    #[serde(default)]
    pub provider_hosts: Option<Vec<HostName>>,
    #[serde(default)]
    pub credential_env: Option<Vec<EnvVarName>>,
}

impl From<LegacyAdapter> for AdapterSpec {
    fn from(legacy: LegacyAdapter) -> Self {
        AdapterSpec {
            image: legacy.image,
            command: legacy.command,
            supports_resume: legacy.supports_resume,
            resume_pattern: legacy.resume_pattern,
            supports_mcp: legacy.supports_mcp,
            supports_readonly_workspace: legacy.supports_readonly_workspace,
            captures_session_id: legacy.captures_session_id,
            provider_hosts: legacy.provider_hosts,
            credential_env: legacy.credential_env,
            ..AdapterSpec::default()
        }
    }
}

/// Whether a file is the legacy config by its path relative to the spec directory.
pub fn is_legacy_path(relative_path: &str) -> bool {
    matches!(relative_path, "config.yaml" | "config.yml")
}
