//! Roundtable's HTTP API and admin MCP endpoint, served by `roundtable start`: thin handlers over
//! the service layer (the CLI's own, so the two never disagree), operator bearer auth, idempotent
//! mutations, keyset cursors, Prometheus metrics and the OpenAPI 3.1 document. Agents never reach
//! it: nothing of it is mounted into a container.

pub mod auth;
pub mod client;
pub mod console;
mod cursor;
mod error;
mod follow;
pub mod hook;
mod idempotency;
pub mod listen;
mod login;
mod mcp;
mod metrics;
pub mod openapi;
mod origin;
mod peers;
mod query;
mod respond;
mod router;
mod routes;
mod row;
pub mod serve;
mod state;
pub mod status_view;
mod table;

use std::future::Future;
use std::path::{Path, PathBuf};

pub use error::ApiError;
pub use listen::{Bound, Listen, ListenError, TlsFiles};
pub use login::ConsoleSessions;
pub use router::router;
pub use state::ApiState;

/// The private socket through which the CLI reaches the daemon of `state_dir` (whatever
/// `--api-listen` says): `api-<12 hex of the state directory's path digest>.sock` under this
/// user's socket root (`/run/roundtable` as root, else `$XDG_RUNTIME_DIR/roundtable`), mode
/// 0600, the operator token still required. Not in the state directory: a project's path can be
/// longer than a Unix socket path may be, and tools that walk the project need not meet it.
pub fn cli_socket(state_dir: &Path) -> PathBuf {
    let canonical = state_dir.canonicalize().unwrap_or_else(|_| state_dir.to_owned());
    let digest = roundtable_specs::digest::sha256_hex(canonical.as_os_str().as_encoded_bytes());
    roundtable_workspace::sockets::default_root_for_this_user().join(format!("api-{}.sock", &digest[..12]))
}

/// Serves the API on `bound` until `shutdown` resolves; requests in flight then finish.
pub async fn serve(bound: Bound, state: ApiState, shutdown: impl Future<Output = ()> + Send) {
    let gate = std::sync::Arc::new(ApiGate::of(&state));
    let tls = matches!(bound, Bound::Tls(_));
    serve::serve_router(bound, router::router_over(state, tls), gate, serve::Limits::default(), shutdown).await;
}

/// The API's gate: the operator token or a console session, and, read without either, the
/// signed routes' bodies only when the webhook has a secret (without one, its route answers
/// unread) and the console's login form (which carries the token).
struct ApiGate {
    token: auth::OperatorToken,
    console: std::sync::Arc<ConsoleSessions>,
    signed: Vec<(axum::http::Method, &'static str)>,
}

impl ApiGate {
    fn of(state: &ApiState) -> Self {
        let signed = if state.hook.is_some() { table::signed_routes() } else { Vec::new() };
        Self { token: state.token.clone(), console: state.console.clone(), signed }
    }
}

impl serve::Gate for ApiGate {
    fn admits(&self, headers: &axum::http::HeaderMap) -> bool {
        serve::Gate::admits(&self.token, headers) || self.console.admits(headers)
    }

    fn reads_unadmitted_body(&self, method: &axum::http::Method, path: &str) -> Option<serve::Unadmitted> {
        if method == axum::http::Method::POST && path == console::LOGIN_PATH {
            return Some(serve::Unadmitted::Login);
        }
        self.signed.iter().any(|(m, p)| m == method && *p == path).then_some(serve::Unadmitted::Signed)
    }
}
