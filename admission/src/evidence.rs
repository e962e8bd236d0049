//! The evidence one admission decision rests on, its deterministic projections (the replay
//! fingerprint, the conformance run id, the probe and profile hashes), the decision it supports
//! on its own (first failure wins), and the receipt that records it.

use roundtable_specs::adapter::{CredentialMode, ResolvedAdapter};
use roundtable_specs::admission::{
    CanaryVerdict, ChainHead, ConformanceVerdict, RECEIPT_KIND, RECEIPT_SCHEMA_VERSION, ReceiptBody, RefusalReason,
    Verdict,
};
use roundtable_specs::digest::{canonical_digest, canonical_json};
use roundtable_specs::names::RuntimeClass;
use serde_json::json;

use crate::contracts::{ContractError, LoadedContract};
use crate::replay::{ReplayResult, replay};
use crate::surface::Surface;

/// Everything admission knows about one adapter now.
#[derive(Debug, Clone)]
pub struct Evidence {
    pub adapter: String,
    pub image: Option<String>,
    /// The full image ID the probe ran in (empty when it could not run).
    pub image_id: String,
    /// The contract, `Ok(None)` when there is none, or what is wrong with it.
    pub contract: Result<Option<LoadedContract>, ContractError>,
    pub surface: Surface,
    pub replay: Vec<ReplayResult>,
    pub canary: CanaryVerdict,
    /// The capability profile, sorted.
    pub capabilities: Vec<String>,
    /// How the adapter's credentials reach its agent; `None` when it has none.
    pub credential_mode: Option<CredentialMode>,
    /// The OCI runtime the probes ran under and its sessions run under; `None` when unknown.
    pub runtime_class: Option<RuntimeClass>,
}

impl Evidence {
    /// Assembles the evidence: replays the contract's transcripts for `adapter`.
    pub fn gather(
        adapter: &ResolvedAdapter,
        image_id: String,
        contract: Result<Option<LoadedContract>, ContractError>,
        surface: Surface,
        canary: CanaryVerdict,
        runtime_class: Option<RuntimeClass>,
    ) -> Self {
        let replay = match &contract {
            Ok(Some(loaded)) => loaded.transcripts.iter().map(|t| replay(adapter, t)).collect(),
            _ => Vec::new(),
        };
        let mut capabilities: Vec<String> = adapter.capabilities().iter().map(|c| c.as_str().to_owned()).collect();
        capabilities.sort();
        Self {
            adapter: adapter.name.clone(),
            image: adapter.image.as_ref().map(ToString::to_string),
            image_id,
            contract,
            surface,
            replay,
            canary,
            capabilities,
            credential_mode: (!adapter.credential_env.is_empty()).then_some(adapter.credential_mode),
            runtime_class,
        }
    }

    fn loaded(&self) -> Option<&LoadedContract> {
        self.contract.as_ref().ok().and_then(Option::as_ref)
    }

    pub fn contract_hash(&self) -> String {
        self.loaded().map(|c| c.hash.clone()).unwrap_or_default()
    }

    /// The command the contract probes.
    pub fn binary(&self) -> String {
        self.loaded().and_then(|c| c.contract.version_command.first().cloned()).unwrap_or_default()
    }

    pub fn profile_hash(&self) -> String {
        canonical_digest(&self.capabilities)
    }

    pub fn probe_hash(&self) -> String {
        let identity =
            json!({"binary": self.binary(), "imageId": self.image_id, "installedVersion": self.surface.version});
        format!("sha256:{}", canonical_digest(&identity))
    }

    /// A deterministic projection of the image, contract, version, profile and replay: two
    /// controllers on the same image and contract derive the same bytes. Free-text messages are
    /// left out; what the planner produced is in.
    pub fn fingerprint(&self) -> String {
        let mut results: Vec<_> = self
            .replay
            .iter()
            .map(|r| json!({"transcript": r.transcript, "passed": r.passed, "replayed": r.replayed}))
            .collect();
        results.sort_by_key(canonical_json);
        let mut preimage = json!({
            "schemaVersion": RECEIPT_SCHEMA_VERSION,
            "adapter": self.adapter,
            "imageId": self.image_id,
            "contractHash": self.contract_hash(),
            "installedVersion": self.surface.version.clone().unwrap_or_default(),
            "profileHash": self.profile_hash(),
            "results": results,
        });
        // Only when there are credentials, so receipts of adapters without any keep their bytes.
        if let Some(mode) = self.credential_mode {
            preimage["credentialMode"] = json!(mode.as_str());
        }
        if let Some(class) = &self.runtime_class {
            preimage["runtimeClass"] = json!(class.as_str());
        }
        format!("sha256:{}", canonical_digest(&preimage))
    }

    pub fn conformance_run_id(&self) -> String {
        let id = canonical_digest(&json!({
            "schemaVersion": RECEIPT_SCHEMA_VERSION,
            "adapter": self.adapter,
            "contractHash": self.contract_hash(),
            "profileHash": self.profile_hash(),
            "replayFingerprint": self.fingerprint(),
            "conformanceVerdict": self.surface.verdict,
        }));
        id[..32].to_owned()
    }

    /// The refusal the evidence supports on its own, first failure first; `None`: it admits.
    pub fn refusal(&self) -> Option<(RefusalReason, String)> {
        let loaded = match &self.contract {
            Err(why) => return Some((RefusalReason::NoContract, roundtable_telemetry::error_chain(why))),
            Ok(None) => {
                return Some((RefusalReason::NoContract, format!("no contract for adapter {:?}", self.adapter)));
            }
            Ok(Some(loaded)) => loaded,
        };
        match self.surface.verdict {
            ConformanceVerdict::Fail => return Some((RefusalReason::ConformanceFail, self.surface.detail.clone())),
            ConformanceVerdict::Skip => return Some((RefusalReason::ConformanceSkip, self.surface.detail.clone())),
            ConformanceVerdict::Ok => {}
        }
        if loaded.transcripts.is_empty() {
            return Some((RefusalReason::NoTranscript, "the contract has no golden transcript".into()));
        }
        if let Some(failed) = self.replay.iter().find(|r| !r.passed) {
            return Some((
                RefusalReason::ReplayDiverged,
                format!("transcript {}: {}", failed.transcript, failed.diverged.join("; ")),
            ));
        }
        if self.canary == CanaryVerdict::Red {
            return Some((RefusalReason::CanaryRed, format!("the canary for image {} is red", self.image_id)));
        }
        None
    }

    /// The receipt this evidence seals, generated at `generated_at` (RFC 3339).
    pub fn receipt(&self, ttl_seconds: u64, generated_at: String, audit_head: Option<ChainHead>) -> ReceiptBody {
        let refusal = self.refusal();
        let every: Vec<String> = std::iter::once("spawn".to_owned())
            .chain(roundtable_specs::adapter::Capability::ALL.iter().map(|c| c.as_str().to_owned()))
            .collect();
        let (verdict, reason, allowed, remediation) = match &refusal {
            None => {
                let mut allowed = vec!["spawn".to_owned()];
                allowed.extend(self.capabilities.iter().cloned());
                (Verdict::Admit, None, allowed, String::new())
            }
            Some((reason, _)) => (Verdict::Refuse, Some(*reason), Vec::new(), reason.remediation(&self.adapter)),
        };
        let mut allowed = allowed;
        allowed.sort();
        let mut forbidden: Vec<String> = every.into_iter().filter(|c| !allowed.contains(c)).collect();
        forbidden.sort();
        let detail = match &refusal {
            Some((_, detail)) => detail.clone(),
            None => self.surface.detail.clone(),
        };
        ReceiptBody {
            schema_version: RECEIPT_SCHEMA_VERSION,
            kind: RECEIPT_KIND.into(),
            adapter: self.adapter.clone(),
            image: self.image.clone(),
            image_id: self.image_id.clone(),
            binary: self.binary(),
            installed_version: self.surface.version.clone(),
            probe_hash: self.probe_hash(),
            contract_hash: self.contract_hash(),
            contract_source: self.loaded().map(LoadedContract::source_text).unwrap_or_default(),
            profile_hash: self.profile_hash(),
            credential_mode: self.credential_mode,
            runtime_class: self.runtime_class.clone(),
            replay_fingerprint: self.fingerprint(),
            conformance_run_id: self.conformance_run_id(),
            conformance_verdict: self.surface.verdict,
            conformance_detail: detail,
            transcripts: self.replay.iter().map(|r| r.transcript.clone()).collect(),
            canary_verdict: self.canary,
            verdict,
            reason,
            allowed_capabilities: allowed,
            forbidden_capabilities: forbidden,
            ttl_seconds,
            generated_at,
            remediation,
            audit_head,
        }
    }
}
