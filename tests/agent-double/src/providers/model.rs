//! The one model request a personality makes when its CLI's base URL is set (the credential
//! broker's loopback address, or a test's server): plain HTTP/1.1 over a `TcpStream`, the body
//! read to the end, and the status and token counts reported as one output line. The key sent is
//! whatever the CLI's variable holds; it is never printed.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

/// The output line's `type`.
pub const EVENT: &str = "roundtable.model_request";

const TIMEOUT: Duration = Duration::from_secs(30);
/// A reply larger than this is cut: the double only reads usage from it.
const MAX_REPLY: u64 = 4 << 20;

/// One request as the CLI would send it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `http://HOST:PORT/PATH`.
    pub url: String,
    /// Besides `Host`, `Content-Type`, `Content-Length` and `Connection`.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

/// What came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// `base` (a base URL without a trailing slash) joined with `path`.
pub fn join(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

/// The line a personality prints for `request`'s outcome (the URL without its query).
pub fn record(request: &Request, outcome: &Result<Reply, String>) -> Value {
    let url = request.url.split('?').next().unwrap_or_default();
    match outcome {
        Ok(reply) => json!({
            "type": EVENT, "url": url, "status": reply.status,
            "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
        }),
        Err(error) => json!({ "type": EVENT, "url": url, "status": null, "error": error }),
    }
}

/// A key the CLI would have sent but whose variable is unset: the line says which variable.
pub fn missing(url: &str, variable: &str) -> Value {
    json!({ "type": EVENT, "url": url, "status": null, "error": format!("Missing environment variable: `{variable}`") })
}

/// The value of the key variable `name`, or the line saying it is unset.
pub fn key(env: &super::Env, url: &str, name: &str) -> Result<String, Value> {
    env.get(name).filter(|value| !value.is_empty()).map(str::to_owned).ok_or_else(|| missing(url, name))
}

/// A streamed Messages API request, as Claude Code and the AI SDK's Anthropic provider send it:
/// `ANTHROPIC_API_KEY` as `x-api-key`, else `ANTHROPIC_AUTH_TOKEN` as a bearer token.
pub fn anthropic(env: &super::Env, url: String, model: &str, prompt: &str) -> Result<Request, Value> {
    let auth = match key(env, &url, "ANTHROPIC_API_KEY") {
        Ok(key) => ("x-api-key".to_owned(), key),
        Err(missing) => match env.get("ANTHROPIC_AUTH_TOKEN").filter(|token| !token.is_empty()) {
            Some(token) => ("Authorization".to_owned(), format!("Bearer {token}")),
            None => return Err(missing),
        },
    };
    Ok(Request {
        url,
        headers: vec![
            auth,
            ("anthropic-version".into(), "2023-06-01".into()),
            ("Accept".into(), "text/event-stream".into()),
        ],
        body: json!({
            "model": model, "max_tokens": 1024, "stream": true,
            "messages": [{ "role": "user", "content": prompt }],
        }),
    })
}

/// Sends `request` and reads the reply to its end.
pub fn send(request: &Request) -> Result<Reply, String> {
    let rest = request.url.strip_prefix("http://").ok_or("only http:// base URLs are played")?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let mut stream = TcpStream::connect(authority).map_err(|error| format!("connect {authority}: {error}"))?;
    let _ = stream.set_read_timeout(Some(TIMEOUT));
    let _ = stream.set_write_timeout(Some(TIMEOUT));
    let body = request.body.to_string();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in &request.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .map_err(|error| format!("send: {error}"))?;
    let mut reply = Vec::new();
    stream.take(MAX_REPLY).read_to_end(&mut reply).map_err(|error| format!("read: {error}"))?;
    parse(&reply)
}

fn parse(reply: &[u8]) -> Result<Reply, String> {
    let split = reply.windows(4).position(|w| w == b"\r\n\r\n").ok_or("the reply has no complete head")?;
    let head = String::from_utf8_lossy(&reply[..split]);
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or("the reply has no status line")?;
    let chunked = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding") && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let raw = &reply[split + 4..];
    let body = if chunked { dechunk(raw) } else { raw.to_vec() };
    let (input_tokens, output_tokens) = usage(&String::from_utf8_lossy(&body));
    Ok(Reply { status, input_tokens, output_tokens })
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&raw[..end]);
        let Ok(size) = usize::from_str_radix(size.split(';').next().unwrap_or_default().trim(), 16) else { break };
        let start = end + 2;
        if size == 0 || raw.len() < start + size {
            break;
        }
        out.extend_from_slice(&raw[start..start + size]);
        raw = raw.get(start + size + 2..).unwrap_or_default();
    }
    out
}

/// Input and output tokens from a JSON or SSE body, in any provider's words: the largest count
/// seen for each (streams repeat running totals).
fn usage(body: &str) -> (u64, u64) {
    let mut counts = (0, 0);
    let documents = body.lines().map(|line| line.strip_prefix("data:").unwrap_or(line).trim());
    for document in documents.chain(std::iter::once(body.trim())) {
        if let Ok(value) = serde_json::from_str::<Value>(document) {
            walk(&value, &mut counts);
        }
    }
    counts
}

fn walk(value: &Value, counts: &mut (u64, u64)) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                let n = value.as_u64();
                match key.as_str() {
                    "input_tokens" | "prompt_tokens" | "promptTokenCount" => counts.0 = counts.0.max(n.unwrap_or(0)),
                    "output_tokens" | "completion_tokens" | "candidatesTokenCount" => {
                        counts.1 = counts.1.max(n.unwrap_or(0))
                    }
                    _ => walk(value, counts),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| walk(item, counts)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_read_from_each_providers_stream() {
        let openai = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":11,\"output_tokens\":7}}}\n\n";
        assert_eq!(usage(openai), (11, 7));
        let anthropic = "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n";
        assert_eq!(usage(anthropic), (5, 9));
        let gemini = "data: {\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":4}}\n";
        assert_eq!(usage(gemini), (3, 4));
        assert_eq!(usage("not json"), (0, 0));
    }

    #[test]
    fn a_chunked_reply_is_read_whole() {
        let reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"inp\r\n1b\r\nut_tokens\":2,\"output_tokens\r\n4\r\n\":3}\r\n0\r\n\r\n";
        assert_eq!(parse(reply), Ok(Reply { status: 200, input_tokens: 2, output_tokens: 3 }));
        assert_eq!(parse(b"HTTP/1.1 401 Unauthorized\r\n\r\n").map(|r| r.status), Ok(401));
        assert!(parse(b"HTTP/1.1 200").is_err());
    }
}
