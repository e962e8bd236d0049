//! `roundtable start`: takes the state directory's lock and runs the daemon until a signal.

use std::process::ExitCode;

use anyhow::Context as _;
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

use roundtable_daemon::{self as daemon, DaemonConfig};
use roundtable_execution::ExecutionConfig;
use roundtable_source::Project;
use roundtable_source::follow::Follow;
use roundtable_source::mark::{Mode, mark};
use roundtable_source::mirror::Remote;
use roundtable_store::Store;
use roundtable_store::audit::{AuditKey, KeyChoice};
use std::time::Duration;

use crate::cli::{Global, StartArgs};

pub async fn run(global: &Global, args: &StartArgs) -> anyhow::Result<ExitCode> {
    if args.source.is_none() && !global.dir.is_dir() {
        anyhow::bail!("spec directory {} not found (run `roundtable init`, or pass --dir)", global.dir.display());
    }
    // Refused before anything starts; exit 1 (tests/integration/egress.rs pins it).
    if let Some(problem) = args.gateway_allow_cidrs.iter().find_map(|cidr| cidr.refused_as_exception()) {
        anyhow::bail!("--gateway-allow-cidr {problem}");
    }
    // Refused before anything starts, naming the file and what is wrong with it.
    let hook = match &args.webhook_secret_file {
        Some(path) => Some(std::sync::Arc::new(roundtable_api::hook::GitHook::new(
            roundtable_api::hook::HookSecret::read(path).context("--webhook-secret-file")?,
        ))),
        None => None,
    };
    let follow = follow(global, args).await?;
    let project = global.project()?;
    let state_dir = &project.state_dir;
    if roundtable_api::auth::ensure_token(state_dir)? {
        tracing::info!(path = %roundtable_api::auth::token_path(state_dir).display(), "created the API's operator token (0600)");
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let holder = format!("pid {} on {} since {}", std::process::id(), host.trim(), time_now());
    // On a store of its own (SQLite) one daemon per state directory; several controllers share a
    // PostgreSQL store, each registered in it, and lease executions.
    let _lock =
        if project.store.is_shared() { None } else { Some(roundtable_store::lock::acquire(state_dir, &holder)?) };
    let store = Store::connect(&project.store).await?;
    let choice = if args.new_audit_key { KeyChoice::ReplaceLost } else { KeyChoice::Existing };
    let audit_key = store.audit_key(&global.audit_key_path()?, choice).await?;
    // The provenance key is made (or checked: 0600, an Ed25519 key) beside it, at start, so an
    // accept through the API never finds it missing.
    roundtable_delivery::provenance::SigningKey::load_or_create(&roundtable_delivery::provenance::key_path_beside(
        audit_key.path(),
    ))?;
    if args.new_audit_key {
        tracing::warn!(path = %audit_key.path().display(), "created the audit key in place of a lost one; entries sealed before it no longer verify (`audit verify` names them)");
    }

    let mut config = DaemonConfig::new(project.clone());
    config.controller.concurrency = args.concurrency.max(1);
    config.controller.grace = args.grace.as_std();
    config.resync = args.resync.as_std();
    config.retention = args.retention.as_std();
    config.image_pull_timeout = args.image_pull_timeout.as_std();
    config.follow = follow.map(|follow| std::sync::Arc::new(tokio::sync::Mutex::new(follow)));

    let (shutdown, hurry) = crate::signals::shutdown_then_hurry()?;
    tracing::info!(dir = %project.spec_dir.display(), state = %state_dir.display(), "watching the specs");
    let execution = execution_config(global, args, project, audit_key)?;
    config.audit_key = execution.audit_key.clone();
    // Each egress tunnel holds two descriptors.
    if let Err(error) = roundtable_gateway::limits::raise_open_file_limit() {
        tracing::warn!(%error, "cannot raise the open-file limit");
    }
    if !execution.egress.broker_test_roots.is_empty() {
        tracing::warn!(
            certificates = execution.egress.broker_test_roots.len(),
            "credential brokers also trust test certificates for provider hosts (--broker-test-ca)"
        );
    }
    if !execution.egress.allow_cidrs.is_empty() {
        let cidrs: Vec<String> = execution.egress.allow_cidrs.iter().map(ToString::to_string).collect();
        tracing::warn!(cidrs = %cidrs.join(", "), "egress gateways may also reach these networks (--gateway-allow-cidr)");
    }
    tracing::info!(
        controller_run = %execution.controller_run,
        executions = %execution.execution_root.display(),
        max_executions = execution.max_executions,
        "controller run started"
    );
    let hurry = async move {
        hurry.await;
        tracing::warn!("second signal: cancelling running executions now (they are still cleaned up)");
    };
    let runtime = crate::commands::state::runtime().await;
    register_metrics();
    let link = roundtable_daemon::DaemonLink::default();
    let api = serve_api(args, (&store, &runtime), &link, &execution, hook).await?;
    announce_console(global, api.console.as_deref(), &execution.project.state_dir);
    match runtime.health().await {
        Ok(health) => {
            tracing::info!(endpoint = %health.endpoint, version = %health.version, "connected to the container engine")
        }
        Err(error) => {
            tracing::warn!(error = %roundtable_telemetry::error_chain(&error), "no container engine: Adapter reconciles and executions will fail and retry")
        }
    }
    let summary = daemon::run(config, store.clone(), runtime, execution, shutdown, hurry, link).await?;
    api.stop().await;
    store.close().await;
    let (reconciles, executions) = (summary.reconciles, summary.executions);
    tracing::info!(
        reconciles = reconciles.reconciles,
        failed = reconciles.failures,
        abandoned = reconciles.abandoned,
        executions_finished = executions.finished,
        executions_interrupted = executions.interrupted,
        "stopped (executions interrupted at the grace period are re-run on the next start)"
    );
    Ok(ExitCode::SUCCESS)
}

/// Every family `/metrics` shows, from the start (a dashboard's query has a series to find
/// before the first reconcile, request or tunnel), and what this binary is.
fn register_metrics() {
    roundtable_controller::metrics::register();
    roundtable_gateway::metrics::register();
    roundtable_broker::metrics::register();
    roundtable_reconcilers::pull::register_metrics();
    let version = env!("CARGO_PKG_VERSION");
    roundtable_telemetry::global()
        .gauge_vec(
            "roundtable_build_info",
            "Always 1: the version and commit this daemon was built from.",
            &["version", "commit"],
        )
        .with_label_values(&[version, env!("ROUNDTABLE_COMMIT")])
        .set(1);
}

/// What the daemon reconciles: the working tree, the checkout's HEAD (`--committed`) or a git
/// source (`--source`). Prepares the state directory and leaves the mark every command reads
/// there, before the project is resolved.
async fn follow(global: &Global, args: &StartArgs) -> anyhow::Result<Option<Follow>> {
    if args.source_path.is_some() && args.source.is_none() {
        anyhow::bail!("--source-path needs --source");
    }
    if args.poll.is_some() && args.source.is_none() && !args.committed {
        anyhow::bail!("--poll needs --source or --committed (a working tree is watched, not polled)");
    }
    if args.source.is_some() && global.state_dir.is_none() {
        anyhow::bail!("--source needs --state-dir: there is no checkout to keep the state (the mirror, the store) in");
    }
    let state_dir = global.state_dir();
    for tightened in roundtable_store::prepare_state_dir(&state_dir)? {
        tracing::warn!("{tightened}");
    }
    let followed = match (&args.source, args.committed) {
        (Some(source), _) => {
            let remote = Remote::parse(source)?;
            let spec_path = args.source_path.clone().unwrap_or_else(|| PathBuf::from(".roundtable"));
            if spec_path.is_absolute() || spec_path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
                anyhow::bail!("--source-path {} must be a relative path inside the repository", spec_path.display());
            }
            let poll = args.poll.map_or(Duration::from_secs(30), |p| p.as_std());
            mark(&state_dir, Some((Mode::Git, &spec_path)))?;
            let project = global.project()?;
            tracing::info!(source = %remote.shown(), "following the git source");
            Some(Follow::remote(project, remote, spec_path, poll).await?)
        }
        (None, true) => {
            let checkout = global.working_tree()?;
            let poll = args.poll.map_or(Duration::from_secs(2), |p| p.as_std());
            let follow = Follow::checkout(&checkout, poll).await?;
            mark(&state_dir, Some((Mode::Committed, &follow.spec_path)))?;
            Some(follow)
        }
        (None, false) => {
            mark(&state_dir, None)?;
            None
        }
    };
    Ok(followed)
}

/// Where executions live, what they may use, and who this run is.
fn execution_config(
    global: &Global,
    args: &StartArgs,
    project: &Project,
    audit_key: AuditKey,
) -> anyhow::Result<ExecutionConfig> {
    let execution_root = global.execution_root(args.execution_root.as_ref())?;
    let execution_root = roundtable_workspace::private_dir::prepare(&execution_root)
        .with_context(|| format!("cannot use {} as the execution root", execution_root.display()))?;
    let proposals_dir = project.proposals_dir();
    std::fs::create_dir_all(&proposals_dir).with_context(|| format!("cannot create {}", proposals_dir.display()))?;
    std::fs::set_permissions(&proposals_dir, std::fs::Permissions::from_mode(0o700))?;
    let mut secrets: HashMap<String, String> = std::env::vars().collect();
    if let Some(file) = &args.secrets_file {
        secrets.extend(roundtable_service::secrets::read(file)?);
    }
    let run = format!("{:x}{:06x}", std::process::id(), fastrand_suffix());
    Ok(ExecutionConfig {
        max_executions: args.max_executions.max(1),
        project: project.clone(),
        execution_root,
        binary: std::env::current_exe().context("cannot find roundtable's own binary")?,
        controller_run: run,
        socket_root: roundtable_workspace::sockets::default_root_for_this_user(),
        secrets,
        audit_key: Some(std::sync::Arc::new(audit_key)),
        gates: true,
        lease_ttl: args.lease_ttl.as_std(),
        egress: roundtable_execution::egress::EgressOptions {
            resolver: args.gateway_resolver,
            allow_cidrs: args.gateway_allow_cidrs.iter().map(|cidr| cidr.net()).collect(),
            dial_allow: args.gateway_dial_allow.iter().map(|cidr| cidr.net()).collect(),
            max_tunnels: args.gateway_max_tunnels.max(1),
            broker_test_roots: match &args.broker_test_ca {
                Some(path) => roundtable_execution::broker::read_test_roots(path)?,
                None => Vec::new(),
            },
        },
    })
}

fn fastrand_suffix() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_micros()).unwrap_or(0)
}

fn time_now() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// The API's listeners: the CLI's private socket and, when asked for, `--api-listen`.
struct ServedApi {
    stop: tokio_util::sync::CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    socket: PathBuf,
    /// Keeps the status view current; dropped first on stop, which ends every watch.
    status: roundtable_api::status_view::Refresher,
    /// The review console's URL, when the API is served over TCP.
    console: Option<String>,
}

impl ServedApi {
    /// Stops accepting, lets requests in flight finish (the server bounds that wait), removes the
    /// CLI socket.
    async fn stop(self) {
        drop(self.status);
        self.stop.cancel();
        for task in self.tasks {
            if tokio::time::timeout(std::time::Duration::from_secs(10), task).await.is_err() {
                tracing::warn!("the API did not stop within 10 s; abandoned");
            }
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Binds the API before the daemon starts (a taken port fails `start` at once), and serves it
/// beside the daemon: always on the CLI's private socket, and on `--api-listen` when given.
/// Where an operator opens the review console: said on stderr whatever the log level, except
/// where stderr carries JSON lines only (there it is logged).
fn announce_console(global: &Global, console: Option<&str>, state_dir: &std::path::Path) {
    let token = roundtable_api::auth::token_path(state_dir);
    let said = match console {
        Some(url) => format!("the review console is at {url} (its token is in {})", token.display()),
        None => "the review console is served over TCP only: pass --api-listen 127.0.0.1:PORT to open it in a browser"
            .to_owned(),
    };
    match global.log_format {
        crate::cli::LogFormat::Json => tracing::info!(console = console.unwrap_or_default(), "{said}"),
        crate::cli::LogFormat::Text => eprintln!("roundtable: {said}"),
    }
}

async fn serve_api(
    args: &StartArgs,
    (store, runtime): (&Store, &std::sync::Arc<dyn roundtable_session_runtime::SessionRuntime>),
    link: &roundtable_daemon::DaemonLink,
    execution: &ExecutionConfig,
    hook: Option<std::sync::Arc<roundtable_api::hook::GitHook>>,
) -> anyhow::Result<ServedApi> {
    let project = &execution.project;
    let state_dir = project.state_dir.as_path();
    // `cli::parse` refused contradictory listener flags before anything started.
    let listener = args.api_listener().map_err(anyhow::Error::msg)?;
    let extra = match &listener {
        Some(listener) => Some(
            roundtable_api::listen::bind(&listener.at, listener.tls.as_ref())
                .await
                .with_context(|| format!("cannot serve the API on --api-listen {}", listener.at))?,
        ),
        None => None,
    };
    let socket = roundtable_api::cli_socket(state_dir);
    let private = roundtable_api::listen::bind_unix(&socket)
        .with_context(|| format!("cannot serve the API on the CLI's socket {}", socket.display()))?;
    // The daemon's own store handle: the status view sees each of its writes as it is made.
    let service = roundtable_service::Service::sharing(project, store.clone(), runtime.clone())
        .with_scan_cache(link.scan_cache())
        .with_anchor_key(execution.audit_key.clone(), None);
    if let Some(key) = &execution.audit_key {
        // What an accept compares proposals with: the held credentials, as keyed hashes.
        let recorded = service.record_credential_fingerprints(&execution.secrets, key).await?;
        tracing::info!(recorded, "recorded the fingerprints of the credentials this daemon holds");
        // An accept that died mid-way (a crash, a kill) must not hold its proposal forever.
        for id in service.roll_back_stale_accepts(key).await? {
            tracing::warn!(proposal = %id, "rolled back an accept that did not finish: the proposal is pending again");
        }
    }
    let (status, refresher) = roundtable_api::status_view::StatusView::start(service.clone(), args.retention.as_std());
    let workspace = match &args.workspace {
        Some(name) => name.clone(),
        // The folder the operator knows: the checkout (whose committed state may be followed),
        // or for a git source, which has none, the state directory.
        None => {
            let folder = match &project.repos {
                roundtable_source::Repos::Root => project.root.clone(),
                roundtable_source::Repos::Checkout(top) => top.clone(),
                roundtable_source::Repos::Mirror(_) => std::path::absolute(&project.state_dir)?,
            };
            folder.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "default".into())
        }
    };
    let state = roundtable_api::ApiState {
        service,
        link: link.clone(),
        workspace: workspace.clone(),
        token: roundtable_api::auth::OperatorToken::load_or_create(state_dir)?,
        audit_key: execution.audit_key.clone(),
        provenance_key: roundtable_delivery::provenance::key_path_beside(
            execution.audit_key.as_ref().map_or(state_dir, |key| key.path()),
        ),
        binary: execution.binary.clone(),
        retention: args.retention.as_std(),
        hook,
        console: Default::default(),
        status,
    };
    let private = roundtable_api::Bound::Unix(private);
    let (cli_address, extra_address) = (private.local(), extra.as_ref().map(roundtable_api::Bound::local));
    // Where a script reaches the API: the --api-listen listener (its real port), else the socket.
    let address_file = state_dir.join("api-address");
    let address = format!("{}\n", extra_address.as_deref().unwrap_or(&cli_address));
    roundtable_store::state_dir::write_private(&address_file, address.as_bytes())?;
    let tcp = extra_address.as_deref().unwrap_or("none (pass --api-listen IP:PORT to serve it over TCP too)");
    tracing::info!(
        socket = %cli_address,
        tcp = %tcp,
        workspace = %workspace,
        token = %roundtable_api::auth::token_path(state_dir).display(),
        "API and admin MCP listening (the socket is the CLI's)"
    );
    if let Some(path) = &args.webhook_secret_file {
        tracing::info!(secret = %path.display(), "git webhook at POST /v1/hooks/git");
    }
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = Vec::new();
    for bound in extra.into_iter().chain([private]) {
        let (state, stop) = (state.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            roundtable_api::serve(bound, state, async move { stop.cancelled().await }).await;
        }));
    }
    let console = extra_address.map(|address| format!("http://{address}/ui/"));
    Ok(ServedApi { stop, tasks, socket, status: refresher, console })
}
