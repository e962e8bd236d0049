//! Opening the state store for commands: the daemon creates it; read-only views never do.

use roundtable_store::Store;

use crate::cli::Global;

/// The project's store if it exists, else an empty in-memory one (so a fresh project shows
/// everything as not yet recorded, and nothing is created on disk).
pub async fn open_for_reading(global: &Global) -> anyhow::Result<Store> {
    Ok(match Store::open_existing(&global.state_dir()).await? {
        Some(store) => store,
        None => Store::open_in_memory().await?,
    })
}
