//! `status --watch` and `sessions logs -f` in a real terminal: each runs in a `tmux` pane on a
//! private tmux server, and the test reads the screen as an operator would see it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::{
    API, ShowLogOnPanic, binary, commit_all, ensure_test_images, json, roundtable, start_daemon, wait_until_within,
    write,
};

/// Whether tmux is here; CI requires it.
fn tmux_or_skip() -> bool {
    let found = Command::new("tmux").arg("-V").output().is_ok_and(|out| out.status.success());
    crate::support::present_or_skip(found, "ROUNDTABLE_REQUIRE_TMUX", "tmux", "apt-get install tmux")
}

/// A tmux server of the test's own (its socket in a folder of the test's), killed when dropped.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").arg("-S").arg(&self.socket).args(args).output().expect("tmux runs");
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `command` in `cwd` in a new 200×50 window named `name`.
    fn run(&self, name: &str, cwd: &Path, command: &str) {
        let size = ["-x", "200", "-y", "50"];
        let shell = format!("cd {} && {command}; sleep 600", cwd.display());
        if self.socket.exists() {
            self.tmux(&["new-window", "-d", "-n", name, &shell]);
        } else {
            let mut args = vec!["new-session", "-d", "-s", "test", "-n", name];
            args.extend(size);
            args.push(&shell);
            self.tmux(&args);
        }
    }

    /// What window `name` shows now (its scrollback included).
    fn screen(&self, name: &str) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-S", "-200", "-t", &format!("test:{name}")])
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").arg("-S").arg(&self.socket).arg("kill-server").output();
    }
}

/// `ticking` prints a line a second, twelve times; `quiet` is suspended (its spec is edited).
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let assignment = |name: &str, prompt: &str, suspend: bool| {
        format!(
            "---\n{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: generic\n  task: {{id: T-{name}, prompt: {}}}\n  readablePaths: [README.md]\n  suspend: {suspend}\n",
            serde_json::to_string(prompt).expect("json")
        )
    };
    let specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n{}{}",
        assignment("ticking", "for i in $(seq 1 12); do echo tick $i; sleep 1; done", false),
        assignment("quiet", "echo first", true),
    );
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    dir
}

/// The lines of `screen` that list `name` in the status table.
fn rows_of<'a>(screen: &'a str, name: &str) -> Vec<&'a str> {
    screen.lines().filter(|line| line.split_whitespace().nth(1) == Some(name)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_and_logs_follow_on_a_terminal() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    if !tmux_or_skip() {
        return;
    }
    ensure_test_images();
    let dir = project();
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    crate::http::Api::of(&root.join(".roundtable/state")).await;
    let tmux = Tmux { socket: executions.path().join("tmux.sock") };
    let bin = binary();

    // `sessions logs -f`: lines appear while the agent still runs, then the end.
    let running = || {
        let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
        listed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["assignment"] == "ticking" && s["phase"] == "Running")
            .and_then(|s| s["id"].as_str().map(str::to_owned))
    };
    wait_until_within("ticking to run", Duration::from_secs(120), || running().is_some()).await;
    let session = running().expect("a running session");
    tmux.run("logs", root, &format!("{} sessions logs -f {session}", bin.display()));
    wait_until_within("a line while the agent runs", Duration::from_secs(30), || {
        tmux.screen("logs").contains("tick 2")
    })
    .await;
    let early = tmux.screen("logs");
    assert!(!early.contains("tick 12"), "the output came only at the end:\n{early}");
    wait_until_within("the session's end", Duration::from_secs(60), || {
        tmux.screen("logs").contains("the session ended (Succeeded)")
    })
    .await;
    let whole = tmux.screen("logs");
    // `-o wide` says how it ended and how long it ran.
    let wide = crate::support::stdout(&roundtable(root, &["sessions", "list", "-o", "wide"]));
    let ticking = wide.lines().find(|line| line.contains(&session)).unwrap_or_else(|| panic!("{wide}"));
    assert!(wide.lines().next().is_some_and(|h| h.contains("CAUSE") && h.contains("DURATION")), "{wide}");
    assert!(ticking.contains("Exited"), "{wide}");
    for i in 1..=12 {
        assert!(whole.lines().any(|line| line.trim() == format!("tick {i}")), "tick {i} missing:\n{whole}");
    }

    // `status --watch`: the table, then a line for the edit.
    tmux.run("status", root, &format!("{} status --watch", bin.display()));
    wait_until_within("the watch's table", Duration::from_secs(30), || {
        let screen = tmux.screen("status");
        screen.contains("KIND") && rows_of(&screen, "quiet").len() == 1
    })
    .await;
    let specs = std::fs::read_to_string(root.join(".roundtable/specs.yaml")).expect("specs");
    write(root, ".roundtable/specs.yaml", &specs.replace("echo first", "echo second"));
    wait_until_within("the edit on the watch's screen", Duration::from_secs(20), || {
        let screen = tmux.screen("status");
        rows_of(&screen, "quiet").iter().any(|line| line.split_whitespace().nth(3) == Some("2"))
    })
    .await;

    // `events --watch`: the newest events oldest first, then each new one appended below them in
    // the same columns, so the screen reads in one order.
    tmux.run("events", root, &format!("{} events --watch --limit 5", bin.display()));
    wait_until_within("the events' list", Duration::from_secs(30), || {
        tmux.screen("events").lines().filter(|line| !line.trim().is_empty()).count() == 6
    })
    .await;
    write(root, ".roundtable/specs.yaml", &specs.replace("echo first", "echo third"));
    wait_until_within("the edit's event appended", Duration::from_secs(20), || {
        tmux.screen("events").lines().any(|line| line.contains("SpecChanged") && line.contains("generation 3"))
    })
    .await;
    let screen = tmux.screen("events");
    let lines: Vec<&str> = screen.lines().filter(|line| !line.trim().is_empty()).collect();
    let header = lines[0];
    assert!(header.starts_with("AGE") && header.contains("OBJECT"), "{screen}");
    let appended = lines.iter().position(|line| line.contains("generation 3")).expect("the appended event");
    assert!(appended > 5, "the new event comes after the list, at the bottom:\n{screen}");
    // The list is oldest first: ages (seconds and minutes) never grow down the list.
    let seconds = |line: &str| {
        let age = line.split_whitespace().next().unwrap_or_default();
        let (number, unit) = age.split_at(age.len().saturating_sub(1));
        number.parse::<u64>().ok().map(|n| if unit == "m" { n * 60 } else { n })
    };
    let ages: Vec<u64> = lines[1..=5].iter().filter_map(|line| seconds(line)).collect();
    assert!(ages.windows(2).all(|pair| pair[0] >= pair[1]), "oldest first: {ages:?}\n{screen}");
    // One set of columns: the OBJECT column starts at the same place in the header and below.
    let column = header.find("OBJECT").expect("OBJECT");
    let object_at =
        |line: &str| line.find("Assignment/").or_else(|| line.find("Adapter/")).or_else(|| line.find("Session/"));
    assert_eq!(object_at(lines[appended]), Some(column), "the appended line keeps the list's columns:\n{screen}");

    drop(tmux);
    drop(daemon);
    crate::support::nothing_left(&engine, root).await;
}
