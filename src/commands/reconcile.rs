//! `roundtable reconcile KIND/NAME [--rerun]`: asks the running daemon through its API (it takes
//! effect at once), or reconciles once in-process when no daemon runs. Either way a stall is
//! cleared; `--rerun` first moves an Assignment to a new execution generation that runs afresh.

use std::process::ExitCode;

use roundtable_service::{Service, ServiceError};
use roundtable_specs::audit::{ReconcileHow, ReconcileRequested};

use crate::cli::Global;
use crate::commands::describe::parse_key;
use crate::commands::state::runtime;

/// Brings `key`'s status up to date after an operator's decision: the running daemon reconciles
/// it now, or `service` reconciles it once in-process. Best effort: a failure is said on stderr,
/// and the next reconcile catches up anyway.
pub async fn refresh(global: &Global, service: &Service, key: &roundtable_specs::ObjectKey) {
    let state_dir = global.state_dir();
    let failed = if roundtable_store::lock::holder(&state_dir).is_some() {
        let path = format!("/v1/reconcile/{}/{}", key.kind.as_str(), key.name);
        match roundtable_api::client::request(&state_dir, "POST", &path, None).await {
            Ok(answer) if answer.status == 202 => None,
            Ok(answer) => Some(format!("the daemon answered {}", answer.status)),
            Err(error) => Some(format!("{error:#}")),
        }
    } else {
        service.reconcile_in_process(key).await.err().map(|error| roundtable_telemetry::error_chain(&error))
    };
    if let Some(why) = failed {
        eprintln!("roundtable: {key}'s status was not brought up to date now ({why}); the next reconcile does it");
    }
}

pub async fn run(global: &Global, object: &str, rerun: bool) -> anyhow::Result<ExitCode> {
    let key = parse_key(object)?;
    let state_dir = global.state_dir();
    if let Some(holder) = roundtable_store::lock::holder(&state_dir) {
        // The daemon anchors the request in the audit chain itself.
        let query = if rerun { "?rerun=true" } else { "" };
        let path = format!("/v1/reconcile/{}/{}{query}", key.kind.as_str(), key.name);
        let answer = roundtable_api::client::request(&state_dir, "POST", &path, None).await?;
        if answer.status == 202 {
            let generation =
                serde_json::from_slice::<serde_json::Value>(&answer.body).ok().and_then(|body| body["rerun"].as_i64());
            match generation {
                Some(generation) => println!(
                    "the daemon ({holder}) is reconciling {key} now: execution generation {generation} runs the agent afresh"
                ),
                None => println!("the daemon ({holder}) is reconciling {key} now"),
            }
            return Ok(ExitCode::SUCCESS);
        }
        let message = crate::commands::status::daemon_message(&answer.body);
        eprintln!("error: the daemon answered {}: {message}", answer.status);
        return Ok(ExitCode::from(1));
    }
    let service = Service::open(global.project()?, runtime().await).await?;
    let rerun = match rerun {
        false => None,
        true => match service.rerun(&key).await {
            Ok(generation) => {
                println!("{key}: execution generation {generation} runs the agent afresh when a daemon runs it");
                Some(generation)
            }
            Err(error @ (ServiceError::UnknownObject { .. } | ServiceError::NotRunnable { .. })) => {
                eprintln!("error: {}", roundtable_telemetry::error_chain(&error));
                return Ok(ExitCode::from(1));
            }
            Err(error) => return Err(error.into()),
        },
    };
    let outcome = service.reconcile_in_process(&key).await;
    if outcome.is_ok() {
        let record = ReconcileRequested { object: key.to_string(), how: ReconcileHow::InProcess, rerun };
        crate::commands::audit::record_operator(global, &key.to_string(), record).await?;
    }
    match outcome {
        Ok(requeue) => {
            let next = requeue.map_or_else(String::new, |d| format!("; look again in {} s", d.as_secs()));
            println!("reconciled {key} (no daemon running){next}");
            Ok(ExitCode::SUCCESS)
        }
        Err(error @ (ServiceError::UnknownObject { .. } | ServiceError::Reconcile { .. })) => {
            eprintln!("error: {}", roundtable_telemetry::error_chain(&error));
            Ok(ExitCode::from(1))
        }
        Err(error) => Err(error.into()),
    }
}
