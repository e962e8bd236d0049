//! Canary attestations: the contract's first golden transcript launched for real in the
//! adapter's image, and the verdict recorded for that image ID until it expires.

use roundtable_session_runtime::{ProbeCommand, ProbeRun};
use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::admission::CanaryAttestation;
use roundtable_specs::admission::CanaryVerdict;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::authority::{AdmissionError, Admitter, PROBE_TIMEOUT};
use crate::contracts;

impl Admitter {
    pub(crate) async fn canary_verdict(&self, adapter: &str, image_id: &str) -> CanaryVerdict {
        match self.store.canary(adapter, image_id).await {
            Ok(Some(canary)) => {
                let fresh = OffsetDateTime::parse(&canary.expires_at, &Rfc3339).is_ok_and(|at| self.now() <= at);
                match (canary.verdict.as_str(), fresh) {
                    ("red", true) => CanaryVerdict::Red,
                    ("green", true) => CanaryVerdict::Green,
                    _ => CanaryVerdict::Stale,
                }
            }
            _ => CanaryVerdict::Unknown,
        }
    }

    /// The canary: the contract's first golden transcript launched for real in the adapter's
    /// image (its planned command line, the prompt on stdin when the plan says so), under the
    /// probe's hardening with no network, no MCP endpoint and no credentials. Green when the CLI
    /// exits 0 and, where the transcript expects a session id, the capture finds one in what it
    /// printed; red otherwise. A brokered Adapter's canary proves its route instead
    /// (`route.rs`): green only when the CLI's model request reached a rehearsal broker with
    /// the placeholder. The verdict is attested for the image ID for `ttl`.
    pub async fn canary(
        &self,
        adapter: &ResolvedAdapter,
        ttl: std::time::Duration,
    ) -> Result<(CanaryAttestation, ProbeRun), AdmissionError> {
        let failed = |why: String| AdmissionError::Canary { adapter: adapter.name.clone(), why };
        let loaded = match contracts::load(&self.contracts, adapter) {
            Ok(Some(loaded)) => loaded,
            Ok(None) => return Err(failed("has no contract, so no canary transcript".into())),
            Err(why) => return Err(failed(roundtable_telemetry::error_chain(&why))),
        };
        let Some(transcript) = loaded.transcripts.first() else {
            return Err(failed("its contract has no golden transcript to run as the canary".into()));
        };
        if adapter.image.is_none() && adapter.command != roundtable_specs::builtins::IN_CONTAINER_BINARY {
            return Err(AdmissionError::NoImage(adapter.name.clone()));
        }
        // Decided before anything is set up: refused, nothing of the image runs.
        let launchable = self.launchable(adapter, &self.policy().await).await?;
        if adapter.brokered() {
            let found =
                self.route_canary(adapter, &launchable, &transcript.prompt, transcript.model.as_deref()).await?;
            let image_id = if adapter.image.is_some() { found.image_id } else { self.own_binary_identity() };
            let canary = self.attest(&adapter.name, &image_id, found.passed, found.detail, ttl).await?;
            return Ok((canary, found.run));
        }
        let input =
            roundtable_agents::plan::PlanInput { prompt: &transcript.prompt, model: transcript.model.as_deref() };
        let planned = roundtable_agents::plan::plan(adapter, input, false);
        let stdin = match planned.stdin {
            roundtable_agents::plan::Stdin::Prompt => Some(transcript.prompt.clone().into_bytes()),
            roundtable_agents::plan::Stdin::Empty => Some(Vec::new()),
        };
        let plan = self.probe_plan(adapter, vec![ProbeCommand { stdin, ..ProbeCommand::new(planned.argv.clone()) }]);
        let outcome = self.launch_under(&launchable, plan).await?;
        let Some(run) = outcome.runs.into_iter().next() else {
            return Err(failed("the canary ran no command".into()));
        };
        let captured = roundtable_agents::capture::capture(adapter.provider, &run.stdout.bytes, run.stdout.truncated());
        let (passed, detail) = match (run.exit_code, transcript.session_id.is_some(), captured.session_id) {
            (Some(0), false, _) => (true, "exited 0".to_owned()),
            (Some(0), true, Ok(id)) => (true, format!("exited 0; captured session {}", id.as_str())),
            (Some(0), true, Err(why)) => (false, format!("exited 0 but no session id was captured: {why}")),
            (Some(code), _, _) => (false, format!("exited {code}")),
            (None, _, _) => (false, format!("did not finish within {} s", PROBE_TIMEOUT.as_secs())),
        };
        // Attested under the same image identity the evidence uses.
        let image_id = if adapter.image.is_some() { outcome.image_id } else { self.own_binary_identity() };
        let canary = self.attest(&adapter.name, &image_id, passed, detail, ttl).await?;
        Ok((canary, run))
    }

    /// Records a canary attestation for `adapter`'s image.
    pub async fn attest(
        &self,
        adapter: &str,
        image_id: &str,
        passed: bool,
        detail: String,
        ttl: std::time::Duration,
    ) -> Result<CanaryAttestation, AdmissionError> {
        let now = self.now();
        let expires = now + ttl;
        let canary = CanaryAttestation {
            adapter: adapter.into(),
            image_id: image_id.into(),
            verdict: if passed { "green" } else { "red" }.into(),
            detail,
            at: now.format(&Rfc3339).unwrap_or_default(),
            expires_at: expires.format(&Rfc3339).unwrap_or_default(),
        };
        self.store.record_canary(&canary).await?;
        self.audit(&format!("Adapter/{adapter}"), &canary).await;
        Ok(canary)
    }
}
