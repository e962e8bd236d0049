//! One probe on the engine: a container under the agent's full hardening (no network, read-only
//! root, every capability dropped, the agent's UID), never a brief, a source or sockets beyond
//! what the plan names (admission: none, or for the route canary the broker's socket with its
//! relay and the CLI's manifests; diagnostics: an empty read-only source and the MCP socket),
//! that runs the plan's commands one after another and is removed whatever happens.

use roundtable_session_runtime::{ProbeOutcome, ProbePlan, ProbeRun, Resources, RuntimeError};
use tokio::sync::watch;

use crate::container::{self, container_name, create_hardened, create_tmpfs_volumes, image_or_empty, volume_names};
use crate::engine::Engine;
use crate::errors::{already_gone, engine_error};
use crate::exec::run_exec;
use crate::profile::SandboxSpec;

/// What a probe container may use: enough for a CLI to print its help, nothing more.
const PROBE_RESOURCES: Resources = Resources {
    memory_bytes: 512 << 20,
    nano_cpus: 1_000_000_000,
    pids: 128,
    workspace_bytes: 16 << 20,
    tmp_bytes: 64 << 20,
};

/// Runs `plan` on `engine`; the container and volumes are removed on every path.
pub async fn run(engine: &Engine, plan: ProbePlan) -> Result<ProbeOutcome, RuntimeError> {
    let name = format!("probe-{}", plan.id);
    let outcome = lifecycle(engine, &plan, &name).await;
    if let Err(error) = container::remove_session(engine.docker(), &name).await {
        let error = roundtable_telemetry::error_chain(&error);
        tracing::error!(probe = %name, %error, "removing the probe's container or volumes failed; what is left carries the ownership labels for garbage collection");
    }
    outcome
}

async fn lifecycle(engine: &Engine, plan: &ProbePlan, name: &str) -> Result<ProbeOutcome, RuntimeError> {
    let docker = engine.docker();
    let image = image_or_empty(docker, plan.image.as_deref()).await?;
    let image_id = match docker.inspect_image(&image).await {
        Ok(found) => found.id.unwrap_or_default(),
        Err(error) if already_gone(&error) => return Err(RuntimeError::ImageMissing { image }),
        Err(error) => return Err(engine_error("inspect the image")(error)),
    };
    let [workspace_volume, tmp_volume] = volume_names(name);
    let spec = SandboxSpec {
        // The ID, not the reference: what is probed is exactly what the receipt names.
        image: image_id.clone(),
        labels: plan.ownership.labels(),
        resources: PROBE_RESOURCES,
        workspace_volume,
        tmp_volume,
        binary: plan.binary.clone(),
        source_dir: plan.mounts.source_dir.clone(),
        task_file: None,
        socket_dir: plan.mounts.socket_dir.clone(),
        home_volume: None,
        runtime: plan.runtime.clone(),
    };
    let container = container_name(name);
    create_tmpfs_volumes(docker, &container, &spec).await?;
    create_hardened(docker, &container, &spec).await?;
    container::start(docker, &container).await?;
    if !plan.tmp_entries.is_empty() {
        crate::session::seed_tmp(docker, &container, &plan.tmp_entries).await?;
    }
    if plan.broker_relay {
        let relays = crate::session::Relays { egress: false, broker: true };
        // Bounded like a command: the relay says it is listening within seconds or fails.
        if let Err(failure) = crate::session::start_proxy(docker, &container, relays).await {
            return Err(RuntimeError::Engine { step: "start the broker relay", source: Box::new(failure) });
        }
    }
    // A probe is never cancelled from outside; its commands are bounded by their timeout.
    let (_keep, mut never) = watch::channel(false);
    let mut runs = Vec::with_capacity(plan.commands.len());
    for command in &plan.commands {
        let argv = &command.argv;
        // The command's own variables (a capability) reach its exec alone, never the container.
        let env = plan.env.iter().chain(&command.env).cloned().collect();
        // Output beyond `output_limit` is drained and counted as it streams, never held.
        let result = run_exec(
            docker,
            &container,
            argv.clone(),
            env,
            command.stdin.clone(),
            plan.output_limit,
            Some(plan.timeout),
            &mut never,
        )
        .await?;
        runs.push(ProbeRun {
            argv: argv.clone(),
            exit_code: result.exit_code,
            stdout: result.stdout,
            stderr: result.stderr,
        });
    }
    Ok(ProbeOutcome { image_id, runs })
}
