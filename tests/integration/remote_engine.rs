//! An engine reached over TCP: a private `dockerd` in its own network namespace listening on TCP
//! with `--tlsverify` and test certificates (a CA, a server certificate for 127.0.0.1, a client
//! certificate), as Docker's own guide sets one up. Roundtable refuses TCP without TLS before it
//! connects, refuses a server its CA did not sign, and with `DOCKER_TLS_VERIFY` and
//! `DOCKER_CERT_PATH` proves every `doctor` step and runs an execution to its proposal there.
//! An engine that cannot see this host's files (as one on another machine cannot: here a private
//! engine that sees an empty tmpfs where this host has the daemon's temporary folder) refuses
//! every Adapter at admission, whatever the mode, before anything of a session exists.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::private_engine::{private_engine_hiding_or_skip, private_engine_with_flags_or_skip};
use crate::support::{
    ShowLogOnPanic, binary, json, nothing_left, one_assignment_project, roundtable, roundtable_with_env,
    session_phases, start_daemon_in_netns, start_daemon_with_env, stderr, stdout, wait_until_within,
};

/// Where the private engine listens, inside its own network namespace.
const TCP: &str = "tcp://127.0.0.1:2376";

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", stderr(&out));
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate it signed, under `dir`:
/// `ca.pem`, `server-cert.pem`, `server-key.pem`, and the client's `cert.pem` and `key.pem`
/// (the names `DOCKER_CERT_PATH` holds).
fn make_certificates(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let mut ca = vec![
        "req",
        "-x509",
        "-days",
        "2",
        "-subj",
        "/CN=roundtable test CA",
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca.pem",
    ];
    ca.extend(ec);
    openssl(dir, &ca);
    for (who, subject, extension) in [
        ("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "/CN=roundtable", "extendedKeyUsage=clientAuth\n"),
    ] {
        let (key, csr, cert, ext) =
            (format!("{who}-key.pem"), format!("{who}.csr"), format!("{who}-cert.pem"), format!("{who}.ext"));
        std::fs::write(dir.join(&ext), extension).expect("extension file");
        let mut request = vec!["req", "-new", "-subj", subject, "-keyout", &key, "-out", &csr];
        request.extend(ec);
        openssl(dir, &request);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-days",
                "2",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca-key.pem",
                "-CAcreateserial",
                "-extfile",
                &ext,
                "-out",
                &cert,
            ],
        );
    }
    std::fs::copy(dir.join("client-cert.pem"), dir.join("cert.pem")).expect("cert.pem");
    std::fs::copy(dir.join("client-key.pem"), dir.join("key.pem")).expect("key.pem");
}

/// `roundtable ARGS` in the engine's network namespace with `env`.
fn in_netns(netns: &str, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new("nsenter")
        .arg(format!("--net={netns}"))
        .arg("--")
        .arg(binary())
        .args(args)
        .current_dir(cwd)
        .env_remove("DOCKER_TLS_VERIFY")
        .env_remove("DOCKER_CERT_PATH")
        .envs(env.iter().copied())
        .output()
        .expect("nsenter roundtable")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_engine_over_tcp_runs_an_execution_and_plain_tcp_is_refused() {
    let certs = tempfile::tempdir().expect("tempdir");
    make_certificates(certs.path());
    let at = |name: &str| certs.path().join(name).display().to_string();
    let flags = vec![
        "--tlsverify".to_owned(),
        format!("--tlscacert={}", at("ca.pem")),
        format!("--tlscert={}", at("server-cert.pem")),
        format!("--tlskey={}", at("server-key.pem")),
        format!("--host={TCP}"),
    ];
    let Some((private, engine)) = private_engine_with_flags_or_skip("{}", flags).await else { return };
    let netns = private.netns().expect("running");
    // A new network namespace's loopback is down until someone brings it up.
    let up =
        Command::new("nsenter").arg(format!("--net={netns}")).args(["--", "ip", "link", "set", "lo", "up"]).status();
    assert!(up.is_ok_and(|s| s.success()), "cannot bring up the engine's loopback");
    let cert_path = certs.path().to_str().expect("utf-8");
    let tls = [("DOCKER_HOST", TCP), ("DOCKER_TLS_VERIFY", "1"), ("DOCKER_CERT_PATH", cert_path)];

    // TCP without TLS is refused before anything is sent.
    let plain = in_netns(&netns, certs.path(), &["doctor"], &[("DOCKER_HOST", TCP)]);
    assert_eq!(plain.status.code(), Some(1), "{}{}", stdout(&plain), stderr(&plain));
    assert!(stdout(&plain).contains("is TCP without TLS: set DOCKER_TLS_VERIFY=1"), "{}", stdout(&plain));
    // A server the configured CA did not sign is not the engine.
    let stranger = tempfile::tempdir().expect("tempdir");
    make_certificates(stranger.path());
    let other_ca = stranger.path().to_str().expect("utf-8");
    let wrong = in_netns(&netns, certs.path(), &["doctor"], &[tls[0], tls[1], ("DOCKER_CERT_PATH", other_ca)]);
    assert_eq!(wrong.status.code(), Some(1), "{}", stdout(&wrong));
    assert!(stdout(&wrong).contains("reachable:       no"), "{}", stdout(&wrong));

    // With the engine's CA and a client certificate: every step proven, over TLS.
    let doctor = in_netns(&netns, certs.path(), &["doctor", "--format", "json"], &tls);
    let report: Value = serde_json::from_str(&stdout(&doctor)).unwrap_or_else(|_| panic!("{}", stderr(&doctor)));
    let report = &report["items"][0];
    assert_eq!(doctor.status.code(), Some(0), "{report:#}");
    assert_eq!(report["endpoint"], TCP, "{report:#}");
    for feature in report["features"].as_array().expect("features") {
        // Runtime classes are informational, as doctor's exit code counts them.
        let name = feature["name"].as_str().unwrap_or_default();
        let required = !matches!(name, "rootless" | "userns") && !name.starts_with("runtimeClass/");
        assert!(!required || feature["available"] == true, "{feature:#}");
    }

    // An execution runs there, to its proposal.
    let dir = one_assignment_project("remote", "echo over tls >> README.md");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let _show = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let daemon = start_daemon_in_netns(&netns, root, &[], executions.path(), &tls);
    wait_until_within("the session over TLS to succeed", Duration::from_secs(120), || {
        session_phases(root, "remote").first().is_some_and(|p| p == "Succeeded")
    })
    .await;
    drop(daemon);
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let id = proposals["items"][0]["id"].as_str().expect("a proposal").to_owned();
    assert!(stdout(&roundtable(root, &["proposals", "export", &id])).contains("+over tls"));
    nothing_left(&engine, root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_cannot_see_this_hosts_files_is_refused_at_admission() {
    let hidden = tempfile::tempdir().expect("tempdir");
    let Some((private, engine)) = private_engine_hiding_or_skip(hidden.path()).await else { return };
    let host = private.host();
    let tmpdir = hidden.path().to_str().expect("utf-8");
    let env = [("DOCKER_HOST", host.as_str()), ("TMPDIR", tmpdir)];
    let dir = one_assignment_project("elsewhere", "echo never >> README.md");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let _show = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let daemon = start_daemon_with_env(root, &[], executions.path(), &env);
    let message = || {
        let rows = json(&roundtable(root, &["status", "--format", "json"]));
        let row = rows["items"].as_array().and_then(|r| r.iter().find(|r| r["name"] == "elsewhere").cloned());
        row.and_then(|r| r["message"].as_str().map(str::to_owned)).unwrap_or_default()
    };
    wait_until_within("the Assignment to be refused", Duration::from_secs(60), || {
        message().contains("engine_without_host_paths")
    })
    .await;
    let said = message();
    assert!(
        said.contains("cannot see this host's files") && said.contains("bind source path does not exist"),
        "{said}"
    );
    assert!(session_phases(root, "elsewhere").is_empty(), "no session was made");
    drop(daemon);
    nothing_left(&engine, root).await;
    assert!(engine.labelled("host-path-check").await.expect("list").is_empty(), "the check removed what it made");

    // doctor says the same of its own steps, and exits 1.
    let doctor = roundtable_with_env(root, &["doctor"], &env);
    assert_eq!(doctor.status.code(), Some(1), "{}", stdout(&doctor));
    assert!(stdout(&doctor).contains("the engine does not see this host's files"), "{}", stdout(&doctor));
}
