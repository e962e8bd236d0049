//! A throw-away PostgreSQL cluster for tests and benchmarks: `initdb` and `pg_ctl` from
//! Debian's `postgresql` package, listening only on a Unix socket in a private temporary folder,
//! run as an unprivileged user when this process is root (PostgreSQL refuses to run as root). A
//! watchdog stops the cluster and removes its folder when the process that started it exits, so
//! a test that panics or is killed leaves nothing behind. [`cluster`] is the one every test of a
//! process shares; [`Private`] is a test's own, which it may restart and reach over TCP (a
//! partition test's network namespace).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::StoreUrl;

/// Set to `1` (CI sets it) to fail, not skip, when no cluster can be started.
pub const REQUIRE_ENV: &str = "ROUNDTABLE_REQUIRE_POSTGRES";

/// A running scratch cluster.
#[derive(Debug)]
pub struct Cluster {
    socket_dir: PathBuf,
    user: String,
    /// The TCP address it also listens on, if any.
    tcp: Option<std::net::SocketAddr>,
}

/// The cluster of this process, started on first use; `None` (with the reason printed) when
/// PostgreSQL is not installed and [`REQUIRE_ENV`] is unset.
pub fn cluster() -> Option<&'static Cluster> {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    match CLUSTER.get_or_init(|| launch(None).map(|launched| launched.cluster)) {
        Ok(cluster) => Some(cluster),
        Err(why) if std::env::var(REQUIRE_ENV).as_deref() == Ok("1") => {
            panic!("{REQUIRE_ENV}=1 but no scratch PostgreSQL: {why}")
        }
        Err(why) => {
            eprintln!("skipping the PostgreSQL half: {why}");
            None
        }
    }
}

impl Cluster {
    /// A URL of a new, empty database in the cluster.
    pub async fn database(&self) -> StoreUrl {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("t{}_{n}", std::process::id());
        let admin = self.url("postgres");
        sqlx::any::install_default_drivers();
        let mut connection = <sqlx::AnyConnection as sqlx::Connection>::connect(&admin).await.expect("scratch admin");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut connection)
            .await
            .expect("create a scratch database");
        let _ = sqlx::Connection::close(connection).await;
        StoreUrl::Postgres(self.url(&name))
    }

    /// The URL of `database`: over TCP when the cluster listens there, else over its socket.
    pub fn url(&self, database: &str) -> String {
        match self.tcp {
            Some(address) => format!("postgres://{}@{address}/{database}", self.user),
            None => format!("postgres://{}@localhost/{database}?host={}", self.user, self.socket_dir.display()),
        }
    }
}

/// A test's own cluster, stopped and removed when dropped (or by its watchdog).
#[derive(Debug)]
pub struct Private {
    launched: Launched,
}

impl Private {
    /// Starts one, listening on `tcp` too when given (clients anywhere are trusted: a test's
    /// address on a veth pair it made, never a public one).
    pub fn start(tcp: Option<std::net::SocketAddr>) -> Result<Self, String> {
        Ok(Self { launched: launch(tcp)? })
    }

    pub fn cluster(&self) -> &Cluster {
        &self.launched.cluster
    }

    /// `pg_ctl restart -m fast`: every connection is cut, and the server is back when this returns.
    pub fn restart(&self) -> Result<(), String> {
        let Launched { bin, data, runner, cluster } = &self.launched;
        // The server's output goes to its log, as at start: a pipe it inherited would keep this
        // waiting for it to exit.
        let log = server_log(&cluster.socket_dir);
        run(runner
            .command(bin.join("pg_ctl"))
            .args(["-w", "-m", "fast", "-D"])
            .arg(data)
            .arg("-l")
            .arg(log)
            .arg("restart"))
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        let Launched { bin, data, runner, cluster } = &self.launched;
        let _ = run(runner.command(bin.join("pg_ctl")).args(["-m", "immediate", "-D"]).arg(data).arg("stop"));
        let _ = std::fs::remove_dir_all(&cluster.socket_dir);
    }
}

/// A started cluster and what it takes to stop or restart it.
#[derive(Debug)]
struct Launched {
    cluster: Cluster,
    bin: PathBuf,
    data: PathBuf,
    runner: Runner,
}

fn launch(tcp: Option<std::net::SocketAddr>) -> Result<Launched, String> {
    let bin = binaries().ok_or("no initdb found (install Debian's postgresql package)")?;
    let runner = Runner::for_this_process()?;
    let dir = tempfile::Builder::new()
        .prefix("roundtable-pg-")
        .tempdir_in("/tmp")
        .map_err(|e| format!("cannot create a folder for the cluster: {e}"))?
        .keep();
    runner.give(&dir)?;
    let data = dir.join("data");
    let user = "roundtable";
    run(runner
        .command(bin.join("initdb"))
        .args(["--auth=trust", "--encoding=UTF8", "--no-sync", "--no-instructions", "-U", user, "-D"])
        .arg(&data))?;
    let listen = match tcp {
        Some(address) => {
            // Trusted from anywhere: it listens only on the test's own address.
            let hba = data.join("pg_hba.conf");
            let mut rules = std::fs::read_to_string(&hba).map_err(|e| format!("cannot read {}: {e}", hba.display()))?;
            rules.push_str("host all all 0.0.0.0/0 trust\n");
            std::fs::write(&hba, rules).map_err(|e| format!("cannot write {}: {e}", hba.display()))?;
            format!("-c listen_addresses='{}' -p {}", address.ip(), address.port())
        }
        None => "-c listen_addresses=''".to_owned(),
    };
    let options = format!(
        "-k {} {listen} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
        dir.display()
    );
    run(runner
        .command(bin.join("pg_ctl"))
        .args(["-w", "-D"])
        .arg(&data)
        .arg("-l")
        .arg(server_log(&dir))
        .args(["-o", &options, "start"]))?;
    // The watchdog outlives a panicking or killed test process by at most a second. It ignores
    // the signals a killed process group gets (`timeout` signals its whole group), or the
    // cluster would outlive the test instead.
    let watchdog = format!(
        "trap '' TERM HUP INT; while [ -d /proc/{pid} ]; do sleep 1; done; '{pg_ctl}' -D '{data}' -m immediate stop >/dev/null 2>&1; rm -rf '{dir}'",
        pid = std::process::id(),
        pg_ctl = bin.join("pg_ctl").display(),
        data = data.display(),
        dir = dir.display(),
    );
    let mut command = runner.command("setsid");
    command.args(["sh", "-c", &watchdog]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    command.spawn().map_err(|e| format!("cannot start the cluster's watchdog: {e}"))?;
    Ok(Launched { cluster: Cluster { socket_dir: dir, user: user.into(), tcp }, bin, data, runner })
}

/// Where the server of the cluster in `dir` writes its output.
fn server_log(dir: &Path) -> PathBuf {
    dir.join("server.log")
}

/// The newest installed server's `bin` folder.
fn binaries() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// Runs the cluster's commands as this process's user, or, as root, as an unprivileged one.
#[derive(Debug)]
struct Runner {
    user: Option<String>,
}

impl Runner {
    fn for_this_process() -> Result<Self, String> {
        if !rustix::process::geteuid().is_root() {
            return Ok(Self { user: None });
        }
        let passwd = std::fs::read_to_string("/etc/passwd").map_err(|e| format!("cannot read /etc/passwd: {e}"))?;
        let known = |name: &str| passwd.lines().any(|line| line.split(':').next() == Some(name));
        let user =
            ["postgres", "nobody"].into_iter().find(|name| known(name)).ok_or("no unprivileged user to run as")?;
        Ok(Self { user: Some(user.to_owned()) })
    }

    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        match &self.user {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    /// Hands `dir` to the user the cluster runs as.
    fn give(&self, dir: &Path) -> Result<(), String> {
        match &self.user {
            Some(user) => run(Command::new("chown").arg(user).arg(dir)),
            None => Ok(()),
        }
    }
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command.stdin(Stdio::null()).output().map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed: {}", String::from_utf8_lossy(&output.stderr).trim()))
    }
}
