//! The review console (docs/console.md): server-rendered pages at `/ui/` on the API's listeners,
//! behind the operator token through a login that opens a cookie session (`login.rs`, beside the
//! shared state that holds the sessions). Every page reads what the CLI reads, through the same
//! service functions; accept and reject are the API's own handlers. The pages work without
//! JavaScript; the one script, the live log tail, is a file served from the binary, so the
//! Content-Security-Policy allows no inline script or style. Its routes are rows of the route
//! table (`table.rs`); this module holds the layers they are served behind.

pub(crate) mod actions;
mod diff;
mod links;
pub(crate) mod pages;
mod review;
pub(crate) mod tail;
mod view;

use askama::Template;
use axum::Router;
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{Next, from_fn};
use axum::response::{IntoResponse, Redirect, Response};

pub use crate::login::ConsoleSessions;
pub use pages::{PAGE_ROWS, status_html};

use crate::state::ApiState;

/// Every console response's headers: no script or style but the console's own files, no framing,
/// no sniffing, no referrer, no caching of operator data.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The login form's path: its body (the token) is read before anyone is authenticated.
pub const LOGIN_PATH: &str = "/ui/login";

/// Whether the listener serving the console has TLS (its cookies are then `Secure`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Transport {
    pub(crate) tls: bool,
}

/// The console's routes (its rows of the route table, `table.rs`) behind its own layers: a POST
/// from another site refused, the security headers on every answer, and whether the listener has
/// TLS (its cookies are then `Secure`).
pub(crate) fn guard(routes: Router<ApiState>, tls: bool) -> Router<ApiState> {
    routes.layer(from_fn(refuse_cross_site)).layer(from_fn(secure_headers)).layer(axum::Extension(Transport { tls }))
}

/// `/` and `/ui` lead to the console's first page.
pub(crate) async fn to_status() -> Redirect {
    Redirect::to("/ui/")
}

/// Adds the security headers to every console response.
async fn secure_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

/// A POST whose `Origin` names another site is refused before its form is read: the CSRF token
/// is the defence, this is a second one that costs nothing. An opaque `null` origin passes to
/// the CSRF check: Chrome sends it for the console's own forms (their referrer policy is
/// `no-referrer`).
async fn refuse_cross_site(request: Request, next: Next) -> Response {
    let foreign = crate::origin::origin_of(request.headers()) == crate::origin::Origin::OtherSite;
    if request.method() == Method::POST && foreign {
        return forbidden("a form from another site is refused");
    }
    next.run(request).await
}

pub(crate) async fn css() -> Response {
    asset("text/css; charset=utf-8", include_str!("../../assets/console.css"))
}

pub(crate) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", include_str!("../../assets/tail.js"))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=300"));
    response
}

/// The CSRF token of the request's console session: a handler that takes it is reached only when
/// logged in; anyone else is sent to the login page (a GET) or refused (anything else).
pub(crate) struct Csrf(pub(crate) String);

impl FromRequestParts<ApiState> for Csrf {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Self::Rejection> {
        match state.console.csrf_of(&parts.headers) {
            Some(csrf) => Ok(Csrf(csrf)),
            None if parts.method == Method::GET || parts.method == Method::HEAD => {
                Err(Redirect::to("/ui/login").into_response())
            }
            None => Err(forbidden("not logged in: log in at /ui/login")),
        }
    }
}

pub(crate) fn forbidden(message: &'static str) -> Response {
    (StatusCode::FORBIDDEN, message).into_response()
}

/// A page's response (the security headers are added by the console's layer).
pub(crate) fn html(page: &impl Template) -> Response {
    match page.render() {
        Ok(body) => axum::response::Html(body).into_response(),
        Err(error) => {
            tracing::error!(%error, "a console template failed to render");
            (StatusCode::INTERNAL_SERVER_ERROR, "the page could not be rendered").into_response()
        }
    }
}

/// A page that only says something: what was not found, or what failed.
#[derive(Template)]
#[template(
    source = "{% extends \"base.html\" %}{% block title %}{{ title }}{% endblock %}{% block content %}<h1>{{ title }}</h1><pre>{{ message }}</pre>{% endblock %}",
    ext = "html"
)]
struct MessagePage {
    csrf: String,
    title: &'static str,
    message: String,
}

fn message(status: StatusCode, csrf: &str, title: &'static str, message: String) -> Response {
    (status, html(&MessagePage { csrf: csrf.to_owned(), title, message })).into_response()
}

pub(crate) fn not_found(csrf: &str, what: &'static str, id: &str) -> Response {
    message(StatusCode::NOT_FOUND, csrf, "Not found", format!("No {what} {}.", view::shown(id)))
}

/// A failure's page: the error chain, escaped.
pub(crate) fn failed(csrf: &str, error: &(dyn std::error::Error + 'static)) -> Response {
    let said = view::shown(&roundtable_telemetry::error_chain(error));
    message(StatusCode::INTERNAL_SERVER_ERROR, csrf, "Something failed", said)
}

/// A console path that names no page: a console 404, with the console's headers.
pub(crate) async fn unknown(Csrf(csrf): Csrf, uri: axum::http::Uri) -> Response {
    not_found(&csrf, "page", uri.path())
}

pub(crate) fn is_not_found(error: &roundtable_service::ServiceError) -> bool {
    matches!(
        error,
        roundtable_service::ServiceError::NotFound { .. } | roundtable_service::ServiceError::UnknownObject { .. }
    )
}
