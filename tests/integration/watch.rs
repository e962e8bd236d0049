//! Watching a real daemon: `GET /v1/status?watch=true` delivers a spec edit within the debounce
//! and one reconcile, a watch resumed from its last version misses nothing (or is told to relist
//! when that version is gone), `/v1/events?watch=true` resumes the same way, and pages, `ETag`
//! and `status` as a CLI process are served from the same materialised status; an Adapter disabled
//! through the API reaches its Assignments' rows as a fresh computation of `status` shows them.

use std::path::Path;
use std::time::{Duration, Instant};

use roundtable_api::client::{self, EventStream, SseEvent};

use crate::http::Api;
use crate::support::{API, ShowLogOnPanic, commit_all, roundtable, start_daemon, stdout, write};

/// A project of `n` suspended Assignments (no execution runs, so no engine work) on one Adapter.
fn suspended_project(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let mut specs =
        format!("{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec: {{command: agent, enabled: false}}\n");
    for i in 0..n {
        specs.push_str(&assignment(i, "first"));
    }
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    dir
}

fn assignment(i: usize, prompt: &str) -> String {
    format!(
        "---\n{API}\nkind: Assignment\nmetadata: {{name: task-{i}}}\nspec:\n  adapter: generic\n  task: {{id: T{i}, prompt: {prompt}}}\n  readablePaths: [README.md]\n  suspend: true\n"
    )
}

/// A daemon over [`suspended_project`] of `n` Assignments, its API served.
struct Running {
    dir: tempfile::TempDir,
    state_dir: std::path::PathBuf,
    api: Api,
    _show_log: ShowLogOnPanic,
    _daemon: crate::support::Daemon,
    _executions: tempfile::TempDir,
}

impl Running {
    async fn start(n: usize) -> Self {
        let dir = suspended_project(n);
        let executions = tempfile::tempdir().expect("tempdir");
        let daemon = start_daemon(dir.path(), &[], executions.path());
        let show_log = ShowLogOnPanic(executions.path().join("daemon.log"), dir.path().to_path_buf());
        let state_dir = dir.path().join(".roundtable/state");
        let api = Api::of(&state_dir).await;
        Self { dir, state_dir, api, _show_log: show_log, _daemon: daemon, _executions: executions }
    }
}

/// Events until `done` says so, within `limit`.
async fn until(stream: &mut EventStream, limit: Duration, done: impl Fn(&SseEvent) -> bool) -> Vec<SseEvent> {
    let mut seen = Vec::new();
    let read = async {
        while let Some(event) = stream.next().await.expect("the stream reads") {
            let finished = done(&event);
            seen.push(event);
            if finished {
                return;
            }
        }
        panic!("the stream ended");
    };
    if tokio::time::timeout(limit, read).await.is_err() {
        let names: Vec<String> = seen.iter().map(|e| format!("{} {}", e.event, e.data)).collect();
        panic!("nothing matched within {limit:?}; seen:\n{}", names.join("\n"));
    }
    seen
}

async fn open(state_dir: &Path, path: &str) -> EventStream {
    match client::stream(state_dir, path).await.expect("the daemon answers") {
        Ok(stream) => stream,
        Err(answer) => panic!("{path}: {} {}", answer.status, String::from_utf8_lossy(&answer.body)),
    }
}

fn is_generation_2_of(name: &'static str) -> impl Fn(&SseEvent) -> bool {
    move |event| {
        event.event == "MODIFIED"
            && serde_json::from_str::<serde_json::Value>(&event.data)
                .is_ok_and(|row| row["name"] == name && row["observedGeneration"] == 2 && row["sync"] == "Synced")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_watch_sees_an_edit_at_once_and_resumes_from_its_last_version() {
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    let running = Running::start(3).await;
    let (root, state_dir, api) = (running.dir.path(), &running.state_dir, &running.api);
    crate::support::wait_until("every Assignment Synced", || {
        let rows = api.get("/v1/status").json();
        rows["items"].as_array().is_some_and(|rows| rows.iter().filter(|r| r["sync"] == "Synced").count() == 4)
    })
    .await;

    // The list, its pages and its ETag all come from one snapshot.
    let listed = api.get("/v1/status");
    let version = listed.json()["metadata"]["resourceVersion"].as_str().expect("a resourceVersion").to_owned();
    let etag = listed.header("etag").expect("an ETag").to_owned();
    assert_eq!(etag, format!("\"{version}\""));
    let unchanged = api.call("GET", "/v1/status", &[("If-None-Match", &etag)], None);
    assert_eq!(unchanged.status, 304, "an unchanged status is not sent again");
    let first = api.get("/v1/status?limit=2").json();
    let next = first["metadata"]["continue"].as_str().expect("a next page");
    let second = api.get(&format!("/v1/status?limit=2&continue={next}")).json();
    let paged: Vec<&serde_json::Value> =
        first["items"].as_array().into_iter().chain(second["items"].as_array()).flatten().collect();
    let whole: Vec<serde_json::Value> = listed.json()["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(paged.into_iter().cloned().collect::<Vec<_>>(), whole, "two pages are the whole list");
    assert!(second["metadata"]["continue"].is_null(), "{second}");

    // A watch without a version: every row, a bookmark, then the edit as it happens.
    let mut watch = open(state_dir, "/v1/status?watch=true").await;
    let initial = until(&mut watch, Duration::from_secs(10), |e| e.event == "BOOKMARK").await;
    assert_eq!(initial.iter().filter(|e| e.event == "ADDED").count(), 4, "{initial:?}");
    let bookmark = initial.last().and_then(|e| e.id.clone()).expect("the bookmark's version");
    let edited = Instant::now();
    let specs = std::fs::read_to_string(root.join(".roundtable/specs.yaml")).expect("specs");
    write(root, ".roundtable/specs.yaml", &specs.replace(&assignment(0, "first"), &assignment(0, "second")));
    let changes = until(&mut watch, Duration::from_secs(10), is_generation_2_of("task-0")).await;
    let delivered = edited.elapsed();
    assert!(changes.iter().all(|e| e.event == "MODIFIED"), "only what changed is sent: {changes:?}");
    eprintln!("an edit reached the watch in {delivered:?}");
    // The debounce (100 ms) and one reconcile, with room for a loaded machine; a view that only
    // refreshed on its 10 s timer would miss it.
    assert!(delivered < Duration::from_secs(5), "the edit took {delivered:?} to reach the watch");
    drop(watch);

    // Dropped, an edit made while away, then resumed from the bookmark: every change since.
    write(
        root,
        ".roundtable/specs.yaml",
        &std::fs::read_to_string(root.join(".roundtable/specs.yaml"))
            .expect("specs")
            .replace(&assignment(1, "first"), &assignment(1, "second")),
    );
    crate::support::wait_until("task-1 at generation 2", || {
        api.get("/v1/status").json()["items"]
            .as_array()
            .is_some_and(|rows| rows.iter().any(|r| r["name"] == "task-1" && r["observedGeneration"] == 2))
    })
    .await;
    let mut resumed = open(state_dir, &format!("/v1/status?watch=true&resourceVersion={bookmark}")).await;
    let missed = until(&mut resumed, Duration::from_secs(10), is_generation_2_of("task-1")).await;
    assert!(missed.iter().any(is_generation_2_of("task-0")), "the first edit is replayed too: {missed:?}");
    assert!(missed.iter().all(|e| e.event != "ADDED" && e.event != "BOOKMARK"), "no relist: {missed:?}");
    let versions: Vec<u64> = missed.iter().filter_map(|e| e.id.as_deref()?.parse().ok()).collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "in order: {versions:?}");

    // A version from before this daemon (or too old) is told to relist.
    match client::stream(state_dir, "/v1/status?watch=true&resourceVersion=1").await.expect("answers") {
        Ok(_) => panic!("a version older than what is kept was accepted"),
        Err(answer) => assert_eq!(answer.status, 410, "{}", String::from_utf8_lossy(&answer.body)),
    }

    // `-o wide` adds every condition.
    let wide = stdout(&roundtable(root, &["status", "-o", "wide"]));
    let header = wide.lines().find(|line| line.starts_with("KIND")).expect("a header");
    assert!(header.contains("CONDITIONS"), "{wide}");
    assert!(wide.lines().any(|line| line.contains("task-2") && line.contains("Ready=False(Suspended)")), "{wide}");

    // The CLI asks the daemon: the same rows, the daemon's version in JSON.
    let printed: serde_json::Value =
        serde_json::from_str(&stdout(&roundtable(root, &["status", "-o", "json"]))).expect("json");
    assert_eq!(printed["items"], api.get("/v1/status").json()["items"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_events_watch_resumes_after_the_last_event_it_saw() {
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    let running = Running::start(1).await;
    let (root, state_dir, api) = (running.dir.path(), &running.state_dir, &running.api);
    crate::support::wait_until("task-0 recorded", || {
        api.get("/v1/events").json()["items"].as_array().is_some_and(|items| !items.is_empty())
    })
    .await;
    let mut watch = open(state_dir, "/v1/events?watch=true").await;
    let start = until(&mut watch, Duration::from_secs(10), |e| e.event == "BOOKMARK").await;
    let from = start[0].id.clone().expect("a version");
    drop(watch);
    let specs = std::fs::read_to_string(root.join(".roundtable/specs.yaml")).expect("specs");
    write(root, ".roundtable/specs.yaml", &specs.replace(&assignment(0, "first"), &assignment(0, "second")));
    let mut resumed = open(state_dir, &format!("/v1/events?watch=true&resourceVersion={from}")).await;
    let seen = until(&mut resumed, Duration::from_secs(20), |e| {
        e.event == "ADDED" && e.data.contains("\"SpecChanged\"") && e.data.contains("generation 2")
    })
    .await;
    let ids: Vec<i64> =
        seen.iter().filter(|e| e.event == "ADDED").filter_map(|e| e.id.as_deref()?.parse().ok()).collect();
    let from: i64 = from.parse().expect("a number");
    assert!(ids.iter().all(|id| *id > from), "only events after {from}: {ids:?}");
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "none skipped: {ids:?}");
}

/// The rows of `kind` in a status list (`items`), by name.
fn rows_of(list: &serde_json::Value, kind: &str) -> Vec<serde_json::Value> {
    let mut rows: Vec<serde_json::Value> =
        list["items"].as_array().into_iter().flatten().filter(|r| r["kind"] == kind).cloned().collect();
    rows.sort_by_key(|r| r["name"].as_str().unwrap_or_default().to_owned());
    rows
}

/// An Adapter disabled through the API moves the rows of the Assignments naming it (through their
/// own reconciles, which its reconcile wakes): the watch gets the Assignment's new row within the
/// debounce and a reconcile or two, and the daemon's view, rebuilt only where writes landed, is
/// what `status` computed afresh in a process of its own says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_disabled_through_the_api_reaches_the_rows_of_its_assignments() {
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    // Disabled in its spec, so nothing runs: the Assignments wait for it, saying why.
    let mut specs =
        format!("{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec: {{command: agent, enabled: false}}\n");
    for i in 0..3 {
        specs.push_str(&format!(
            "---\n{API}\nkind: Assignment\nmetadata: {{name: task-{i}}}\nspec:\n  adapter: generic\n  task: {{id: T{i}, prompt: p}}\n  readablePaths: [README.md]\n"
        ));
    }
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let _daemon = start_daemon(root, &["--workspace", "w"], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let state_dir = root.join(".roundtable/state");
    let api = Api::of(&state_dir).await;
    let says = |row: &serde_json::Value, words: &str| row["message"].as_str().is_some_and(|m| m.contains(words));
    crate::support::wait_until("the Assignments wait for their disabled Adapter", || {
        let rows = rows_of(&api.get("/v1/status").json(), "Assignment");
        rows.len() == 3 && rows.iter().all(|r| says(r, "spec.enabled: false"))
    })
    .await;

    let mut watch = open(&state_dir, "/v1/status?watch=true").await;
    until(&mut watch, Duration::from_secs(10), |e| e.event == "BOOKMARK").await;
    let disabled = api.call("POST", "/v1/workspaces/w/agents/generic/disable", &[], None);
    assert_eq!(disabled.status, 200, "{}", disabled.text());
    let moved = until(&mut watch, Duration::from_secs(10), |event| {
        event.event == "MODIFIED"
            && serde_json::from_str::<serde_json::Value>(&event.data)
                .is_ok_and(|row| row["name"] == "task-1" && says(&row, "by an operator through the API"))
    })
    .await;
    assert!(moved.iter().all(|e| e.event == "MODIFIED"), "only what changed is sent: {moved:?}");
    crate::support::wait_until("every Assignment moved", || {
        rows_of(&api.get("/v1/status").json(), "Assignment").iter().all(|r| says(r, "by an operator through the API"))
    })
    .await;

    // The daemon's view is what a process computing everything afresh says.
    let viewed = api.get("/v1/status").json();
    let computed: serde_json::Value =
        serde_json::from_str(&stdout(&roundtable(root, &["status", "-o", "json", "--retention", "30d"])))
            .expect("json");
    for kind in ["Adapter", "Assignment"] {
        assert_eq!(rows_of(&viewed, kind), rows_of(&computed, kind), "{kind} rows");
    }
    assert!(says(&rows_of(&viewed, "Adapter")[0], "by an operator through the API"), "{viewed}");
}
