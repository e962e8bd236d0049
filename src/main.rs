//! The `roundtable` binary: wiring, command-line parsing and rendering only.

mod cli;
mod commands;
mod jsonpath;
mod project;
mod render;
mod signals;
mod traces;

use std::process::ExitCode;

use clap::error::ErrorKind;

use cli::{
    AdaptersCommand, AdmissionCommand, AuditCommand, Cli, Command, CompletionShell, GatewayCommand, LogFormat,
    McpCommand, ProposalsCommand, ProvenanceCommand, SandboxCommand, SessionsCommand, StateCommand,
};

/// mimalloc returns freed pages to the system, where glibc's malloc kept them in one arena per
/// thread; see the README's Dependencies table for the figures.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The exit code for usage errors (sysexits' EX_USAGE).
const EXIT_USAGE: u8 = 64;

/// The log filter: `RUST_LOG`, else `default` (`info` for the daemon, whose lines are its
/// account of itself; `warn` for every other command). SQL statements stay out unless `RUST_LOG`
/// names sqlx: at `debug` they would be most of the log.
fn log_filter(rust_log: Option<&str>, default: &str) -> String {
    let chosen = rust_log.filter(|value| !value.trim().is_empty()).unwrap_or(default);
    if chosen.contains("sqlx") { chosen.to_owned() } else { format!("{chosen},sqlx=warn") }
}

/// Logs on stderr, and for the daemon, traces to a collector when one is named (what exports
/// them, to be shut down at exit); why the collector cannot be used.
fn init_logging(format: LogFormat, command: &Command) -> Result<Option<traces::Exporting>, String> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let daemon = matches!(command, Command::Start(_));
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = log_filter(rust_log.as_deref(), if daemon { "info" } else { "warn" });
    let filter =
        tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // A log that cannot be written (a full disk under a redirected stderr) loses the line;
        // reporting that with `eprintln!` would panic whatever task was logging, an execution's
        // included, which then never recorded how it ended.
        .log_internal_errors(false)
        .with_ansi(colour_on_stderr(std::env::var_os("NO_COLOR").as_deref()));
    let fmt = match format {
        LogFormat::Json => fmt.json().boxed(),
        LogFormat::Text => fmt.boxed(),
    };
    let exporting = match command {
        Command::Start(args) => {
            let variable = |name| std::env::var(name).ok();
            let url = traces::endpoint(
                args.otlp_endpoint.as_deref(),
                variable(traces::TRACES_VARIABLE).as_deref(),
                variable(traces::BASE_VARIABLE).as_deref(),
            )?;
            url.map(|url| traces::Exporting::start(&url, cli::VERSION).map(|exporting| (exporting, url))).transpose()?
        }
        _ => None,
    };
    let otel = exporting.as_ref().map(|(exporting, _)| exporting.layer());
    tracing_subscriber::registry().with(filter).with(fmt).with(otel).init();
    if let Some((_, url)) = &exporting {
        tracing::info!(endpoint = %url, "exporting traces over OTLP/HTTP");
    }
    Ok(exporting.map(|(exporting, _)| exporting))
}

/// Colour only for a person at a terminal: a pipe, a file or a journal gets plain text, and a
/// non-empty `NO_COLOR` (no-color.org) turns it off everywhere.
fn colour_on_stderr(no_color: Option<&std::ffi::OsStr>) -> bool {
    use std::io::IsTerminal as _;
    no_color.is_none_or(|value| value.is_empty()) && std::io::stderr().is_terminal()
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let global = &cli.global;
    match &cli.command {
        Command::Init => {
            commands::init::run(&global.dir, &global.state_dir(), &global.store_url(), &global.audit_key_path()?).await
        }
        Command::Validate(args) => commands::validate::run(global, args.format),
        Command::Completion { shell } => {
            let shell = match shell {
                CompletionShell::Bash => clap_complete::Shell::Bash,
                CompletionShell::Zsh => clap_complete::Shell::Zsh,
                CompletionShell::Fish => clap_complete::Shell::Fish,
            };
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "roundtable", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema { out } => commands::schema::run(out.as_deref()),
        Command::Doctor(args) => commands::doctor::run(args.format).await,
        Command::Start(args) => commands::start::run(global, args).await,
        Command::Status { format, exit_code, retention, watch: false } => {
            commands::status::run(
                global,
                format.format,
                *exit_code,
                retention.map(roundtable_specs::units::Duration::as_std),
            )
            .await
        }
        Command::Status { format, retention, watch: true, .. } => {
            commands::watch::status(global, format.format, retention.map(roundtable_specs::units::Duration::as_std))
                .await
        }
        Command::Plan { format, local } => commands::plan::run(global, format.format, *local).await,
        Command::Describe { object, format } => commands::describe::run(global, object, format.format).await,
        Command::Events { object, limit, watch, format } => {
            let listed =
                commands::events::run(global, object.as_deref(), usize::from(*limit), format.format, *watch).await?;
            if *watch && listed.code == ExitCode::SUCCESS {
                commands::watch::events(global, object.as_deref(), format.format, listed.columns).await
            } else {
                Ok(listed.code)
            }
        }
        Command::Reconcile { object, rerun } => commands::reconcile::run(global, object, *rerun).await,
        Command::Controllers { format } => commands::controllers::run(global, format.format).await,
        Command::Prune { retention, dry_run, format } => {
            commands::prune::run(global, retention.as_std(), *dry_run, format.format).await
        }
        Command::Sessions(SessionsCommand::List(args)) => {
            commands::executions::sessions_list(global, args.format).await
        }
        Command::Sessions(SessionsCommand::Show { id, format }) => {
            commands::executions::sessions_show(global, id, format.format).await
        }
        Command::Sessions(SessionsCommand::Logs { id, follow, format }) => {
            commands::executions::sessions_logs(global, id, *follow, format.format).await
        }
        Command::Sessions(SessionsCommand::Register {
            assignment,
            adapter,
            external_id,
            model,
            working_dir,
            metadata,
            format,
        }) => {
            let request = roundtable_service::resume::RegisterRequest {
                assignment: assignment.clone(),
                adapter: adapter.clone(),
                external_session_id: external_id.clone(),
                model: model.clone(),
                working_dir: working_dir.clone(),
                metadata: metadata.iter().cloned().collect(),
            };
            commands::resume::register(global, request, format.format).await
        }
        Command::Admission(AdmissionCommand::Check { name, seal, format }) => {
            commands::admission::check(global, name, *seal, format.format).await
        }
        Command::Admission(AdmissionCommand::List { format }) => commands::admission::list(global, format.format).await,
        Command::Admission(AdmissionCommand::Canary { name, ttl, format }) => {
            commands::admission::canary(global, name, ttl.as_std(), format.format).await
        }
        Command::Audit(AuditCommand::Verify { from, to, slice }) => {
            commands::audit::verify(global, *from, *to, slice.as_deref()).await
        }
        Command::Audit(AuditCommand::Export { from, to }) => commands::audit::export(global, *from, *to).await,
        Command::State(StateCommand::Backup { file }) => commands::state::backup(global, file).await,
        Command::State(StateCommand::Migrate { from, to }) => commands::state::migrate(global, from.as_ref(), to).await,
        Command::Resume { assignment, format } => {
            commands::resume::resume(global, assignment.as_deref(), format.format).await
        }
        Command::Proposals(ProposalsCommand::List { state, format }) => {
            commands::executions::proposals_list(global, *state, format.format).await
        }
        Command::Proposals(ProposalsCommand::Accept { id, branch, push, repo, overrides, reasons, format }) => {
            let args = commands::delivery::AcceptArgs {
                id,
                branch: branch.clone(),
                push: push.clone(),
                repo: repo.clone(),
                gates: overrides,
                reasons,
                format: format.format,
            };
            commands::delivery::accept(global, args).await
        }
        Command::Proposals(ProposalsCommand::Reject { id, reason }) => {
            commands::delivery::reject(global, id, reason).await
        }
        Command::Proposals(ProposalsCommand::Provenance { id }) => commands::delivery::provenance_of(global, id).await,
        Command::Provenance(ProvenanceCommand::Key) => commands::delivery::public_key(global),
        Command::Provenance(ProvenanceCommand::Verify { file, public_key, commit, keyid }) => {
            commands::delivery::verify(file, public_key, commit.as_deref(), keyid.as_deref())
        }
        Command::Proposals(ProposalsCommand::Show { id, format }) => {
            commands::executions::proposals_show(global, id, format.format).await
        }
        Command::Proposals(ProposalsCommand::Export { id }) => commands::executions::proposals_export(global, id).await,
        Command::Proposals(ProposalsCommand::Diff { id, stat }) => commands::delivery::diff(global, id, *stat).await,
        Command::Sandbox(SandboxCommand::Mock { brief }) => {
            let workspace = std::env::current_dir()?;
            for line in roundtable_incontainer::mock::run(brief, &workspace)? {
                println!("{line}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Adapters(AdaptersCommand::List(args)) => commands::adapters::list(global, args.format),
        Command::Adapters(AdaptersCommand::Plan { name, assignment, prompt, model, format }) => {
            let request = roundtable_service::agents::PlanRequest {
                assignment: assignment.as_deref(),
                prompt: prompt.as_deref(),
                model: model.as_deref(),
            };
            commands::adapters::plan(global, name, &request, format.format).await
        }
        Command::Adapters(AdaptersCommand::Capture { name, truncated, format }) => {
            commands::adapters::capture(global, name, *truncated, format.format).await
        }
        Command::Mcp(McpCommand::Stdio { unix_socket }) => match roundtable_incontainer::mcp_bridge::run(unix_socket) {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(error) => {
                eprintln!("roundtable mcp stdio: {error}");
                Ok(ExitCode::from(1))
            }
        },
        Command::Gateway(GatewayCommand::Serve(args)) => commands::gateway::serve(args).await,
        Command::Proxy { listen, upstream } => commands::gateway::proxy(listen, upstream).await,
        Command::Sandbox(SandboxCommand::Init) => {
            roundtable_incontainer::init::run().await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sandbox(SandboxCommand::WriteProbe { dirs }) => {
            let report = roundtable_incontainer::write_probe::run(dirs);
            print!("{}", render::json(&report)?);
            Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Sandbox(SandboxCommand::Inventory { dir }) => {
            println!("{}", serde_json::to_string(&roundtable_incontainer::inventory::run(dir))?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Sandbox(SandboxCommand::Reach { socket }) => match roundtable_incontainer::reach::run(socket) {
            Ok(line) => {
                println!("{}", render::sanitize(&line));
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => {
                eprintln!("roundtable sandbox reach: {}: {error}", socket.display());
                Ok(ExitCode::from(1))
            }
        },
        Command::Sandbox(SandboxCommand::Check {
            uid,
            gid,
            memory,
            pids,
            cpu_millis,
            runtime_class,
            host_kernel,
            seed_workspace,
            then,
        }) => {
            let expected = roundtable_incontainer::check::Expected {
                uid: *uid,
                gid: *gid,
                memory_bytes: *memory,
                pids: *pids,
                cpu_millis: *cpu_millis,
                runtime: runtime_class
                    .clone()
                    .map(|class| roundtable_specs::runtime_class::ResolvedRuntime::new(class, host_kernel.clone())),
            };
            let mut report = roundtable_incontainer::check::run(&expected);
            if *seed_workspace {
                roundtable_incontainer::check::seed_workspace(&mut report);
            }
            if then.is_empty() {
                print!("{}", render::json(&report)?);
            } else {
                // One line, flushed now: the controller reads up to its newline, then answers.
                use std::io::Write as _;
                let mut stdout = std::io::stdout().lock();
                writeln!(stdout, "{}", serde_json::to_string(&report)?)?;
                stdout.flush()?;
            }
            for failure in report.failures() {
                eprintln!("sandbox check failed: {}: {}", failure.name, render::sanitize(&failure.detail));
            }
            if !report.ok {
                return Ok(ExitCode::from(1));
            }
            if then.is_empty() {
                return Ok(ExitCode::SUCCESS);
            }
            let refused = roundtable_incontainer::launch::await_go_then_exec(then, std::io::stdin());
            let code = refused.exit_code();
            eprintln!("sandbox check: {}", render::sanitize_block(&format!("{:#}", anyhow::Error::new(refused))));
            Ok(ExitCode::from(code))
        }
    }
}

/// A reader that goes away (`roundtable … | head`) ends us quietly, as SIGPIPE ends C tools,
/// instead of a panic message from `print!`.
fn exit_quietly_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.contains("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

/// The commands the runtime starts inside agent containers.
fn runs_in_container(command: &Command) -> bool {
    matches!(command, Command::Sandbox(_) | Command::Proxy { .. } | Command::Mcp(_))
}

fn main() -> ExitCode {
    exit_quietly_on_broken_pipe();
    let cli = match cli::parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => ExitCode::from(EXIT_USAGE),
            };
        }
    };
    let exporting = match init_logging(cli.global.log_format, &cli.command) {
        Ok(exporting) => exporting,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // What runs inside an agent container counts against its pids limit: one thread, whatever the
    // host's core count (a multi-thread runtime would start one worker per host core).
    let mut builder = if runs_in_container(&cli.command) {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        builder.max_blocking_threads(2);
        builder
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let code = match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            // Errors name files, objects and engines: escaped like everything else shown.
            eprintln!("error: {}", render::sanitize_block(&format!("{error:#}")));
            ExitCode::from(1)
        }
    };
    // Outside the runtime: the exporter's blocking client must not be dropped inside it.
    drop(runtime);
    if let Some(exporting) = exporting {
        exporting.shutdown();
    }
    code
}

#[cfg(test)]
mod tests {
    use super::log_filter;

    #[test]
    fn sql_stays_out_of_the_log_unless_rust_log_names_sqlx() {
        assert_eq!(log_filter(None, "info"), "info,sqlx=warn");
        assert_eq!(log_filter(Some("debug"), "warn"), "debug,sqlx=warn");
        assert_eq!(log_filter(Some(" "), "warn"), "warn,sqlx=warn");
        assert_eq!(log_filter(Some("debug,sqlx=debug"), "warn"), "debug,sqlx=debug");
    }
}
