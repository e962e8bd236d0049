//! What every handler shares: the service layer (the CLI's own), the running daemon, who this
//! API serves, and the webhook's secret.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use roundtable_daemon::DaemonLink;
use roundtable_service::Service;
use roundtable_specs::audit::{AuditRecord, Operated, Operator, OperatorAction};
use roundtable_store::audit::AuditKey;

use crate::auth::OperatorToken;
use crate::hook::GitHook;

/// The API's shared state; cheap to clone.
#[derive(Clone)]
pub struct ApiState {
    pub service: Service,
    pub link: DaemonLink,
    /// The one workspace this daemon serves: its project's name.
    pub workspace: String,
    pub token: OperatorToken,
    /// Operator actions are anchored in the audit chain with it.
    pub audit_key: Option<Arc<AuditKey>>,
    /// The provenance signing key of accepted proposals (beside the audit key).
    pub provenance_key: PathBuf,
    /// The daemon's own binary (mounted into diagnostic probes).
    pub binary: PathBuf,
    /// What `status` counts as past retention.
    pub retention: Duration,
    /// The git webhook's secret, when `start --webhook-secret-file` gave one; without it the
    /// hook route answers `404 hook_not_configured` and reads no body.
    pub hook: Option<Arc<GitHook>>,
    /// Who is logged in to the review console (in memory: a restart logs everyone out).
    pub console: Arc<crate::login::ConsoleSessions>,
    /// `status`, materialised: what `/v1/status`, its watches and the console's pages serve.
    pub status: crate::status_view::StatusView,
}

impl ApiState {
    /// Every `status` row of the materialised view, as the CLI lists them.
    pub async fn status_rows(&self) -> Result<Vec<roundtable_specs::output::ObjectStatus>, crate::error::ApiError> {
        let snapshot = self.status.snapshot(std::time::Duration::from_secs(30)).await.map_err(|why| {
            crate::error::ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, "status_unavailable", why)
        })?;
        snapshot
            .rows
            .iter()
            .map(|row| row.status().map_err(|error| crate::error::ApiError::internal(error.to_string())))
            .collect()
    }

    /// Anchors an operator's action in the audit chain (when the daemon keeps one).
    pub async fn record_operator(&self, subject: &str, action: impl OperatorAction) {
        self.record(subject, &Operated { action, by: Operator::API }).await;
    }

    /// Appends `record` under `subject` to the audit chain (when the daemon keeps one); a failure
    /// is logged, never the caller's.
    pub async fn record(&self, subject: &str, record: &impl AuditRecord) {
        let Some(key) = &self.audit_key else { return };
        let kind = record.kind().as_str();
        let appended = match roundtable_store::audit::AuditedEntry::of(subject, record) {
            Ok(entry) => self.service.store().append_audited(key, &entry).await,
            Err(error) => Err(roundtable_store::Error::Record(error)),
        };
        if let Err(error) = appended {
            tracing::error!(kind, subject, error = %roundtable_telemetry::error_chain(&error), "cannot anchor an API action in the audit chain");
        }
    }
}
