//! What every handler shares: the service layer (the CLI's own), the running daemon, and who
//! this API serves.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use roundtable_core::daemon::DaemonLink;
use roundtable_service::Service;
use roundtable_store::audit::AuditKey;

use crate::auth::OperatorToken;

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
    /// The daemon's own binary (mounted into diagnostic probes).
    pub binary: PathBuf,
    /// What `status` counts as past retention.
    pub retention: Duration,
}

impl ApiState {
    /// Anchors an operator's action in the audit chain (when the daemon keeps one).
    pub async fn record_operator(&self, kind: &str, subject: &str, mut record: serde_json::Value) {
        let Some(key) = &self.audit_key else { return };
        if let Some(map) = record.as_object_mut() {
            map.insert("via".into(), "api".into());
        }
        let entry = roundtable_store::audit::AuditedEntry { kind, subject, record };
        if let Err(error) = self.service.store().append_audited(key, &entry).await {
            tracing::error!(kind, subject, error = %roundtable_telemetry::error_chain(&error), "cannot anchor an operator action in the audit chain");
        }
    }
}
