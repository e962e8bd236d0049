//! `roundtable reconcile KIND/NAME`: asks the running daemon, or reconciles once in-process when
//! no daemon runs. Either way a stall is cleared.

use std::process::ExitCode;

use roundtable_service::{Reconciled, Service, ServiceError};

use crate::cli::Global;
use crate::commands::describe::parse_key;
use crate::commands::state::runtime;

pub async fn run(global: &Global, object: &str) -> anyhow::Result<ExitCode> {
    let key = parse_key(object)?;
    let service = Service::open(&global.dir, &global.state_dir(), runtime().await).await?;
    let outcome = service.reconcile(&key).await;
    let how = match &outcome {
        Ok(Reconciled::Requested { .. }) => Some("requested"),
        Ok(Reconciled::InProcess { .. }) => Some("in-process"),
        Err(_) => None,
    };
    if let Some(how) = how {
        let record = serde_json::json!({"object": key.to_string(), "how": how});
        crate::commands::audit::record_operator(global, "operator.reconcile", &key.to_string(), record).await?;
    }
    match outcome {
        Ok(Reconciled::Requested { daemon }) => {
            println!("requested a reconcile of {key} from the daemon ({daemon})");
            Ok(ExitCode::SUCCESS)
        }
        Ok(Reconciled::InProcess { requeue }) => {
            let next = requeue.map_or_else(String::new, |d| format!("; look again in {} s", d.as_secs()));
            println!("reconciled {key} (no daemon running){next}");
            Ok(ExitCode::SUCCESS)
        }
        Err(error @ (ServiceError::UnknownObject { .. } | ServiceError::Reconcile { .. })) => {
            eprintln!("error: {}", roundtable_controller::error_chain(&error));
            Ok(ExitCode::from(1))
        }
        Err(error) => Err(error.into()),
    }
}
