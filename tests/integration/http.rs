//! A plain HTTP/1.1 client for the API tests: one request per connection, the whole answer,
//! chunked bodies decoded. Blocking, from a test thread.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

/// An answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `error.code` of an error body.
    pub fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or_default().to_owned()
    }
}

/// A daemon's API: where it listens and its operator token.
#[derive(Debug, Clone)]
pub struct Api {
    pub address: String,
    pub token: String,
}

impl Api {
    /// Waits for the daemon of `state_dir` to write where its API listens.
    pub async fn of(state_dir: &Path) -> Api {
        let address_file = state_dir.join("api-address");
        crate::support::wait_until("the daemon to serve its API", || address_file.is_file()).await;
        let address = std::fs::read_to_string(&address_file).expect("api-address").trim().to_owned();
        let token = std::fs::read_to_string(state_dir.join("api-token")).expect("api-token").trim().to_owned();
        Api { address, token }
    }

    /// An authenticated request.
    pub fn call(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Reply {
        let bearer = format!("Bearer {}", self.token);
        let mut all = vec![("Authorization", bearer.as_str())];
        all.extend_from_slice(headers);
        request(&self.address, method, path, &all, body)
    }

    pub fn get(&self, path: &str) -> Reply {
        self.call("GET", path, &[], None)
    }

    /// One JSON-RPC message to the admin MCP endpoint, with the headers its transport requires.
    pub fn mcp(&self, message: &str) -> Reply {
        self.call("POST", "/mcp", &MCP_HEADERS, Some(message))
    }
}

/// What MCP's streamable HTTP transport requires of every POST: a JSON body, and a client that
/// accepts both a JSON answer and a stream.
pub const MCP_HEADERS: [(&str, &str); 2] =
    [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];

/// One request to `address` (`IP:PORT`).
pub fn request(address: &str, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Reply {
    let mut stream = TcpStream::connect(address).unwrap_or_else(|e| panic!("connect {address}: {e}"));
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let body = body.unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write");
    stream.write_all(body.as_bytes()).expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read");
    parse(&answer)
}

fn parse(answer: &[u8]) -> Reply {
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP head");
    let head = String::from_utf8_lossy(&answer[..end]).into_owned();
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).expect("status");
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':').map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))).collect();
    let mut rest = &answer[end + 4..];
    let chunked =
        headers.iter().any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        let mut body = Vec::new();
        loop {
            let line = rest.windows(2).position(|w| w == b"\r\n").expect("chunk size");
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[..line]).expect("utf-8").trim(), 16).expect("hex");
            rest = &rest[line + 2..];
            if size == 0 {
                break body;
            }
            body.extend_from_slice(&rest[..size]);
            rest = &rest[size + 2..];
        }
    } else {
        rest.to_vec()
    };
    Reply { status, headers, body }
}
