//! The provider CLIs' side: launch plans as the CLI prints them, output capture, registered
//! sessions and the resume briefing, and (on the real engine) each fake provider CLI reading its
//! manifest, calling tools through `roundtable mcp stdio` and producing a proposal.

use crate::support::{API, json, roundtable, spec_tree, stderr, stdout};

#[test]
fn adapters_plan_prints_argv_and_environment_names_never_values() {
    let tree = spec_tree(&[(
        ".roundtable/adapters.yaml",
        &format!("{API}\nkind: Adapter\nmetadata: {{name: codex}}\nspec:\n  credentialEnv: [CODEX_API_KEY]\n"),
    )]);
    let out = roundtable(
        tree.path(),
        &["adapters", "plan", "codex", "--prompt", "-x fix it", "--model", "o3", "--format", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let plan = json(&out);
    assert_eq!(plan["argv"][0], "codex");
    assert_eq!(plan["argv"].as_array().map(Vec::len), Some(9));
    assert_eq!(plan["argv"][7], "--model=o3");
    assert_eq!(plan["stdin"], "prompt", "the prompt goes on stdin, never into argv");
    assert!(plan["env"].as_array().expect("env").iter().all(|name| name.as_str().is_some_and(|n| !n.contains('='))));
    assert!(!stdout(&out).contains("-x fix it"));
    let unknown = roundtable(tree.path(), &["adapters", "plan", "nope"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(stderr(&unknown).contains("no adapter \"nope\""), "{}", stderr(&unknown));
}

#[test]
fn registered_sessions_feed_the_resume_briefing() {
    let tree = spec_tree(&[(
        ".roundtable/specs.yaml",
        &format!(
            "{API}\nkind: Adapter\nmetadata: {{name: opencode}}\nspec: {{supportsResume: true}}\n---\n{API}\nkind: Assignment\nmetadata: {{name: fix-typo}}\nspec:\n  adapter: opencode\n  task: {{id: T-9, title: Fix the typo, prompt: Fix it.}}\n  readablePaths: [README.md]\n"
        ),
    )]);
    let root = tree.path();
    let out = roundtable(
        root,
        &[
            "sessions",
            "register",
            "--assignment",
            "fix-typo",
            "--adapter",
            "opencode",
            "--external-id",
            "ses_abc123",
            "--format",
            "json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let session = &json(&out)["items"][0];
    let resume = session["detail"]["agent"]["resumeCommand"].as_array().expect("resume command").clone();
    assert_eq!(resume[resume.len() - 2], "ses_abc123");
    assert_eq!(session["cause"], "Registered");

    let refused = roundtable(
        root,
        &["sessions", "register", "--assignment", "fix-typo", "--adapter", "opencode", "--external-id", "x; rm -rf /"],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains("invalid session id"), "{}", stderr(&refused));

    let briefing = roundtable(root, &["resume", "fix-typo", "--format", "json"]);
    assert!(briefing.status.success(), "{}", stderr(&briefing));
    let briefing = json(&briefing);
    assert_eq!(briefing["sessions"].as_array().map(Vec::len), Some(1));
    assert!(briefing["text"].as_str().is_some_and(|t| t.contains("ses_abc123")));
    assert_eq!(roundtable(root, &["resume", "unknown"]).status.code(), Some(1));
}

/// The four provider CLIs, as the test image's fakes play them.
const PROVIDERS: [&str; 4] = ["codex", "claude", "gemini", "opencode"];

fn provider_prompt(provider: &str) -> String {
    format!(
        "Fix the typo for {provider}.\nmcp: proposal.create {{\"summary\":\"mine\"}}\nmcp: claims.acquire {{\"paths\":[\"{provider}-was-here.md\"],\"ttlSeconds\":60}}\nmcp: session.heartbeat {{\"status\":\"editing\"}}\nwrite: README.md # Project (edited by {provider})\nscan: /tmp /roundtable /run/roundtable\nsleep: 3\n"
    )
}

/// OpenCode names models `provider/model`; the others take a bare name.
fn model_of(provider: &str) -> &'static str {
    if provider == "opencode" { "anthropic/test-model" } else { "test-model" }
}

/// A committed project with one Adapter and one Assignment per provider, all on the test image.
fn providers_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    crate::support::write(root, "README.md", "# Project\n");
    let mut specs = String::new();
    for provider in PROVIDERS {
        let prompt = serde_json::to_string(&provider_prompt(provider)).expect("json string");
        let model = model_of(provider);
        specs.push_str(&format!(
            "{API}\nkind: Adapter\nmetadata: {{name: {provider}}}\nspec:\n  image: roundtable-test/agent:latest\n  resources: {{memory: 256Mi, cpus: 1, pids: 64, workspaceSize: 64Mi, tmpSize: 32Mi}}\n---\n\
             {API}\nkind: Assignment\nmetadata: {{name: fix-{provider}}}\nspec:\n  adapter: {provider}\n  model: {model}\n  task: {{id: T-{provider}, title: Fix the {provider} typo, prompt: {prompt}}}\n  readablePaths: [README.md]\n---\n"
        ));
    }
    crate::support::write(root, ".roundtable/specs.yaml", &specs);
    crate::support::commit_all(root);
    dir
}

/// Every file under `dir` (recursively) whose bytes contain `needle`.
fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(path),
                Ok(kind)
                    if kind.is_file()
                        && std::fs::read(&path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle)) =>
                {
                    found.push(path);
                }
                _ => {}
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_provider_cli_reads_its_manifest_calls_tools_through_the_bridge_and_proposes() {
    use std::time::{Duration, Instant};

    use crate::support::{ShowLogOnPanic, ensure_test_images, nothing_left, start_daemon};

    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let project = providers_project();
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    // Each fake sends one model request to its broker, whose upstream leg finds no provider: a
    // resolver that answers nothing keeps it on this machine.
    let secrets = executions.path().join("secrets.env");
    std::fs::write(
        &secrets,
        "CODEX_API_KEY=sk-fake-codex\nANTHROPIC_API_KEY=sk-fake-anthropic\nGEMINI_API_KEY=fake-gemini\n",
    )
    .expect("secrets");
    std::fs::set_permissions(&secrets, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");
    let daemon = start_daemon(
        root,
        &[
            "--max-executions",
            "4",
            "--gateway-resolver",
            "127.0.0.1:9",
            "--secrets-file",
            secrets.to_str().expect("utf-8"),
        ],
        executions.path(),
    );
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());

    // While the agents run, nothing the engine shows about their containers holds a capability.
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let mut inspected = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    let sessions = loop {
        for resource in engine.labelled(&project_id).await.expect("list") {
            let out = std::process::Command::new("docker").args(["inspect", &resource.name]).output().expect("docker");
            if out.status.success() {
                inspected += 1;
                assert!(!String::from_utf8_lossy(&out.stdout).contains("rtcap_"), "docker inspect shows a capability");
            }
        }
        let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
        let items = listed["items"].as_array().cloned().unwrap_or_default();
        if items.len() == PROVIDERS.len() && items.iter().all(|s| s["finishedAt"].is_string()) {
            break items;
        }
        assert!(Instant::now() < deadline, "sessions did not finish: {listed:#}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(inspected > 0, "no running container was inspected");
    drop(daemon);

    for provider in PROVIDERS {
        let assignment = format!("fix-{provider}");
        let session = sessions.iter().find(|s| s["assignment"] == assignment.as_str()).expect("a session");
        assert_eq!(session["phase"], "Succeeded", "{provider}: {session:#}");
        let id = session["externalSessionId"].as_str().unwrap_or_default();
        if provider == "opencode" {
            assert!(id.starts_with("ses_") && id.len() == 30, "{provider} id {id:?}");
        } else {
            assert_eq!(id.len(), 36, "{provider} id {id:?} is a UUID");
        }
        let agent = &session["detail"]["agent"];
        assert_eq!(agent["provider"], provider);
        assert_eq!(agent["model"], model_of(provider));
        let prompt_bytes = provider_prompt(provider).len() as u64;
        assert_eq!(agent["usage"]["inputTokens"].as_u64(), Some(prompt_bytes), "{provider} usage: {agent:#}");
        assert_eq!(agent["usage"]["outputTokens"].as_u64(), Some(42), "{provider}");
        for tool in ["task.get", "notes.append", "proposal.create", "claims.acquire", "session.heartbeat"] {
            assert_eq!(agent["toolCalls"][tool].as_u64(), Some(1), "{provider} called {tool}: {agent:#}");
        }
        assert!(agent["toolCallsRefused"].as_u64().is_some_and(|n| n >= 1), "proposal.create was refused");
        assert!(agent["lastHeartbeat"].is_string());

        let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
        let proposal = proposals["items"]
            .as_array()
            .and_then(|items| items.iter().find(|p| p["assignment"] == assignment.as_str()).cloned())
            .unwrap_or_else(|| panic!("{provider}: no proposal in {proposals:#}"));
        let patch = stdout(&roundtable(root, &["proposals", "export", proposal["id"].as_str().expect("id")]));
        assert!(
            patch.contains(&format!("+task: Fix the {provider} typo")),
            "{provider}: the brief came through MCP:\n{patch}"
        );
        assert!(patch.contains(&format!("+# Project (edited by {provider})")), "{provider}:\n{patch}");

        // Its model request went to its broker with the placeholder the broker recognised,
        // in the variable its real CLI reads (issue 32: the fakes honour the same variables).
        let exec_dir = executions.path().join(session["id"].as_str().expect("an id"));
        let log = std::fs::read_to_string(exec_dir.join("broker.log")).unwrap_or_default();
        let credential = match provider {
            "codex" => "CODEX_API_KEY",
            "gemini" => "GEMINI_API_KEY",
            _ => "ANTHROPIC_API_KEY",
        };
        let recognised = log
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .any(|line| line["method"] == "POST" && line["credential"] == credential);
        assert!(recognised, "{provider}: no model request with {credential}'s placeholder in {log}");

        let briefing = json(&roundtable(root, &["resume", &assignment, "--format", "json"]));
        let notes: Vec<&str> =
            briefing["notes"].as_array().expect("notes").iter().filter_map(|n| n["text"].as_str()).collect();
        assert_eq!(notes, [format!("{provider} read task T-{provider}")], "{provider}");
        // The session has ended, so its claim holds nothing. The end's own release can land just
        // after the proposal is visible; then the briefing releases the straggler instead (the
        // manager's release at every end is tested in execution/tests/execution.rs).
        assert_eq!(briefing["claims"].as_array().map(Vec::len), Some(0), "{provider}: {briefing:#}");
        assert!(briefing["released"].as_array().is_some_and(|r| r.len() <= 1), "{provider}: {briefing:#}");
    }

    // The chain verifies with the daemon's key, and holds each session's capability and end.
    let key = executions.path().join("audit.key");
    let key = key.to_str().expect("utf-8 path");
    let verified = roundtable(root, &["audit", "verify", "--audit-key", key]);
    assert!(verified.status.success(), "{}{}", stdout(&verified), stderr(&verified));
    let exported = stdout(&roundtable(root, &["audit", "export", "--audit-key", key]));
    for kind in ["capability.issued", "capability.revoked", "proposal.submitted", "session.ended"] {
        let count = exported.matches(&format!("\\\"kind\\\":\\\"{kind}\\\"")).count();
        assert_eq!(count, PROVIDERS.len(), "{kind} entries in\n{exported}");
    }
    let slice = root.join("slice.jsonl");
    std::fs::write(&slice, &exported).expect("slice");
    let offline = roundtable(root, &["audit", "verify", "--slice", slice.to_str().expect("utf-8"), "--audit-key", key]);
    assert!(offline.status.success(), "{}", stdout(&offline));

    // No file Roundtable wrote holds a capability: not the daemon's log, the execution folders
    // (captured output, egress logs, briefs) or the state database.
    assert_eq!(files_containing(executions.path(), b"rtcap_"), Vec::<std::path::PathBuf>::new());
    assert_eq!(files_containing(&root.join(".roundtable/state"), b"rtcap_"), Vec::<std::path::PathBuf>::new());
    nothing_left(&engine, root).await;
}

/// Home volumes of the project in `root`.
fn home_volumes(root: &std::path::Path) -> Vec<String> {
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let out = std::process::Command::new("docker")
        .args(["volume", "ls", "-q", "--filter", "label=roundtable.dev/purpose=home"])
        .args(["--filter", &format!("label=roundtable.dev/project={project_id}")])
        .output()
        .expect("docker volume ls");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_home_lets_the_next_run_resume_the_provider_session_and_prune_removes_it() {
    use crate::support::{ShowLogOnPanic, commit_all, ensure_test_images, start_daemon, wait_until, write};

    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let project = tempfile::tempdir().expect("tempdir");
    let root = project.path();
    write(root, "README.md", "# Project\n");
    let specs = |prompt: &str| {
        format!(
            "{API}\nkind: Adapter\nmetadata: {{name: codex}}\nspec:\n  image: roundtable-test/agent:latest\n  persistentHome: true\n  supportsResume: true\n  providerHosts: []\n---\n\
             {API}\nkind: Assignment\nmetadata: {{name: fix}}\nspec:\n  adapter: codex\n  task: {{id: T-1, title: Fix it, prompt: '{prompt}'}}\n  readablePaths: [README.md]\n"
        )
    };
    write(root, ".roundtable/specs.yaml", &specs("write: README.md first run"));
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let finished = |count: usize| {
        move || {
            let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
            let items = listed["items"].as_array().cloned().unwrap_or_default();
            items.len() == count && items.iter().all(|s| s["finishedAt"].is_string())
        }
    };
    wait_until("the first run", finished(1)).await;
    assert_eq!(home_volumes(root).len(), 1, "the home outlives the first container");

    // New run fields, new execution generation: it resumes the thread the first run started.
    write(root, ".roundtable/specs.yaml", &specs("write: README.md second run"));
    wait_until("the second run", finished(2)).await;
    drop(daemon);
    let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let sessions = listed["items"].as_array().expect("items");
    let (second, first) = (&sessions[0], &sessions[1]);
    assert_eq!(first["phase"], "Succeeded", "{first:#}");
    assert_eq!(second["phase"], "Succeeded", "the rollout was still there: {second:#}");
    let thread = first["externalSessionId"].as_str().expect("the first run's thread");
    assert_eq!(second["detail"]["agent"]["resumedFrom"], thread);
    assert_eq!(second["externalSessionId"], thread, "Codex resumed the same thread");
    let argv: Vec<&str> =
        second["detail"]["agent"]["argv"].as_array().expect("argv").iter().filter_map(|a| a.as_str()).collect();
    assert_eq!(argv[argv.len() - 3..], ["resume", thread, "<briefing>"]);

    // Once no spec declares the Assignment, prune removes its home.
    write(root, ".roundtable/specs.yaml", specs("x").split("---").next().expect("the Adapter"));
    // Pruning appends to the audit chain, with the key the daemon sealed it with.
    let key = executions.path().join("audit.key");
    let pruned = roundtable(root, &["prune", "--audit-key", key.to_str().expect("utf-8")]);
    assert!(pruned.status.success(), "{}{}", stdout(&pruned), stderr(&pruned));
    assert_eq!(home_volumes(root), Vec::<String>::new(), "{}", stdout(&pruned));
}

/// The provider sessions kept in the home `volume` (Codex's `sessions/`), listed by a throw-away
/// container of the test image.
fn sessions_in_home(volume: &str) -> Vec<String> {
    let out = std::process::Command::new("docker")
        .args(["run", "--rm", "--network", "none", "-v", &format!("{volume}:/h:ro"), "--entrypoint", "find"])
        .args(["roundtable-test/agent:latest", "/h/sessions", "-type", "f"])
        .output()
        .expect("docker run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

/// Removes every home volume labelled for `project_id` when dropped, whatever the test did.
struct RemoveHomes(String);

impl Drop for RemoveHomes {
    fn drop(&mut self) {
        let out = std::process::Command::new("docker")
            .args(["volume", "ls", "-q", "--filter", "label=roundtable.dev/purpose=home"])
            .args(["--filter", &format!("label=roundtable.dev/project={}", self.0)])
            .output();
        for volume in out.map(|out| String::from_utf8_lossy(&out.stdout).into_owned()).unwrap_or_default().lines() {
            let _ = std::process::Command::new("docker").args(["volume", "rm", "-f", volume]).output();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_repository_at_a_reused_path_gets_an_empty_home_and_never_the_old_ones() {
    use crate::support::{ShowLogOnPanic, commit_all, ensure_test_images, start_daemon, wait_until, write};

    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    // A CI runner's checkout folder, used by one repository and then by another.
    let base = tempfile::tempdir().expect("tempdir");
    let root = base.path().join("checkout");
    let specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: codex}}\nspec:\n  image: roundtable-test/agent:latest\n  persistentHome: true\n  supportsResume: true\n  providerHosts: []\n---\n\
         {API}\nkind: Assignment\nmetadata: {{name: t}}\nspec:\n  adapter: codex\n  task: {{id: T-1, title: Work, prompt: 'write: README.md work'}}\n  readablePaths: [README.md]\n"
    );
    let check_out = |readme: &str| {
        std::fs::create_dir_all(&root).expect("mkdir");
        write(&root, "README.md", readme);
        write(&root, ".roundtable/specs.yaml", &specs);
        commit_all(&root);
    };
    let run_once = |what: &'static str| {
        let root = root.clone();
        async move {
            let executions = tempfile::tempdir().expect("tempdir");
            let daemon = start_daemon(&root, &[], executions.path());
            let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.clone());
            wait_until(what, || {
                let listed = json(&roundtable(&root, &["sessions", "list", "--format", "json"]));
                let items = listed["items"].as_array().cloned().unwrap_or_default();
                items.len() == 1 && items[0]["finishedAt"].is_string()
            })
            .await;
            drop(daemon);
            let listed = json(&roundtable(&root, &["sessions", "list", "--format", "json"]));
            assert_eq!(listed["items"][0]["phase"], "Succeeded", "{listed:#}");
            executions
        }
    };
    check_out("# The first repository\n");
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let _remove = RemoveHomes(project_id);
    run_once("the first repository's run").await;
    let first = home_volumes(&root);
    assert_eq!(first.len(), 1, "{first:?}");
    let left = sessions_in_home(&first[0]);
    assert_eq!(left.len(), 1, "the first run left its provider session in its home: {left:?}");

    // The folder is wiped and another repository is checked out there, with an Assignment of the
    // same name: it runs in a home of its own, which holds its own session only.
    std::fs::remove_dir_all(&root).expect("rm -rf");
    check_out("# Another repository\n");
    let executions = run_once("the second repository's run").await;
    let homes = home_volumes(&root);
    assert_eq!(homes.len(), 2, "the second repository mounted the first one's home: {homes:?}");
    let second = homes.iter().find(|name| **name != first[0]).expect("a second home");
    let seen = sessions_in_home(second);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(!seen.contains(&left[0]), "the first repository's session is in the second's home: {seen:?}");

    // `prune` of the new repository reports the old home as another repository's and keeps it.
    write(&root, ".roundtable/specs.yaml", specs.split("---").next().expect("the Adapter"));
    let key = executions.path().join("audit.key");
    let pruned = roundtable(&root, &["prune", "--audit-key", key.to_str().expect("utf-8")]);
    assert!(pruned.status.success(), "{}{}", stdout(&pruned), stderr(&pruned));
    let report = stdout(&pruned);
    assert!(report.contains(&first[0]) && report.contains("another repository that was at this path"), "{report}");
    assert_eq!(home_volumes(&root), first, "its own home is pruned, the other left alone: {report}");
}

/// A custom CLI that is none of the four: a shell script on the test image's `sh` that speaks MCP
/// itself, through the bridge its plan names (docs/providers.md, "A custom CLI with MCP").
fn shell_agent_specs(prompt: &str) -> String {
    let prompt = serde_json::to_string(prompt).expect("json string");
    format!(
        "{API}\nkind: Adapter\nmetadata: {{name: shell-agent}}\nspec:\n  image: roundtable-test/agent:latest\n  command: sh\n  args: [-c]\n  supportsMcp: true\n  resources: {{memory: 256Mi, cpus: 1, pids: 64, workspaceSize: 64Mi, tmpSize: 32Mi}}\n---\n\
         {API}\nkind: Assignment\nmetadata: {{name: note-from-shell}}\nspec:\n  adapter: shell-agent\n  requires: [mcp]\n  task: {{id: T-sh, title: Leave a note, prompt: {prompt}}}\n  readablePaths: [README.md]\n"
    )
}

/// The requests a shell can pipe into `roundtable mcp stdio`: initialize, then one tool call.
/// The `sleep` keeps stdin open until the answers are back (the bridge closes at end of input).
const SHELL_MCP_CLIENT: &str = r#"{ printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' '{"jsonrpc":"2.0","method":"notifications/initialized"}' '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notes.append","arguments":{"text":"left by a shell script through roundtable mcp stdio"}}}'; sleep 3; } | /roundtable/bin/roundtable mcp stdio"#;

#[test]
fn a_generic_adapter_with_mcp_plans_the_socket_the_capability_and_the_bridge() {
    let tree = spec_tree(&[(".roundtable/specs.yaml", &shell_agent_specs("true"))]);
    let validated = roundtable(tree.path(), &["validate"]);
    assert!(validated.status.success(), "requires: [mcp] is met: {}{}", stdout(&validated), stderr(&validated));
    let out = roundtable(tree.path(), &["adapters", "plan", "shell-agent", "--prompt", "true", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan = json(&out);
    assert_eq!(plan["mcp"], true, "{plan:#}");
    assert!(
        plan["passedEnv"].as_array().expect("passedEnv").iter().any(|v| v["name"] == "ROUNDTABLE_AGENT_CAPABILITY"),
        "{plan:#}"
    );
    assert!(plan["mounts"].as_array().expect("mounts").iter().any(|m| m["path"] == "/run/roundtable"), "{plan:#}");
    assert_eq!(
        plan["mcpBridge"],
        serde_json::json!(["/roundtable/bin/roundtable", "mcp", "stdio", "--unix-socket", "/run/roundtable/mcp.sock"])
    );
    let text = stdout(&roundtable(tree.path(), &["adapters", "plan", "shell-agent", "--prompt", "true"]));
    assert!(text.contains("no manifest: the CLI starts /roundtable/bin/roundtable mcp stdio"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generic_shell_agent_calls_a_tool_through_roundtable_mcp_stdio() {
    use crate::support::{
        ShowLogOnPanic, commit_all, ensure_test_images, nothing_left, start_daemon, wait_until, write,
    };

    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let project = tempfile::tempdir().expect("tempdir");
    let root = project.path();
    write(root, "README.md", "# Project\n");
    write(root, ".roundtable/specs.yaml", &shell_agent_specs(SHELL_MCP_CLIENT));
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until("the shell agent's session", || {
        let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
        listed["items"].as_array().is_some_and(|items| items.len() == 1 && items[0]["finishedAt"].is_string())
    })
    .await;
    drop(daemon);

    let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let session = &listed["items"][0];
    assert_eq!(session["phase"], "Succeeded", "{session:#}");
    let agent = &session["detail"]["agent"];
    assert_eq!(agent["mcpSocket"], "/run/roundtable/mcp.sock", "{agent:#}");
    assert_eq!(agent["toolCalls"]["notes.append"].as_u64(), Some(1), "{agent:#}");
    let id = session["id"].as_str().expect("session id");
    let logs = stdout(&roundtable(root, &["sessions", "logs", id]));
    assert!(logs.contains(r#""id":2"#) && logs.contains(r#""result""#), "the tool answered the shell: {logs}");

    // The note is on the board, attributed to the session.
    let briefing = json(&roundtable(root, &["resume", "note-from-shell", "--format", "json"]));
    let notes: Vec<&str> =
        briefing["notes"].as_array().expect("notes").iter().filter_map(|n| n["text"].as_str()).collect();
    assert_eq!(notes, ["left by a shell script through roundtable mcp stdio"], "{briefing:#}");
    assert_eq!(files_containing(executions.path(), b"rtcap_"), Vec::<std::path::PathBuf>::new());
    nothing_left(&engine, root).await;
}
