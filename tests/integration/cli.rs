//! The command-line surface end to end: validate, adapters list, init, usage errors.

use serde_json::Value;

use crate::support::{repo_root, roundtable, spec_tree, stderr, stdout};

const API: &str = "apiVersion: roundtable.dev/v1alpha1";

/// The `name` of every item of a list envelope, in order.
fn item_names(list: &Value) -> Vec<&str> {
    let items = list["items"].as_array().expect("items");
    items.iter().filter_map(|item| item["name"].as_str()).collect()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn quickstart_specs_validate() {
    let root = repo_root();
    let out = roundtable(&root, &["validate", "--dir", "examples/quickstart/.roundtable"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let shown = stdout(&out);
    assert!(shown.contains("valid: 4 objects in 3 files (1 warning)"), "{shown}");
    assert!(
        shown.contains("adapters.yaml:9:3: warning: spec.image: image roundtable-test/agent:latest is not pinned"),
        "{shown}"
    );
}

#[test]
fn broken_files_are_positioned_in_text_and_json() {
    let tree = spec_tree(&[
        ("ok.yaml", &format!("{API}\nkind: Adapter\nmetadata: {{name: mine}}\nspec: {{command: mine}}\n")),
        (
            "nested/bad.yaml",
            &format!(
                "{API}\nkind: Assignment\nmetadata: {{name: fix}}\nspec:\n  adapter: mine\n  task: {{id: T, prompt: p}}\n  readablePaths:\n    - docs\n    - ../secrets\n---\n{API}\nkind: Adapter\nmetadata: {{name: other}}\nspec:\n  resources:\n    memory: 64Gi\n"
            ),
        ),
        ("state/ignored.yaml", "this: [is not: valid"),
        ("contracts/ignored.yaml", "neither: [is this"),
        ("admission/ignored.yml", "nor: [this"),
    ]);
    let dir = tree.path().to_str().expect("utf-8 path");
    let text = roundtable(tree.path(), &["validate", "--dir", dir]);
    assert_eq!(text.status.code(), Some(1), "{}", stdout(&text));
    let shown = stdout(&text);
    assert!(shown.contains("nested/bad.yaml:9:7: spec.readablePaths[1]: \"../secrets\""), "{shown}");
    assert!(
        shown.contains("nested/bad.yaml:16:5: spec.resources.memory: 64Gi exceeds the hard cap of 16Gi"),
        "{shown}"
    );
    assert!(!shown.contains("state/ignored.yaml") && !shown.contains("admission/ignored.yml"), "skipped: {shown}");
    // contracts/ is not read as resources, but as admission contracts.
    assert!(shown.contains("contracts/ignored.yaml:1:1: neither: unknown field"), "{shown}");

    let as_json = roundtable(tree.path(), &["validate", "--dir", dir, "--format", "json"]);
    assert_eq!(as_json.status.code(), Some(1));
    let list = json(&stdout(&as_json));
    assert_eq!(list["kind"], "ValidationErrorList");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 3, "{list:#}");
    let first = &items[0];
    assert!(first["file"].as_str().expect("file").ends_with("nested/bad.yaml"));
    assert_eq!((first["line"].as_u64(), first["column"].as_u64()), (Some(9), Some(7)));
    assert_eq!(first["path"], "spec.readablePaths[1]");
    assert_eq!(first["severity"], "error");
}

#[test]
fn syntax_errors_name_file_line_and_column() {
    let tree =
        spec_tree(&[("a.yaml", &format!("{API}\nkind: Adapter\nmetadata: {{name: x}}\nspec:\n  image: [unclosed\n"))]);
    let out = roundtable(tree.path(), &["validate", "--dir", "."]);
    assert_eq!(out.status.code(), Some(1));
    let shown = stdout(&out);
    assert!(shown.starts_with("./a.yaml:"), "{shown}");
    let position: Vec<&str> = shown.split(':').take(3).collect();
    assert!(position[1].parse::<u32>().is_ok() && position[2].parse::<u32>().is_ok(), "{shown}");
}

#[test]
fn oversized_and_non_utf8_files_are_refused() {
    let big = format!("{API}\n# {}\n", "x".repeat(1 << 20));
    let tree = spec_tree(&[("big.yaml", &big)]);
    std::fs::write(tree.path().join("latin1.yml"), b"name: caf\xe9\n").expect("write");
    let out = roundtable(tree.path(), &["validate", "--dir", "."]);
    assert_eq!(out.status.code(), Some(1));
    let shown = stdout(&out);
    assert!(shown.contains("big.yaml: file is"), "{shown}");
    assert!(shown.contains("latin1.yml: not valid UTF-8"), "{shown}");
}

#[test]
fn missing_spec_directory_is_an_error() {
    let tree = spec_tree(&[]);
    let out = roundtable(tree.path(), &["validate", "--dir", "nowhere"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("spec directory not found"));
    assert!(!tree.path().join("nowhere").exists(), "validate creates nothing");
}

/// Outside any project, a listing does not print an empty table as if nothing had run here.
#[test]
fn listings_outside_any_project_say_there_is_none() {
    let tree = spec_tree(&[]);
    for listing in [["sessions", "list"], ["proposals", "list"]] {
        let out = roundtable(tree.path(), &listing);
        assert_eq!(out.status.code(), Some(1), "{listing:?}: {}", stdout(&out));
        let said = stderr(&out);
        assert!(said.contains("no Roundtable project here") && said.contains("roundtable init"), "{said}");
        assert!(stdout(&out).is_empty(), "no table: {}", stdout(&out));
    }
    assert!(!tree.path().join(".roundtable").exists(), "a listing creates nothing");
}

#[test]
fn adapters_list_shows_builtins_and_merges_overrides_field_by_field() {
    let tree = spec_tree(&[(
        "adapters.yaml",
        &format!(
            "{API}\nkind: Adapter\nmetadata: {{name: codex}}\nspec:\n  image: sha256:{}\n  resources: {{pids: 64}}\n---\n{API}\nkind: Adapter\nmetadata: {{name: 'Qwen CLI'}}\nspec:\n  command: qwen\n  supportsMcp: true\n",
            "a".repeat(64)
        ),
    )]);
    let out = roundtable(tree.path(), &["adapters", "list", "--format", "json", "--dir", "."]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list = json(&stdout(&out));
    assert_eq!(list["kind"], "AdapterList");
    let names = item_names(&list);
    assert_eq!(names, ["Qwen CLI", "claude", "codex", "gemini", "generic", "mock", "opencode"]);
    let item =
        |name: &str| list["items"].as_array().expect("items").iter().find(|i| i["name"] == name).cloned().expect(name);
    let codex = item("codex");
    assert_eq!(codex["pinned"], true);
    assert_eq!(codex["resources"]["pids"], 64, "the override wins");
    assert_eq!(codex["resources"]["memory"], "2Gi", "the rest keeps the defaults");
    assert_eq!(codex["providerHosts"][0], "api.openai.com", "the template's hosts survive");
    assert_eq!(codex["command"], "codex");
    let qwen = item("Qwen CLI");
    assert_eq!(qwen["slug"], "qwen-cli");
    assert_eq!(qwen["builtin"], false);
    // A generic CLI gets the endpoint it declares and starts the bridge itself.
    assert_eq!(qwen["capabilities"], serde_json::json!(["mcp"]));
}

#[test]
fn adapters_list_without_specs_shows_the_six_builtins() {
    let tree = spec_tree(&[]);
    let out = roundtable(tree.path(), &["adapters", "list", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list = json(&stdout(&out));
    let names = item_names(&list);
    assert_eq!(names, ["claude", "codex", "gemini", "generic", "mock", "opencode"]);
    let text = roundtable(tree.path(), &["adapters", "list"]);
    assert!(stdout(&text).starts_with("NAME"), "{}", stdout(&text));
}

#[test]
fn adapters_list_on_a_folder_that_names_no_project_says_why_and_fails() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = roundtable(tmp.path(), &["adapters", "list", "--dir", "/", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("has no parent folder to be the project root"), "{}", stderr(&out));
    assert_eq!(item_names(&json(&stdout(&out))).len(), 6, "the built-ins are still listed");
}

#[test]
fn an_unknown_adapter_is_an_error_never_generic() {
    let tree = spec_tree(&[(
        "a.yaml",
        &format!(
            "{API}\nkind: Assignment\nmetadata: {{name: fix}}\nspec:\n  adapter: Generic\n  task: {{id: T, prompt: p}}\n  readablePaths: [a]\n"
        ),
    )]);
    let out = roundtable(tree.path(), &["validate", "--dir", "."]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("spec.adapter: unknown adapter \"Generic\""), "{}", stdout(&out));
}

#[test]
fn init_scaffolds_a_valid_project_and_keeps_existing_files() {
    let tree = spec_tree(&[]);
    let first = roundtable(tree.path(), &["init"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let spec_dir = tree.path().join(".roundtable");
    assert!(spec_dir.join("state/.gitignore").is_file());
    std::fs::write(spec_dir.join("policy.yaml"), "# mine\n").expect("write");
    let second = roundtable(tree.path(), &["init"]);
    assert!(stdout(&second).contains("kept"), "{}", stdout(&second));
    assert_eq!(std::fs::read_to_string(spec_dir.join("policy.yaml")).expect("read"), "# mine\n");
    let valid = roundtable(tree.path(), &["validate"]);
    assert!(valid.status.success(), "{}", stdout(&valid));
}

#[test]
fn usage_errors_exit_64() {
    let tree = spec_tree(&[]);
    assert_eq!(roundtable(tree.path(), &["frobnicate"]).status.code(), Some(64));
    assert_eq!(roundtable(tree.path(), &["validate", "--format", "xml"]).status.code(), Some(64));
    assert_eq!(roundtable(tree.path(), &["--help"]).status.code(), Some(0));
}

/// Runs the binary in `cwd` with `envs` added, waiting at most 30 s (a scan that blocked on a
/// FIFO would otherwise hang the test run).
fn roundtable_within(cwd: &std::path::Path, args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
    use std::process::{Command, Stdio};
    let mut child = Command::new(crate::support::binary())
        .args(args)
        .current_dir(cwd)
        // The tests reach the API over TCP (opt-in), each daemon on a free port.
        .env("ROUNDTABLE_API_LISTEN", "127.0.0.1:0")
        .env_remove("RUST_LOG")
        .env_remove("ROUNDTABLE_DIR")
        .env_remove("ROUNDTABLE_STATE_DIR")
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run roundtable");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("roundtable {args:?} did not finish within 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

#[test]
fn bidi_controls_in_spec_text_never_reach_the_terminal() {
    const RLO: char = '\u{202e}';
    // A file whose name displays reversed, an Assignment whose name and title carry U+202E, and
    // an Adapter (loaded) declared in a file whose name carries it too.
    let broken = format!(
        "{API}\nkind: Assignment\nmetadata: {{name: \"fix\\u202eit\"}}\nspec:\n  adapter: generic\n  task: {{id: T, title: \"evil{RLO}txt.exe\", prompt: p}}\n  readablePaths: [README.md]\n"
    );
    let loaded = format!("{API}\nkind: Adapter\nmetadata: {{name: shown}}\nspec: {{command: x}}\n");
    let tree = spec_tree(&[(&format!("evil{RLO}lmy.yaml"), &broken), (&format!("ok{RLO}.yaml"), &loaded)]);
    let root = tree.path();
    let raw = |out: &std::process::Output| {
        String::from_utf8_lossy(&out.stdout).contains(RLO) || String::from_utf8_lossy(&out.stderr).contains(RLO)
    };

    let validate = roundtable(root, &["validate", "--dir", "."]);
    assert_eq!(validate.status.code(), Some(1), "{}", stdout(&validate));
    let shown = stdout(&validate);
    assert!(!raw(&validate), "raw U+202E reached the terminal: {shown:?}");
    assert!(shown.contains("evil\\u{202e}lmy.yaml"), "the file is named, escaped: {shown}");
    assert!(shown.contains("U+202E (RIGHT-TO-LEFT OVERRIDE)"), "the character is named: {shown}");

    for args in [&["status", "--dir", "."][..], &["plan", "--dir", "."], &["adapters", "list", "--dir", "."]] {
        let out = roundtable(root, args);
        assert!(!raw(&out), "{args:?}: raw U+202E reached the terminal: {:?}{:?}", stdout(&out), stderr(&out));
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(all.contains("\\u{202e}"), "{args:?} shows the file, escaped: {all}");
    }
}

#[test]
fn spec_files_outside_the_project_or_not_regular_are_refused_by_name_without_blocking() {
    let tree = spec_tree(&[(
        ".roundtable/ok.yaml",
        &format!("{API}\nkind: Adapter\nmetadata: {{name: mine}}\nspec: {{command: mine}}\n"),
    )]);
    let root = tree.path();
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("secret.yaml"), "token: SECRET-CONTENT\n").expect("write");
    std::os::unix::fs::symlink(outside.path().join("secret.yaml"), root.join(".roundtable/leak.yaml")).expect("link");
    let status = std::process::Command::new("mkfifo").arg(root.join(".roundtable/pipe.yaml")).status().expect("mkfifo");
    assert!(status.success());

    for args in [&["validate"][..], &["status", "--exit-code"], &["plan"], &["adapters", "list"]] {
        let out = roundtable_within(root, args, &[]);
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(1), "{args:?}: {all}");
        assert!(!all.contains("SECRET"), "{args:?} printed the linked file's content: {all}");
        assert!(all.contains("leak.yaml") && all.contains("outside the project root"), "{args:?}: {all}");
        assert!(all.contains("pipe.yaml") && all.contains("a FIFO, not a regular file"), "{args:?}: {all}");
    }
    let shown = stdout(&roundtable_within(root, &["validate"], &[]));
    assert!(shown.contains(".roundtable/leak.yaml: a symbolic link to a file outside the project root"), "{shown}");
    assert!(shown.contains(".roundtable/pipe.yaml: a FIFO, not a regular file"), "{shown}");
}

#[test]
fn an_unreachable_engine_makes_status_and_plan_fail_naming_it() {
    let tree = spec_tree(&[(
        ".roundtable/a.yaml",
        &format!("{API}\nkind: Adapter\nmetadata: {{name: mock}}\nspec: {{timeout: 5m}}\n"),
    )]);
    let root = tree.path();
    let nowhere = [("DOCKER_HOST", "unix:///nonexistent.sock")];

    let status = roundtable_within(root, &["status", "--exit-code"], &nowhere);
    assert_eq!(status.status.code(), Some(1), "an unreachable engine is an error: {}", stdout(&status));
    let shown = stdout(&status);
    let engine = shown.lines().find(|l| l.starts_with("Engine")).unwrap_or_else(|| panic!("no Engine row: {shown}"));
    assert!(
        engine.contains("unix:///nonexistent.sock") && engine.contains("Error") && engine.contains("Unknown"),
        "{engine}"
    );
    assert!(engine.contains("unreachable"), "{engine}");
    assert!(!shown.contains("Synced"), "{shown}");

    let as_json = roundtable_within(root, &["status", "--format", "json"], &nowhere);
    let list = json(&stdout(&as_json));
    let row = list["items"].as_array().and_then(|rows| rows.iter().find(|r| r["kind"] == "Engine")).cloned();
    let row = row.unwrap_or_else(|| panic!("no Engine row: {list:#}"));
    assert_eq!((row["sync"].as_str(), row["health"].as_str()), (Some("Error"), Some("Unknown")), "{row:#}");
    assert_eq!(row["name"], "unix:///nonexistent.sock");

    let plan = roundtable_within(root, &["plan"], &nowhere);
    assert_ne!(plan.status.code(), Some(0), "{}", stdout(&plan));
    assert!(stdout(&plan).starts_with("! container engine unreachable"), "{}", stdout(&plan));
    assert!(!stdout(&plan).contains("No changes"), "{}", stdout(&plan));
    let plan_json = json(&stdout(&roundtable_within(root, &["plan", "--format", "json"], &nowhere)));
    assert_eq!(plan_json["items"][0]["op"], "?", "{plan_json:#}");
    assert_eq!(plan_json["items"][0]["object"], "Engine/unix:///nonexistent.sock", "{plan_json:#}");
}

#[test]
fn usage_errors_exit_64_in_every_subcommand() {
    let tree = spec_tree(&[]);
    let usage: &[&[&str]] = &[
        &["status", "--format", "toml"],
        &["status", "--retention", "5x"],
        &["status", "--retention", "1.5h"],
        &["plan", "--format", "yml"],
        &["describe"],
        &["describe", "nonsense"],
        &["describe", "Adapter/"],
        &["describe", "Adapter/x", "--format", "xml"],
        &["reconcile", "no-slash"],
        &["prune", "--retention", "forever"],
        &["prune", "--format", "csv"],
        &["sessions"],
        &["sessions", "show"],
        &["sessions", "list", "--format", "table"],
        &["sessions", "logs"],
        &["proposals", "show"],
        &["proposals", "export"],
        &["proposals", "list", "--format", "toml"],
        &["adapters", "list", "--format", "csv"],
        &["doctor", "--format", "xml"],
        &["validate", "-o", "wider"],
        &["start", "--resync", "0s"],
        &["start", "--resync", "10"],
        &["start", "--grace", "a while"],
        &["start", "--max-executions", "0"],
        &["start", "--concurrency", "-1"],
        &["start", "--gateway-allow-cidr", "10.0.0.1/8"],
        &["gateway", "serve", "--listen", "127.0.0.1:0", "--allow-host", "*.example.com"],
        &["gateway", "serve", "--listen", "127.0.0.1:0", "--allow-host", "a.example.com", "--dns-timeout", "0s"],
        &["gateway", "serve", "--listen", "127.0.0.1:0", "--allow-host", "a.example.com", "--allow-cidr", "::/0"],
        &["proxy", "--listen", "nowhere"],
        &["--log-format", "xml", "status"],
        &["schema", "--bogus"],
    ];
    for args in usage {
        let out = roundtable_within(tree.path(), args, &[]);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}{}", stdout(&out), stderr(&out));
        assert!(stdout(&out).is_empty() && !stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
    }
    // Well-formed requests for things that do not exist are not usage errors.
    for args in [&["describe", "Widget/x"][..], &["describe", "Adapter/nothing"], &["sessions", "show", "nope"]] {
        let out = roundtable_within(tree.path(), args, &[]);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}{}", stdout(&out), stderr(&out));
    }
}

#[test]
fn completion_scripts_name_every_command_and_bash_reads_its_own() {
    let root = repo_root();
    let bash = roundtable(&root, &["completion", "bash"]);
    assert!(bash.status.success(), "{}", stderr(&bash));
    let script = stdout(&bash);
    for command in ["validate", "status", "sessions", "proposals", "completion", "--format"] {
        assert!(script.contains(command), "{command} missing from the bash completion");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("roundtable.bash");
    std::fs::write(&file, &script).expect("write");
    let checked = std::process::Command::new("bash").arg("-n").arg(&file).output().expect("bash");
    assert!(checked.status.success(), "bash -n: {}", stderr(&checked));
    for shell in ["zsh", "fish"] {
        let out = roundtable(&root, &["completion", shell]);
        assert!(out.status.success() && stdout(&out).contains("roundtable"), "{shell}: {}", stderr(&out));
    }
    assert_eq!(roundtable(&root, &["completion", "tcsh"]).status.code(), Some(64));
}

#[test]
fn dash_o_is_format_on_every_listing_as_kubectl_has_it() {
    let long = roundtable(&repo_root().join("examples/quickstart"), &["adapters", "list", "--format", "json"]);
    let short = roundtable(&repo_root().join("examples/quickstart"), &["adapters", "list", "-o", "json"]);
    assert!(short.status.success(), "{}", stderr(&short));
    assert_eq!(json(&stdout(&short)), json(&stdout(&long)));
}

#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let out = roundtable(&repo_root(), &["--version"]);
    let said = stdout(&out);
    let commit = said.trim().strip_prefix("roundtable 0.1.0 (").and_then(|rest| rest.strip_suffix(')'));
    assert!(
        commit.is_some_and(|c| c == "unknown" || (c.len() == 12 && c.chars().all(|ch| ch.is_ascii_hexdigit()))),
        "{said}"
    );
}

/// `-o yaml` is the JSON document as YAML: PyYAML (YAML 1.1, the strictest reader about what a
/// plain word means) reads back exactly what `-o json` prints, strings that look like other
/// types included.
#[test]
fn yaml_output_reads_back_as_the_json_document() {
    use std::io::Write as _;
    let dir = spec_tree(&[(
        ".roundtable/specs.yaml",
        "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {name: 'no'}\nspec:\n  provider: generic\n  command: 'yes: #1'\n  args: ['1e3', 'null', '- x', \"a\\nb\", '']\n  image: example.test/x:1\n",
    )]);
    let as_json = roundtable(dir.path(), &["adapters", "list", "-o", "json"]);
    let as_yaml = roundtable(dir.path(), &["adapters", "list", "-o", "yaml"]);
    assert!(as_yaml.status.success(), "{}", stderr(&as_yaml));
    if !crate::support::python_module_or_skip("yaml", "PyYAML") {
        return;
    }
    let mut reader = std::process::Command::new("python3")
        .args(["-c", "import sys, json, yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    reader.stdin.take().expect("stdin").write_all(&as_yaml.stdout).expect("write");
    let read = reader.wait_with_output().expect("python3");
    assert!(read.status.success(), "PyYAML refused:\n{}", stdout(&as_yaml));
    assert_eq!(json(&stdout(&read)), json(&stdout(&as_json)), "{}", stdout(&as_yaml));
}

#[test]
fn validate_warns_of_a_readable_path_missing_at_the_revision_and_a_revision_that_does_not_resolve() {
    let project = tempfile::tempdir().expect("tempdir");
    let root = project.path();
    crate::support::write(root, "README.md", "hello\n");
    crate::support::write(root, "docs/guide.md", "guide\n");
    let assignment = |name: &str, revision: &str, paths: &str| {
        format!(
            "{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: mock\n  task: {{id: T, prompt: p}}\n  source: {{repo: ., revision: {revision}}}\n  readablePaths: {paths}\n"
        )
    };
    crate::support::write(root, ".roundtable/a.yaml", &assignment("present", "main", "[README.md, docs/]"));
    crate::support::write(root, ".roundtable/b.yaml", &assignment("missing", "main", "[README.md, src/, READM.md]"));
    crate::support::write(root, ".roundtable/c.yaml", &assignment("elsewhere", "master", "[README.md]"));
    crate::support::commit_all(root);
    let out = roundtable(root, &["validate"]);
    let shown = stdout(&out);
    assert!(out.status.success(), "warnings do not make the specs invalid: {shown}{}", stderr(&out));
    assert!(shown.contains("valid: 3 objects in 3 files (3 warnings)"), "{shown}");
    assert!(
        shown.contains(
            "b.yaml:8:30: warning: spec.readablePaths[1]: \"src/\" does not exist at main in the project's repository"
        ),
        "{shown}"
    );
    assert!(shown.contains("spec.readablePaths[2]: \"READM.md\" does not exist"), "{shown}");
    assert!(shown.contains("c.yaml:7:21: warning: spec.source.revision: \"master\" does not resolve"), "{shown}");
    assert!(shown.contains("its branches are main"), "{shown}");
    assert!(!shown.contains("a.yaml"), "what exists is not warned of: {shown}");
}
