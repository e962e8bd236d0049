//! Controllers that lose their store, for real: one controller in its own network namespace
//! reaches PostgreSQL over a veth pair that the test cuts and heals, and a store that restarts
//! (`pg_ctl restart`) under two running controllers. The cut-off controller stops its own
//! executions before its leases can expire, records nothing it no longer holds, and rejoins on
//! heal without a restart; the other takes over exactly once; after a store restart both carry on
//! and nothing is lost or run twice. Each ends with one proposal per Assignment and a verifying
//! audit chain.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::scale_out::{daemon_log, live_controllers, rt, run_id_in, sessions, two_checkouts};
use crate::support::{
    Daemon, ShowLogOnPanic, ensure_test_images, json, nothing_left, present_or_skip, start_daemon_in_netns,
    start_daemon_with_env, stdout, wait_until_within,
};

/// A network namespace of the test's own, joined to this one by a veth pair: the host end has
/// `.1`, the namespace end `.2` of a /30 of 10.231.0.0/16. It goes (and the pair with it) when
/// dropped or, if the test is killed, when its holder notices the test process is gone.
struct Netns {
    holder: Child,
    host_end: String,
    host: Ipv4Addr,
}

impl Netns {
    fn create() -> Result<Self, String> {
        let test = std::process::id();
        let holder = Command::new("unshare")
            .args(["--net", "sh", "-c", &format!("while [ -d /proc/{test} ]; do sleep 1; done")])
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run unshare --net: {e}"))?;
        let pid = holder.id();
        // Distinct per process, so two runs on one host do not collide.
        let subnet = (test % 16_000) * 4;
        let (host, inside) = (
            Ipv4Addr::new(10, 231, (subnet >> 8) as u8, (subnet & 0xff) as u8 + 1),
            Ipv4Addr::new(10, 231, (subnet >> 8) as u8, (subnet & 0xff) as u8 + 2),
        );
        let netns = Self { holder, host_end: format!("rtp{pid}h"), host };
        let inside_end = format!("rtp{pid}n");
        std::thread::sleep(Duration::from_millis(200));
        netns.ip(&[
            "link",
            "add",
            &netns.host_end,
            "type",
            "veth",
            "peer",
            "name",
            &inside_end,
            "netns",
            &pid.to_string(),
        ])?;
        netns.ip(&["addr", "add", &format!("{host}/30"), "dev", &netns.host_end])?;
        netns.ip(&["link", "set", &netns.host_end, "up"])?;
        netns.inside(&["addr", "add", &format!("{inside}/30"), "dev", &inside_end])?;
        netns.inside(&["link", "set", &inside_end, "up"])?;
        netns.inside(&["link", "set", "lo", "up"])?;
        Ok(netns)
    }

    fn path(&self) -> String {
        format!("/proc/{}/ns/net", self.holder.id())
    }

    fn ip(&self, args: &[&str]) -> Result<(), String> {
        run(Command::new("ip").args(args))
    }

    fn inside(&self, args: &[&str]) -> Result<(), String> {
        run(Command::new("nsenter").arg(format!("--net={}", self.path())).args(["--", "ip"]).args(args))
    }

    /// Cuts the pair: packets are dropped, nothing is refused, as in a real partition.
    fn cut(&self) {
        self.ip(&["link", "set", &self.host_end, "down"]).expect("cut");
    }

    fn heal(&self) {
        self.ip(&["link", "set", &self.host_end, "up"]).expect("heal");
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = self.ip(&["link", "del", &self.host_end]);
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command.output().map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("{command:?}: {}", String::from_utf8_lossy(&output.stderr).trim()))
    }
}

/// A free TCP port on `address` (bound and let go).
fn free_port(address: Ipv4Addr) -> u16 {
    std::net::TcpListener::bind((address, 0)).and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

struct Controller {
    _daemon: Daemon,
    executions: tempfile::TempDir,
    root: PathBuf,
}

impl Controller {
    /// A controller of `root` on `store`, in `netns` when given.
    fn start(root: &Path, store: &str, key: &Path, ttl: &str, netns: Option<&Netns>) -> Self {
        let executions = tempfile::tempdir().expect("tempdir");
        let key = key.display().to_string();
        let env = [("ROUNDTABLE_STORE", store), ("ROUNDTABLE_AUDIT_KEY", key.as_str()), ("ROUNDTABLE_LEASE_TTL", ttl)];
        let args = ["--max-executions", "4"];
        let daemon = match netns {
            Some(netns) => start_daemon_in_netns(&netns.path(), root, &args, executions.path(), &env),
            None => start_daemon_with_env(root, &args, executions.path(), &env),
        };
        Self { _daemon: daemon, executions, root: root.to_owned() }
    }

    fn log(&self) -> String {
        daemon_log(self.executions.path())
    }

    fn run_id(&self) -> Option<String> {
        run_id_in(&self.log())
    }

    fn show_log_on_panic(&self) -> ShowLogOnPanic {
        ShowLogOnPanic(self.executions.path().join("daemon.log"), self.root.clone())
    }
}

fn proposals(root: &Path, store: &str, key: &Path) -> Vec<serde_json::Value> {
    json(&rt(root, store, key, &["proposals", "list", "--format", "json"]))["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn verify_audit(root: &Path, store: &str, key: &Path) {
    let verified = rt(root, store, key, &["audit", "verify"]);
    assert!(verified.status.success(), "{}{}", stdout(&verified), String::from_utf8_lossy(&verified.stderr));
}

/// `ip` and `unshare` to make the namespace; required where containers are.
fn can_partition() -> bool {
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    let found = root && Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success());
    present_or_skip(
        found,
        "ROUNDTABLE_REQUIRE_CONTAINER_TESTS",
        "ip (iproute2) as root",
        "the partition test needs root and iproute2",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_cut_off_from_its_store_stops_its_execution_in_time_and_rejoins_on_heal() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    if !can_partition() || roundtable_store::scratch::cluster().is_none() {
        return;
    }
    ensure_test_images();
    let netns = Netns::create().expect("a network namespace with a veth pair");
    let listen = SocketAddr::from((netns.host, free_port(netns.host)));
    let postgres = roundtable_store::scratch::Private::start(Some(listen)).expect("a PostgreSQL on the veth");
    let store = postgres.cluster().database().await.expose();
    let (first, second) = two_checkouts(1, 8);
    let keys = tempfile::tempdir().expect("tempdir");
    let key = keys.path().join("audit.key");

    // The controller behind the veth starts alone, so the execution is its own.
    let cut_off = Controller::start(first.path(), &store, &key, "6s", Some(&netns));
    let _cut_log = cut_off.show_log_on_panic();
    wait_until_within("the session to run", Duration::from_secs(90), || {
        sessions(first.path(), &store, &key).first().is_some_and(|s| s["phase"] == "Running")
    })
    .await;
    let other = Controller::start(second.path(), &store, &key, "6s", None);
    let _other_log = other.show_log_on_panic();
    wait_until_within("the second controller to register", Duration::from_secs(30), || other.run_id().is_some()).await;
    let running = sessions(first.path(), &store, &key);
    assert_eq!(running[0]["controllerRun"].as_str(), cut_off.run_id().as_deref(), "{running:#?}");

    netns.cut();
    let cut_at = std::time::Instant::now();
    // The fence is what the engine shows: the agent's container has stopped before the lease
    // can expire (6 s after its last renewal, so at most 6 s after the cut) and the other
    // controller take the execution over. A log line saying so proves nothing.
    let project = roundtable_source::Project::resolve(&first.path().join(".roundtable")).expect("project").id;
    let lease_ttl = Duration::from_secs(6);
    while engine.labelled(&project).await.expect("list").iter().any(|found| found.running) {
        assert!(cut_at.elapsed() < lease_ttl, "its container still runs {:?} after the cut", cut_at.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fenced_after = cut_at.elapsed();
    while !engine.labelled(&project).await.expect("list").is_empty() {
        assert!(cut_at.elapsed() < Duration::from_secs(20), "its container is still there");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stopped_after = cut_at.elapsed();
    assert!(cut_off.log().contains("cut off from the store"), "the fence is explained in its log");

    // The other controller takes it over once, and it succeeds.
    wait_until_within("the take-over to succeed", Duration::from_secs(90), || {
        let phases: Vec<String> = sessions(second.path(), &store, &key)
            .iter()
            .filter_map(|s| s["phase"].as_str().map(str::to_owned))
            .collect();
        phases == ["Succeeded", "Interrupted"]
    })
    .await;
    let taken_over = sessions(second.path(), &store, &key);
    assert_eq!(taken_over[0]["controllerRun"].as_str(), other.run_id().as_deref(), "{taken_over:#?}");

    // Healed: it rejoins without a restart, says so in the store, and records nothing about
    // what it lost.
    netns.heal();
    wait_until_within("the cut-off controller to rejoin", Duration::from_secs(30), || {
        cut_off.log().contains("reconnected to the store")
    })
    .await;
    let events = json(&rt(first.path(), &store, &key, &["events", "Assignment/a00", "--format", "json"]));
    let fenced: Vec<&serde_json::Value> =
        events["items"].as_array().into_iter().flatten().filter(|e| e["reason"] == "ExecutionFenced").collect();
    assert_eq!(fenced.len(), 1, "{events:#}");
    let live = live_controllers(first.path(), &store, &key);
    assert!(live.contains(&cut_off.run_id().expect("run")), "rejoined: {live:?}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(sessions(first.path(), &store, &key), taken_over, "nothing more was recorded");
    assert_eq!(proposals(first.path(), &store, &key).len(), 1, "exactly one proposal");
    eprintln!(
        "partition: stopped {} ms and container gone {} ms after the cut (lease TTL 6 s)",
        fenced_after.as_millis(),
        stopped_after.as_millis()
    );
    drop((cut_off, other));
    verify_audit(first.path(), &store, &key);
    nothing_left(&engine, first.path()).await;
    nothing_left(&engine, second.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_carry_on_across_a_store_restart_and_nothing_runs_twice() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    if roundtable_store::scratch::cluster().is_none() {
        return;
    }
    ensure_test_images();
    let postgres = roundtable_store::scratch::Private::start(None).expect("a PostgreSQL of the test's own");
    let store = postgres.cluster().database().await.expose();
    let (first, second) = two_checkouts(6, 6);
    let keys = tempfile::tempdir().expect("tempdir");
    let key = keys.path().join("audit.key");
    // A TTL the restart fits well within: a store that is back in a second must not cost the
    // running executions.
    let a = Controller::start(first.path(), &store, &key, "20s", None);
    let b = Controller::start(second.path(), &store, &key, "20s", None);
    let _logs = (a.show_log_on_panic(), b.show_log_on_panic());
    wait_until_within("sessions to run", Duration::from_secs(90), || {
        sessions(first.path(), &store, &key).iter().any(|s| s["phase"] == "Running")
    })
    .await;
    postgres.restart().expect("pg_ctl restart");
    wait_until_within("six succeeded sessions", Duration::from_secs(180), || {
        let all = sessions(first.path(), &store, &key);
        all.len() >= 6 && all.iter().all(|s| s["phase"] == "Succeeded")
    })
    .await;
    let all = sessions(first.path(), &store, &key);
    let mut assignments: Vec<&str> = all.iter().filter_map(|s| s["assignment"].as_str()).collect();
    assignments.sort_unstable();
    assignments.dedup();
    assert_eq!((all.len(), assignments.len()), (6, 6), "each ran exactly once: {all:#?}");
    assert_eq!(proposals(first.path(), &store, &key).len(), 6, "one proposal each");
    for controller in [&a, &b] {
        assert!(!controller.log().contains("cut off from the store"), "a restart of a second fenced nothing");
    }
    drop((a, b));
    verify_audit(first.path(), &store, &key);
    nothing_left(&engine, first.path()).await;
    nothing_left(&engine, second.path()).await;
}
