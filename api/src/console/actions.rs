//! What the console's forms do: log in and out, accept and reject a proposal (through the API's
//! own handlers, so the gates, the audit and the idempotency are the same), verify the audit
//! chain. Every form carries the session's CSRF token and is refused without it.

use askama::Template;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use roundtable_specs::delivery::{GateOverride, ProposalGate};

use super::pages::{AuditPage, DiffChoice, head_of, proposal_page};
use super::view::shown;
use super::{Csrf, Transport, forbidden, html};
use crate::login::{self, ConsoleSessions, LOGIN_COOKIE, SESSION_COOKIE};
use crate::routes::delivery::{AcceptBody, accepted, rejected};
use crate::state::ApiState;

/// A form's fields in order (repeated names kept: one override per gate).
type Fields = Vec<(String, String)>;

fn field<'f>(fields: &'f Fields, name: &str) -> Option<&'f str> {
    fields.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
}

const FORGED: &str = "the form's CSRF token is missing or wrong: reload the page and try again";

/// A logged-in session's form that returned its CSRF token: the session's token and the fields.
/// Anything else is refused before a handler sees it (`403`).
pub(crate) struct CheckedForm(String, Fields);

impl axum::extract::FromRequest<ApiState> for CheckedForm {
    type Rejection = Response;

    async fn from_request(request: axum::extract::Request, state: &ApiState) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = request.into_parts();
        let Csrf(csrf) =
            <Csrf as axum::extract::FromRequestParts<ApiState>>::from_request_parts(&mut parts, state).await?;
        let request = axum::extract::Request::from_parts(parts, body);
        let Form(fields) = Form::<Fields>::from_request(request, state).await.map_err(IntoResponse::into_response)?;
        if !field(&fields, "csrf").is_some_and(|sent| login::same(sent, &csrf)) {
            return Err(forbidden(FORGED));
        }
        Ok(Self(csrf, fields))
    }
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    workspace: String,
    csrf: String,
    error: Option<&'static str>,
}

/// The login page with a fresh double-submit token in its cookie and its form.
fn login_page(state: &ApiState, transport: Transport, status: StatusCode, error: Option<&'static str>) -> Response {
    let Some(csrf) = login::random_hex() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "the random source failed").into_response();
    };
    let page = LoginPage { workspace: shown(&state.workspace), csrf: csrf.clone(), error };
    let mut response = (status, html(&page)).into_response();
    set_cookie(&mut response, &login::set_cookie(LOGIN_COOKIE, &csrf, transport.tls, None));
    response
}

fn set_cookie(response: &mut Response, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

pub(crate) async fn login_form(
    State(state): State<ApiState>,
    axum::Extension(transport): axum::Extension<Transport>,
    headers: HeaderMap,
) -> Response {
    if state.console.admits(&headers) {
        return Redirect::to("/ui/").into_response();
    }
    login_page(&state, transport, StatusCode::OK, None)
}

pub(crate) async fn login(
    State(state): State<ApiState>,
    axum::Extension(transport): axum::Extension<Transport>,
    headers: HeaderMap,
    Form(fields): Form<Fields>,
) -> Response {
    let double_submitted = match (login::cookie(&headers, LOGIN_COOKIE), field(&fields, "csrf")) {
        (Some(cookie), Some(sent)) => login::same(cookie, sent),
        _ => false,
    };
    if !double_submitted {
        return login_page(&state, transport, StatusCode::FORBIDDEN, Some("The login form expired: try again."));
    }
    if !field(&fields, "token").is_some_and(|token| state.token.matches(token.trim())) {
        tracing::warn!("a console login with a wrong operator token");
        return login_page(
            &state,
            transport,
            StatusCode::UNAUTHORIZED,
            Some("That is not this daemon's operator token."),
        );
    }
    let Some((id, _csrf)) = state.console.open() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "cannot open a console session").into_response();
    };
    let mut response = Redirect::to("/ui/").into_response();
    *response.status_mut() = StatusCode::SEE_OTHER;
    set_cookie(
        &mut response,
        &login::set_cookie(SESSION_COOKIE, &id, transport.tls, Some(ConsoleSessions::lifetime())),
    );
    set_cookie(&mut response, &login::clear_cookie(LOGIN_COOKIE, transport.tls));
    response
}

pub(crate) async fn logout(
    State(state): State<ApiState>,
    axum::Extension(transport): axum::Extension<Transport>,
    headers: HeaderMap,
    _form: CheckedForm,
) -> Response {
    state.console.close(&headers);
    let mut response = Redirect::to("/ui/login").into_response();
    *response.status_mut() = StatusCode::SEE_OTHER;
    set_cookie(&mut response, &login::clear_cookie(SESSION_COOKIE, transport.tls));
    response
}

/// Back to the proposal's page, saying what was done.
fn done(id: &str, what: &str) -> Response {
    let mut response =
        Redirect::to(&format!("/ui/proposals/{}?done={what}", super::pages::percent(id))).into_response();
    *response.status_mut() = StatusCode::SEE_OTHER;
    response
}

/// The proposal's page again, with why the action did not happen.
async fn refused(state: &ApiState, csrf: String, id: &str, status: StatusCode, message: &str) -> Response {
    match proposal_page(state, csrf, id, DiffChoice::default()).await {
        Ok(mut page) => {
            page.error = Some(shown(message));
            (status, html(&page)).into_response()
        }
        Err(response) => response,
    }
}

pub(crate) async fn accept(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    CheckedForm(csrf, fields): CheckedForm,
) -> Response {
    let gates = fields.iter().filter(|(k, _)| k == "override_gate").map(|(_, v)| v);
    let reasons = fields.iter().filter(|(k, _)| k == "override_reason").map(|(_, v)| v);
    let mut overrides = Vec::new();
    for (gate, reason) in gates.zip(reasons) {
        let Ok(gate) = serde_json::from_value::<ProposalGate>(serde_json::Value::String(gate.clone())) else {
            return refused(&state, csrf, &id, StatusCode::BAD_REQUEST, &format!("no gate {gate:?}")).await;
        };
        overrides.push(GateOverride { gate, reason: reason.clone() });
    }
    let branch = field(&fields, "branch").map(str::trim).filter(|b| !b.is_empty()).map(str::to_owned);
    let push = field(&fields, "push").map(str::trim).filter(|p| !p.is_empty()).map(str::to_owned);
    let body = AcceptBody { branch, push, overrides };
    match accepted(&state, &id, body).await {
        Ok(_) => done(&id, "accepted"),
        Err(error) => refused(&state, csrf, &id, error.status, &error.message).await,
    }
}

pub(crate) async fn reject(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    CheckedForm(csrf, fields): CheckedForm,
) -> Response {
    let reason = field(&fields, "reason").unwrap_or_default();
    match rejected(&state, &id, reason, "console").await {
        Ok(_) => done(&id, "rejected"),
        Err(error) => refused(&state, csrf, &id, error.status, &error.message).await,
    }
}

pub(crate) async fn verify(State(state): State<ApiState>, CheckedForm(csrf, _fields): CheckedForm) -> Response {
    let head = head_of(&state).await;
    let (verdict, class) = match &state.audit_key {
        None => ("This daemon keeps no audit chain to verify.".to_owned(), "error"),
        Some(key) => match state.service.store().verify_chain(key, None, None).await {
            Ok(Ok(verified)) => {
                let through = verified.head.map(|h| format!(" through entry {}", h.seq)).unwrap_or_default();
                let unverified = verified
                    .unverified
                    .map(|u| {
                        format!("; entries {} to {} were sealed under a lost key and are not verified", u.first, u.last)
                    })
                    .unwrap_or_default();
                (format!("The chain verifies{through}{unverified}."), "notice")
            }
            Ok(Err(broken)) => (format!("The chain does not verify: {}", shown(&broken.to_string())), "error"),
            Err(error) => (shown(&roundtable_telemetry::error_chain(&error)), "error"),
        },
    };
    html(&AuditPage { csrf, head, verdict: Some(verdict), verdict_class: class })
}
