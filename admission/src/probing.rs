//! Probing an adapter's image: the probe plan (a container labelled apart from agents, under
//! the agent's hardening), the cache of what it read (by image ID and contract hash), and the
//! identity that stands in for an image ID when the agent is Roundtable's own mounted binary.

use roundtable_session_runtime::{Captured, Ownership, ProbeCommand, ProbePlan, ProbeRun, Purpose};
use roundtable_specs::adapter::ResolvedAdapter;
use serde_json::json;

use roundtable_telemetry::error_chain;

use crate::authority::{Admitter, PROBE_TIMEOUT};
use crate::contracts::LoadedContract;
use crate::launch::{Launchable, RuntimeRefused};
use crate::surface::{self, Surface};

fn run_to_json(run: &ProbeRun) -> serde_json::Value {
    json!({
        "argv": run.argv,
        "exitCode": run.exit_code,
        "stdout": String::from_utf8_lossy(&run.stdout.bytes),
        "stderr": String::from_utf8_lossy(&run.stderr.bytes),
    })
}

fn run_from_json(value: &serde_json::Value) -> Option<ProbeRun> {
    let text = |name: &str| value.get(name).and_then(|v| v.as_str()).unwrap_or_default().as_bytes().to_vec();
    let captured = |bytes: Vec<u8>| Captured { total: bytes.len() as u64, bytes };
    Some(ProbeRun {
        argv: serde_json::from_value(value.get("argv")?.clone()).ok()?,
        exit_code: value.get("exitCode").and_then(serde_json::Value::as_i64),
        stdout: captured(text("stdout")),
        stderr: captured(text("stderr")),
    })
}

impl Admitter {
    /// A probe of `commands` in `adapter`'s image, labelled apart from agents; its runtime is
    /// set when it is launched (`launch.rs`), from the runtime class gate's decision.
    pub(crate) fn probe_plan(&self, adapter: &ResolvedAdapter, commands: Vec<ProbeCommand>) -> ProbePlan {
        let nonce = format!("{}:{}:{:?}", adapter.name, std::process::id(), std::time::SystemTime::now());
        let id = format!(
            "{}-{}",
            roundtable_specs::names::slug(&adapter.name),
            &roundtable_specs::digest::sha256_hex(nonce.as_bytes())[..12]
        );
        ProbePlan {
            id: id.clone(),
            ownership: Ownership {
                project: self.project.clone(),
                assignment: None,
                session: format!("probe-{id}"),
                controller_run: self.controller_run.clone(),
                purpose: Purpose::Probe,
            },
            image: adapter.image.as_ref().map(ToString::to_string),
            binary: self.binary.clone(),
            commands,
            env: surface::probe_env(),
            timeout: PROBE_TIMEOUT,
            output_limit: surface::PROBE_OUTPUT_LIMIT,
            mounts: Default::default(),
            tmp_entries: Vec::new(),
            runtime: None,
            broker_relay: false,
        }
    }

    /// Runs (or reads from the cache) the probe for `contract` in `adapter`'s image, under the
    /// runtime the runtime class gate decided (`launch`); refused, nothing runs and the surface
    /// says why.
    pub(crate) async fn probe(
        &self,
        adapter: &ResolvedAdapter,
        loaded: &LoadedContract,
        launch: &Result<Launchable, RuntimeRefused>,
    ) -> (String, Surface) {
        let image = adapter.image.as_ref().map(ToString::to_string);
        if image.is_none() && adapter.command != roundtable_specs::builtins::IN_CONTAINER_BINARY {
            return (String::new(), Surface::skipped("spec.image is not set: there is nothing to probe"));
        }
        let launchable = match launch {
            Ok(launchable) => launchable,
            Err(refused) => return (String::new(), Surface::skipped(format!("not probed: {refused}"))),
        };
        // A probe under one runtime says nothing of another: the cache keeps them apart.
        let cache_key = match launchable.class() {
            Some(class) => format!("{}@{class}", loaded.hash),
            None => loaded.hash.clone(),
        };
        // The cache is keyed by image ID; the empty image runs our own binary, which changes
        // with every build, so the mock is always probed afresh.
        let known_id = match &image {
            Some(reference) => match self.runtime.inspect_image(reference).await {
                Ok(Some(held)) => Some(held.id),
                Ok(None) => {
                    return (String::new(), Surface::skipped(format!("image {reference} is not on the engine")));
                }
                Err(error) => {
                    return (String::new(), Surface::skipped(format!("cannot inspect image {reference}: {error}")));
                }
            },
            // The empty image runs our own mounted binary: its identity (path, size, modification
            // time) stands in for the image ID, so a new build is probed afresh.
            None => Some(self.own_binary_identity()),
        };
        if let Some(id) = &known_id
            && let Ok(Some(cached)) = self.store.probe(id, &cache_key).await
            && let Ok(serde_json::Value::Array(values)) = serde_json::from_str::<serde_json::Value>(&cached)
        {
            let runs: Vec<ProbeRun> = values.iter().filter_map(run_from_json).collect();
            return (id.clone(), surface::conformance(&loaded.contract, &runs));
        }
        let plan = self.probe_plan(adapter, surface::probe_commands(&loaded.contract));
        match self.launch_under(launchable, plan).await {
            Ok(outcome) => {
                let id = if image.is_some() { outcome.image_id } else { known_id.unwrap_or_default() };
                let runs: Vec<serde_json::Value> = outcome.runs.iter().map(run_to_json).collect();
                let text = serde_json::Value::Array(runs).to_string();
                if let Err(error) = self.store.save_probe(&id, &cache_key, &text).await {
                    tracing::warn!(%error, "cannot cache the probe result");
                }
                let surface = surface::conformance(&loaded.contract, &outcome.runs);
                (id, surface)
            }
            Err(error) => (
                known_id.unwrap_or_default(),
                Surface::skipped(format!("the probe did not run: {}", error_chain(&error))),
            ),
        }
    }

    pub(crate) fn own_binary_identity(&self) -> String {
        let meta = std::fs::metadata(&self.binary).ok();
        let modified = meta.as_ref().and_then(|m| m.modified().ok()).map(|t| format!("{t:?}")).unwrap_or_default();
        let identity = format!("{}:{}:{modified}", self.binary.display(), meta.map_or(0, |m| m.len()));
        format!("empty+{}", &roundtable_specs::digest::sha256_hex(identity.as_bytes())[..16])
    }
}
