//! The four provider personalities end to end: each reads a manifest in its CLI's format that
//! starts `agent-double mcp-echo-server`, calls tools through it, edits the workspace and prints
//! its CLI's JSON lines; and each refuses what its CLI refuses.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_agent-double");
const PROVIDERS: [&str; 4] = ["codex", "claude", "gemini", "opencode"];
const CAPABILITY: &str = "rtcap_test_capability";

fn prompt(provider: &str) -> String {
    format!(
        "Fix the typo for {provider}.\nmcp: proposal.create {{\"summary\":\"mine\"}}\nmcp: claims.acquire {{\"paths\":[\"{provider}-was-here.md\"],\"ttlSeconds\":60}}\nmcp: session.heartbeat {{\"status\":\"editing\"}}\nmcp: rpc.fail {{}}\nwrite: README.md # Project (edited by {provider})\n"
    )
}

struct Run {
    status: Option<i32>,
    stderr: String,
    events: Vec<Value>,
}

/// A workspace, a folder for the provider's configuration, and the echo server's log.
struct Fixture {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    config: PathBuf,
    log: PathBuf,
}

/// What the manifest should get wrong, if anything.
#[derive(Clone, Copy, PartialEq)]
enum Manifest {
    Right,
    /// The capability is not passed to the server (the bridge then refuses to start).
    ForgetsCapability,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        let workspace = root.path().join("workspace");
        let config = root.path().join("config");
        std::fs::create_dir_all(&workspace).expect("workspace");
        std::fs::create_dir_all(config.join("home")).expect("config");
        std::fs::write(workspace.join("README.md"), "# Project\n").expect("readme");
        let log = root.path().join("echo.log");
        Self { _root: root, workspace, config, log }
    }

    fn server_args(&self, provider: &str) -> Vec<String> {
        let log = self.log.display().to_string();
        ["mcp-echo-server", "--log", &log, "--require-env", "ROUNDTABLE_AGENT_CAPABILITY", "--title"]
            .iter()
            .map(|a| (*a).to_owned())
            .chain([format!("Fix the {provider} typo")])
            .collect()
    }

    /// Writes the manifest as Roundtable does (but naming the echo server); returns the argv
    /// after the provider's name and the provider's environment.
    fn plan(&self, provider: &str, manifest: Manifest) -> (Vec<String>, Vec<(String, String)>) {
        let args = self.server_args(provider);
        let workspace = self.workspace.display().to_string();
        let forget = manifest == Manifest::ForgetsCapability;
        let words = |list: &[&str]| list.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        match provider {
            "codex" => {
                let home = self.config.join("codex");
                std::fs::create_dir_all(&home).expect("codex home");
                let env_vars = if forget { "" } else { "env_vars = [\"ROUNDTABLE_AGENT_CAPABILITY\"]\n" };
                let toml = format!(
                    "# Written by the test.\n[mcp_servers.roundtable]\ncommand = {}\nargs = {}\n{env_vars}startup_timeout_sec = 20\ntool_timeout_sec = 600\nrequired = true\ndefault_tools_approval_mode = \"approve\"\n",
                    json!(BINARY),
                    json!(args)
                );
                std::fs::write(home.join("config.toml"), toml).expect("config.toml");
                let mut argv = words(&[
                    "exec",
                    "--json",
                    "--skip-git-repo-check",
                    "--dangerously-bypass-approvals-and-sandbox",
                    "-C",
                ]);
                argv.extend([workspace, "--model=test-model".into(), "-".into()]);
                (argv, vec![("CODEX_HOME".into(), home.display().to_string())])
            }
            "claude" => {
                let path = self.config.join("mcp.json");
                let env = if forget {
                    json!({})
                } else {
                    json!({"ROUNDTABLE_AGENT_CAPABILITY": "${ROUNDTABLE_AGENT_CAPABILITY}"})
                };
                let manifest = json!({"mcpServers": {"roundtable": {"type": "stdio", "command": BINARY, "args": args, "env": env}}});
                std::fs::write(&path, manifest.to_string()).expect("mcp.json");
                let mut argv = words(&["-p", "--output-format=stream-json", "--verbose", "--model=test-model"]);
                argv.push(format!("--mcp-config={}", path.display()));
                argv.extend(words(&["--strict-mcp-config", "--permission-mode=bypassPermissions"]));
                let env = vec![
                    ("CLAUDE_CONFIG_DIR".into(), self.config.join("claude").display().to_string()),
                    ("DISABLE_AUTOUPDATER".into(), "1".into()),
                    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(), "1".into()),
                    // The tests may run as root, where Claude refuses bypassPermissions without it.
                    ("IS_SANDBOX".into(), "1".into()),
                ];
                (argv, env)
            }
            "gemini" => {
                let path = self.config.join("gemini-settings.json");
                let env = if forget {
                    json!({})
                } else {
                    json!({"ROUNDTABLE_AGENT_CAPABILITY": "$ROUNDTABLE_AGENT_CAPABILITY"})
                };
                let settings = json!({
                    "mcpServers": {"roundtable": {
                        "command": BINARY, "args": args, "env": env,
                        "timeout": 600_000, "trust": true,
                    }},
                    "mcp": {"allowed": ["roundtable"]},
                    "security": {"folderTrust": {"enabled": false}},
                    "privacy": {"usageStatisticsEnabled": false},
                });
                std::fs::write(&path, settings.to_string()).expect("settings");
                let argv = words(&[
                    "--output-format=stream-json",
                    "--model=test-model",
                    "--approval-mode=yolo",
                    "--allowed-mcp-server-names=roundtable",
                ]);
                let env = vec![
                    ("GEMINI_CLI_HOME".into(), self.config.join("gemini").display().to_string()),
                    ("GEMINI_CLI_SYSTEM_SETTINGS_PATH".into(), path.display().to_string()),
                    ("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()),
                ];
                (argv, env)
            }
            _ => {
                let mut command = vec![BINARY.to_owned()];
                command.extend(args);
                let environment = if forget {
                    json!({})
                } else {
                    json!({"ROUNDTABLE_AGENT_CAPABILITY": "{env:ROUNDTABLE_AGENT_CAPABILITY}"})
                };
                let config = json!({
                    "$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
                    "mcp": {"roundtable": {"type": "local", "command": command, "environment": environment, "enabled": true, "timeout": 30_000}},
                });
                let argv = vec![
                    "run".into(),
                    "--format=json".into(),
                    "--model=anthropic/test-model".into(),
                    format!("--dir={workspace}"),
                ];
                let env = vec![
                    ("OPENCODE_CONFIG_CONTENT".into(), config.to_string()),
                    ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
                    ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
                ];
                (argv, env)
            }
        }
    }

    /// The personality with `argv`, a clean environment plus `env`, and `stdin`, in the workspace.
    fn run(&self, provider: &str, argv: &[String], env: &[(String, String)], stdin: &str) -> Run {
        let mut child = Command::new(BINARY)
            .arg(provider)
            .args(argv)
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.config.join("home"))
            .env("ROUNDTABLE_AGENT_CAPABILITY", CAPABILITY)
            .env("LEAKY", "inherited")
            .env("SOME_TOKEN", "secret")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agent-double");
        if let Some(mut input) = child.stdin.take() {
            // A refusal exits before reading its prompt; the broken pipe is then expected.
            let _ = input.write_all(stdin.as_bytes());
        }
        let out = child.wait_with_output().expect("wait");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let events = stdout
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{provider}: not a JSON line ({e}): {line}"))
            })
            .collect();
        Run { status: out.status.code(), stderr: String::from_utf8_lossy(&out.stderr).into_owned(), events }
    }

    /// The echo server's log: its environment, then every message it received.
    fn log(&self) -> (Value, Vec<Value>) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut lines = text.lines().map(|line| serde_json::from_str::<Value>(line).unwrap_or(Value::Null));
        let env = lines.next().map(|first| first["env"].clone()).unwrap_or(Value::Null);
        (env, lines.collect())
    }
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|event| event["type"] == kind).collect()
}

/// The session id, input and output tokens, read from the output the way Roundtable reads it.
fn capture(provider: &str, events: &[Value]) -> (String, u64, u64) {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    match provider {
        "codex" => {
            let usage = &of_type(events, "turn.completed")[0]["usage"];
            (
                text(&events[0]["thread_id"]),
                usage["input_tokens"].as_u64().unwrap_or(0),
                usage["output_tokens"].as_u64().unwrap_or(0),
            )
        }
        "claude" => {
            let result = of_type(events, "result")[0];
            assert_eq!(result["session_id"], events[0]["session_id"], "claude: init and result agree");
            let usage = &result["usage"];
            (
                text(&result["session_id"]),
                usage["input_tokens"].as_u64().unwrap_or(0),
                usage["output_tokens"].as_u64().unwrap_or(0),
            )
        }
        "gemini" => {
            let stats = &of_type(events, "result")[0]["stats"];
            (
                text(&of_type(events, "init")[0]["session_id"]),
                stats["input_tokens"].as_u64().unwrap_or(0),
                stats["output_tokens"].as_u64().unwrap_or(0),
            )
        }
        _ => {
            let finish = of_type(events, "step_finish");
            let tokens = &finish[0]["part"]["tokens"];
            (
                text(&events[0]["sessionID"]),
                tokens["input"].as_u64().unwrap_or(0),
                tokens["output"].as_u64().unwrap_or(0),
            )
        }
    }
}

/// The MCP tool names the output shows as called, in order, and how many ended in error.
fn tool_calls(provider: &str, events: &[Value]) -> (Vec<String>, usize) {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    match provider {
        "codex" => {
            let items: Vec<&Value> = of_type(events, "item.completed")
                .into_iter()
                .map(|e| &e["item"])
                .filter(|i| i["type"] == "mcp_tool_call")
                .collect();
            assert!(items.iter().all(|i| i["server"] == "roundtable"));
            (items.iter().map(|i| text(&i["tool"])).collect(), items.iter().filter(|i| i["status"] == "failed").count())
        }
        "claude" => {
            let uses: Vec<String> = of_type(events, "assistant")
                .iter()
                .map(|e| &e["message"]["content"][0])
                .filter(|b| b["type"] == "tool_use" && b["name"].as_str().is_some_and(|n| n.starts_with("mcp__")))
                .map(|b| text(&b["name"]))
                .collect();
            let errors =
                of_type(events, "user").iter().filter(|e| e["message"]["content"][0]["is_error"] == true).count();
            (uses, errors)
        }
        "gemini" => {
            let uses: Vec<String> = of_type(events, "tool_use")
                .iter()
                .map(|e| text(&e["tool_name"]))
                .filter(|n| n.starts_with("mcp_"))
                .collect();
            (uses, of_type(events, "tool_result").iter().filter(|e| e["status"] == "error").count())
        }
        _ => {
            let parts: Vec<&Value> = of_type(events, "tool_use")
                .into_iter()
                .map(|e| &e["part"])
                .filter(|p| p["tool"].as_str().is_some_and(|t| t.starts_with("roundtable_")))
                .collect();
            (
                parts.iter().map(|p| text(&p["tool"])).collect(),
                parts.iter().filter(|p| p["state"]["status"] == "error").count(),
            )
        }
    }
}

#[test]
fn each_personality_reads_its_manifest_calls_tools_and_edits_the_workspace() {
    for provider in PROVIDERS {
        let fixture = Fixture::new();
        let (argv, env) = fixture.plan(provider, Manifest::Right);
        let prompt = prompt(provider);
        let run = fixture.run(provider, &argv, &env, &prompt);
        assert_eq!(run.status, Some(0), "{provider}: {}\n{:#?}", run.stderr, run.events);

        let (id, input, output) = capture(provider, &run.events);
        if provider == "opencode" {
            assert!(id.starts_with("ses_") && id.len() == 30, "{provider} id {id:?}");
            assert!(run.events.iter().all(|e| e["sessionID"] == id.as_str()), "every opencode line names the session");
        } else {
            assert_eq!(id.len(), 36, "{provider} id {id:?} is a UUID");
        }
        assert_eq!((input, output), (prompt.len() as u64, 42), "{provider} usage");

        let (tools, errors) = tool_calls(provider, &run.events);
        let expected: Vec<String> =
            ["task.get", "notes.append", "proposal.create", "claims.acquire", "session.heartbeat", "rpc.fail"]
                .iter()
                .map(|tool| match provider {
                    "codex" => (*tool).to_owned(),
                    "claude" => format!("mcp__roundtable__{}", tool.replace('.', "_")),
                    "gemini" => format!("mcp_roundtable_{tool}"),
                    _ => format!("roundtable_{}", tool.replace('.', "_")),
                })
                .collect();
        assert_eq!(tools, expected, "{provider}");
        assert_eq!(
            errors, 2,
            "{provider}: proposal.create (isError) and rpc.fail (JSON-RPC error) are reported as errors"
        );

        let signature = std::fs::read_to_string(fixture.workspace.join(format!("{provider}-was-here.md")));
        assert_eq!(signature.ok().as_deref(), Some(format!("task: Fix the {provider} typo\n").as_str()), "{provider}");
        let readme = std::fs::read_to_string(fixture.workspace.join("README.md"));
        assert_eq!(readme.ok().as_deref(), Some(format!("# Project (edited by {provider})\n").as_str()));

        let (server_env, messages) = fixture.log();
        assert_eq!(server_env["ROUNDTABLE_AGENT_CAPABILITY"], CAPABILITY, "{provider}");
        let methods: Vec<&str> = messages.iter().filter_map(|m| m["method"].as_str()).collect();
        assert_eq!(
            methods[..4],
            ["initialize", "notifications/initialized", "tools/list", "tools/list"],
            "{provider}: handshake, following the cursor"
        );
        assert_eq!(messages[0]["params"]["protocolVersion"], "2025-06-18");
        assert_eq!(messages[0]["params"]["clientInfo"]["name"], format!("{provider}-double"));
        let calls: Vec<&Value> =
            messages.iter().filter(|m| m["method"] == "tools/call").map(|m| &m["params"]).collect();
        assert_eq!(calls[1]["arguments"], json!({"text": format!("{provider} read task T-1")}), "{provider}");
        assert_eq!(calls[3]["arguments"], json!({"paths": [format!("{provider}-was-here.md")], "ttlSeconds": 60}));
    }
}

#[test]
fn each_personality_gives_the_server_the_environment_its_cli_gives() {
    for provider in PROVIDERS {
        let fixture = Fixture::new();
        let (argv, env) = fixture.plan(provider, Manifest::Right);
        let run = fixture.run(provider, &argv, &env, "Look around.\n");
        assert_eq!(run.status, Some(0), "{provider}: {}", run.stderr);
        let (server_env, _) = fixture.log();
        let has = |name: &str| server_env.get(name).is_some();
        let (leaky, token) = match provider {
            // Codex: defaults and env_vars only. Claude: PATH, HOME and the manifest's env only.
            "codex" | "claude" => (false, false),
            // Gemini: everything inherited except secret-looking names.
            "gemini" => (true, false),
            // OpenCode: everything inherited.
            _ => (true, true),
        };
        assert_eq!((has("LEAKY"), has("SOME_TOKEN")), (leaky, token), "{provider}: {server_env:#}");
        assert!(has("PATH") && has("HOME"), "{provider}");
    }
}

#[test]
fn a_manifest_that_forgets_the_capability_fails_where_the_cli_passes_only_what_it_lists() {
    for provider in ["codex", "claude"] {
        let fixture = Fixture::new();
        let (argv, env) = fixture.plan(provider, Manifest::ForgetsCapability);
        let run = fixture.run(provider, &argv, &env, &prompt(provider));
        assert_eq!(run.status, Some(1), "{provider}: {:#?}", run.events);
        assert!(run.stderr.contains("ROUNDTABLE_AGENT_CAPABILITY is not set"), "{provider}: {}", run.stderr);
        let failed = match provider {
            "codex" => {
                of_type(&run.events, "turn.failed").len() == 1 && of_type(&run.events, "turn.started").is_empty()
            }
            _ => {
                of_type(&run.events, "result").first().is_some_and(|r| r["is_error"] == true)
                    && run.events[0]["mcp_servers"][0]["status"] == "failed"
            }
        };
        assert!(failed, "{provider}: {:#?}", run.events);
        assert!(!fixture.workspace.join(format!("{provider}-was-here.md")).exists());
    }
    // Gemini and OpenCode pass their own environment on, so the capability arrives anyway.
    for provider in ["gemini", "opencode"] {
        let fixture = Fixture::new();
        let (argv, env) = fixture.plan(provider, Manifest::ForgetsCapability);
        let run = fixture.run(provider, &argv, &env, "x");
        assert_eq!(run.status, Some(0), "{provider}: {}", run.stderr);
        assert_eq!(fixture.log().0["ROUNDTABLE_AGENT_CAPABILITY"], CAPABILITY, "{provider}");
    }
}

#[test]
fn a_hung_server_fails_the_run_within_its_timeout() {
    let fixture = Fixture::new();
    let (argv, env) = fixture.plan("codex", Manifest::Right);
    let config = fixture.config.join("codex/config.toml");
    let toml =
        std::fs::read_to_string(&config).expect("config").replace("tool_timeout_sec = 600", "tool_timeout_sec = 1");
    std::fs::write(&config, toml).expect("config");
    let started = Instant::now();
    let run = fixture.run("codex", &argv, &env, "mcp: hang {}\n");
    assert_eq!(run.status, Some(1));
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
    let failed = of_type(&run.events, "turn.failed");
    assert!(
        failed[0]["error"]["message"].as_str().is_some_and(|m| m.contains("no answer to tools/call within 1s")),
        "{failed:?}"
    );
    let hung = of_type(&run.events, "item.completed").into_iter().find(|e| e["item"]["tool"] == "hang").cloned();
    assert_eq!(hung.map(|e| e["item"]["status"].clone()), Some(json!("failed")), "the started call is closed");
}

#[test]
fn a_server_that_cannot_start_is_a_provider_format_error() {
    for provider in PROVIDERS {
        let fixture = Fixture::new();
        let (argv, env) = fixture.plan(provider, Manifest::Right);
        // Point every manifest at a program that does not exist.
        let missing = "/nonexistent/roundtable";
        for file in ["codex/config.toml", "mcp.json", "gemini-settings.json"] {
            let path = fixture.config.join(file);
            if let Ok(text) = std::fs::read_to_string(&path) {
                std::fs::write(&path, text.replace(BINARY, missing)).expect("rewrite");
            }
        }
        let env: Vec<(String, String)> = env.into_iter().map(|(k, v)| (k, v.replace(BINARY, missing))).collect();
        let run = fixture.run(provider, &argv, &env, "x");
        assert_eq!(run.status, Some(1), "{provider}: {}", run.stderr);
        let text = serde_json::to_string(&run.events).unwrap_or_default();
        assert!(text.contains("cannot start /nonexistent/roundtable"), "{provider}: {text}");
    }
}

#[test]
fn each_personality_refuses_what_its_cli_refuses() {
    let fixture = Fixture::new();
    for provider in PROVIDERS {
        let (argv, env) = fixture.plan(provider, Manifest::Right);
        let mut unknown = argv.clone();
        unknown.push("--no-such-flag".into());
        let run = fixture.run(provider, &unknown, &env, "x");
        assert_eq!(run.status, Some(2), "{provider}: {}", run.stderr);
        assert!(run.stderr.contains("no-such-flag"), "{provider}: {}", run.stderr);
        assert!(run.events.is_empty());

        let empty = fixture.run(provider, &argv, &env, "");
        let (status, needle) = match provider {
            "codex" => (1, "No prompt provided via stdin."),
            "claude" => (1, "Input must be provided either through stdin or as a prompt argument"),
            "gemini" => (42, "No input provided via stdin."),
            _ => (1, "You must provide a message or a command"),
        };
        assert_eq!(empty.status, Some(status), "{provider}: {}", empty.stderr);
        assert!(empty.stderr.contains(needle), "{provider}: {}", empty.stderr);
    }

    let (argv, env) = fixture.plan("claude", Manifest::Right);
    let quiet: Vec<String> = argv.iter().filter(|a| *a != "--verbose").cloned().collect();
    let run = fixture.run("claude", &quiet, &env, "x");
    assert_eq!(run.status, Some(1));
    assert_eq!(run.stderr.trim(), "Error: When using --print, --output-format=stream-json requires --verbose");

    let (argv, env) = fixture.plan("gemini", Manifest::Right);
    let untrusted: Vec<(String, String)> = env.into_iter().filter(|(k, _)| k != "GEMINI_CLI_TRUST_WORKSPACE").collect();
    let run = fixture.run("gemini", &argv, &untrusted, "x");
    assert_eq!(run.status, Some(55));
    assert!(run.stderr.contains("not running in a trusted directory"), "{}", run.stderr);

    let (argv, env) = fixture.plan("opencode", Manifest::Right);
    let strict: Vec<(String, String)> = env
        .into_iter()
        .map(|(k, v)| {
            if k == "OPENCODE_CONFIG_CONTENT" {
                (k, v.replace("\"enabled\":true", "\"enabled\":true,\"args\":[]"))
            } else {
                (k, v)
            }
        })
        .collect();
    let run = fixture.run("opencode", &argv, &strict, "x");
    assert_eq!(run.status, Some(1));
    assert!(run.stderr.contains("Unrecognized key: \"args\" mcp.roundtable"), "{}", run.stderr);

    let (argv, env) = fixture.plan("codex", Manifest::Right);
    let picky: Vec<String> =
        argv.iter().filter(|a| !a.starts_with("--skip-git") && !a.starts_with("--dangerously")).cloned().collect();
    let run = fixture.run("codex", &picky, &env, "x");
    assert_eq!(run.status, Some(1));
    assert!(run.stderr.contains("Not inside a trusted directory"), "{}", run.stderr);
}

#[test]
fn the_personalities_answer_by_the_name_they_are_invoked_as() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (provider, version) in
        [("codex", "codex-cli "), ("claude", "(Claude Code)"), ("gemini", "."), ("opencode", ".")]
    {
        let link = dir.path().join(provider);
        std::os::unix::fs::symlink(BINARY, &link).expect("symlink");
        let help = Command::new(&link).arg("--help").output().expect("run");
        assert!(help.status.success(), "{provider}");
        assert!(String::from_utf8_lossy(&help.stdout).contains("agent-double"), "{provider}");
        let out = Command::new(&link).arg("--version").output().expect("run");
        assert!(String::from_utf8_lossy(&out.stdout).contains(version), "{provider}");
    }
    assert!(Path::new(BINARY).is_file());
}

/// What the tiny model server in [`serve_one`] received.
#[derive(Debug)]
struct Received {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A plain HTTP/1.1 server on loopback that answers one request with `status` and an SSE body
/// reporting 17 input and 5 output tokens, then hands back what it received.
fn serve_one(status: u16) -> (String, std::thread::JoinHandle<Received>) {
    use std::io::{BufRead as _, BufReader, Read as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut request_line = String::new();
        reader.read_line(&mut request_line).expect("request line");
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("header");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').expect("a header");
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
        let length: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .expect("content-length");
        let mut body = vec![0; length];
        reader.read_exact(&mut body).expect("body");
        let events = "data: {\"usage\":{\"input_tokens\":17,\"output_tokens\":5}}\n\n";
        let reply = format!(
            "HTTP/1.1 {status} Whatever\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{events}",
            events.len()
        );
        (&stream).write_all(reply.as_bytes()).expect("reply");
        Received {
            request_line: request_line.trim_end().to_owned(),
            headers,
            body: serde_json::from_slice(&body).expect("a JSON body"),
        }
    });
    (base, handle)
}

const PLACEHOLDER: &str = "rt-placeholder-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Points `provider`'s plan at `base` the way Roundtable's brokered plan does, with the
/// placeholder in the key variable its CLI reads.
fn point_at(fixture: &Fixture, provider: &str, env: &mut Vec<(String, String)>, base: &str) {
    let set = |env: &mut Vec<(String, String)>, name: &str, value: &str| env.push((name.into(), value.into()));
    match provider {
        "codex" => {
            let path = fixture.config.join("codex/config.toml");
            let rest = std::fs::read_to_string(&path).expect("config.toml");
            let provider = format!(
                "model_provider = \"roundtable\"\n\n[model_providers.roundtable]\nname = \"Roundtable broker\"\nbase_url = \"{base}/api.openai.com/v1\"\nenv_key = \"CODEX_API_KEY\"\nwire_api = \"responses\"\nsupports_websockets = false\nrequires_openai_auth = false\n\n"
            );
            std::fs::write(&path, format!("{provider}{rest}")).expect("config.toml");
            set(env, "CODEX_API_KEY", PLACEHOLDER);
        }
        "claude" => {
            set(env, "ANTHROPIC_BASE_URL", &format!("{base}/api.anthropic.com"));
            set(env, "ANTHROPIC_API_KEY", PLACEHOLDER);
        }
        "gemini" => {
            set(env, "GOOGLE_GEMINI_BASE_URL", &format!("{base}/generativelanguage.googleapis.com"));
            set(env, "GEMINI_API_KEY", PLACEHOLDER);
        }
        _ => {
            let (_, content) = env.iter_mut().find(|(n, _)| n == "OPENCODE_CONFIG_CONTENT").expect("config");
            let mut config: Value = serde_json::from_str(content).expect("json");
            config["provider"] = json!({"anthropic": {"options": {"baseURL": format!("{base}/api.anthropic.com/v1")}}});
            *content = config.to_string();
            set(env, "ANTHROPIC_API_KEY", PLACEHOLDER);
        }
    }
}

#[test]
fn each_personality_asks_the_model_at_its_base_url_then_carries_on() {
    let expected: [(&str, &str, &str, &str); 4] = [
        ("codex", "POST /api.openai.com/v1/responses HTTP/1.1", "authorization", "Bearer "),
        ("claude", "POST /api.anthropic.com/v1/messages HTTP/1.1", "x-api-key", ""),
        (
            "gemini",
            "POST /generativelanguage.googleapis.com/v1beta/models/test-model:streamGenerateContent?alt=sse HTTP/1.1",
            "x-goog-api-key",
            "",
        ),
        ("opencode", "POST /api.anthropic.com/v1/messages HTTP/1.1", "x-api-key", ""),
    ];
    for (provider, request_line, key_header, scheme) in expected {
        let fixture = Fixture::new();
        let (argv, mut env) = fixture.plan(provider, Manifest::Right);
        let (base, server) = serve_one(200);
        point_at(&fixture, provider, &mut env, &base);
        let prompt = prompt(provider);
        let run = fixture.run(provider, &argv, &env, &prompt);
        assert_eq!(run.status, Some(0), "{provider}: {}\n{:#?}", run.stderr, run.events);
        let received = server.join().expect("the server saw a request");
        assert_eq!(received.request_line, request_line, "{provider}");
        assert_eq!(received.header(key_header), Some(format!("{scheme}{PLACEHOLDER}").as_str()), "{provider}");
        let text = received.body.to_string();
        assert!(text.contains("Fix the typo for"), "{provider}: the prompt is in the body: {text}");
        match provider {
            "codex" => assert_eq!(received.body["stream"], true),
            "claude" | "opencode" => {
                assert_eq!(received.header("anthropic-version"), Some("2023-06-01"));
                assert_eq!(received.body["model"], "test-model", "{provider}");
            }
            _ => assert!(received.body["contents"].is_array()),
        }

        let lines = of_type(&run.events, "roundtable.model_request");
        assert_eq!(lines.len(), 1, "{provider}: {:#?}", run.events);
        assert_eq!(
            (&lines[0]["status"], &lines[0]["input_tokens"], &lines[0]["output_tokens"]),
            (&json!(200), &json!(17), &json!(5)),
            "{provider}"
        );
        if provider == "opencode" {
            assert!(lines[0]["sessionID"].is_string(), "in OpenCode's own shape");
        }
        assert!(
            run.events.iter().all(|e| !e.to_string().contains(PLACEHOLDER)),
            "{provider}: the key is never printed"
        );
        // The scripted session still ran.
        assert!(fixture.workspace.join(format!("{provider}-was-here.md")).is_file(), "{provider}");
    }
}

#[test]
fn a_refused_model_request_is_recorded_and_no_base_url_means_no_request() {
    let fixture = Fixture::new();
    let (argv, mut env) = fixture.plan("claude", Manifest::Right);
    let (base, server) = serve_one(401);
    point_at(&fixture, "claude", &mut env, &base);
    let run = fixture.run("claude", &argv, &env, &prompt("claude"));
    server.join().expect("served");
    let lines = of_type(&run.events, "roundtable.model_request");
    assert_eq!(lines[0]["status"], 401);
    assert_eq!(run.status, Some(0), "the scripted session goes on");

    for provider in PROVIDERS {
        let fixture = Fixture::new();
        let (argv, env) = fixture.plan(provider, Manifest::Right);
        let run = fixture.run(provider, &argv, &env, &prompt(provider));
        assert_eq!(run.status, Some(0), "{provider}: {}", run.stderr);
        assert!(of_type(&run.events, "roundtable.model_request").is_empty(), "{provider}");
    }

    // A base URL but no key: the line says which variable, nothing is sent.
    let fixture = Fixture::new();
    let (argv, mut env) = fixture.plan("gemini", Manifest::Right);
    env.push(("GOOGLE_GEMINI_BASE_URL".into(), "http://127.0.0.1:9/gemini".into()));
    let run = fixture.run("gemini", &argv, &env, &prompt("gemini"));
    let lines = of_type(&run.events, "roundtable.model_request");
    assert_eq!(lines[0]["status"], Value::Null);
    assert!(lines[0]["error"].as_str().is_some_and(|e| e.contains("GEMINI_API_KEY")), "{:?}", lines[0]);
}
