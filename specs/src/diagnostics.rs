//! Agent diagnostics: what one probe of an adapter's image found, check by check, as the CLI and
//! the HTTP API show it and the state store keeps it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::list::ListItem;

/// How a whole diagnostic ended: failed when any check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DiagnosticStatus {
    Passed,
    Failed,
}

/// How one check ended. `skipped` says the check does not apply (or could not be reached), never
/// that it passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CheckStatus {
    Passed,
    Failed,
    Skipped,
}

/// One check of a diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticCheck {
    /// `image`, `executable_version`, `read_only_boundary` or `mcp_surface`.
    pub name: String,
    pub status: CheckStatus,
    /// What was observed; anything the container printed is redacted first.
    pub detail: String,
    /// What to do about a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<String>,
}

impl DiagnosticCheck {
    pub fn passed(name: &str, detail: impl Into<String>) -> Self {
        Self { name: name.to_owned(), status: CheckStatus::Passed, detail: detail.into(), remediation: None }
    }

    pub fn failed(name: &str, detail: impl Into<String>, remediation: impl Into<String>) -> Self {
        Self {
            name: name.to_owned(),
            status: CheckStatus::Failed,
            detail: detail.into(),
            remediation: Some(remediation.into()),
        }
    }

    pub fn skipped(name: &str, why: impl Into<String>) -> Self {
        Self { name: name.to_owned(), status: CheckStatus::Skipped, detail: why.into(), remediation: None }
    }
}

/// One diagnostic run of an adapter, inside its image, under the agent's hardening.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticReport {
    /// `diag-` and 12 hex characters.
    pub id: String,
    /// The adapter's name.
    pub agent: String,
    /// The image reference the adapter names; absent for the built-in `mock` (the empty image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The image ID the probe ran in, when the image resolved on the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    pub status: DiagnosticStatus,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC.
    pub finished_at: String,
    pub checks: Vec<DiagnosticCheck>,
    /// What the version command printed, secrets redacted, at most 2,000 bytes.
    pub excerpt: String,
    /// The excerpt is shorter than what was printed.
    pub excerpt_truncated: bool,
}

impl DiagnosticReport {
    /// Failed when any check failed; skipped checks do not fail a diagnostic.
    pub fn status_of(checks: &[DiagnosticCheck]) -> DiagnosticStatus {
        if checks.iter().any(|check| check.status == CheckStatus::Failed) {
            DiagnosticStatus::Failed
        } else {
            DiagnosticStatus::Passed
        }
    }

    /// The check named `name`, if it ran.
    pub fn check(&self, name: &str) -> Option<&DiagnosticCheck> {
        self.checks.iter().find(|check| check.name == name)
    }
}

impl ListItem for DiagnosticReport {
    const LIST_KIND: &'static str = "DiagnosticReportList";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(checks: Vec<DiagnosticCheck>) -> DiagnosticReport {
        DiagnosticReport {
            id: "diag-0123456789ab".into(),
            agent: "codex".into(),
            image: Some("agent:latest".into()),
            image_id: None,
            status: DiagnosticReport::status_of(&checks),
            started_at: "2026-01-01T00:00:00.000000000Z".into(),
            finished_at: "2026-01-01T00:00:01.000000000Z".into(),
            checks,
            excerpt: String::new(),
            excerpt_truncated: false,
        }
    }

    #[test]
    fn any_failed_check_fails_the_diagnostic_and_skipped_ones_do_not() {
        let cases = [
            (vec![DiagnosticCheck::passed("image", "ok")], DiagnosticStatus::Passed),
            (
                vec![DiagnosticCheck::passed("image", "ok"), DiagnosticCheck::skipped("mcp_surface", "no MCP")],
                DiagnosticStatus::Passed,
            ),
            (
                vec![
                    DiagnosticCheck::passed("image", "ok"),
                    DiagnosticCheck::failed("executable_version", "exit 127", "install it"),
                ],
                DiagnosticStatus::Failed,
            ),
            (Vec::new(), DiagnosticStatus::Passed),
        ];
        for (checks, want) in cases {
            assert_eq!(DiagnosticReport::status_of(&checks), want, "{checks:?}");
        }
    }

    #[test]
    fn the_report_serialises_camel_case_and_round_trips() {
        let report = report(vec![DiagnosticCheck::failed("image", "missing", "build it")]);
        let json = serde_json::to_value(&report).expect("serializes");
        assert_eq!(json["imageId"], serde_json::Value::Null);
        assert!(json.get("imageId").is_none(), "absent, not null: {json}");
        assert_eq!(json["status"], "failed");
        assert_eq!(json["excerptTruncated"], false);
        assert_eq!(json["checks"][0]["remediation"], "build it");
        let text = serde_json::to_string(&report).expect("serializes");
        let back: DiagnosticReport = serde_json::from_str(&text).expect("parses");
        assert_eq!(serde_json::to_string(&back).expect("serializes"), text);
        assert_eq!(crate::List::of(vec![back]).kind, "DiagnosticReportList");
    }
}
