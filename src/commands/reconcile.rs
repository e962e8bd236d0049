//! `roundtable reconcile KIND/NAME`: asks the running daemon, or reconciles once in-process when
//! no daemon runs. Either way a stall is cleared.

use std::process::ExitCode;

use roundtable_controller::Reconciler as _;
use roundtable_reconcilers::ObjectReconciler;
use roundtable_reconcilers::desired::sync;
use roundtable_reconcilers::source::scan;
use roundtable_store::Store;

use crate::cli::Global;
use crate::commands::describe::parse_key;
use crate::commands::plan::engine_images;

pub async fn run(global: &Global, object: &str) -> anyhow::Result<ExitCode> {
    let key = parse_key(object)?;
    let state_dir = global.state_dir();
    if let Some(holder) = roundtable_store::lock::holder(&state_dir) {
        let store = Store::open(&state_dir).await?;
        store.request_reconcile(&key).await?;
        println!("requested a reconcile of {key} from the daemon ({holder})");
        return Ok(ExitCode::SUCCESS);
    }
    let store = Store::open(&state_dir).await?;
    let dir = global.dir.clone();
    let scanned = tokio::task::spawn_blocking(move || scan(&dir)).await?;
    sync(&store, &store, &scanned).await?;
    if store.object(&key).await?.is_none() {
        eprintln!("error: {key} is neither declared nor recorded");
        return Ok(ExitCode::from(1));
    }
    let reconciler = ObjectReconciler::new(store.clone(), engine_images().await, store.clone());
    match reconciler.reconcile(&key).await {
        Ok(action) => {
            let next =
                action.requeue_after().map_or_else(String::new, |d| format!("; look again in {} s", d.as_secs()));
            println!("reconciled {key} (no daemon running){next}");
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("error: reconciling {key} failed: {error}");
            Ok(ExitCode::from(1))
        }
    }
}
