//! Operator authentication: one bearer token per state directory, in a file only its owner can
//! read (created by `init`, or by `start` when missing). Held in memory by SHA-256 digest and
//! compared in constant time. Agents never see it: it is not mounted, passed or logged.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use crate::error::ApiError;

/// The token file inside the state directory.
pub const TOKEN_FILE: &str = "api-token";
const PREFIX: &str = "rt_";

/// What can go wrong with the token file.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read or create the API token {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the API token {path} is readable by others (mode {mode:o}); run `chmod 600 {path}`")]
    Exposed { path: PathBuf, mode: u32 },
    #[error("the API token {path} does not hold a token (rt_ and 64 hex digits)")]
    Malformed { path: PathBuf },
    #[error("the operating system's random source failed")]
    Random,
}

/// The operator token, by digest.
#[derive(Clone)]
pub struct OperatorToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for OperatorToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OperatorToken(..)")
    }
}

pub fn token_path(state_dir: &Path) -> PathBuf {
    state_dir.join(TOKEN_FILE)
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Reads the token in `state_dir`, refusing one others can read.
pub fn read_token(state_dir: &Path) -> Result<String, TokenError> {
    let path = token_path(state_dir);
    let io = |source| TokenError::Io { path: path.clone(), source };
    let mode = std::fs::metadata(&path).map_err(io)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(TokenError::Exposed { path, mode });
    }
    let text = std::fs::read_to_string(&path).map_err(io)?;
    let token = text.trim();
    let well_formed =
        token.strip_prefix(PREFIX).is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
    if !well_formed {
        return Err(TokenError::Malformed { path });
    }
    Ok(token.to_owned())
}

/// 32 random bytes, hex (the operator token's secret, the console's session ids and CSRF
/// tokens); none when the operating system's random source fails.
pub(crate) fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Creates the token file (0600) unless it exists; whether it was created.
pub fn ensure_token(state_dir: &Path) -> Result<bool, TokenError> {
    let path = token_path(state_dir);
    let token = random_hex().ok_or(TokenError::Random)?;
    let created = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path);
    match created {
        Ok(mut file) => {
            file.write_all(format!("{PREFIX}{token}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|source| TokenError::Io { path, source })?;
            Ok(true)
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(TokenError::Io { path, source }),
    }
}

impl OperatorToken {
    /// The token of `state_dir`, created when missing.
    pub fn load_or_create(state_dir: &Path) -> Result<Self, TokenError> {
        ensure_token(state_dir)?;
        Ok(Self { digest: digest(&read_token(state_dir)?) })
    }

    /// A token given directly (tests, benchmarks).
    pub fn from_secret(token: &str) -> Self {
        Self { digest: digest(token) }
    }

    /// Whether `presented` is the token; constant time in its content.
    pub fn matches(&self, presented: &str) -> bool {
        bool::from(digest(presented).ct_eq(&self.digest))
    }
}

/// What a request's head says about who sent it. Judged on the head alone, before any of the
/// body is read: the serve layer reads a body only for `Operator` (see [`crate::serve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    Operator,
    WrongToken,
    NoToken,
}

impl OperatorToken {
    /// Judges the `Authorization` header. No route authenticates any other way (the CLI's Unix
    /// socket asks for the token too), so this is the one place a request earns trust.
    pub fn judge(&self, headers: &HeaderMap) -> Credential {
        match bearer(headers) {
            Some(token) if self.matches(token) => Credential::Operator,
            Some(_) => Credential::WrongToken,
            None => Credential::NoToken,
        }
    }
}

impl crate::serve::Gate for OperatorToken {
    fn admits(&self, headers: &HeaderMap) -> bool {
        self.judge(headers) == Credential::Operator
    }
}

/// The bearer token of a request, if it carries one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Whether the listener a request came in on speaks TLS: the scheme of the URLs the API gives
/// out about itself (a request's `Host` says the rest).
#[derive(Debug, Clone, Copy)]
pub struct Scheme(pub &'static str);

/// Where this API's OAuth protected resource metadata (RFC 9728) is served.
pub const PROTECTED_RESOURCE_PATH: &str = "/.well-known/oauth-protected-resource";

/// This API's base URL as the request reached it: its scheme and `Host`.
pub fn base_url(headers: &HeaderMap, scheme: Scheme) -> String {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
    format!("{}://{host}", scheme.0)
}

/// Refuses a request without the operator token before anything else sees it.
pub async fn require_operator(State(token): State<OperatorToken>, request: Request, next: Next) -> Response {
    let scheme = request.extensions().get::<Scheme>().copied().unwrap_or(Scheme("http"));
    let metadata = format!("{}{PROTECTED_RESOURCE_PATH}", base_url(request.headers(), scheme));
    match token.judge(request.headers()) {
        Credential::Operator => next.run(request).await,
        Credential::WrongToken => unauthorized("the bearer token is not this daemon's operator token", &metadata),
        Credential::NoToken => {
            unauthorized("no operator token: send Authorization: Bearer <the state directory's api-token>", &metadata)
        }
    }
}

/// `401` with the challenge MCP's authorization spec asks for: a bearer token, and where the
/// resource's metadata says how to get one.
fn unauthorized(message: &str, metadata: &str) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    let challenge = format!("Bearer realm=\"roundtable\", resource_metadata=\"{metadata}\"");
    if let Ok(value) = axum::http::HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_file_is_private_and_only_its_token_matches() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(ensure_token(dir.path()).expect("created"));
        assert!(!ensure_token(dir.path()).expect("kept"), "an existing token is never replaced");
        let mode = std::fs::metadata(token_path(dir.path())).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let token = read_token(dir.path()).expect("reads");
        let operator = OperatorToken::load_or_create(dir.path()).expect("loads");
        assert!(operator.matches(&token));
        assert!(!operator.matches(&format!("{token}x")));
        assert!(!operator.matches(""));

        std::fs::set_permissions(token_path(dir.path()), std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(matches!(read_token(dir.path()), Err(TokenError::Exposed { .. })));
    }
}
