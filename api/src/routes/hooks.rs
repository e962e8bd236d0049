//! `POST /v1/hooks/git`: a forge's push webhook. Authenticated by its signature alone (a forge
//! cannot send the operator token), it asks the daemon to fetch its git source now; it reads
//! nothing of the payload, so a forged or replayed call can at most cause one early fetch. A
//! delivery id already acted on is answered as a duplicate and not acted on again
//! (`hook.rs`).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse as _, Response};
use roundtable_specs::audit::{HookAccepted, HookRefused};
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::ApiError;
use crate::respond;
use crate::state::ApiState;

/// The hook's name in the audit chain's subjects (`Hook/git`).
const HOOK: &str = "git";

/// The audit chain's subject for this hook's entries.
fn subject() -> String {
    format!("Hook/{HOOK}")
}

/// What a signed call did.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookBody {
    pub hook: String,
    /// `requested`: the daemon fetches its git source now; `duplicate`: this delivery id was
    /// acted on already, so nothing is done.
    pub fetch: String,
    /// The forge's delivery id, when the call named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
}

pub async fn git(State(state): State<ApiState>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(hook) = state.hook.clone() else {
        return ApiError::not_found(
            "hook_not_configured",
            "this daemon has no webhook secret (`roundtable start --webhook-secret-file PATH`)",
        )
        .into_response();
    };
    if let Err(reason) = hook.secret.verify(&headers, &body) {
        tracing::warn!(%reason, "git webhook call refused");
        if let Some(unrecorded_since_last) = hook.refusals.note(std::time::Instant::now()) {
            state.record(&subject(), &HookRefused { hook: HOOK, reason, unrecorded_since_last }).await;
        }
        let mut response = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "bad_signature",
            format!("refused ({reason}): the call must carry X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body under the webhook secret>"),
        )
        .with_details(serde_json::json!({"reason": reason}))
        .into_response();
        // The forge's realm is its secret, not the operator's bearer token.
        response.headers_mut().remove(axum::http::header::WWW_AUTHENTICATE);
        return response;
    }
    let now = std::time::Instant::now();
    let delivery = crate::hook::delivery_id(&headers);
    let duplicate = delivery.is_some_and(|id| !hook.deliveries.first_sight(id, now));
    let requested = !duplicate && state.link.request_fetch();
    if let Some(unrecorded_since_last) = hook.accepted.note(now) {
        let record =
            HookAccepted { hook: HOOK, fetch_requested: requested, delivery, duplicate, unrecorded_since_last };
        state.record(&subject(), &record).await;
    }
    let body = |fetch: &str| HookBody { hook: HOOK.into(), fetch: fetch.into(), delivery: delivery.map(Into::into) };
    if duplicate {
        return respond::json(StatusCode::OK, &body("duplicate"));
    }
    if !requested {
        return ApiError::new(
            StatusCode::CONFLICT,
            "no_git_source",
            "this daemon reconciles no git source (`roundtable start --source URL`); nothing to fetch",
        )
        .into_response();
    }
    respond::json(StatusCode::ACCEPTED, &body("requested"))
}
