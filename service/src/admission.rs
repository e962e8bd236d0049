//! `admission check|list|canary`: the admission authority over the adapters and policy the spec
//! directory declares (so a check needs no daemon and no recorded state).

use std::path::PathBuf;
use std::sync::Arc;

use roundtable_admission::gate;
use roundtable_admission::{Admitter, Check};
use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::admission::{AdmissionItem, CanaryItem, CanaryVerdict, GateKind};
use roundtable_specs::policy::{AdmissionMode, AdmissionPolicySpec};
use roundtable_specs::{Catalog, Spec};
use roundtable_store::audit::AuditKey;

use crate::{Result, Service, ServiceError};

/// The adapters and the policy the spec directory declares.
struct Declared {
    catalog: Catalog,
    policy: AdmissionPolicySpec,
}

impl Service {
    fn declared(&self) -> Declared {
        let loaded = crate::load(Some(&self.project));
        let policy = loaded
            .objects
            .iter()
            .find_map(|o| match &o.spec {
                Spec::AdmissionPolicy(policy) => Some(policy.clone()),
                _ => None,
            })
            .unwrap_or_default();
        Declared { catalog: Catalog::build(&loaded.objects), policy }
    }

    /// Every adapter the spec directory declares, over the built-ins.
    pub(crate) fn declared_catalog(&self) -> Catalog {
        self.declared().catalog
    }

    /// The AdmissionPolicy the spec directory declares (the default without one).
    pub(crate) fn declared_policy(&self) -> AdmissionPolicySpec {
        self.declared().policy
    }

    /// The admission authority of this project; `binary` is mounted into probes, `audit_key`
    /// anchors what it seals and attests (without it, receipts' anchors are verified under the
    /// service's anchor key).
    pub fn admitter(&self, binary: PathBuf, audit_key: Option<Arc<AuditKey>>) -> Admitter {
        Admitter::new(
            self.runtime.clone(),
            self.store.clone(),
            self.project.spec_dir.clone(),
            binary,
            self.project.id.clone(),
            audit_key,
        )
        .with_anchor_key(self.anchor_key.clone(), self.missing_key.clone())
        // What the project declares, never what a daemon last recorded: without a daemon (or
        // before its resync) the recorded policy is stale or the default, and a canary decided
        // by it ran an image the declared runtime class refuses.
        .with_policy(self.declared_policy())
    }

    /// One adapter's admission now; with `seal`, a fresh receipt is sealed from the live
    /// evidence first (an admit or a refusal) and anchored in the audit chain.
    pub async fn admission_check(&self, admitter: &Admitter, name: &str, seal: bool) -> Result<AdmissionItem> {
        let policy = self.declared_policy();
        let adapter = self.adapter(name).await?;
        if seal {
            admitter.seal(&adapter, &policy).await.map_err(ServiceError::Admission)?;
        }
        Ok(self.admission_item(admitter, &adapter, &policy).await)
    }

    /// Every adapter's admission, alphabetical.
    pub async fn admission_list(&self, admitter: &Admitter) -> Result<Vec<AdmissionItem>> {
        let declared = self.declared();
        let mut items = Vec::new();
        for (_, entry) in declared.catalog.iter() {
            items.push(self.admission_item(admitter, &entry.resolved, &declared.policy).await);
        }
        Ok(items)
    }

    async fn admission_item(
        &self,
        admitter: &Admitter,
        adapter: &ResolvedAdapter,
        policy: &AdmissionPolicySpec,
    ) -> AdmissionItem {
        let check = admitter.check(adapter, policy).await;
        let ttl = policy.receipt_ttl.as_std().as_secs();
        let receipt = check.receipt_summary(admitter.receipts(), ttl);
        let evidence = check.evidence_summary();
        let Check { evidence: live, decision, exempt, .. } = check;
        let floor = gate::floor_of(policy.min_versions.get(&adapter.name), adapter.min_version.as_ref());
        let floor = gate::security_floor(&adapter.name, live.surface.version.as_deref(), floor);
        let spawn = policy.mode != AdmissionMode::Enforce || ((exempt || decision.admitted()) && floor.admitted());
        debug_assert_eq!(decision.gate, GateKind::Admission);
        AdmissionItem {
            adapter: adapter.name.clone(),
            mode: policy.mode,
            exempt,
            spawn,
            decisions: vec![decision, floor],
            evidence,
            receipt,
        }
    }

    /// Runs the canary of `name` and attests its verdict for the image for `ttl`.
    pub async fn admission_canary(
        &self,
        admitter: &Admitter,
        name: &str,
        ttl: std::time::Duration,
    ) -> Result<CanaryItem> {
        let adapter = self.adapter(name).await?;
        let (canary, run) = admitter.canary(&adapter, ttl).await.map_err(ServiceError::Admission)?;
        let mut output = String::from_utf8_lossy(&run.stdout.bytes).lines().take(20).collect::<Vec<_>>().join("\n");
        if !run.stderr.bytes.is_empty() {
            output.push_str("\n[stderr] ");
            output
                .push_str(&String::from_utf8_lossy(&run.stderr.bytes).lines().take(10).collect::<Vec<_>>().join("\n"));
        }
        Ok(CanaryItem {
            adapter: canary.adapter,
            image_id: canary.image_id,
            verdict: if canary.verdict == "green" { CanaryVerdict::Green } else { CanaryVerdict::Red },
            detail: canary.detail,
            argv: run.argv,
            exit_code: run.exit_code,
            output,
            at: canary.at,
            expires_at: canary.expires_at,
        })
    }
}
