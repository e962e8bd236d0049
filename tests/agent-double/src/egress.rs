//! `egress-probe`: what an agent inside the sandbox can reach. It checks its proxy environment,
//! makes a real TLS round trip to the allowed host through `HTTPS_PROXY`, and tries what must
//! fail: a host off the allowlist, a ClientHello naming another host (domain fronting) and a
//! direct connection. One JSON line per probe on stdout.
//!
//! `egress-probe --allowed HOST --ca FILE --denied HOST --direct IP:PORT [--flood N] [--hold-ms N]`
//!
//! `--flood N` holds N tunnels half-open, then asks for one more: a gateway limited to N tunnels
//! must answer 429 instead of letting one agent exhaust the daemon's descriptors.

use std::io::{self, BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};

struct Probe {
    allowed: String,
    ca: String,
    denied: String,
    direct: String,
    flood: usize,
    hold_ms: u64,
}

fn parse(args: &[String]) -> Option<Probe> {
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    Some(Probe {
        allowed: value("--allowed")?,
        ca: value("--ca")?,
        denied: value("--denied")?,
        direct: value("--direct")?,
        flood: value("--flood").and_then(|v| v.parse().ok()).unwrap_or(0),
        hold_ms: value("--hold-ms").and_then(|v| v.parse().ok()).unwrap_or(0),
    })
}

/// CONNECTs through the proxy; returns the stream and the response head.
pub(crate) fn connect(proxy: &str, host: &str) -> io::Result<(TcpStream, String)> {
    let mut stream = TcpStream::connect(proxy)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(format!("CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n").as_bytes())?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    Ok((stream, head))
}

/// A TLS round trip over `stream` presenting `server_name`; returns what the echo sent back.
fn tls_echo(stream: TcpStream, server_name: &str, ca: &CertificateDer<'static>, message: &[u8]) -> io::Result<Vec<u8>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).map_err(io::Error::other)?;
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let name = ServerName::try_from(server_name.to_owned()).map_err(io::Error::other)?;
    let connection = rustls::ClientConnection::new(Arc::new(config), name).map_err(io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(connection, stream);
    tls.write_all(message)?;
    tls.flush()?;
    let mut echoed = vec![0u8; message.len()];
    tls.read_exact(&mut echoed)?;
    Ok(echoed)
}

/// Threads of the `roundtable proxy` process in this container (it counts against the pids limit).
fn proxy_threads() -> Option<u64> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.get(1) == Some(&&b"proxy"[..]) {
            let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
            return status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|n| n.trim().parse().ok());
        }
    }
    None
}

fn line(value: String) {
    println!("{value}");
}

pub fn run(args: &[String]) -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(probe) = parse(args) else {
        eprintln!("egress-probe: --allowed, --ca, --denied and --direct are required");
        return std::process::ExitCode::from(64);
    };
    let env = |name: &str| std::env::var(name).ok();
    line(format!(
        "{{\"probe\":\"env\",\"HTTPS_PROXY\":{:?},\"https_proxy\":{:?},\"others\":{}}}",
        env("HTTPS_PROXY").unwrap_or_default(),
        env("https_proxy").unwrap_or_default(),
        ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"].iter().any(|n| env(n).is_some())
    ));
    line(format!("{{\"probe\":\"proxy-threads\",\"threads\":{}}}", proxy_threads().unwrap_or(0)));
    let proxy = env("HTTPS_PROXY").unwrap_or_default();
    let proxy = proxy.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let ca = match std::fs::read(&probe.ca) {
        Ok(bytes) => CertificateDer::from(bytes),
        Err(error) => {
            eprintln!("egress-probe: cannot read {}: {error}", probe.ca);
            return std::process::ExitCode::from(1);
        }
    };

    let message = b"hello through the gateway";
    let allowed = connect(&proxy, &probe.allowed)
        .and_then(|(stream, head)| Ok((head, tls_echo(stream, &probe.allowed, &ca, message)?)));
    match allowed {
        Ok((head, echoed)) => line(format!(
            "{{\"probe\":\"allowed\",\"status\":{:?},\"echo_matches\":{}}}",
            head.lines().next().unwrap_or_default(),
            echoed == message
        )),
        Err(error) => line(format!("{{\"probe\":\"allowed\",\"error\":{:?}}}", error.to_string())),
    }

    match connect(&proxy, &probe.denied) {
        Ok((_, head)) => line(format!("{{\"probe\":\"denied\",\"head\":{head:?}}}")),
        Err(error) => line(format!("{{\"probe\":\"denied\",\"error\":{:?}}}", error.to_string())),
    }

    let fronted = connect(&proxy, &probe.allowed)
        .and_then(|(stream, _)| tls_echo(stream, &format!("other.{}", probe.allowed), &ca, message));
    line(format!("{{\"probe\":\"fronting\",\"succeeded\":{}}}", fronted.is_ok()));

    let direct = probe
        .direct
        .parse()
        .map_err(io::Error::other)
        .and_then(|address| TcpStream::connect_timeout(&address, Duration::from_secs(3)));
    line(format!("{{\"probe\":\"direct\",\"connected\":{}}}", direct.is_ok()));

    if probe.flood > 0 {
        // The tunnels above are closed on this side; let the gateway finish closing them too.
        std::thread::sleep(Duration::from_millis(1000));
        let held: Vec<TcpStream> = (0..probe.flood)
            .filter_map(|_| TcpStream::connect(&proxy).ok())
            .filter_map(|mut stream| stream.write_all(b"CONNECT ").ok().map(|()| stream))
            .collect();
        // Let the proxy carry each of them to the gateway before asking for one more.
        std::thread::sleep(Duration::from_millis(500));
        match connect(&proxy, &probe.allowed) {
            Ok((_, head)) => line(format!("{{\"probe\":\"flood\",\"held\":{},\"head\":{head:?}}}", held.len())),
            Err(error) => line(format!("{{\"probe\":\"flood\",\"error\":{:?}}}", error.to_string())),
        }
        drop(held);
    }

    // Stay up a while so the operator (or a test) can look at the sidecar while it runs.
    std::thread::sleep(Duration::from_millis(probe.hold_ms));
    std::process::ExitCode::SUCCESS
}
