//! The egress gateway end to end: a session of an Adapter with `providerHosts` gets its own
//! gateway sidecar; from inside the hardened container, through the in-container proxy, the
//! allowed host answers a real TLS round trip and everything else is refused. DNS is a scripted
//! server and the provider a TLS echo on 127.0.0.200:443 (loopback only: tests never leave the
//! machine).

use std::net::SocketAddr;
use std::time::Duration;

use roundtable_net_fixtures::{FakeDns, Reply, TlsEcho};
use serde_json::Value;

use crate::support::{
    API, ShowLogOnPanic, commit_all, ensure_test_images, json, nothing_left, roundtable, session_phases, start_daemon,
    stdout, wait_until, write,
};

const PROVIDER: &str = "provider.roundtable.test";
const UPSTREAM: &str = "127.0.0.200:443";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_reaches_its_provider_through_the_gateway_and_nothing_else() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let upstream_address: SocketAddr = UPSTREAM.parse().expect("address");
    let upstream = TlsEcho::start(upstream_address, &[PROVIDER]).await.expect("TLS echo on 127.0.0.200:443");
    let dns = FakeDns::start("127.0.0.1:0".parse().expect("address")).await.expect("fake DNS");
    dns.answer(PROVIDER, vec![Reply::Addresses(vec![upstream_address.ip()])]);
    dns.answer("evil.roundtable.test", vec![Reply::Addresses(vec![upstream_address.ip()])]);

    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    std::fs::write(root.join("provider-ca.der"), upstream.identity.certificate.as_ref()).expect("CA");
    let specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: prober}}\nspec:\n  image: roundtable-test/agent:latest\n  command: egress-probe\n  args: [--allowed, {PROVIDER}, --ca, /roundtable/workspace/provider-ca.der, --denied, evil.roundtable.test, --direct, '{UPSTREAM}', --flood, '4', --hold-ms, '4000']\n  providerHosts: [{PROVIDER}]\n---\n{API}\nkind: Assignment\nmetadata: {{name: probe}}\nspec:\n  adapter: prober\n  task: {{id: P, prompt: probe}}\n  readablePaths: [README.md, provider-ca.der]\n"
    );
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let resolver = dns.address().to_string();
    let _daemon = start_daemon(
        root,
        &[
            "--gateway-resolver",
            &resolver,
            "--gateway-allow-cidr",
            "127.0.0.0/8",
            "--gateway-dial-allow",
            "127.0.0.0/8",
            "--gateway-max-tunnels",
            "4",
        ],
        executions.path(),
    );
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());

    // While the agent runs, status shows its sidecar and what it decided.
    let saw_gateway_row = std::cell::RefCell::new(None);
    wait_until("the probe to finish", || {
        let status = json(&roundtable(root, &["status", "--format", "json"]));
        if let Some(row) = status["items"].as_array().and_then(|rows| rows.iter().find(|r| r["kind"] == "Gateway")) {
            *saw_gateway_row.borrow_mut() = Some(row.clone());
        }
        session_phases(root, "probe").first().is_some_and(|phase| phase != "Running" && phase != "Queued")
    })
    .await;
    assert_eq!(session_phases(root, "probe"), ["Succeeded"]);
    let row = saw_gateway_row.into_inner().expect("status listed the running session's gateway");
    assert_eq!(row["health"], "Healthy", "{row:#}");
    assert!(row["message"].as_str().is_some_and(|m| m.contains(PROVIDER)), "{row:#}");

    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let id = sessions["items"][0]["id"].as_str().expect("session id").to_owned();
    let logs = stdout(&roundtable(root, &["sessions", "logs", &id]));
    let probes: Vec<Value> = logs.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let probe = |name: &str| probes.iter().find(|p| p["probe"] == name).cloned().unwrap_or(Value::Null);
    assert_eq!(probe("env")["HTTPS_PROXY"], "http://127.0.0.1:3128", "{logs}");
    assert_eq!(probe("env")["https_proxy"], "http://127.0.0.1:3128", "{logs}");
    assert_eq!(probe("env")["others"], false, "no other proxy variable: {logs}");
    assert_eq!(probe("proxy-threads")["threads"], 1, "the in-container proxy runs on one thread: {logs}");
    assert_eq!(probe("allowed")["status"], "HTTP/1.1 200 Connection Established", "{logs}");
    assert_eq!(probe("allowed")["echo_matches"], true, "bytes made the round trip unchanged: {logs}");
    assert!(
        probe("denied")["head"].as_str().is_some_and(|h| h.contains("X-Gateway-Deny: host_not_allowlisted")),
        "{logs}"
    );
    assert_eq!(probe("fronting")["succeeded"], false, "{logs}");
    assert_eq!(probe("direct")["connected"], false, "no network but loopback inside: {logs}");
    assert_eq!(probe("flood")["held"], 4, "{logs}");
    let egress_log = || std::fs::read_to_string(executions.path().join(&id).join("egress.log")).unwrap_or_default();
    assert!(
        probe("flood")["head"].as_str().is_some_and(|h| h.starts_with("HTTP/1.1 429") && h.contains("tunnel_limit")),
        "a fifth tunnel is refused, not queued: {logs}\n--- egress.log ---\n{}",
        egress_log()
    );

    let shown = json(&roundtable(root, &["sessions", "show", &id, "--format", "json"]));
    let egress = &shown["items"][0]["detail"]["egress"];
    assert_eq!(egress["state"], "stopped", "{shown:#}");
    assert_eq!(egress["hosts"], serde_json::json!([PROVIDER]));
    assert_eq!(egress["counters"]["allowed"], 1, "{egress:#}");
    assert_eq!(egress["counters"]["denials"]["host_not_allowlisted"], 1, "{egress:#}");
    assert_eq!(egress["counters"]["denials"]["sni_mismatch"], 1, "{egress:#}");
    assert_eq!(egress["counters"]["denials"]["tunnel_limit"], 1, "{egress:#}");
    assert_eq!(dns.lookups(PROVIDER), 2, "one lookup per tunnel to the provider");
    assert_eq!(dns.lookups("evil.roundtable.test"), 0, "a refused host is never resolved");

    // The decision log is in the execution folder, one JSON line per tunnel and close.
    let log = std::fs::read_to_string(executions.path().join(&id).join("egress.log")).expect("egress.log");
    let reasons: Vec<String> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["event"] == "decision")
        .map(|line| line["reason"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(reasons[..4], ["allowed", "host_not_allowlisted", "sni_mismatch", "tunnel_limit"], "{log}");
    // The four held tunnels end when the probe drops them.
    assert!(reasons[4..].iter().all(|reason| reason == "client_eof"), "{log}");
    assert!(!std::path::Path::new(&format!("/run/roundtable/{id}")).exists(), "the socket directory is removed");
    tokio::time::sleep(Duration::from_millis(100)).await;
    nothing_left(&engine, root).await;
}

#[test]
fn the_proxy_refuses_to_start_without_its_sidecar_socket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out =
        roundtable(dir.path(), &["proxy", "--listen", "127.0.0.1:0", "--upstream", "unix:/nonexistent/egress.sock"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(crate::support::stderr(&out).contains("sidecar socket /nonexistent/egress.sock is missing"));
}

/// `roundtable gateway serve` as an operator runs it: decisions as JSON lines on stdout,
/// inherited proxy variables ignored, a clean stop on SIGTERM that removes its socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standalone_gateway_prints_one_decision_line_per_tunnel() {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

    let upstream_address: SocketAddr = "127.0.0.201:443".parse().expect("address");
    let upstream = TlsEcho::start(upstream_address, &[PROVIDER]).await.expect("TLS echo");
    let dns = FakeDns::start("127.0.0.1:0".parse().expect("address")).await.expect("fake DNS");
    dns.answer(PROVIDER, vec![Reply::Addresses(vec![upstream_address.ip()])]);
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("gateway.sock");
    let mut gateway = tokio::process::Command::new(crate::support::binary())
        .args(["gateway", "serve", "--listen", &format!("unix:{}", socket.display()), "--allow-host", PROVIDER])
        .args(["--resolver", &dns.address().to_string(), "--allow-cidr", "127.0.0.0/8"])
        .args(["--gateway-dial-allow", "127.0.0.0/8"])
        // A gateway that honoured these would send everything to a proxy that does not exist.
        .env("HTTPS_PROXY", "http://127.0.0.9:9")
        .env("ALL_PROXY", "http://127.0.0.9:9")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("gateway serve");
    let mut stderr = tokio::io::BufReader::new(gateway.stderr.take().expect("stderr")).lines();
    let ready = stderr.next_line().await.expect("stderr").unwrap_or_default();
    assert!(ready.contains("listening on unix:") && ready.contains("allowCidrs [127.0.0.0/8]"), "{ready}");

    let tunnel = |host: &'static str| {
        let socket = socket.clone();
        async move {
            let mut stream = tokio::net::UnixStream::connect(&socket).await.expect("connect");
            stream.write_all(format!("CONNECT {host}:443 HTTP/1.1\r\n\r\n").as_bytes()).await.expect("write");
            let mut head = [0u8; 12];
            stream.read_exact(&mut head).await.expect("status line");
            (String::from_utf8_lossy(&head).into_owned(), stream)
        }
    };
    let (status, stream) = tunnel(PROVIDER).await;
    assert_eq!(status, "HTTP/1.1 200");
    let mut rest = [0u8; 27];
    let mut stream = stream;
    stream.read_exact(&mut rest).await.expect("rest of the 200");
    let mut tls = roundtable_net_fixtures::tls_client(stream, PROVIDER, &upstream.identity.certificate, true)
        .await
        .expect("TLS through the standalone gateway");
    tls.write_all(b"standalone").await.expect("write");
    let mut echoed = [0u8; 10];
    tls.read_exact(&mut echoed).await.expect("echo");
    assert_eq!(&echoed, b"standalone");
    drop(tls);
    let (status, _) = tunnel("other.roundtable.test").await;
    assert_eq!(status, "HTTP/1.1 403");

    let pid = gateway.id().expect("pid").to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
    let output = tokio::time::timeout(Duration::from_secs(10), gateway.wait_with_output())
        .await
        .expect("stops")
        .expect("output");
    assert!(output.status.success(), "exit: {:?}", output.status);
    let lines: Vec<Value> =
        String::from_utf8_lossy(&output.stdout).lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    let decisions: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| l["event"] == "decision")
        .map(|l| (l["host"].as_str().unwrap_or_default(), l["reason"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(decisions, [(PROVIDER, "allowed"), ("other.roundtable.test", "host_not_allowlisted")]);
    let allowed = &lines[0];
    assert_eq!(allowed["dialed"], "127.0.0.201:443", "dialed the pinned address, not a proxy: {allowed}");
    assert_eq!(allowed["allowed_by_cidr"], serde_json::json!(["127.0.0.0/8"]));
    let close = lines.iter().find(|l| l["event"] == "close").expect("a close line");
    assert!(close["bytes_in"].as_u64().is_some_and(|n| n > 0), "{close}");
    assert!(!socket.exists(), "the socket is removed on a clean stop");
}

#[test]
fn an_exception_covering_a_whole_address_family_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join(".roundtable")).expect("spec dir");
    let out = roundtable(dir.path(), &["start", "--gateway-allow-cidr", "0.0.0.0/0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(crate::support::stderr(&out).contains("covers a whole address family"));
    assert!(!dir.path().join(".roundtable/state").exists(), "nothing half-done");
}
