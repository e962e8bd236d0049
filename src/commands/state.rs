//! Opening a project for commands: the session runtime (the Docker engine, or the reason there is
//! none) and the service over the state store. The daemon creates the store; read-only views
//! never do.

use std::sync::Arc;

use roundtable_runtime::{SessionRuntime, Unavailable};
use roundtable_service::Service;

use crate::cli::Global;

/// The Docker engine as a session runtime, or one whose every call says why there is none.
pub async fn runtime() -> Arc<dyn SessionRuntime> {
    match roundtable_docker::DockerRuntime::connect().await {
        Ok(runtime) => Arc::new(runtime),
        Err(error) => Arc::new(Unavailable {
            // Where the engine was looked for, so `status` and `plan` can name it.
            endpoint: roundtable_docker::engine::endpoint().unwrap_or_else(|_| "none".into()),
            reason: roundtable_controller::error_chain(&error),
        }),
    }
}

/// The project's service; its store if it exists, else an empty in-memory one (so a fresh
/// project shows everything as not yet recorded, and nothing is created on disk).
pub async fn open_for_reading(global: &Global) -> anyhow::Result<Service> {
    Ok(Service::open_for_reading(&global.dir, &global.state_dir(), runtime().await).await?)
}

/// The project's service with its store created if missing (commands that write state).
pub async fn open_for_writing(global: &Global) -> anyhow::Result<Service> {
    Ok(Service::open(&global.dir, &global.state_dir(), runtime().await).await?)
}
