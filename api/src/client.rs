//! How the CLI reaches its running daemon: HTTP/1.1 over the state directory's private socket,
//! with the operator token. Small on purpose: one request, `Connection: close`, the whole answer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const DEADLINE: Duration = Duration::from_secs(30);
const MAX_ANSWER: u64 = 64 << 20;

/// Why the daemon could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no daemon answers at {path}")]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Token(#[from] crate::auth::TokenError),
    #[error("talking to the daemon failed")]
    Io(#[from] std::io::Error),
    #[error("the daemon did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the daemon's answer is not HTTP")]
    Malformed,
}

/// An answer: status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Sends `method path` with `body` (JSON, when given) to the daemon of `state_dir`.
pub async fn request(state_dir: &Path, method: &str, path: &str, body: Option<&[u8]>) -> Result<Answer, ClientError> {
    let token = crate::auth::read_token(state_dir)?;
    let socket = crate::cli_socket(state_dir);
    let exchange = async {
        let mut stream = tokio::net::UnixStream::connect(&socket)
            .await
            .map_err(|source| ClientError::Connect { path: socket.clone(), source })?;
        let body = body.unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: roundtable\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        let mut answer = Vec::new();
        stream.take(MAX_ANSWER).read_to_end(&mut answer).await?;
        parse(&answer)
    };
    tokio::time::timeout(DEADLINE, exchange).await.map_err(|_| ClientError::Timeout(DEADLINE))?
}

/// Status and body of an HTTP/1.1 answer (`Content-Length` or chunked).
fn parse(answer: &[u8]) -> Result<Answer, ClientError> {
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n").ok_or(ClientError::Malformed)?;
    let head = std::str::from_utf8(&answer[..end]).map_err(|_| ClientError::Malformed)?;
    let status = head.split_whitespace().nth(1).and_then(|code| code.parse().ok()).ok_or(ClientError::Malformed)?;
    let chunked = head.lines().any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding") && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let rest = &answer[end + 4..];
    let body = if chunked { dechunk(rest)? } else { rest.to_vec() };
    Ok(Answer { status, body })
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, ClientError> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n").ok_or(ClientError::Malformed)?;
        let size_text = std::str::from_utf8(&rest[..line_end]).map_err(|_| ClientError::Malformed)?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or_default().trim(), 16)
            .map_err(|_| ClientError::Malformed)?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = rest.get(..size).ok_or(ClientError::Malformed)?;
        body.extend_from_slice(chunk);
        rest = rest.get(size + 2..).ok_or(ClientError::Malformed)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_with_a_length_or_in_chunks() {
        let plain = parse(b"HTTP/1.1 202 Accepted\r\ncontent-length: 2\r\n\r\n{}").expect("parses");
        assert_eq!((plain.status, plain.body.as_slice()), (202, b"{}".as_slice()));
        let chunked = parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
            .expect("parses");
        assert_eq!(chunked.body, b"abcde");
        assert!(parse(b"garbage").is_err());
    }
}
