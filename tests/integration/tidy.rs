//! Mechanical checks of the code map's invariants.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::support::repo_root;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != ".git" {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_doc_line() {
    let mut files = Vec::new();
    rust_files(&repo_root(), &mut files);
    assert!(files.len() > 10, "found only {} .rs files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).expect("read");
            let first = text.lines().find(|line| !line.trim().is_empty()).unwrap_or_default();
            !first.starts_with("//!")
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(missing.is_empty(), "these files do not open with `//!`: {missing:#?}");
}

/// Each package in Cargo.lock and the names of its dependencies.
fn lock_graph() -> BTreeMap<String, Vec<String>> {
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).expect("Cargo.lock");
    let mut graph = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let mut name = String::new();
        let mut deps = Vec::new();
        let mut in_deps = false;
        for line in block.lines() {
            let line = line.trim();
            if let Some(value) = line.strip_prefix("name = ") {
                name = value.trim_matches('"').to_owned();
            } else if line.starts_with("dependencies = [") {
                in_deps = true;
            } else if in_deps && line == "]" {
                in_deps = false;
            } else if in_deps {
                // Entries look like "serde", or "serde 1.0.1" when versions are ambiguous.
                let entry = line.trim_matches(|c| c == '"' || c == ',');
                deps.push(entry.split(' ').next().unwrap_or_default().to_owned());
            }
        }
        graph.entry(name).or_insert_with(Vec::new).extend(deps);
    }
    graph
}

/// Every package `root` depends on, directly or not, and `root` itself.
fn reachable(root: &str) -> BTreeSet<String> {
    // `cargo tree` resolves features and the target as a build of `root` alone would; the lock
    // file lists every optional and other-platform edge (chrono's wasm-only `js-sys`, say).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(repo_root())
        .args(["tree", "--offline", "-p", root, "-e", "normal", "--target", "x86_64-unknown-linux-gnu"])
        .args(["--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo tree");
    assert!(out.status.success(), "cargo tree -p {root}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|line| line.split(' ').next()).map(str::to_owned).collect()
}

#[test]
fn specs_depends_on_no_async_network_or_docker_crate() {
    let seen = reachable("roundtable-specs");
    let forbidden = [
        "tokio",
        "futures",
        "futures-util",
        "bollard",
        "sqlx",
        "hyper",
        "axum",
        "reqwest",
        "notify",
        "hickory-resolver",
        "rustls",
        "mio",
    ];
    let found: Vec<&&str> = forbidden.iter().filter(|name| seen.contains(**name)).collect();
    assert!(found.is_empty(), "specs (transitively) depends on {found:?}");
    assert!(seen.contains("serde-saphyr"), "the walk found the specs crate's real dependencies");
}

#[test]
fn controller_layers_stay_apart() {
    let graph = lock_graph();
    for runtime in ["roundtable-docker", "roundtable-session-runtime", "roundtable-workspace", "roundtable-incontainer"]
    {
        let deps = graph.get(runtime).unwrap_or_else(|| panic!("{runtime} in the lock file"));
        assert!(!deps.iter().any(|dep| dep == "roundtable-store"), "{runtime} does not reach into the state store");
        for above in ["roundtable-reconcilers", "roundtable-execution", "roundtable-daemon"] {
            assert!(!deps.iter().any(|dep| dep == above), "{runtime} knows no reconciler ({above})");
        }
    }
    let store = graph.get("roundtable-store").expect("store in lock");
    assert!(!store.iter().any(|dep| dep == "bollard"), "the store does not talk to the engine");
}

/// The session runtime is the only way to the engine: `roundtable-docker` is the one crate whose
/// manifest names bollard (the lock file's direct dependencies), and the runtime contract and the
/// workspace path depend on no engine crate at all, even transitively.
#[test]
fn only_the_docker_runtime_depends_on_an_engine_crate() {
    let graph = lock_graph();
    let direct: Vec<&String> = graph
        .iter()
        .filter(|(name, deps)| name.starts_with("roundtable") && deps.iter().any(|dep| dep == "bollard"))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(direct, ["roundtable-docker"], "crates that depend on bollard directly");
    let neutral_crates = [
        "roundtable-session-runtime",
        "roundtable-workspace",
        "roundtable-source",
        "roundtable-reconcilers",
        "roundtable-execution",
        "roundtable-daemon",
        "roundtable-service",
    ];
    for neutral in neutral_crates {
        let seen = reachable(neutral);
        assert!(!seen.contains("bollard"), "{neutral} reaches bollard: {seen:?}");
        assert!(!seen.contains("roundtable-docker"), "{neutral} names the Docker runtime");
    }
}

/// Every file a clone of the repository has: tracked files plus untracked ones git does not
/// ignore (new files count before their first commit). Build output is never included.
fn repository_files() -> Vec<std::path::PathBuf> {
    let root = repo_root();
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .output()
        .expect("run git ls-files");
    assert!(output.status.success(), "git ls-files failed: {}", String::from_utf8_lossy(&output.stderr));
    let files: Vec<std::path::PathBuf> = output
        .stdout
        .split(|byte| *byte == 0)
        .filter(|path| !path.is_empty())
        .map(|path| Path::new(std::str::from_utf8(path).expect("UTF-8 path")).to_path_buf())
        .filter(|path| !path.components().any(|part| part.as_os_str() == "target"))
        .map(|path| root.join(path))
        // Tracked files deleted in the work tree are not there to read.
        .filter(|path| path.is_file())
        .collect();
    assert!(files.len() > 50, "found only {} files", files.len());
    files
}

/// Files under `dir` (relative to the repository) with one of `extensions`.
fn files_under(dir: &str, extensions: &[&str]) -> Vec<std::path::PathBuf> {
    let root = repo_root().join(dir);
    repository_files()
        .into_iter()
        .filter(|path| path.starts_with(&root))
        .filter(|path| path.extension().and_then(|e| e.to_str()).is_some_and(|e| extensions.contains(&e)))
        .collect()
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repo_root()).unwrap_or(path).display().to_string()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

/// `file: needle` for every needle found in every file.
fn occurrences(files: &[std::path::PathBuf], needles: &[String], lowercase: bool) -> Vec<String> {
    let mut found = Vec::new();
    for path in files {
        let mut bytes = std::fs::read(path).expect("read");
        if lowercase {
            bytes.make_ascii_lowercase();
        }
        for needle in needles {
            if contains(&bytes, needle.as_bytes()) {
                found.push(format!("{}: {needle}", relative(path)));
            }
        }
    }
    found
}

/// The repository stands alone: no file points at documents outside it. The needles are split so
/// this file does not match itself.
#[test]
fn no_file_points_outside_the_repository() {
    let needles =
        [["..", "/shared"].concat(), ["shared", "/"].concat(), ["DES", "IGN"].concat(), ["reference", "/"].concat()];
    // CI alone points ROUNDTABLE_PROVIDER_CLIS at the vendored real CLIs beside the repository.
    let ci = repo_root().join(".ci/run");
    let files: Vec<std::path::PathBuf> = repository_files().into_iter().filter(|path| *path != ci).collect();
    let found = occurrences(&files, &needles, false);
    assert!(
        found.is_empty(),
        "these files point outside the repository (state the fact or point into docs/): {found:#?}"
    );
}

/// Only the state store creates or migrates tables: no DDL and no migrator anywhere else.
#[test]
fn only_store_creates_or_migrates_tables() {
    let needles = [
        ["create", " table"].concat(),
        ["alter", " table"].concat(),
        ["drop", " table"].concat(),
        ["create", " index"].concat(),
        ["sqlx::", "migrate"].concat(),
    ];
    let store = repo_root().join("store");
    let outside: Vec<std::path::PathBuf> = repository_files()
        .into_iter()
        .filter(|path| !path.starts_with(&store))
        .filter(|path| path.extension().and_then(|e| e.to_str()).is_some_and(|e| e == "rs" || e == "sql"))
        .collect();
    let found = occurrences(&outside, &needles, true);
    assert!(found.is_empty(), "only store/ may create or migrate tables: {found:#?}");
    let inside = files_under("store", &["rs", "sql"]);
    assert!(!occurrences(&inside, &needles, true).is_empty(), "the check found the store's own migrations");
}

/// The controller is generic over its key: no concrete kind and no API types by name.
#[test]
fn controller_names_no_concrete_kind() {
    let forbidden = ["Adapter", "Assignment", "AdmissionPolicy", "roundtable_specs"];
    let files = files_under("controller", &["rs"]);
    assert!(files.len() > 3, "found only {} controller files", files.len());
    let mut found = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("read");
        let identifiers: BTreeSet<&str> =
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|word| !word.is_empty()).collect();
        for name in forbidden.iter().filter(|name| identifiers.contains(**name)) {
            found.push(format!("{}: {name}", relative(path)));
        }
    }
    assert!(found.is_empty(), "the controller names concrete kinds: {found:#?}");
}

/// The controller reaches no engine, store, API or gateway crate, even transitively.
#[test]
fn controller_depends_on_no_engine_store_or_api_crate() {
    let seen = reachable("roundtable-controller");
    let forbidden = [
        "bollard",
        "sqlx",
        "hickory-resolver",
        "roundtable-specs",
        "roundtable-store",
        "roundtable-docker",
        "roundtable-session-runtime",
        "roundtable-workspace",
        "roundtable-gateway",
        "roundtable-reconcilers",
    ];
    let found: Vec<&&str> = forbidden.iter().filter(|name| seen.contains(**name)).collect();
    assert!(found.is_empty(), "controller (transitively) depends on {found:?}");
    assert!(seen.contains("backon"), "the walk found the controller's real dependencies");
}

/// The controller does no file IO of its own (file-watch hints come through notify), so it
/// cannot write a spec file.
#[test]
fn controller_touches_no_file() {
    let needles = ["fs::".to_owned(), "File::open".to_owned(), "File::create".to_owned(), "OpenOptions".to_owned()];
    let found = occurrences(&files_under("controller/src", &["rs"]), &needles, false);
    assert!(found.is_empty(), "the controller touches files: {found:#?}");
}

/// `specs` does no IO: it is handed text and returns values.
#[test]
fn specs_does_no_io() {
    let needles: Vec<String> = [
        "std::fs",
        "tokio",
        "std::process",
        "std::env",
        "std::os",
        "std::io::stdin",
        "TcpStream",
        "UdpSocket",
        "UnixStream",
        "File::open",
        "File::create",
        "OpenOptions",
        "println!",
        "eprintln!",
    ]
    .map(str::to_owned)
    .into();
    let files = files_under("specs/src", &["rs"]);
    assert!(files.len() > 10, "found only {} specs files", files.len());
    let found = occurrences(&files, &needles, false);
    assert!(found.is_empty(), "specs does IO: {found:#?}");
}

/// The reconcilers the controller runs act only through the backend traits (`StatusBackend`,
/// `ImageBackend`, `AuditSink`, `ExecutionBackend`): no engine, database, file or process of
/// their own, so fakes can drive the same code.
#[test]
fn reconcilers_act_only_through_backend_traits() {
    let reconcilers = ["reconcile.rs", "adapter.rs", "assignment.rs", "conditions.rs"];
    let needles: Vec<String> = [
        "bollard",
        "sqlx",
        "roundtable_docker",
        "roundtable_workspace",
        "roundtable_gateway",
        "std::fs",
        "tokio::fs",
        "std::process",
        "tokio::process",
        "Command::new",
        "TcpStream",
        "UnixStream",
    ]
    .map(str::to_owned)
    .into();
    let files: Vec<std::path::PathBuf> =
        reconcilers.iter().map(|name| repo_root().join("reconcilers/src").join(name)).collect();
    let missing: Vec<String> = files.iter().filter(|path| !path.is_file()).map(|path| relative(path)).collect();
    assert!(missing.is_empty(), "the reconciler modules moved; update this list: {missing:?}");
    let found = occurrences(&files, &needles, false);
    assert!(found.is_empty(), "reconcilers act outside their backends: {found:#?}");
}

/// The workspace's production sources: `src/` of the binary and of every library crate, not
/// tests, test helpers, benches or fuzz targets.
fn production_sources() -> Vec<std::path::PathBuf> {
    let root = repo_root();
    repository_files()
        .into_iter()
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .filter(|path| {
            let parts: Vec<String> = path
                .strip_prefix(&root)
                .unwrap_or(path)
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            let top = parts.first().map(String::as_str).unwrap_or_default();
            !matches!(top, "tests" | "fuzz" | "benches" | "examples")
                && (top == "src" || parts.get(1).is_some_and(|second| second == "src"))
        })
        .collect()
}

/// rmcp's types stay in the two MCP endpoint modules: its API changes between majors, and an
/// upgrade should touch those files alone.
#[test]
fn only_the_mcp_endpoints_name_rmcp() {
    let allowed = ["agents/src/mcp.rs", "agents/src/mcp/framing.rs", "api/src/mcp.rs"];
    let naming: Vec<String> = occurrences(&production_sources(), &["rmcp::".to_owned()], false)
        .into_iter()
        .filter(|hit| !allowed.iter().any(|file| hit.starts_with(&format!("{file}:"))))
        .collect();
    assert!(naming.is_empty(), "modules that name rmcp: {naming:?}");
}

/// Every container is created from the one hardened profile: only one production file builds a
/// container body, it sets every hardening field, and only one file creates containers.
#[test]
fn containers_come_only_from_the_hardened_profile() {
    let sources = production_sources();
    assert!(sources.len() > 40, "found only {} production sources", sources.len());
    let with = |needle: &str| -> Vec<std::path::PathBuf> {
        sources.iter().filter(|path| std::fs::read_to_string(path).expect("read").contains(needle)).cloned().collect()
    };
    let builders = with("ContainerCreateBody {");
    let names: Vec<String> = builders.iter().map(|path| relative(path)).collect();
    assert_eq!(builders.len(), 1, "exactly one file may build a container body: {names:?}");
    let profile = std::fs::read_to_string(&builders[0]).expect("read");
    let hardening = [
        "cap_drop: Some(vec![\"ALL\"",
        "\"no-new-privileges\"",
        "readonly_rootfs: Some(true)",
        "network_mode: Some(\"none\"",
        "network_disabled: Some(true)",
        "privileged: Some(false)",
        "memory_swap: Some(memory)",
        "pids_limit:",
        "user: Some(format!(\"{AGENT_UID}:{AGENT_UID}\"))",
    ];
    let missing: Vec<&str> = hardening.iter().copied().filter(|setting| !profile.contains(setting)).collect();
    assert!(missing.is_empty(), "{names:?} no longer sets {missing:?}");
    let creators: Vec<String> = with(".create_container(").iter().map(|path| relative(path)).collect();
    assert_eq!(creators.len(), 1, "exactly one file may create containers: {creators:?}");
}

/// Nothing is ever applied to an operator's working tree: a production file that runs `git apply`
/// does so only to an index (`--cached`, never a work tree), of a repository it initialised
/// itself (the patch check) or a scratch index file in the operator's repository (an accept,
/// `GIT_INDEX_FILE`), and git is spawned from one place.
#[test]
fn nothing_is_applied_outside_a_scratch_repository() {
    let sources = production_sources();
    let mut appliers = Vec::new();
    let mut spawners = Vec::new();
    for path in &sources {
        let whole = std::fs::read_to_string(path).expect("read");
        // A file's unit tests (its trailing `#[cfg(test)]` module) are not production: a test
        // may compare a parser with `git apply` itself.
        let text = whole.split("\n#[cfg(test)]\nmod tests").next().unwrap_or_default();
        if text.contains("\"apply\"") {
            let cached = text.contains("\"apply\", \"--cached\"");
            let scratch_index_only = cached && (text.contains("[\"init\"") || text.contains("\"GIT_INDEX_FILE\""));
            appliers.push((relative(path), scratch_index_only));
        }
        if text.contains("Command::new(\"git\")") {
            spawners.push(relative(path));
        }
    }
    assert_eq!(appliers.len(), 2, "only the patch check and an accept run `git apply`: {appliers:?}");
    assert!(
        appliers.iter().all(|(_, scratch)| *scratch),
        "`git apply` outside a scratch repository's index: {appliers:?}"
    );
    assert_eq!(spawners.len(), 1, "git is spawned from one place only: {spawners:?}");
}

/// The workspace's members, as the root manifest lists them (`.` for the root package).
fn workspace_members() -> Vec<String> {
    let root = std::fs::read_to_string(repo_root().join("Cargo.toml")).expect("Cargo.toml");
    let members = root.split("members = [").nth(1).and_then(|rest| rest.split(']').next()).expect("members");
    members.split(',').map(|m| m.trim().trim_matches('"').to_owned()).filter(|m| !m.is_empty()).collect()
}

/// The Roundtable crates each workspace package's `[dependencies]` names (dev and build
/// dependencies are not part of the layering), by crate name without the `roundtable-` prefix.
fn manifest_layers() -> BTreeMap<String, BTreeSet<String>> {
    let mut layers = BTreeMap::new();
    for member in workspace_members() {
        let member = member.as_str();
        if member.starts_with("tests/") {
            continue; // test helpers, outside the product's layering
        }
        let manifest = std::fs::read_to_string(repo_root().join(member).join("Cargo.toml")).expect(member);
        let name = manifest
            .lines()
            .find_map(|line| line.strip_prefix("name = "))
            .map(|name| name.trim_matches('"').trim_start_matches("roundtable-").to_owned())
            .expect("package name");
        let dependencies = manifest
            .split("\n[dependencies]\n")
            .nth(1)
            .map(|section| section.split("\n[").next().unwrap_or_default())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.strip_prefix("roundtable-"))
            .filter_map(|rest| rest.split(['.', ' ', '=']).next())
            .map(str::to_owned)
            .collect();
        layers.insert(name, dependencies);
    }
    layers
}

/// The code map's dependency block in `docs/architecture.md`, line by line: a crate and the
/// Roundtable crates it names (parenthesised asides and what follows `;` are prose).
fn mapped_layers() -> Vec<(String, BTreeSet<String>)> {
    let map = std::fs::read_to_string(repo_root().join("docs/architecture.md")).expect("architecture.md");
    let section = map.split("\n## Code map\n").nth(1).expect("a Code map section");
    let block = section.split("```\n").nth(1).expect("the dependency block");
    block
        .lines()
        .map(|line| {
            let (name, rest) = line.split_once(' ').unwrap_or((line, ""));
            let rest = rest.split(';').next().unwrap_or_default();
            let mut named = String::new();
            let mut depth = 0;
            for c in rest.chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ if depth == 0 => named.push(c),
                    _ => {}
                }
            }
            let dependencies = named.split(',').map(str::trim).filter(|d| !d.is_empty()).map(str::to_owned).collect();
            (name.to_owned(), dependencies)
        })
        .collect()
}

#[test]
fn the_code_maps_dependency_block_is_the_manifests() {
    let manifests = manifest_layers();
    let mapped = mapped_layers();
    let mut problems = Vec::new();
    let mut above = BTreeSet::new();
    for (name, dependencies) in &mapped {
        match manifests.get(name) {
            None => problems.push(format!("{name}: in the map, but no workspace crate has that name")),
            Some(actual) if actual != dependencies => {
                problems.push(format!("{name}: the map says {dependencies:?}, its manifest {actual:?}"))
            }
            Some(_) => {}
        }
        let below: Vec<_> = dependencies.difference(&above).collect();
        if !below.is_empty() {
            problems.push(format!("{name}: depends on {below:?}, which the map lists below it, not above"));
        }
        above.insert(name.clone());
    }
    for name in manifests.keys().filter(|name| !above.contains(*name)) {
        problems.push(format!("{name}: a workspace crate the map does not list"));
    }
    assert!(problems.is_empty(), "docs/architecture.md's code map has drifted:\n{}", problems.join("\n"));
}

/// The inline code spans of a Markdown document, fenced blocks left out.
fn code_spans(markdown: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    prose.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// `a/{b,c}.rs` as `a/b.rs` and `a/c.rs`; anything else as itself.
fn expand_braces(token: &str) -> Vec<String> {
    match (token.find('{'), token.find('}')) {
        (Some(open), Some(close)) if open < close => token[open + 1..close]
            .split(',')
            .flat_map(|choice| expand_braces(&format!("{}{choice}{}", &token[..open], &token[close + 1..])))
            .collect(),
        _ => vec![token.to_owned()],
    }
}

/// How many repository paths `doc` writes in backticks (`reconcilers/src/reconcile.rs`, `docker/src/`,
/// `api/src/routes/read.rs::status`), and those that do not exist. A token counts as a path when
/// it has no spaces, contains `/` and starts with a folder git tracks at the top of the
/// repository; container paths (`/roundtable/…`), placeholders (`<state-dir>/…`) and URLs do not.
fn missing_paths(doc: &str) -> (usize, Vec<String>) {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join(doc)).expect(doc);
    let top: BTreeSet<String> = repository_files()
        .iter()
        .filter_map(|path| path.strip_prefix(&root).ok()?.components().next())
        .map(|first| first.as_os_str().to_string_lossy().into_owned())
        .filter(|first| root.join(first).is_dir())
        .collect();
    let mut missing = Vec::new();
    let mut checked = 0;
    for span in code_spans(&text) {
        let token = span.split("::").next().unwrap_or_default();
        if token.chars().any(char::is_whitespace) || !token.contains('/') {
            continue;
        }
        if !token.split('/').next().is_some_and(|first| top.contains(first)) {
            continue;
        }
        for path in expand_braces(token) {
            checked += 1;
            if !root.join(&path).exists() {
                missing.push(format!("{doc}: `{span}` names {path}, which does not exist"));
            }
        }
    }
    (checked, missing)
}

/// Every repository path the code map names exists, so a move that forgets the map fails here.
#[test]
fn every_path_the_code_map_names_exists() {
    let mut missing = Vec::new();
    // At least this many paths each: a parser that found none would pass vacuously.
    for (doc, at_least) in [("docs/architecture.md", 100), ("docs/kubernetes-backend.md", 5)] {
        let (checked, absent) = missing_paths(doc);
        assert!(checked >= at_least, "{doc}: found only {checked} paths to check");
        missing.extend(absent);
    }
    assert!(missing.is_empty(), "the docs name paths that are not there (update the map):\n{}", missing.join("\n"));
}

/// The leads of the code map's bold paragraphs (`**…**` at the start of a line).
fn bold_leads(markdown: &str) -> Vec<String> {
    markdown
        .lines()
        .filter_map(|line| line.strip_prefix("**"))
        .filter_map(|rest| rest.split_once("**").map(|(lead, _)| lead.to_owned()))
        .collect()
}

/// Each workspace member has a paragraph in the code map whose bold lead names its folder and
/// its package in backticks: `**`specs` (`roundtable-specs`).**`, or for the root package
/// `**Root package `roundtable` (`src/`).**`.
#[test]
fn every_crate_has_a_paragraph_in_the_code_map() {
    let map = std::fs::read_to_string(repo_root().join("docs/architecture.md")).expect("architecture.md");
    let section = map.split("\n## Code map\n").nth(1).expect("a Code map section");
    let section = section.split("\n## ").next().unwrap_or_default();
    let leads = bold_leads(section);
    let mut unmapped = Vec::new();
    let mut count = 0;
    for member in workspace_members() {
        let member = member.as_str();
        count += 1;
        let manifest = std::fs::read_to_string(repo_root().join(member).join("Cargo.toml")).expect(member);
        let package = manifest
            .lines()
            .find_map(|line| line.strip_prefix("name = "))
            .map(|name| name.trim_matches('"'))
            .expect("name");
        let folder = if member == "." { "src/" } else { member };
        let (folder, package) = (format!("`{folder}`"), format!("`{package}`"));
        if !leads.iter().any(|lead| lead.contains(&folder) && lead.contains(&package)) {
            unmapped.push(format!("{member} (a bold lead naming {folder} and {package})"));
        }
    }
    assert!(count > 10, "found only {count} workspace members");
    assert!(unmapped.is_empty(), "docs/architecture.md's code map has no paragraph for: {unmapped:#?}");
}

/// The subcommands `roundtable <path> --help` lists (without clap's `help`).
fn subcommands(path: &[String]) -> Vec<String> {
    let output = std::process::Command::new(crate::support::binary())
        .args(path)
        .arg("--help")
        .env_remove("RUST_LOG")
        .output()
        .expect("run roundtable --help");
    assert!(
        output.status.success(),
        "roundtable {} --help: {}",
        path.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    let Some(listed) = help.split("\nCommands:\n").nth(1) else { return Vec::new() };
    listed
        .lines()
        .take_while(|line| !line.trim().is_empty())
        // A command's line starts with two spaces and its name; wrapped help is indented further.
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command of the binary, as `help` lists them, is in `docs/cli.md` (as
/// `roundtable sessions list`, say), so a new command cannot ship without its reference.
#[test]
fn the_cli_reference_names_every_command() {
    let reference = std::fs::read_to_string(repo_root().join("docs/cli.md")).expect("docs/cli.md");
    let mut pending: Vec<Vec<String>> = subcommands(&[]).into_iter().map(|name| vec![name]).collect();
    assert!(pending.len() > 15, "found only {} commands in `roundtable --help`", pending.len());
    let mut missing = Vec::new();
    let mut seen = 0;
    while let Some(path) = pending.pop() {
        seen += 1;
        let command = format!("roundtable {}", path.join(" "));
        let named = reference.match_indices(&command).any(|(at, _)| {
            reference[at + command.len()..].chars().next().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
        });
        if !named {
            missing.push(command);
        }
        pending.extend(subcommands(&path).into_iter().map(|name| [path.clone(), vec![name]].concat()));
    }
    assert!(seen > 30, "found only {seen} commands");
    assert!(missing.is_empty(), "docs/cli.md does not name these commands: {missing:#?}");
}

/// What a crate root (`lib.rs` or `main.rs`) re-exports, by name: `pub use module::{A, b::C}`
/// makes `crate::A` and `crate::C` names of `module`.
fn reexports(src: &Path) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for root in ["lib.rs", "main.rs"] {
        let Ok(text) = std::fs::read_to_string(src.join(root)) else { continue };
        let production = text.split("#[cfg(test)]").next().unwrap_or_default();
        for line in production.lines().map(str::trim) {
            let Some(rest) = line.strip_prefix("pub use ").or_else(|| line.strip_prefix("pub(crate) use ")) else {
                continue;
            };
            let rest = rest.trim_start_matches("self::").trim_start_matches("crate::").trim_end_matches(';');
            let Some((module, named)) = rest.split_once("::") else { continue };
            for name in named.trim_matches(|c| c == '{' || c == '}').split(',') {
                let name = name.rsplit(" as ").next().unwrap_or_default();
                let name = name.rsplit("::").next().unwrap_or_default().trim();
                if !name.is_empty() && name != "self" {
                    names.insert(name.to_owned(), module.to_owned());
                }
            }
        }
    }
    names
}

/// The modules a crate's top-level module names outside its tests and comments: `crate::a::…`,
/// each name in `crate::{a, b::c}`, a name the crate root re-exports from a module (`crate::A`
/// for `pub use a::A`), and, in a file directly under `src/`, `super::a` (the crate root too).
fn module_imports(crate_dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = repo_root().join(crate_dir).join("src");
    let reexported = reexports(&src);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let word = |text: &str| -> String { text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    for path in files {
        let relative = path.strip_prefix(&src).expect("under src");
        let first = relative.components().next().expect("a component").as_os_str().to_string_lossy();
        let module = first.trim_end_matches(".rs").to_owned();
        if module == "lib" || module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let production: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let roots: &[&str] = if relative.components().count() == 1 { &["crate::", "super::"] } else { &["crate::"] };
        let named = graph.entry(module.clone()).or_default();
        for root in roots {
            for (at, _) in production.match_indices(root) {
                let preceded = production[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
                if preceded {
                    continue;
                }
                let rest = &production[at + root.len()..];
                let targets: Vec<String> = match rest.strip_prefix('{') {
                    Some(group) => {
                        group.split('}').next().unwrap_or_default().split(',').map(|n| word(n.trim())).collect()
                    }
                    None => vec![word(rest)],
                };
                let targets = targets.into_iter().map(|t| reexported.get(&t).cloned().unwrap_or(t));
                named.extend(targets.filter(|t| !t.is_empty() && *t != module));
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    graph.values_mut().for_each(|named| named.retain(|n| modules.contains(n)));
    graph
}

/// A cycle in `graph`, as the path that closes it, if there is one.
fn a_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(graph, next, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

/// No module imports one that imports it back, so each crate reads bottom-up: every member of
/// the workspace, the binary's `src/` included, with no exemption.
#[test]
fn no_crate_has_a_module_import_cycle() {
    let crates = workspace_members();
    assert!(crates.len() > 20 && crates.iter().any(|c| c == "reconcilers"), "found {crates:?}");
    let cycles: Vec<String> = crates
        .iter()
        .filter_map(|name| a_cycle(&module_imports(name)).map(|cycle| format!("{name}: {}", cycle.join(" -> "))))
        .collect();
    assert!(cycles.is_empty(), "module import cycles: {cycles:#?}");
    let specs = module_imports("specs");
    assert!(specs.len() > 20 && specs.values().any(|named| !named.is_empty()), "found too little: {specs:?}");
    // A re-exported name is an edge to the module that defines it.
    let source = module_imports("source");
    assert!(source["follow"].contains("project"), "`crate::Project` is `project`'s: {source:?}");
}

/// Every `Provider` has a complete profile (`specs/src/providers/`, docs/providers.md's "Adding a
/// provider"). The compiler holds each profile to its fields; this holds it to what lives
/// outside the code: its own file, filed under its own provider; a built-in contract in
/// `specs/contracts/` that is the text the profile ships, parses, is for the provider and replays
/// something; a template whose provider is itself; a row of docs/providers.md naming it; and its
/// configuration folders in docs/proposals.md's table of protected paths.
#[test]
fn every_provider_has_a_complete_profile() {
    use roundtable_specs::adapter::Provider;
    let root = repo_root();
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let guide = read("docs/providers.md");
    assert!(guide.contains("\n## Adding a provider\n"), "docs/providers.md has no \"Adding a provider\" section");
    let proposals = read("docs/proposals.md");
    let protected = proposals.split("\n## Protected paths").nth(1).and_then(|rest| rest.split("\n## ").next());
    let protected = protected.expect("docs/proposals.md has a \"Protected paths\" section");
    assert!(Provider::ALL.len() >= 6, "found only {} providers", Provider::ALL.len());
    let mut problems = Vec::new();
    for provider in Provider::ALL.iter().copied() {
        let word = provider.as_str();
        let profile = provider.profile();
        if profile.provider != provider {
            problems.push(format!("{word}: Provider::profile gives the profile of {}", profile.provider));
        }
        let file = format!("specs/src/providers/{word}.rs");
        if !root.join(&file).is_file() {
            problems.push(format!("{word}: its profile's file {file} does not exist"));
        }
        let contract = format!("specs/contracts/{}", profile.contract.file);
        match std::fs::read_to_string(root.join(&contract)) {
            Err(error) => problems.push(format!("{word}: its contract {contract} cannot be read: {error}")),
            Ok(text) if text != profile.contract.text => {
                problems.push(format!("{word}: the contract its profile ships is not {contract}"));
            }
            Ok(text) => match roundtable_specs::contract::parse(&contract, &text) {
                Err(error) => problems.push(format!("{word}: {contract} does not parse: {error:?}")),
                Ok(parsed) if parsed.adapter != word => {
                    problems.push(format!("{word}: {contract} is the contract of adapter {:?}", parsed.adapter));
                }
                Ok(parsed) if parsed.transcripts.is_empty() => {
                    problems.push(format!("{word}: {contract} has no golden transcript"));
                }
                Ok(_) => {}
            },
        }
        match roundtable_specs::builtins::template(word).and_then(|template| template.provider) {
            Some(own) if own == provider => {}
            other => problems.push(format!("{word}: its built-in template's provider is {other:?}")),
        }
        if !guide.contains(&format!("| `{word}`")) {
            problems.push(format!("{word}: no table row of docs/providers.md names `{word}`"));
        }
        for folder in profile.protected {
            if !protected.contains(&format!("| `{folder}` | root |")) {
                problems
                    .push(format!("{word}: docs/proposals.md's protected paths do not list `{folder}` at the root"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "incomplete provider profiles (see docs/providers.md, \"Adding a provider\"):\n{}",
        problems.join("\n")
    );
}
