//! The command-line surface (clap definitions only).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use roundtable_specs::names::{Cidr, HostName};
use roundtable_specs::units::Duration;
use roundtable_store::StoreUrl;

/// The version and the commit it was built from (`build.rs`), as `--version` and
/// `roundtable_build_info` show them.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("ROUNDTABLE_COMMIT"), ")");

// === value parsers: what clap cannot check from the type alone is still a usage error (64) ===

/// A period something repeats at: at least one second (a zero period would spin).
fn period(text: &str) -> Result<Duration, String> {
    let duration: Duration = text.parse().map_err(|error: roundtable_specs::units::UnitError| error.to_string())?;
    if duration.as_std() < std::time::Duration::from_secs(1) {
        return Err(format!("{text} is too short: a period is at least 1s"));
    }
    Ok(duration)
}

/// A timeout: more than nothing (a zero timeout fails everything at once).
fn timeout(text: &str) -> Result<Duration, String> {
    let duration: Duration = text.parse().map_err(|error: roundtable_specs::units::UnitError| error.to_string())?;
    if duration.as_std().is_zero() {
        return Err(format!("{text}: a timeout must be greater than 0s"));
    }
    Ok(duration)
}

/// A network egress may reach despite the address policy: never a whole address family.
fn allowed_cidr(text: &str) -> Result<Cidr, String> {
    let cidr: Cidr = text.parse().map_err(|error: roundtable_specs::names::NameError| error.to_string())?;
    match cidr.refused_as_exception() {
        Some(problem) => Err(problem),
        None => Ok(cidr),
    }
}

/// An exact host name, by the one host-name rule.
fn host(text: &str) -> Result<String, String> {
    text.parse::<HostName>().map(|host| host.to_string()).map_err(|error| error.to_string())
}

/// `KIND/NAME`; whether KIND is a kind is the command's to say (an unknown object, exit 1).
fn object_reference(text: &str) -> Result<String, String> {
    match text.split_once('/') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(text.to_owned()),
        _ => Err(format!("{text:?} is not KIND/NAME, like Adapter/codex or Assignment/fix-typos")),
    }
}

/// A count of at least one.
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(count) => Ok(count),
        Err(error) => Err(format!("{text:?} is not a whole number: {error}")),
    }
}

#[derive(Debug, Parser)]
#[command(name = "roundtable", version = VERSION, about = "Runs AI coding-agent CLIs safely and declaratively")]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct Global {
    /// The spec directory.
    #[arg(long, global = true, default_value = ".roundtable", env = "ROUNDTABLE_DIR")]
    pub dir: PathBuf,
    /// The state directory (default: <dir>/state); created with a .gitignore when needed.
    #[arg(long, global = true, env = "ROUNDTABLE_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Where the state store is: `sqlite:PATH` (default: <state-dir>/state.db; one controller) or
    /// `postgres://USER@HOST/DATABASE` (several controllers sharing it; `?host=/DIR` for a Unix
    /// socket). Every command reads it.
    #[arg(long, global = true, env = "ROUNDTABLE_STORE", value_parser = parse_store)]
    pub store: Option<StoreUrl>,
    /// The audit chain's key, outside the state directory (default:
    /// /var/lib/roundtable/keys/<project-id>.key as root, else under $XDG_STATE_HOME/roundtable/keys/).
    /// `start` creates it (0600) for an empty chain; one lost from a chain with entries is refused
    /// (see `start --new-audit-key`); verifiers only read it.
    #[arg(long, global = true, env = "ROUNDTABLE_AUDIT_KEY")]
    pub audit_key: Option<PathBuf>,
    /// Log format on stderr; the level comes from RUST_LOG (default: warn). Text is coloured only
    /// on a terminal, and never with NO_COLOR set.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// The project these options name, once resolved (`crate::project`).
    #[arg(skip)]
    pub(crate) project: std::sync::OnceLock<roundtable_source::Project>,
}

fn parse_store(text: &str) -> Result<StoreUrl, String> {
    StoreUrl::parse(text).map_err(|error| error.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    /// The text table with more columns, where a listing has them (`kubectl -o wide`).
    Wide,
    Json,
    /// The same document as `json`, as YAML (`kubectl -o yaml`).
    Yaml,
    /// Each object as `Kind/name` (or `session/ID`), one per line (`kubectl -o name`).
    Name,
    /// `jsonpath=TEMPLATE`: kubectl's JSONPath template over the `json` document. The template
    /// is parsed once, for the process's one output, so it is kept for its whole life.
    JsonPath(&'static crate::jsonpath::Template),
}

impl Format {
    /// Whether the output is a document (JSON, YAML or drawn from one) rather than a table.
    pub fn is_document(self) -> bool {
        !matches!(self, Format::Text | Format::Wide)
    }
}

/// Reads `-o`: one of the plain formats, or `jsonpath=TEMPLATE`, each named in `--help` and
/// completed by the shells.
#[derive(Debug, Clone, Copy)]
pub struct FormatParser;

const PLAIN_FORMATS: [(&str, Format); 5] = [
    ("text", Format::Text),
    ("wide", Format::Wide),
    ("json", Format::Json),
    ("yaml", Format::Yaml),
    ("name", Format::Name),
];

impl clap::builder::TypedValueParser for FormatParser {
    type Value = Format;

    fn parse_ref(
        &self,
        _command: &clap::Command,
        _argument: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Format, clap::Error> {
        let invalid = |message: String| clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{message}\n"));
        let text = value.to_str().ok_or_else(|| invalid("the output format is not UTF-8".into()))?;
        if let Some((_, format)) = PLAIN_FORMATS.iter().find(|(name, _)| *name == text) {
            return Ok(*format);
        }
        if let Some(template) = text.strip_prefix("jsonpath=") {
            let template = crate::jsonpath::Template::parse(template).map_err(|error| invalid(error.to_string()))?;
            return Ok(Format::JsonPath(Box::leak(Box::new(template))));
        }
        Err(invalid(format!(
            "invalid output format {text:?}: use text, wide, json, yaml, name or jsonpath=TEMPLATE (like jsonpath='{{.items[*].name}}')"
        )))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let plain = PLAIN_FORMATS.iter().map(|(name, _)| clap::builder::PossibleValue::new(*name));
        Some(Box::new(plain.chain([clap::builder::PossibleValue::new("jsonpath=TEMPLATE")])))
    }
}

/// The shells `completion` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct FormatArg {
    /// Output format (`-o`, as kubectl has it).
    #[arg(long, short = 'o', value_parser = FormatParser, default_value = "text")]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Scaffold .roundtable/ with commented examples.
    /// Existing files are kept, never overwritten.
    Init,
    /// Check the spec files statically (never touches the repository, the engine or the state dir).
    Validate(FormatArg),
    /// Print a shell's completion script: `source <(roundtable completion bash)`, or write it where
    /// the shell loads completions from (docs/cli.md).
    Completion {
        /// The shell whose completion script to print.
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// Print the combined JSON Schema, or write every schema into a directory.
    Schema {
        /// Write every schema as its own file into this directory (the repository's `schemas/`
        /// is made so) instead of printing the combined one.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Report the container engine, its API version and the hardening features it offers.
    Doctor(FormatArg),
    /// Run the controller: reconcile the specs until SIGINT or SIGTERM.
    // Boxed: by far the largest variant (clippy::large_enum_variant).
    Start(Box<StartArgs>),
    /// Drift: every object, file error and leftover, with or without a running daemon.
    Status {
        #[command(flatten)]
        format: FormatArg,
        /// Exit 2 on drift (OutOfSync or Unknown) too. Without it: 1 when a row is an Error (no
        /// project, a file that does not load, the engine unreachable), else 0.
        #[arg(long, conflicts_with = "watch")]
        exit_code: bool,
        /// Finished sessions and proposals older than this show as `requires pruning` (default:
        /// the running daemon's `--retention`, else 30d). Given, status is computed here.
        #[arg(long)]
        retention: Option<Duration>,
        /// After the table, print each row that changes as it changes (`kubectl get -w`); from the
        /// daemon when one runs, else by recomputing every 2 s. `-o json`: one
        /// `{"type", "object"}` line per change.
        #[arg(long, short = 'w')]
        watch: bool,
    },
    /// What reconciling now would change, terraform style, without changing anything.
    Plan {
        #[command(flatten)]
        format: FormatArg,
        /// Plan the working tree's files (`--dir`) against the state, even when the daemon
        /// follows committed state (`start --committed`, `--source`): an uncommitted edit's
        /// preview, as `argocd app diff --local`.
        #[arg(long)]
        local: bool,
    },
    /// One object's status, conditions, stored spec and recent events.
    Describe {
        /// KIND/NAME, like Adapter/codex.
        #[arg(value_parser = object_reference)]
        object: String,
        #[command(flatten)]
        format: FormatArg,
    },
    /// What happened to every object (or one), newest first, as `kubectl get events`.
    Events {
        /// KIND/NAME, like Assignment/fix: only this object's events.
        #[arg(value_parser = object_reference)]
        object: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=1000))]
        limit: u16,
        /// After the list, print each new event as it is recorded (needs a running daemon).
        #[arg(long, short = 'w')]
        watch: bool,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Reconcile one object now (through the daemon when one runs), clearing a stall.
    Reconcile {
        /// KIND/NAME, like Adapter/codex.
        #[arg(value_parser = object_reference)]
        object: String,
        /// Assignments: run the agent afresh in a new execution generation, instead of reusing
        /// the result of an earlier one with the same run fields at the same commit.
        #[arg(long)]
        rerun: bool,
    },
    /// Controllers registered in the store: live or stopped, their heartbeats, what each runs.
    Controllers {
        #[command(flatten)]
        format: FormatArg,
    },
    /// Remove finished sessions, proposals and logs past retention, and labelled leftovers no spec owns.
    Prune {
        /// How long finished sessions and proposals are kept.
        #[arg(long, default_value = "30d")]
        retention: Duration,
        /// List what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Sessions: one per execution attempt.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Proposals: the patches agents produced; only an operator's accept makes one a commit.
    #[command(subcommand)]
    Proposals(ProposalsCommand),
    /// Provenance of accepted proposals: the project's public key, and offline verification.
    #[command(subcommand)]
    Provenance(ProvenanceCommand),
    /// Adapters: built-in templates and declared ones.
    #[command(subcommand)]
    Adapters(AdaptersCommand),
    /// Pieces that run inside agent containers or in tests.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// The egress gateway, standalone (the daemon runs one per session of an Adapter with
    /// providerHosts).
    #[command(subcommand)]
    Gateway(GatewayCommand),
    /// Print the briefing that resumes an Assignment (default: the one with the newest session):
    /// task, earlier sessions and their resume commands, notes, claims, proposals. Claims of
    /// finished sessions are released.
    Resume {
        /// The Assignment to resume (default: the one with the newest session).
        assignment: Option<String>,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Receipt-gated admission: check or seal an adapter's receipt, list them, run a canary.
    #[command(subcommand)]
    Admission(AdmissionCommand),
    /// The HMAC audit chain: verify it, export a slice.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// The state store: back it up while a daemon runs.
    #[command(subcommand)]
    State(StateCommand),
    /// The agent side of the session's MCP endpoint.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Inside an agent container: forward 127.0.0.1:3128 to the session's gateway socket.
    Proxy {
        /// Where the agent's HTTPS_PROXY points (or the broker's loopback address). Repeatable:
        /// the Nth --listen is carried to the Nth --upstream.
        #[arg(long, default_values = ["127.0.0.1:3128"])]
        listen: Vec<roundtable_gateway::Endpoint>,
        /// The gateway (or the broker): unix:PATH, IP:PORT or tcp:IP:PORT.
        #[arg(long, default_values = ["unix:/run/roundtable/egress.sock"])]
        upstream: Vec<roundtable_gateway::Endpoint>,
    },
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// Write a consistent copy of the state database to FILE (0600; never overwrites), safe
    /// while the daemon runs, and check it.
    Backup {
        /// Where to write the copy (must not exist).
        file: PathBuf,
    },
    /// Copy the project's state (objects, conditions, events and the audit chain, sessions,
    /// proposals, the agents' board, overrides, probes, diagnostics) into another store, which
    /// must be empty: typically from the SQLite file to the PostgreSQL database several
    /// controllers will share. Stop the daemon first.
    Migrate {
        /// The store to copy from (default: --store, or the state directory's SQLite file).
        #[arg(long, value_parser = parse_store)]
        from: Option<StoreUrl>,
        /// The store to copy into (created tables, no rows).
        #[arg(long, value_parser = parse_store)]
        to: StoreUrl,
    },
}

#[derive(Debug, Subcommand)]
pub enum GatewayCommand {
    /// Serve CONNECT tunnels to exact hosts; one JSON decision line per tunnel on stdout.
    Serve(GatewayServeArgs),
}

#[derive(Debug, Args)]
pub struct GatewayServeArgs {
    /// unix:PATH, IP:PORT or tcp:IP:PORT.
    #[arg(long)]
    pub listen: roundtable_gateway::Endpoint,
    /// An exact DNS name tunnels may reach (repeatable): no wildcards, IP literals or ports.
    #[arg(long = "allow-host", required = true, value_parser = host)]
    pub allow_hosts: Vec<String>,
    /// The DNS server to ask (default: the nameserver lines of /etc/resolv.conf).
    #[arg(long)]
    pub resolver: Option<std::net::SocketAddr>,
    /// A non-public network tunnels may reach anyway (repeatable; logged in every decision it
    /// affects).
    #[arg(long = "allow-cidr", value_parser = allowed_cidr)]
    pub allow_cidrs: Vec<Cidr>,
    /// When given, the only networks the gateway dials (repeatable); it can only narrow.
    #[arg(long = "gateway-dial-allow")]
    pub dial_allow: Vec<Cidr>,
    /// Tunnels open at once; more are answered 429.
    #[arg(long, default_value_t = 4096, value_parser = at_least_one)]
    pub max_tunnels: usize,
    /// A spliced tunnel with no traffic for this long is closed.
    #[arg(long, default_value = "1h", value_parser = timeout)]
    pub idle_timeout: Duration,
    /// From accept to a complete CONNECT head, and from 200 to a complete ClientHello.
    #[arg(long, default_value = "10s", value_parser = timeout)]
    pub handshake_timeout: Duration,
    /// One DNS lookup's deadline: every nameserver, resend and TCP retry is inside it.
    #[arg(long, default_value = "5s", value_parser = timeout)]
    pub dns_timeout: Duration,
    /// One TCP connect to an upstream's address.
    #[arg(long, default_value = "10s", value_parser = timeout)]
    pub connect_timeout: Duration,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Every session, newest first.
    List(FormatArg),
    /// One session: phase, cause, exit code, outputs, manifest, self-check, rejected entries.
    Show {
        /// The session's ID, or a prefix of it that names one session (`sessions list` shows them).
        id: String,
        #[command(flatten)]
        format: FormatArg,
    },
    /// The captured stdout and stderr of a session.
    Logs {
        /// The session's ID, or a prefix of it that names one session (`sessions list` shows them).
        id: String,
        /// Follow a running session's output as it comes, until it ends (from the daemon).
        #[arg(long, short = 'f')]
        follow: bool,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Record a session a provider CLI ran outside Roundtable, so `resume` can find it; with an
    /// external id and a resumable adapter, the resume command is filled from its resumePattern.
    Register {
        /// The Assignment the session worked for.
        #[arg(long)]
        assignment: String,
        /// The adapter whose CLI ran it.
        #[arg(long)]
        adapter: String,
        /// The provider's own session id (1 to 128 of A-Z, a-z, 0-9, '_', '-').
        #[arg(long)]
        external_id: Option<String>,
        /// The model it ran with, when known.
        #[arg(long)]
        model: Option<String>,
        /// The folder it ran in (what the resume command needs to run in again).
        #[arg(long)]
        working_dir: Option<String>,
        /// KEY=VALUE (repeatable).
        #[arg(long = "metadata", value_parser = key_value)]
        metadata: Vec<(String, String)>,
        #[command(flatten)]
        format: FormatArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProposalsCommand {
    /// Every proposal, newest first.
    List {
        /// Only proposals in this state.
        #[arg(long, value_parser = parse_word::<roundtable_specs::session::ProposalState>)]
        state: Option<roundtable_specs::session::ProposalState>,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Commits a pending proposal on a new branch (its base commit plus the verified patch, made
    /// in a scratch index: HEAD, the index and the working tree are untouched), through the
    /// review gates, with signed provenance as a git note (docs/delivery.md).
    Accept {
        /// The proposal's ID, or a prefix of it that names one proposal (`proposals list` shows them).
        id: String,
        /// The new branch (default: roundtable/ASSIGNMENT/PROPOSAL).
        #[arg(long)]
        branch: Option<String>,
        /// Push the branch and the provenance notes to this remote (a name or a URL).
        #[arg(long)]
        push: Option<String>,
        /// The repository to commit in (default: the project's).
        #[arg(long)]
        repo: Option<PathBuf>,
        /// Let a gate's findings through (secrets, protectedPaths, size); needs --reason.
        #[arg(long = "override", value_parser = parse_word::<roundtable_specs::delivery::ProposalGate>)]
        overrides: Vec<roundtable_specs::delivery::ProposalGate>,
        /// Why, for each --override in order (one reason serves them all).
        #[arg(long = "reason")]
        reasons: Vec<String>,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Rejects a pending proposal, with the reason (audited).
    Reject {
        /// The proposal's ID, or a prefix of it that names one proposal (`proposals list` shows them).
        id: String,
        /// Why (recorded with the decision and in the audit chain).
        #[arg(long)]
        reason: String,
    },
    /// The signed provenance (a DSSE envelope) of an accepted proposal.
    Provenance {
        /// The proposal's ID, or a prefix of it that names one proposal (`proposals list` shows them).
        id: String,
    },
    /// One proposal and its patch.
    Show {
        /// The proposal's ID, or a prefix of it that names one proposal (`proposals list` shows them).
        id: String,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Writes the patch to stdout (for `git apply`).
    Export {
        /// The proposal's ID, or a prefix of it that names one proposal (`proposals list` shows them).
        id: String,
    },
    /// The patch with names and content escaped for a terminal; `--stat`: files and line counts.
    Diff {
        /// The proposal's ID, or a prefix of it that names one proposal (`proposals list` shows them).
        id: String,
        /// Only the files and their line counts.
        #[arg(long)]
        stat: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProvenanceCommand {
    /// The project's provenance public key (securesystemslib's JSON form), created if missing.
    Key,
    /// Verifies a DSSE envelope offline against a public key; prints the key's id (computed from
    /// its bytes) and the statement's subjects.
    Verify {
        /// The DSSE envelope (JSON), as `proposals provenance` prints it.
        file: PathBuf,
        /// The public key to verify it with (securesystemslib's JSON form, as `provenance key`
        /// prints it).
        #[arg(long)]
        public_key: PathBuf,
        /// The commit the statement must be about: the one whose note the envelope came from
        /// (a full id).
        #[arg(long)]
        commit: Option<String>,
        /// The key's expected id (hex SHA-256 of the raw public key), pinned.
        #[arg(long)]
        keyid: Option<String>,
    },
}

/// A fixed word of `T` (`secrets`, `pending`, …).
fn parse_word<T: std::str::FromStr<Err = roundtable_specs::words::UnknownWord>>(text: &str) -> Result<T, String> {
    text.parse().map_err(|error: roundtable_specs::words::UnknownWord| error.to_string())
}

#[derive(Debug, Subcommand)]
pub enum AdaptersCommand {
    /// Every adapter, built-ins and specs merged, alphabetical.
    List(FormatArg),
    /// How an adapter is launched: argv, stdin, environment names (never values), the files
    /// written under /tmp/roundtable/, mounts.
    Plan {
        /// The adapter's name.
        name: String,
        /// Plan for this Assignment's prompt and model.
        #[arg(long, conflicts_with = "prompt")]
        assignment: Option<String>,
        /// Plan for this prompt (default: a placeholder); it may start with '-'.
        #[arg(long, allow_hyphen_values = true)]
        prompt: Option<String>,
        /// The model flag, when not taken from --assignment.
        #[arg(long)]
        model: Option<String>,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Reads an agent's output on stdin; prints the session id and token usage it captures, or why none.
    Capture {
        /// The adapter whose output format to read.
        name: String,
        /// The output was cut at the capture cap (its last partial line is never parsed).
        #[arg(long)]
        truncated: bool,
        #[command(flatten)]
        format: FormatArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdmissionCommand {
    /// Re-derive NAME's evidence (a probe in its image, the contract, the transcript replay, the
    /// canary) and compare it with its sealed receipt. Exit 0 admitted, 1 refused, 2 unknown name.
    Check {
        /// The adapter's name.
        name: String,
        /// Seal a fresh receipt from the live evidence first (a refusal is sealed too) and
        /// anchor it in the audit chain.
        #[arg(long)]
        seal: bool,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Every adapter's admission: decision, version, receipt and its expiry.
    List {
        #[command(flatten)]
        format: FormatArg,
    },
    /// Run NAME's canary (its contract's first transcript, launched for real in its image with no
    /// network) and attest the verdict for the image. Exit 0 green, 1 red.
    Canary {
        /// The adapter's name.
        name: String,
        /// How long the attestation holds.
        #[arg(long, default_value = "24h", value_parser = period)]
        ttl: Duration,
        #[command(flatten)]
        format: FormatArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Verify the chain (or entries FROM..=TO) with the key; names the first bad sequence number.
    /// With --slice, verify an exported slice offline (no state store needed).
    Verify {
        /// The first sequence number to verify (default: the first entry).
        #[arg(long)]
        from: Option<i64>,
        /// The last sequence number to verify (default: the last entry).
        #[arg(long)]
        to: Option<i64>,
        /// A file written by `audit export`.
        #[arg(long)]
        slice: Option<PathBuf>,
    },
    /// Write entries FROM..=TO as JSON lines (seq, prevMac, mac, entry) to stdout.
    Export {
        /// The first sequence number to write.
        #[arg(long, default_value_t = 1)]
        from: i64,
        /// The last sequence number to write (default: the last entry).
        #[arg(long, default_value_t = i64::MAX)]
        to: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Bridge stdio to the session's MCP socket, presenting $ROUNDTABLE_AGENT_CAPABILITY.
    /// Agent CLIs start this as their MCP server (it is what every manifest names).
    Stdio {
        /// The session's MCP socket.
        #[arg(long, default_value = roundtable_specs::layout::MCP_SOCKET)]
        unix_socket: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// PID 1 of an agent container: reaps orphans and waits.
    Init,
    /// The built-in mock agent: writes the prompt to roundtable-mock.md, prints a transcript.
    Mock {
        /// The task file to read the prompt from.
        #[arg(long, default_value = roundtable_specs::layout::TASK)]
        brief: PathBuf,
    },
    /// Verify the hardening from inside a container; prints a JSON report, exits 1 on any mismatch.
    Check {
        /// The user the process must run as.
        #[arg(long, default_value_t = 1000)]
        uid: u32,
        /// The group the process must run as.
        #[arg(long, default_value_t = 1000)]
        gid: u32,
        /// Expected memory limit in bytes.
        #[arg(long)]
        memory: u64,
        /// Expected pids limit.
        #[arg(long)]
        pids: u64,
        /// Expected CPU limit in thousandths of a CPU.
        #[arg(long)]
        cpu_millis: u64,
        /// The OCI runtime the container was created under: the check then proves the kernel
        /// it must show (the host's, gVisor's, or one of its own).
        #[arg(long)]
        runtime_class: Option<roundtable_specs::names::RuntimeClass>,
        /// The host kernel's release, as the engine reports it.
        #[arg(long, requires = "runtime_class")]
        host_kernel: Option<String>,
        /// Once every check passed, copy the source mount into the empty workspace (as this
        /// user); a failed copy fails the check.
        #[arg(long)]
        seed_workspace: bool,
        /// The agent's argv. The report is then printed as one line, and a passed check waits
        /// for the controller's go byte on stdin before it becomes this command.
        #[arg(last = true)]
        then: Vec<String>,
    },
    /// After a session's export: every entry below DIR as JSON, with its kind and when it last
    /// changed, which the export is checked against.
    #[command(hide = true)]
    Inventory { dir: PathBuf },
    /// Doctor: connect to the Unix socket SOCKET (bind-mounted from the host, as a session's
    /// are) and print the line it answers; exits 1 when the connection is refused.
    #[command(hide = true)]
    Reach { socket: PathBuf },
    /// Agent diagnostics: try to write in each DIR; prints a JSON report, exits 1 unless every
    /// write failed as read-only.
    #[command(hide = true)]
    WriteProbe {
        /// The folders to try.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// Reconciles running at once.
    #[arg(long, default_value_t = 4, value_parser = at_least_one)]
    pub concurrency: usize,
    /// Full rescan and reconcile-everything period (jittered by ±10 %).
    #[arg(long, default_value = "10m", value_parser = period)]
    pub resync: Duration,
    /// How long shutdown waits for in-flight reconciles.
    #[arg(long, default_value = "30s")]
    pub grace: Duration,
    /// How long one pull of an Adapter's image may take before it is abandoned (and tried
    /// again after a backoff).
    #[arg(long, default_value = "10m", value_parser = period)]
    pub image_pull_timeout: Duration,
    /// How long this controller's registration and its execution leases live without a
    /// heartbeat (sent every third of it). With a shared store, another controller takes over an
    /// execution of one that was killed or cut off once this has passed.
    #[arg(long, default_value = "15s", env = "ROUNDTABLE_LEASE_TTL", value_parser = period)]
    pub lease_ttl: Duration,
    /// Executions running at once; more wait in a queue (phase Queued).
    #[arg(long, default_value_t = 4, value_parser = at_least_one)]
    pub max_executions: usize,
    /// Where execution folders live (default: /var/lib/roundtable/executions/<project-id> as
    /// root, else $XDG_STATE_HOME/roundtable/executions/<project-id>).
    #[arg(long)]
    pub execution_root: Option<PathBuf>,
    /// Finished sessions and proposals older than this are pruned every hour.
    #[arg(long, default_value = "30d")]
    pub retention: Duration,
    /// A dotenv file (KEY=VALUE lines, mode 0600) with values for adapters' credentialEnv.
    #[arg(long)]
    pub secrets_file: Option<PathBuf>,
    /// The DNS server every egress gateway asks (default: the nameservers of /etc/resolv.conf).
    #[arg(long)]
    pub gateway_resolver: Option<std::net::SocketAddr>,
    /// A non-public network every egress gateway may reach anyway (repeatable; each Adapter's
    /// egress.allowCidrs adds its own).
    #[arg(long = "gateway-allow-cidr")]
    pub gateway_allow_cidrs: Vec<Cidr>,
    /// When given, the only networks egress gateways dial (repeatable); it can only narrow.
    #[arg(long = "gateway-dial-allow")]
    pub gateway_dial_allow: Vec<Cidr>,
    /// FOR TESTS: a PEM file of CA certificates the credential broker also trusts for provider
    /// hosts (a fake provider's test CA). Production needs none: the web's roots are built in.
    #[arg(long = "broker-test-ca")]
    pub broker_test_ca: Option<PathBuf>,
    /// Tunnels one session's gateway holds open at once; more are answered 429.
    #[arg(long, default_value_t = 256, value_parser = at_least_one)]
    pub gateway_max_tunnels: usize,
    /// A listener for the HTTP API and the admin MCP endpoint besides the CLI's private socket
    /// (always served): IP:PORT (port 0: any free one) or unix:PATH. None by default, so the
    /// daemons of several projects on one host never compete for a port.
    #[arg(long, env = "ROUNDTABLE_API_LISTEN")]
    pub api_listen: Option<roundtable_api::Listen>,
    /// Serve --api-listen IP:PORT over TLS with this PEM certificate chain (with --tls-key).
    #[arg(long)]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long)]
    pub tls_key: Option<PathBuf>,
    /// The workspace name in API paths (/v1/workspaces/{ws}/…); default: the project folder's name.
    #[arg(long)]
    pub workspace: Option<String>,
    /// Export traces over OTLP/HTTP (protobuf) to this collector's base URL (`/v1/traces` is
    /// added), like OTEL_EXPORTER_OTLP_ENDPOINT, which it overrides. Plain http:// only. Off when
    /// neither it nor the standard variables name one.
    #[arg(long)]
    pub otlp_endpoint: Option<String>,
    /// Replace a lost audit key: create a new one and record, as the first entry sealed with it,
    /// the head of the chain so far (whose entries then no longer verify). Refused while the key
    /// exists.
    #[arg(long)]
    pub new_audit_key: bool,
    /// Reconcile the committed state of a git source, URL[#BRANCH] (a path, file://, https://,
    /// ssh://, git://; the branch defaults to the remote's HEAD branch), through a bare mirror in
    /// the state directory, instead of the working tree. Needs --state-dir (there is no checkout
    /// to keep the state in). See docs/gitops.md.
    #[arg(long, conflicts_with = "committed")]
    pub source: Option<String>,
    /// With --source: the spec directory inside the repository (default: .roundtable).
    #[arg(long)]
    pub source_path: Option<PathBuf>,
    /// How often the source is fetched (--source, default 30s) or the checkout's HEAD read
    /// (--committed, default 2s); jittered by ±10 %.
    #[arg(long, value_parser = period)]
    pub poll: Option<Duration>,
    /// Reconcile the checkout's HEAD commit only, never its uncommitted edits; re-read on the poll.
    #[arg(long)]
    pub committed: bool,
    /// The git webhook's shared secret (a file of this user's, mode 0600 or stricter; a trailing
    /// newline is not part of it). With it, `POST /v1/hooks/git` asks the daemon to fetch its
    /// git source when the call's X-Hub-Signature-256 (or GitLab's X-Gitlab-Token) matches; the
    /// route needs no operator token. Without it, that route answers 404.
    #[arg(long, value_name = "PATH")]
    pub webhook_secret_file: Option<PathBuf>,
}

/// The listener `--api-listen` asks for, and the TLS files it is served with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiListener {
    pub at: roundtable_api::Listen,
    pub tls: Option<roundtable_api::TlsFiles>,
}

impl StartArgs {
    /// The extra API listener, if any, once the listener flags are known not to contradict each
    /// other; the one rule for them, which [`parse`] applies before anything starts.
    pub fn api_listener(&self) -> Result<Option<ApiListener>, String> {
        use roundtable_api::{Listen, TlsFiles};
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles { cert: cert.clone(), key: key.clone() }),
            (Some(_), None) => return Err("--tls-cert needs --tls-key (the certificate's private key)".into()),
            (None, Some(_)) => return Err("--tls-key needs --tls-cert (the certificate chain it signs for)".into()),
            (None, None) => None,
        };
        match (&self.api_listen, tls) {
            (None, Some(_)) => Err("--tls-cert and --tls-key need --api-listen IP:PORT: without it the API is \
                                    served only on the CLI's private socket, which TLS does not cover"
                .into()),
            (Some(unix @ Listen::Unix(_)), Some(_)) => Err(format!(
                "--tls-cert and --tls-key cannot be used with --api-listen {unix}: TLS is served over TCP \
                 only (a Unix socket is guarded by its owner and mode 0600); drop the TLS flags or listen \
                 on IP:PORT"
            )),
            (None, None) => Ok(None),
            (Some(at), tls) => Ok(Some(ApiListener { at: at.clone(), tls })),
        }
    }
}

/// Parses the command line, then refuses what the flags say together but clap cannot check
/// alone (a usage error, exit 64, before anything starts).
pub fn parse() -> Result<Cli, clap::Error> {
    use clap::CommandFactory as _;
    let cli = Cli::try_parse()?;
    if let Command::Start(args) = &cli.command
        && let Err(message) = args.api_listener()
    {
        return Err(Cli::command().error(clap::error::ErrorKind::ArgumentConflict, message));
    }
    Ok(cli)
}

/// `KEY=VALUE`.
fn key_value(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// Every argument an operator can see says what it is in `--help`: no bare `<ID>`.
    #[test]
    fn every_visible_argument_has_help_text() {
        fn undocumented(command: &clap::Command, path: &str, found: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !arg.is_hide_set() && !builtin && arg.get_help().is_none() {
                    found.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
                undocumented(sub, &format!("{path} {}", sub.get_name()), found);
            }
        }
        let mut found = Vec::new();
        undocumented(&super::Cli::command(), "roundtable", &mut found);
        assert!(found.is_empty(), "arguments without help text: {found:#?}");
    }
}
