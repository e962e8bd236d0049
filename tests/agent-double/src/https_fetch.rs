//! `https-fetch`: a client that ignores base URLs, as curl or an SDK would be: it reaches an
//! `https://` URL through `HTTPS_PROXY` with a `CONNECT`, trusting only the certificates in
//! `SSL_CERT_FILE` (none when it is unset, so an unknown server is refused), and prints the
//! response (status line, then body) on stdout. In a brokered session that is the broker's
//! interception, with the session CA.
//!
//! `https-fetch URL [--header 'Name: value']… [--data BODY]`

use std::io::{self, Read as _, Write as _};
use std::process::ExitCode;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};

struct Fetch {
    host: String,
    path: String,
    headers: Vec<String>,
    data: Option<String>,
}

fn parse(args: &[String]) -> Option<Fetch> {
    let url = args.first()?.strip_prefix("https://")?;
    let (host, path) = match url.find('/') {
        Some(at) => (url[..at].to_owned(), url[at..].to_owned()),
        None => (url.to_owned(), "/".to_owned()),
    };
    let mut fetch = Fetch { host, path, headers: Vec::new(), data: None };
    let mut rest = args[1..].iter();
    while let Some(flag) = rest.next() {
        match flag.as_str() {
            "--header" => fetch.headers.push(rest.next()?.clone()),
            "--data" => fetch.data = Some(rest.next()?.clone()),
            _ => return None,
        }
    }
    Some(fetch)
}

/// The roots in `SSL_CERT_FILE`; empty when it is unset or unreadable.
fn roots() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(bytes) = std::env::var_os("SSL_CERT_FILE").and_then(|path| std::fs::read(path).ok()) {
        for der in CertificateDer::pem_slice_iter(&bytes).flatten() {
            let _ = roots.add(der);
        }
    }
    roots
}

fn fetch(fetch: &Fetch) -> io::Result<Vec<u8>> {
    let proxy = std::env::var("HTTPS_PROXY").or_else(|_| std::env::var("https_proxy")).map_err(io::Error::other)?;
    let proxy = proxy.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let (stream, head) = crate::egress::connect(&proxy, &fetch.host)?;
    if !head.starts_with("HTTP/1.1 200") {
        return Ok(head.into_bytes());
    }
    let mut config = rustls::ClientConfig::builder().with_root_certificates(roots()).with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = ServerName::try_from(fetch.host.clone()).map_err(io::Error::other)?;
    let connection = rustls::ClientConnection::new(Arc::new(config), name).map_err(io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(connection, stream);
    let method = if fetch.data.is_some() { "POST" } else { "GET" };
    let mut request = format!("{method} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", fetch.path, fetch.host);
    for header in &fetch.headers {
        request.push_str(&format!("{header}\r\n"));
    }
    let body = fetch.data.clone().unwrap_or_default();
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    tls.write_all(request.as_bytes())?;
    tls.flush()?;
    let mut answer = Vec::new();
    match tls.read_to_end(&mut answer) {
        // A server that closes without close_notify still said what it said.
        Ok(_) => Ok(answer),
        Err(_) if !answer.is_empty() => Ok(answer),
        Err(error) => Err(error),
    }
}

pub fn run(args: &[String]) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(parsed) = parse(args) else {
        eprintln!("usage: https-fetch https://HOST/PATH [--header 'Name: value']... [--data BODY]");
        return ExitCode::from(64);
    };
    match fetch(&parsed) {
        Ok(answer) => {
            println!("{}", String::from_utf8_lossy(&answer));
            ExitCode::SUCCESS
        }
        Err(error) => {
            println!("https-fetch: {error}");
            ExitCode::from(1)
        }
    }
}
