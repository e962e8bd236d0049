//! The Assignment kind: one run-to-completion unit of agent work, like a Kubernetes Job.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::adapter::Capability;
use crate::units::Duration;

/// The most re-runs an Assignment may ask for after failed executions.
pub const MAX_RETRIES: u32 = 10;

/// `spec` of an Assignment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssignmentSpec {
    /// The Adapter's exact name; there is no fallback.
    #[schemars(length(min = 1))]
    pub adapter: String,
    #[serde(default)]
    pub role: Role,
    pub task: Task,
    #[serde(default)]
    pub source: Source,
    /// Relative paths (files or folders) the agent may read; required and non-empty.
    #[schemars(length(min = 1), inner(regex(pattern = crate::field_patterns::READABLE_PATH)))]
    pub readable_paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::field_patterns::NOT_BLANK_LINE))]
    pub model: Option<String>,
    /// Overrides the adapter's timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// What one session may spend through the credential broker; unset fields fall back to the
    /// Adapter's `budget`. Not a run field: changing it does not start a new execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::broker::Budget>,
    /// Re-runs after a failed execution.
    #[serde(default)]
    #[schemars(range(max = MAX_RETRIES))]
    pub retries: u32,
    /// Capabilities the adapter must offer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<Capability>,
    /// True cancels a running execution and starts none.
    #[serde(default)]
    pub suspend: bool,
}

/// What the agent is asked to be.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    #[default]
    Implementer,
    Reviewer,
}

/// `spec.task`: the brief handed to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Task {
    #[schemars(regex(pattern = crate::field_patterns::NOT_BLANK))]
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    #[schemars(regex(pattern = crate::field_patterns::NOT_BLANK))]
    pub prompt: String,
}

/// `spec.source`: which repository and revision the workspace is cut from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Source {
    /// Relative to the project root; the top of a git work tree.
    #[serde(default = "Source::default_repo")]
    #[schemars(regex(pattern = crate::field_patterns::REPO_PATH))]
    pub repo: String,
    /// Resolved to a commit once, when the execution is provisioned, and recorded.
    #[serde(default = "Source::default_revision")]
    #[schemars(regex(pattern = crate::field_patterns::REVISION))]
    pub revision: String,
}

impl Source {
    fn default_repo() -> String {
        ".".into()
    }

    fn default_revision() -> String {
        "HEAD".into()
    }
}

impl Default for Source {
    fn default() -> Self {
        Self { repo: Self::default_repo(), revision: Self::default_revision() }
    }
}

/// The fields whose change starts a new execution; their digest is the execution generation.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFields<'a> {
    pub adapter: &'a str,
    pub role: Role,
    pub task: &'a Task,
    pub source: &'a Source,
    pub readable_paths: &'a [String],
    pub model: Option<&'a str>,
    pub requires: &'a [Capability],
}

impl RunFields<'_> {
    /// The resource paths of the run fields (`spec.task`, …): a change under one of them starts a
    /// new execution.
    pub fn paths(&self) -> Vec<String> {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(fields)) => fields.keys().map(|key| format!("spec.{key}")).collect(),
            _ => Vec::new(),
        }
    }
}

impl AssignmentSpec {
    pub fn run_fields(&self) -> RunFields<'_> {
        RunFields {
            adapter: &self.adapter,
            role: self.role,
            task: &self.task,
            source: &self.source,
            readable_paths: &self.readable_paths,
            model: self.model.as_deref(),
            requires: &self.requires,
        }
    }
}
