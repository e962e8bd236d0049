//! Opening a project for commands: the session runtime (the Docker engine, or the reason there is
//! none) and the service over the state store. The daemon creates the store; read-only views
//! never do. Also `roundtable state backup`.

use std::sync::Arc;

use roundtable_service::Service;
use roundtable_session_runtime::{SessionRuntime, Unavailable};

use crate::cli::Global;

/// The Docker engine as a session runtime, or one whose every call says why there is none.
pub async fn runtime() -> Arc<dyn SessionRuntime> {
    match roundtable_docker::DockerRuntime::connect().await {
        Ok(runtime) => Arc::new(runtime),
        Err(error) => Arc::new(Unavailable {
            // Where the engine was looked for, so `status` and `plan` can name it.
            endpoint: roundtable_docker::engine::endpoint().unwrap_or_else(|_| "none".into()),
            reason: roundtable_telemetry::error_chain(&error),
        }),
    }
}

/// The project's service; its store if it exists, else an empty in-memory one (so a fresh
/// project shows everything as not yet recorded, and nothing is created on disk).
pub async fn open_for_reading(global: &Global) -> anyhow::Result<Service> {
    let service = Service::open_for_reading(global.project()?, runtime().await).await?;
    let (key, missing) = anchor_key(global);
    Ok(service.with_anchor_key(key, missing))
}

/// [`open_for_reading`] with the specs read from the working tree (`--dir`) rather than from the
/// tree the daemon follows: the state is the daemon's, the files are the uncommitted ones
/// (`plan --local`). Unmarked, the two are the same.
pub async fn open_working_tree_for_reading(global: &Global) -> anyhow::Result<Service> {
    let followed = global.project()?.clone();
    let tree = global.working_tree()?;
    let project = roundtable_source::Project { spec_dir: tree.spec_dir, root: tree.root, ..followed };
    let service = Service::open_for_reading(&project, runtime().await).await?;
    let (key, missing) = anchor_key(global);
    Ok(service.with_anchor_key(key, missing))
}

/// For a listing of what ran (sessions, proposals): outside any project (no spec directory and
/// no state store) an empty table would read as "nothing has run here", so it is refused.
pub fn refuse_outside_a_project(global: &Global) -> anyhow::Result<()> {
    let project = global.project()?;
    let no_database = matches!(&project.store, roundtable_store::StoreUrl::Sqlite(file) if !file.exists());
    if !project.spec_dir.exists() && no_database {
        anyhow::bail!(
            "no Roundtable project here: {} does not exist (run `roundtable init`, or pass --dir)",
            std::path::absolute(&project.spec_dir).unwrap_or_else(|_| project.spec_dir.clone()).display()
        );
    }
    Ok(())
}

/// The project's service with its store created if missing (commands that write state).
pub async fn open_for_writing(global: &Global) -> anyhow::Result<Service> {
    let service = Service::open(global.project()?, runtime().await).await?;
    let (key, missing) = anchor_key(global);
    Ok(service.with_anchor_key(key, missing))
}

/// For a command that writes into the spec directory (`admission check --seal` writes a
/// receipt under `admission/`): the project's service and, when the project follows committed
/// state (`start --committed`, `start --source`), the spec directory written to, which is the
/// working tree's (`--dir`), not the exported tree the daemon reads. That tree is replaced by the
/// next commit followed, so a file written into it would vanish; what is written into the working
/// tree reaches the daemon once committed. Refused when `--dir` names no checkout.
pub async fn open_for_writing_specs(global: &Global) -> anyhow::Result<(Service, Option<std::path::PathBuf>)> {
    let followed = global.project()?.clone();
    let tree = global.working_tree()?;
    // Unmarked, the project is its working tree.
    if roundtable_source::mark::marked(&followed.state_dir).is_none() {
        return Ok((open_for_writing(global).await?, None));
    }
    // Any spelling of a path into the exported trees (the followed project's root) is refused.
    let exported = followed.root.canonicalize().unwrap_or_else(|_| followed.root.clone());
    if tree.spec_dir.canonicalize().is_ok_and(|written| written.starts_with(&exported)) {
        anyhow::bail!(
            "--dir names the exported tree {} the daemon reads, which the next commit replaces; pass --dir with the spec directory of a clone of the repository",
            followed.spec_dir.display()
        );
    }
    let in_a_checkout = tree.spec_dir.is_dir()
        && roundtable_workspace::git::text(&tree.root, &["rev-parse", "--is-inside-work-tree"])
            .is_ok_and(|t| t == "true");
    if !in_a_checkout {
        anyhow::bail!(
            "this project's daemon follows committed state (its specs are read from the exported tree {}, which the next commit replaces), so a file written there would vanish; pass --dir with the spec directory of a clone of the repository, then commit what is written under its admission/",
            followed.spec_dir.display()
        );
    }
    let project = roundtable_source::Project { spec_dir: tree.spec_dir.clone(), root: tree.root, ..followed };
    let service = Service::open(&project, runtime().await).await?;
    let (key, missing) = anchor_key(global);
    Ok((service.with_anchor_key(key, missing), Some(tree.spec_dir)))
}

/// The key admission verifies receipts' anchors under, for views that append nothing; or why
/// there is none, naming where it was looked for (then a sealed receipt "cannot be verified").
fn anchor_key(global: &Global) -> (Option<Arc<roundtable_store::audit::AuditKey>>, Option<String>) {
    let looked_at = global.audit_key_path().map(|path| path.display().to_string());
    match crate::commands::audit::reader_key(global) {
        Ok(Some(key)) => (Some(Arc::new(key)), None),
        Ok(None) => (None, Some(format!("no audit key at {}", looked_at.unwrap_or_default()))),
        Err(error) => {
            tracing::warn!("cannot verify admission receipts against the audit chain: {error:#}");
            (None, Some(format!("{error:#}")))
        }
    }
}

/// `roundtable state backup FILE`: a consistent copy of the state database, checked.
pub async fn backup(global: &Global, file: &std::path::Path) -> anyhow::Result<std::process::ExitCode> {
    use anyhow::Context as _;
    let url = global.store_url();
    let store = roundtable_store::Store::open_existing(&url)
        .await?
        .with_context(|| format!("no state database at {url} to back up"))?;
    let started = std::time::Instant::now();
    store.backup_to(file).await.with_context(|| format!("cannot back up to {}", file.display()))?;
    store.close().await;
    let bytes = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    println!(
        "backed up {} to {} ({bytes} bytes, integrity ok, {} ms)",
        url,
        file.display(),
        started.elapsed().as_millis()
    );
    Ok(std::process::ExitCode::SUCCESS)
}

/// `roundtable state migrate --from STORE --to STORE`: copies the project's state into an empty
/// store, refusing while a daemon holds the state directory (it would keep writing to the source).
pub async fn migrate(
    global: &Global,
    from: Option<&roundtable_store::StoreUrl>,
    to: &roundtable_store::StoreUrl,
) -> anyhow::Result<std::process::ExitCode> {
    use anyhow::Context as _;
    let from = from.cloned().unwrap_or_else(|| global.store_url());
    if from == *to {
        anyhow::bail!("--from and --to are the same store ({from})");
    }
    if let Some(holder) = roundtable_store::lock::holder(&global.state_dir()) {
        anyhow::bail!("a daemon ({holder}) is running on this state directory; stop it before migrating");
    }
    let source = roundtable_store::Store::open_existing(&from)
        .await?
        .with_context(|| format!("no state store at {from} to migrate"))?;
    let target = roundtable_store::Store::connect_new(to).await.with_context(|| format!("cannot open {to}"))?;
    let started = std::time::Instant::now();
    let copied = source.copy_into(&target).await.with_context(|| format!("cannot migrate {from} to {to}"))?;
    source.close().await;
    target.close().await;
    let rows: usize = copied.iter().map(|c| c.rows).sum();
    for table in &copied {
        println!("{:<18} {:>8} rows", table.table, table.rows);
    }
    println!(
        "migrated {rows} rows from {from} to {to} in {} ms; verify the audit chain there with `roundtable --store '{to}' audit verify`",
        started.elapsed().as_millis()
    );
    Ok(std::process::ExitCode::SUCCESS)
}
