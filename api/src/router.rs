//! The axum router, built from the route table (`table.rs`) and nothing else: the JSON API's
//! public and signed rows as they are, its operator rows behind the operator token and the
//! idempotency layer (auth first, so a refused request stores nothing), the console's rows behind
//! the console's own layers. It also builds the OpenAPI document from the same table, once, and
//! hands it to the route that serves it: that route is a row of the table the document describes,
//! so the document cannot be reached from the row's handler without going round in a circle.

use axum::Router;
use axum::middleware::from_fn_with_state;

use crate::routes::ops;
use crate::row::{Access, Part};
use crate::state::ApiState;

/// The whole API, built from the table, with the review console (its cookies not `Secure`: for a
/// plain listener and tests).
pub fn router(state: ApiState) -> Router {
    router_over(state, false)
}

/// The whole API and the review console for a listener with TLS or without.
pub(crate) fn router_over(state: ApiState, tls: bool) -> Router {
    let (mut public, mut operator, mut console) = (Router::new(), Router::new(), Router::new());
    // Routes on one path merge into one method router (axum panics on a method given twice).
    for route in crate::table::rows() {
        let (path, part, handler) = route.into_served();
        match part {
            Part::Api { access: Access::Public | Access::Signed, .. } => public = public.route(path, handler),
            Part::Api { access: Access::Operator, .. } => operator = operator.route(path, handler),
            Part::Console => console = console.route(path, handler),
        }
    }
    let operator = operator
        .layer(from_fn_with_state(state.clone(), crate::idempotency::idempotent))
        .layer(from_fn_with_state(state.token.clone(), crate::auth::require_operator));
    let document = ops::Document(crate::openapi::document_text().into());
    public
        .merge(operator)
        .merge(crate::console::guard(console, tls))
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .layer(axum::Extension(crate::auth::Scheme(if tls { "https" } else { "http" })))
        .layer(axum::Extension(document))
        .with_state(state)
}
