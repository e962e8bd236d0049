//! The real provider CLIs (Codex, OpenCode, Gemini CLI) in images built by
//! `examples/images/build.sh`: admission probes their real help and version surfaces inside the
//! hardened container, and seals them. Needs the CLI files in `ROUNDTABLE_PROVIDER_CLIS`; skips
//! without them unless `ROUNDTABLE_REQUIRE_PROVIDER_CLIS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support::{
    API, ShowLogOnPanic, commit_all, engine_or_skip, json, nothing_left, repo_root, roundtable, start_daemon, stderr,
    stdout, write,
};

/// The folder holding the CLI files, or `None` (skip) when the run does not require them.
pub(crate) fn provider_clis() -> Option<PathBuf> {
    let required = std::env::var("ROUNDTABLE_REQUIRE_PROVIDER_CLIS").is_ok_and(|v| v == "1");
    match std::env::var_os("ROUNDTABLE_PROVIDER_CLIS").map(PathBuf::from) {
        Some(dir) if dir.join("SHA256SUMS").is_file() => Some(dir),
        found if required => panic!("ROUNDTABLE_REQUIRE_PROVIDER_CLIS=1 but ROUNDTABLE_PROVIDER_CLIS is {found:?}"),
        _ => {
            eprintln!("skipping: set ROUNDTABLE_PROVIDER_CLIS to the folder holding the real provider CLIs");
            None
        }
    }
}

/// Builds the three images once per test run; the Adapters file pinning them by ID.
pub(crate) fn real_cli_adapters(clis: &Path) -> String {
    static BUILT: OnceLock<Result<String, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let adapters = repo_root().join("target/provider-images/test-adapters.yaml");
        let out = Command::new("bash")
            .arg(repo_root().join("examples/images/build.sh"))
            .arg(&adapters)
            .env("ROUNDTABLE_PROVIDER_CLIS", clis)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("examples/images/build.sh failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        std::fs::read_to_string(&adapters).map_err(|e| e.to_string())
    });
    built.clone().unwrap_or_else(|error| panic!("{error}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_clis_are_admitted_on_their_real_surfaces() {
    let Some(clis) = provider_clis() else { return };
    let Some(engine) = engine_or_skip().await else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    write(root, ".roundtable/adapters.yaml", &real_cli_adapters(&clis));
    commit_all(root);

    for (name, version) in [("codex", "0.171.0"), ("opencode", "1.18.33"), ("gemini", "0.61.0")] {
        let out = roundtable(root, &["admission", "check", name, "--seal", "--format", "json"]);
        let item = json(&out)["items"][0].clone();
        assert_eq!(out.status.code(), Some(0), "{name}: {item:#}{}", stderr(&out));
        assert_eq!(item["evidence"]["installedVersion"], version, "{name}");
        assert_eq!(item["evidence"]["conformance"], "ok", "{name}: {item:#}");
        assert!(item["evidence"]["imageId"].as_str().is_some_and(|id| id.starts_with("sha256:")), "{name}");
    }

    // A contract naming a flag the real CLI does not have is refused, the flag named.
    let contract = std::fs::read_to_string(repo_root().join("specs/contracts/codex.yaml")).expect("contract");
    let wrong = contract.replace("requiredFlags: [--json,", "requiredFlags: [--session-id, --json,");
    write(root, ".roundtable/contracts/codex.yaml", &wrong);
    let out = roundtable(root, &["admission", "check", "codex", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let item = json(&out)["items"][0].clone();
    assert_eq!(item["decisions"][0]["reason"], "conformance_fail", "{item:#}");
    assert_eq!(item["decisions"][0]["message"], "the help surface does not advertise --session-id");
    nothing_left(&engine, root).await;
}

/// Each real CLI runs its exact built-in plan in the hardened container, holding only placeholders,
/// with its session's credential broker as its only way out: it gets past argument parsing, its
/// MCP client completes `initialize` and lists the tools on the session's authenticated endpoint,
/// its first model request arrives at the broker with its placeholder (recognised and swapped;
/// the provider host resolves to a loopback address where nothing answers, so offline it then
/// retries until the Assignment's timeout), and the provider session id is captured where the CLI
/// prints one before the model call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_real_cli_accepts_its_plan_and_speaks_mcp_to_the_endpoint() {
    let Some(clis) = provider_clis() else { return };
    let Some(engine) = engine_or_skip().await else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    write(root, ".roundtable/adapters.yaml", &real_cli_adapters(&clis));
    let mut assignments = String::new();
    for cli in CLIS {
        assignments.push_str(&format!(
            "---\n{API}\nkind: Assignment\nmetadata: {{name: {cli}-argv}}\nspec:\n  adapter: {cli}\n  task: {{id: T, prompt: Say hi.}}\n  readablePaths: [README.md]\n  timeout: 40s\n  retries: 1\n"
        ));
    }
    write(root, ".roundtable/assignments.yaml", &assignments);
    commit_all(root);
    let validated = roundtable(root, &["validate"]);
    assert!(validated.status.success(), "{}{}", stdout(&validated), stderr(&validated));
    let executions = tempfile::tempdir().expect("executions");
    let secrets = executions.path().join("secrets.env");
    std::fs::write(&secrets, "CODEX_API_KEY=sk-test\nANTHROPIC_API_KEY=sk-test\nGEMINI_API_KEY=test\n")
        .expect("secrets");
    std::fs::set_permissions(&secrets, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");
    let _log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_owned());
    // Every provider host resolves to a loopback address where nothing listens: the broker's
    // upstream leg fails there, never anywhere off this machine.
    let dns = roundtable_net_fixtures::FakeDns::start("127.0.0.1:0".parse().expect("address")).await.expect("DNS");
    for host in ["api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com"] {
        dns.answer(host, vec![roundtable_net_fixtures::Reply::Addresses(vec!["127.0.0.207".parse().expect("ip")])]);
    }
    let resolver = dns.address().to_string();
    let daemon = start_daemon(
        root,
        &[
            "--secrets-file",
            secrets.to_str().expect("utf-8"),
            "--max-executions",
            "3",
            "--grace",
            "1s",
            "--gateway-resolver",
            &resolver,
            "--gateway-allow-cidr",
            "127.0.0.207/32",
            "--gateway-dial-allow",
            "127.0.0.207/32",
        ],
        executions.path(),
    );
    let sessions = || json(&roundtable(root, &["sessions", "list", "--format", "json"]))["items"].clone();
    // Under CI load the engine has once broken an exec's attach before the CLI printed anything
    // (dockerd: "exec attach failed: … broken pipe"; the session ended with 126 and no output):
    // each Assignment may re-run once, and the test looks at the session that ran to its timeout.
    // Under load opencode (Node.js) has also taken over 20 s to reach its MCP client: 40 s each.
    // Codex gives up after its retries of the broker's 502 (exit 1); the others retry until the
    // timeout.
    let ran_out = |session: &serde_json::Value, cli: &str| {
        session["adapter"] == cli
            && (session["cause"] == "TimedOut" || (cli == "codex" && session["cause"] == "Exited"))
    };
    let timed_out =
        |cli: &str| sessions().as_array().is_some_and(|items| items.iter().any(|session| ran_out(session, cli)));
    let finished = || CLIS.iter().all(|cli| timed_out(cli));
    crate::support::wait_until_within(
        "a session of each CLI to run into its timeout",
        std::time::Duration::from_secs(270),
        finished,
    )
    .await;
    stop_gracefully(daemon);

    for (cli, client, version) in [
        ("codex", "codex-mcp-client", "0.171.0"),
        ("opencode", "opencode", "1.18.33"),
        ("gemini", "gemini-cli-mcp-client", "0.61.0"),
    ] {
        let items = sessions();
        let session = items
            .as_array()
            .and_then(|items| items.iter().find(|session| ran_out(session, cli)).cloned())
            .unwrap_or_else(|| panic!("no session of {cli}: {items:#}"));
        let id = session["id"].as_str().expect("id");
        let logs = stdout(&roundtable(root, &["sessions", "logs", id]));
        // A usage error ends at once with a parser's complaint; a clean start runs into the timeout.
        for complaint in ["unexpected argument", "Unknown argument", "Unknown arguments", "error: unrecognized"] {
            assert!(!logs.contains(complaint), "{cli} rejected its argv: {logs}");
        }
        let expected = if cli == "codex" { "Exited" } else { "TimedOut" };
        assert_eq!(session["cause"], expected, "{cli}: {session:#}\n{logs}");
        let agent = &session["detail"]["agent"];
        let clients = agent["mcpClients"].as_array().cloned().unwrap_or_default();
        assert!(
            clients.iter().any(|c| c["name"] == client && c["version"] == version),
            "{cli}'s MCP client did not initialize on the endpoint: {agent:#}"
        );
        assert!(agent["toolsListed"].as_u64().is_some_and(|n| n >= 1), "{cli} listed no tools: {agent:#}");
        // Codex and Gemini name their session before the first model call.
        if cli != "opencode" {
            assert!(session["externalSessionId"].as_str().is_some_and(|id| id.len() >= 32), "{cli}: {session:#}");
        }
        // Its first model request reached the broker with its placeholder, which the broker
        // recognised (the line names the variable) before it tried the provider.
        let log = std::fs::read_to_string(executions.path().join(id).join("broker.log")).unwrap_or_default();
        let first = log
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find(|line| line["method"] == "POST")
            .unwrap_or_else(|| panic!("{cli} sent no model request to the broker: {log}\n{logs}"));
        let credential = match cli {
            "codex" => "CODEX_API_KEY",
            "opencode" => "ANTHROPIC_API_KEY",
            _ => "GEMINI_API_KEY",
        };
        assert_eq!(first["credential"], credential, "{cli}: {first}");
        assert_eq!(first["reason"], "upstream_failed", "{cli}: {first}");
    }
    nothing_left(&engine, root).await;
}

const CLIS: [&str; 3] = ["codex", "opencode", "gemini"];

/// SIGTERM, then wait: a retry still running is cancelled and cleaned up within the grace.
fn stop_gracefully(mut daemon: crate::support::Daemon) {
    let pid = daemon.0.id().to_string();
    let _ = std::process::Command::new("kill").args(["-TERM", &pid]).status();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while daemon.0.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
