//! The route table: which method on which path template is served by which handler, and whether
//! it needs the operator token. The router is built from it and nothing else, and a test checks
//! the OpenAPI document against it (`openapi::tests`). Reads and writes under `/v1` and `/mcp`
//! need the operator token; `/healthz`, `/readyz` and the OpenAPI document do not, and the git
//! webhook is authenticated by its body's signature instead. Mutations pass the idempotency layer
//! after auth.

pub(crate) mod agents;
pub(crate) mod delivery;
mod follow;
pub(crate) mod hooks;
mod ops;
pub(crate) mod read;
pub(crate) mod status;
pub(crate) mod write;

use std::fmt;

use axum::Router;
use axum::handler::Handler;
use axum::middleware::from_fn_with_state;
use axum::routing::{MethodFilter, MethodRouter, on};

use crate::state::ApiState;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Anyone who reaches the listener: probes and the document.
    Public,
    /// Only a request with the operator token; mutations are idempotent.
    Operator,
    /// A forge's webhook: no token, its handler checks the signature over the body, which the
    /// serve layer reads for it (bounded) although the head carries no token.
    Signed,
}

/// The HTTP methods the API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Verb {
    Get,
    Post,
    Delete,
}

impl Verb {
    /// Axum's filter for it; a GET route also answers HEAD, as axum's `get` does.
    fn filter(self) -> MethodFilter {
        match self {
            Verb::Get => MethodFilter::GET,
            Verb::Post => MethodFilter::POST,
            Verb::Delete => MethodFilter::DELETE,
        }
    }

    fn method(self) -> axum::http::Method {
        match self {
            Verb::Get => axum::http::Method::GET,
            Verb::Post => axum::http::Method::POST,
            Verb::Delete => axum::http::Method::DELETE,
        }
    }

    /// Its key in an OpenAPI path item.
    pub(crate) fn openapi_key(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Post => "post",
            Verb::Delete => "delete",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Delete => "DELETE",
        })
    }
}

/// One row of the table.
pub(crate) struct Route {
    pub(crate) access: Access,
    pub(crate) verb: Verb,
    /// Axum's path template, which is also OpenAPI's (`/v1/sessions/{id}`).
    pub(crate) path: &'static str,
    /// The handler, bound to a method only when the router is built, so the router serves it
    /// under `verb` and nothing else.
    handler: Box<dyn FnOnce(MethodFilter) -> MethodRouter<ApiState>>,
}

fn route<H, T>(access: Access, verb: Verb, path: &'static str, handler: H) -> Route
where
    H: Handler<T, ApiState>,
    T: 'static,
{
    Route { access, verb, path, handler: Box::new(move |filter| on(filter, handler)) }
}

/// Every route the API serves.
pub(crate) fn table() -> Vec<Route> {
    use Access::{Operator, Public, Signed};
    use Verb::{Delete, Get, Post};
    vec![
        route(Public, Get, "/healthz", ops::healthz),
        route(Public, Get, "/readyz", ops::readyz),
        route(Public, Get, "/v1/openapi.json", ops::openapi),
        route(Public, Get, crate::auth::PROTECTED_RESOURCE_PATH, ops::protected_resource),
        route(Operator, Get, "/v1/status", status::status),
        route(Operator, Get, "/v1/adapters", read::adapters),
        route(Operator, Get, "/v1/assignments/{name}", read::assignment),
        route(Operator, Get, "/v1/sessions", read::sessions),
        route(Operator, Post, "/v1/sessions", write::register_session),
        route(Operator, Get, "/v1/sessions/{id}", read::session),
        route(Operator, Get, "/v1/sessions/{id}/logs", read::session_logs),
        route(Operator, Get, "/v1/proposals", read::proposals),
        route(Operator, Get, "/v1/proposals/{id}", read::proposal),
        route(Operator, Post, "/v1/proposals/{id}/accept", delivery::accept),
        route(Operator, Post, "/v1/proposals/{id}/reject", delivery::reject),
        route(Operator, Get, "/v1/events", read::events),
        route(Operator, Post, "/v1/reconcile/{kind}/{name}", write::reconcile),
        route(Signed, Post, "/v1/hooks/git", hooks::git),
        route(Operator, Get, "/v1/workspaces/{ws}/agents", agents::list),
        route(Operator, Get, "/v1/workspaces/{ws}/agents/{id}", agents::detail),
        route(Operator, Post, "/v1/workspaces/{ws}/agents/{id}/enable", agents::enable),
        route(Operator, Post, "/v1/workspaces/{ws}/agents/{id}/disable", agents::disable),
        route(Operator, Post, "/v1/workspaces/{ws}/agents/{id}/diagnostics", agents::diagnose),
        route(Operator, Get, "/v1/workspaces/{ws}/agents/{id}/diagnostics", agents::diagnostics),
        route(Operator, Get, "/v1/workspaces/{ws}/agents/{id}/diagnostics/{diagnostic}", agents::diagnostic),
        route(Operator, Get, "/metrics", ops::metrics),
        route(Operator, Post, "/mcp", crate::mcp::post),
        route(Operator, Get, "/mcp", crate::mcp::get),
        route(Operator, Delete, "/mcp", crate::mcp::delete),
    ]
}

/// The routes whose body authenticates them, as `(method, path)`: the one list the serve layer's
/// gate reads an unauthenticated body for. Their paths take no parameters, so a request's path
/// is compared to them as it is.
pub(crate) fn signed_routes() -> Vec<(axum::http::Method, &'static str)> {
    table()
        .into_iter()
        .filter(|route| route.access == Access::Signed)
        .map(|route| (route.verb.method(), route.path))
        .collect()
}

/// The whole API, built from [`table`], with the review console (its cookies not `Secure`: for a
/// plain listener and tests).
pub fn router(state: ApiState) -> Router {
    router_over(state, false)
}

/// The whole API and the review console for a listener with TLS or without.
pub(crate) fn router_over(state: ApiState, tls: bool) -> Router {
    let (mut public, mut operator) = (Router::new(), Router::new());
    // Routes on one path merge into one method router (axum panics on a method given twice).
    for Route { access, verb, path, handler } in table() {
        let handler = handler(verb.filter());
        match access {
            Access::Public | Access::Signed => public = public.route(path, handler),
            Access::Operator => operator = operator.route(path, handler),
        }
    }
    let operator = operator
        .layer(from_fn_with_state(state.clone(), crate::idempotency::idempotent))
        .layer(from_fn_with_state(state.token.clone(), crate::auth::require_operator));
    public
        .merge(operator)
        .merge(crate::console::router(tls))
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .layer(axum::Extension(crate::auth::Scheme(if tls { "https" } else { "http" })))
        .with_state(state)
}
