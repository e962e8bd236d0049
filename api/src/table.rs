//! The route table: every route the listener serves, the JSON API, the admin MCP endpoint and the
//! review console, one row each (the row's shape is `row.rs`). The router (`router.rs`) is built
//! from it and nothing else, and so is the OpenAPI document (`openapi.rs`): each row of the JSON
//! API carries its operation (summary, parameters, request body, answers), and who may call it
//! decides both the router's layers and the operation's `security`. Reads and writes under `/v1`,
//! `/mcp` and `/metrics` need the operator token; `/healthz`, `/readyz`, the OpenAPI document and
//! the OAuth metadata do not, and the git webhook is authenticated by its body's signature
//! instead. The console's rows are routed behind its own login and are not in the document
//! (`row::Part`).

use roundtable_specs::List;
use roundtable_specs::delivery::Decision;
use roundtable_specs::diagnostics::DiagnosticReport;
use roundtable_specs::output::{
    AdapterItem, AgentItem, DescribeItem, EventItem, ObjectStatus, ProposalItem, SessionItem, SessionLogsBody,
};
use serde_json::json;

use crate::console::{self, actions, pages, tail};
use crate::error::ErrorBody;
use crate::routes::agents::{self, AgentChangeBody};
use crate::routes::delivery::{self, AcceptBody, RejectBody};
use crate::routes::hooks::{self, HookBody};
use crate::routes::write::{self, ReconcileBody, RegisterSessionBody};
use crate::routes::{ops, read, status};
use crate::row::{Access, Answer, Operation, Param, Part, Route, Verb, of, string};

/// Every route the listener serves.
pub(crate) fn rows() -> Vec<Route> {
    use Access::{Operator, Public, Signed};
    use Verb::{Delete, Get, Post};
    vec![
        // === Probes and what describes the API ===
        Route::api(
            Public,
            Get,
            "/healthz",
            ops::healthz,
            Operation::new("healthz", "Liveness: the process answers.")
                .answer(Answer::text("200", "Alive.", "text/plain")),
        ),
        Route::api(
            Public,
            Get,
            "/readyz",
            ops::readyz,
            Operation::new("readyz", "Readiness: the first scan of the spec directory is merged.")
                .answer(Answer::text("200", "Ready.", "text/plain")),
        ),
        Route::api(
            Public,
            Get,
            "/v1/openapi.json",
            ops::openapi,
            Operation::new("openapi", "This document.").answer(
                Answer::empty("200", "The OpenAPI 3.1 document.").or("application/json", |_| json!({"type": "object"})),
            ),
        ),
        Route::api(
            Public,
            Get,
            crate::auth::PROTECTED_RESOURCE_PATH,
            ops::protected_resource,
            Operation::new(
                "protectedResource",
                "OAuth protected resource metadata (RFC 9728), where a 401's WWW-Authenticate points MCP clients: the resource, and that its token goes in the Authorization header. No authorization server: the operator token is handed over out of band.",
            )
            .answer(Answer::empty("200", "The metadata.").or("application/json", |_| {
                json!({
                    "type": "object",
                    "required": ["resource", "bearer_methods_supported"],
                    "properties": {
                        "resource": {"type": "string"},
                        "bearer_methods_supported": {"type": "array", "items": {"type": "string"}},
                        "resource_name": {"type": "string"},
                        "resource_documentation": {"type": "string"}
                    }
                })
            })),
        ),
        Route::api(
            Operator,
            Get,
            "/metrics",
            ops::metrics,
            Operation::new("metrics", "Prometheus metrics (text format 0.0.4).")
                .answer(Answer::text("200", "Metrics.", "text/plain")),
        ),
        // === Reads ===
        Route::api(
            Operator,
            Get,
            "/v1/status",
            status::status,
            Operation::new("status", "Drift of every object.")
                .params([
                    Param::query(
                        "limit",
                        "Rows per page, 1 to 1000. Without `limit` and `continue`, every row at once.",
                        |_| json!({"type": "integer", "minimum": 1, "maximum": 1000}),
                    ),
                    continue_param(),
                    Param::query("pretty", "Indented JSON, for a person reading it.", |_| json!({"type": "boolean"})),
                    Param::text_header("If-None-Match", "An `ETag` from before: `304` while the status is the same."),
                ])
                .answer(
                    Answer::json::<List<ObjectStatus>>(
                        "200",
                        "Every object's sync and health, as `roundtable status --format json` lists them, in compact JSON (`?pretty=true` indents it), served from the daemon's materialised status. `metadata.resourceVersion` is the version a watch resumes from; the `ETag` header carries it too. With `?watch=true` (and `resourceVersion`, or `Last-Event-ID` when reconnecting) the answer is `text/event-stream` instead: without a version every row as an `ADDED` event then a `BOOKMARK`, then each change as `ADDED`, `MODIFIED` or `DELETED` (its `id` the change's version, its `data` the row); a version older than what is kept is answered `410 expired` (list again).",
                    )
                    .header("ETag", "The list's version, quoted.")
                    .or("text/event-stream", string),
                )
                .answer(Answer::empty("304", "Not modified since the `If-None-Match` version."))
                .answer(refusal("410", "`expired`: the version asked for is no longer kept; list again.")),
        ),
        Route::api(
            Operator,
            Get,
            "/v1/adapters",
            read::adapters,
            Operation::new("adapters", "Adapters.")
                .answer(Answer::json::<List<AdapterItem>>("200", "Built-in and declared adapters, merged.")),
        ),
        Route::api(
            Operator,
            Get,
            "/v1/assignments/{name}",
            read::assignment,
            Operation::new("assignment", "One Assignment, as `roundtable describe`.")
                .params([Param::path("name", "The Assignment's name.")])
                .answer(Answer::json::<DescribeItem>(
                    "200",
                    "Status, stored spec, observed status and recent events.",
                )),
        ),
        Route::api(
            Operator,
            Get,
            "/v1/sessions",
            read::sessions,
            Operation::new("sessions", "Sessions.")
                .params(page())
                .answer(Answer::json::<List<SessionItem>>("200", "Sessions, newest first.")),
        ),
        Route::api(
            Operator,
            Post,
            "/v1/sessions",
            write::register_session,
            Operation::new(
                "registerSession",
                "Records a session run outside Roundtable (as `roundtable sessions register`).",
            )
            .params([idempotency_key()])
            .body(of::<RegisterSessionBody>)
            .answer(Answer::json::<SessionItem>("201", "The recorded session.")),
        ),
        Route::api(
            Operator,
            Get,
            "/v1/sessions/{id}",
            read::session,
            Operation::new("session", "One session by ID or unique prefix.")
                .params([session_id()])
                .answer(Answer::json::<SessionItem>("200", "The session.")),
        ),
        Route::api(
            Operator,
            Get,
            "/v1/sessions/{id}/logs",
            read::session_logs,
            Operation::new("sessionLogs", "A session's captured output.")
                .params([
                    session_id(),
                    Param::query("stream", "`stdout` or `stderr`: that stream's bytes as captured.", |_| {
                        json!({"type": "string", "enum": ["stdout", "stderr"]})
                    }),
                ])
                .answer(
                    Answer::json::<SessionLogsBody>(
                        "200",
                        "Captured output; `?stream=` returns one stream's raw bytes instead. With `?follow=true` the answer is `text/event-stream`: each line of a running session's output as a `line` event (`LogLine`, its `id` the line number: `Last-Event-ID` resumes after it), then one `end` event (`{\"reason\", \"phase\"}`) once the session has finished.",
                    )
                    .or("application/octet-stream", |_| json!({"type": "string", "format": "binary"}))
                    .or("text/event-stream", string),
                ),
        ),
        Route::api(
            Operator,
            Get,
            "/v1/proposals",
            read::proposals,
            Operation::new("proposals", "Pending proposals.")
                .params(page())
                .answer(Answer::json::<List<ProposalItem>>("200", "Proposals, newest first.")),
        ),
        Route::api(
            Operator,
            Get,
            "/v1/proposals/{id}",
            read::proposal,
            Operation::new(
                "proposal",
                "One proposal; its patch with `Accept: text/x-diff` (refused when it does not match its recorded digest).",
            )
            .params([proposal_id()])
            .answer(Answer::json::<ProposalItem>("200", "The proposal, or its patch.").or("text/x-diff", string)),
        ),
        // === Decisions on proposals ===
        Route::api(
            Operator,
            Post,
            "/v1/proposals/{id}/accept",
            delivery::accept,
            Operation::new(
                "acceptProposal",
                "Accepts a pending proposal (as `roundtable proposals accept`): the review gates, one commit on its base in a scratch index on a new branch, signed provenance as a git note, the optional push.",
            )
            .params([proposal_id(), idempotency_key()])
            .body(of::<AcceptBody>)
            .answer(decided())
            .answer(refusal("409", "`not_pending` (rejected or superseded), `branch_exists`."))
            .answer(refusal("422", "`gates_refused` (details.unmet names each finding), `base_missing`.")),
        ),
        Route::api(
            Operator,
            Post,
            "/v1/proposals/{id}/reject",
            delivery::reject,
            Operation::new(
                "rejectProposal",
                "Rejects a pending proposal with a reason (as `roundtable proposals reject`).",
            )
            .params([proposal_id(), idempotency_key()])
            .body(of::<RejectBody>)
            .answer(decided())
            .answer(refusal("409", "`not_pending`: it was accepted or superseded.")),
        ),
        // === Events and reconciles ===
        Route::api(
            Operator,
            Get,
            "/v1/events",
            read::events,
            Operation::new("events", "Events.").params(page()).answer(
                Answer::json::<List<EventItem>>(
                    "200",
                    "Events of every object, newest first. With `?watch=true` (and `resourceVersion`, an event's ID, or `Last-Event-ID` when reconnecting) the answer is `text/event-stream` instead: a `BOOKMARK` with the version it starts after (the newest event, without one), then each new event as `ADDED`, its `id` the event's.",
                )
                .or("text/event-stream", string),
            ),
        ),
        Route::api(
            Operator,
            Post,
            "/v1/reconcile/{kind}/{name}",
            write::reconcile,
            Operation::new(
                "reconcile",
                "Reconciles one object now, clearing a stall; `rerun=true` makes an Assignment run afresh.",
            )
            .params([
                Param::path("kind", "The object's kind.")
                    .with_schema(|_| json!({"type": "string", "enum": ["Adapter", "Assignment", "AdmissionPolicy"]})),
                Param::path("name", "The object's name."),
                Param::query(
                    "rerun",
                    "Assignments: run the agent afresh in a new execution generation instead of reusing the result of an earlier one with the same run fields at the same commit.",
                    |_| json!({"type": "boolean", "default": false}),
                ),
                idempotency_key(),
            ])
            .answer(Answer::json::<ReconcileBody>("202", "Queued: the daemon's controller has it now.")),
        ),
        Route::api(
            Signed,
            Post,
            "/v1/hooks/git",
            hooks::git,
            Operation::new(
                "gitHook",
                "A forge's push webhook: asks the daemon to fetch its git source now. Authenticated by the signature over the exact body (GitHub, Gitea, Forgejo) or GitLab's token, never the operator token; the payload is not otherwise read.",
            )
            .params([
                Param::text_header(
                    "X-Hub-Signature-256",
                    "`sha256=` and the hex HMAC-SHA256 of the body under the webhook secret.",
                ),
                Param::text_header("X-Gitlab-Token", "GitLab's form: the webhook secret itself."),
                Param::text_header(
                    "X-GitHub-Delivery",
                    "The forge's delivery id (GitHub, Gitea, Forgejo): one seen within 24 h is answered as a duplicate and not acted on again.",
                ),
                Param::text_header("X-Gitlab-Event-UUID", "GitLab's delivery id, as X-GitHub-Delivery."),
            ])
            .body(|_| json!({"description": "The forge's payload, at most 1 MiB; only its signature is checked."}))
            .answer(Answer::json::<HookBody>(
                "200",
                "Signed, and its delivery id was acted on already: nothing is done (`fetch`: `duplicate`).",
            ))
            .answer(Answer::json::<HookBody>("202", "Signed: the daemon fetches its git source now."))
            .answer(refusal(
                "401",
                "`bad_signature`: no signature, a malformed one, or one of other bytes or another secret; nothing is fetched.",
            ))
            .answer(refusal("404", "`hook_not_configured`: the daemon was started without `--webhook-secret-file`."))
            .answer(refusal("409", "`no_git_source`: the signature is good but the daemon reconciles no git source."))
            .answer(refusal("413", "`body_too_large`: over 1 MiB.")),
        ),
        // === Agents of the workspace ===
        Route::api(
            Operator,
            Get,
            "/v1/workspaces/{ws}/agents",
            agents::list,
            Operation::new("agents", "Agents (adapters) with capabilities, version, sessions and heartbeat.")
                .params([workspace()])
                .params(page())
                .answer(Answer::json::<List<AgentItem>>("200", "Agents in name order.")),
        ),
        Route::api(
            Operator,
            Get,
            "/v1/workspaces/{ws}/agents/{id}",
            agents::detail,
            Operation::new("agent", "One agent.")
                .params(agent())
                .answer(Answer::json::<AgentItem>("200", "The agent.")),
        ),
        Route::api(
            Operator,
            Post,
            "/v1/workspaces/{ws}/agents/{id}/enable",
            agents::enable,
            Operation::new("enableAgent", "Enables an agent (a runtime override of spec.enabled).")
                .params(agent())
                .params([idempotency_key()])
                .answer(Answer::json::<AgentChangeBody>("200", "The agent after the change.")),
        ),
        Route::api(
            Operator,
            Post,
            "/v1/workspaces/{ws}/agents/{id}/disable",
            agents::disable,
            Operation::new("disableAgent", "Disables an agent, draining its active sessions first.")
                .params(agent())
                .params([
                    idempotency_key(),
                    Param::query("force", "Cancel the agent's active sessions instead of waiting for them.", |_| {
                        json!({"type": "string", "enum": ["true", "false"]})
                    }),
                ])
                .answer(Answer::json::<AgentChangeBody>(
                    "200",
                    "The agent after the change: `draining` while active sessions finish, else `disabled`.",
                )),
        ),
        Route::api(
            Operator,
            Post,
            "/v1/workspaces/{ws}/agents/{id}/diagnostics",
            agents::diagnose,
            Operation::new(
                "diagnoseAgent",
                "Probes inside the agent's image under the full hardening, with no network and no credentials.",
            )
            .params(agent())
            .params([idempotency_key()])
            .answer(Answer::json::<DiagnosticReport>("201", "The stored report (its checks say what passed).")),
        ),
        Route::api(
            Operator,
            Get,
            "/v1/workspaces/{ws}/agents/{id}/diagnostics",
            agents::diagnostics,
            Operation::new("agentDiagnostics", "An agent's diagnostic reports.")
                .params(agent())
                .answer(Answer::json::<List<DiagnosticReport>>("200", "The agent's stored reports, newest first.")),
        ),
        Route::api(
            Operator,
            Get,
            "/v1/workspaces/{ws}/agents/{id}/diagnostics/{diagnostic}",
            agents::diagnostic,
            Operation::new("agentDiagnostic", "One diagnostic report.")
                .params(agent())
                .params([Param::path("diagnostic", "A diagnostic report's ID.")])
                .answer(Answer::json::<DiagnosticReport>("200", "The report.")),
        ),
        // === The admin MCP endpoint ===
        Route::api(
            Operator,
            Post,
            "/mcp",
            crate::mcp::post,
            Operation::new(
                "adminMcp",
                "The admin MCP endpoint (streamable HTTP, JSON responses): tools status, adapters, assignments, sessions, proposals, reconcile, accept_proposal, reject_proposal.",
            )
            .body(|_| {
                json!({"type": "object", "description": "One JSON-RPC 2.0 message. The transport requires `Accept: application/json, text/event-stream`."})
            })
            .answer(Answer::empty("200", "The JSON-RPC response.").or("application/json", |_| json!({"type": "object"})))
            .answer(Answer::empty("202", "A notification or a response: accepted."))
            .answer(refusal("400", "Not a JSON-RPC message, or an unsupported `MCP-Protocol-Version`."))
            .answer(refusal("403", "`origin_not_allowed`: a request from a page of another site."))
            .answer(refusal(
                "406",
                "`not_acceptable`: the client does not accept both `application/json` and `text/event-stream`.",
            ))
            .answer(refusal("415", "`unsupported_media_type`: the body is not `application/json`.")),
        ),
        // MCP's streamable HTTP transport has clients try these two; they are served, to refuse.
        Route::api(
            Operator,
            Get,
            "/mcp",
            crate::mcp::get,
            Operation::new(
                "adminMcpStream",
                "Refused: this MCP endpoint sends no server-initiated stream (POST requests to it).",
            )
            .answer(refusal("405", "Always: `method_not_allowed`.")),
        ),
        Route::api(
            Operator,
            Delete,
            "/mcp",
            crate::mcp::delete,
            Operation::new("adminMcpEndSession", "Refused: this MCP endpoint keeps no sessions to end.")
                .answer(refusal("405", "Always: `method_not_allowed`.")),
        ),
        // === The review console (its own login; not in the OpenAPI document) ===
        Route::console(Get, "/ui/", pages::status),
        Route::console(Get, "/ui/assignments/{name}", pages::assignment),
        Route::console(Get, "/ui/sessions/{id}", pages::session),
        Route::console(Get, "/ui/sessions/{id}/tail", tail::tail),
        Route::console(Get, "/ui/proposals", pages::proposals),
        Route::console(Get, "/ui/proposals/{id}", pages::proposal),
        Route::console(Post, "/ui/proposals/{id}/accept", actions::accept),
        Route::console(Post, "/ui/proposals/{id}/reject", actions::reject),
        Route::console(Get, "/ui/controllers", pages::controllers),
        Route::console(Get, "/ui/audit", pages::audit),
        Route::console(Post, "/ui/audit/verify", actions::verify),
        Route::console(Get, console::LOGIN_PATH, actions::login_form),
        Route::console(Post, console::LOGIN_PATH, actions::login),
        Route::console(Post, "/ui/logout", actions::logout),
        Route::console(Get, "/ui/assets/console.css", console::css),
        Route::console(Get, "/ui/assets/tail.js", console::script),
        Route::console(Get, "/ui/{*rest}", console::unknown),
        Route::console(Get, "/ui", console::to_status),
        Route::console(Get, "/", console::to_status),
    ]
}

/// The routes whose body authenticates them, as `(method, path)`: the one list the serve layer's
/// gate reads an unauthenticated body for. Their paths take no parameters, so a request's path
/// is compared to them as it is.
pub(crate) fn signed_routes() -> Vec<(axum::http::Method, &'static str)> {
    rows()
        .into_iter()
        .filter(|route| matches!(route.part, Part::Api { access: Access::Signed, .. }))
        .map(|route| (route.verb.method(), route.path))
        .collect()
}

// === Parameters and answers several rows share ===

/// An error body every operation may answer with, here with what this status means for it.
fn refusal(status: &'static str, description: &'static str) -> Answer {
    Answer::json::<ErrorBody>(status, description)
}

/// An accept's or a reject's answer.
fn decided() -> Answer {
    Answer::json::<Decision>(
        "200",
        "The decision recorded (also when the proposal already was in that state: idempotent).",
    )
}

fn continue_param() -> Param {
    Param::query("continue", "The `metadata.continue` of the previous page, verbatim.", string)
}

/// A keyset-paged list's `limit` and `continue`.
fn page() -> [Param; 2] {
    [
        Param::query(
            "limit",
            "Items per page, 1 to 200 (default 50).",
            |_| json!({"type": "integer", "minimum": 1, "maximum": 200}),
        ),
        continue_param(),
    ]
}

/// What makes a mutation's retry safe (`idempotency.rs`).
fn idempotency_key() -> Param {
    Param::header(
        "Idempotency-Key",
        "Makes a retry safe: the same key and request replay the stored response for 24 hours; the same key with another request is 409.",
        |_| json!({"type": "string", "minLength": 1, "maxLength": 255}),
    )
}

fn session_id() -> Param {
    Param::path("id", "A session ID or a unique prefix of one.")
}

fn proposal_id() -> Param {
    Param::path("id", "A proposal ID or a unique prefix of one.")
}

fn workspace() -> Param {
    Param::path("ws", "The workspace this daemon serves (its project's name).")
}

/// An agent of the workspace: `{ws}` and `{id}`.
fn agent() -> [Param; 2] {
    [workspace(), Param::path("id", "The agent: an adapter's name.")]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::rows;
    use crate::row::{In, Part};

    /// The `{name}` segments of a path template.
    fn template_parameters(path: &str) -> BTreeSet<&str> {
        path.split('/').filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}')).collect()
    }

    /// A route can be left out of the OpenAPI document only by being a console row, and only a
    /// path of the console may be one: a JSON route marked so would be served undocumented.
    #[test]
    fn only_the_consoles_paths_are_left_out_of_the_document() {
        for route in rows() {
            let console_path = route.path == "/" || route.path == "/ui" || route.path.starts_with("/ui/");
            let is_console = matches!(route.part, Part::Console);
            assert_eq!(
                is_console, console_path,
                "{} {}: a console row must be a console path and the other way round",
                route.verb, route.path
            );
        }
    }

    /// Each row of the API carries a whole operation: an id no other has, a summary, its answers
    /// once each, and exactly the path parameters its template has, each parameter once.
    #[test]
    fn every_row_of_the_api_carries_a_whole_operation() {
        let (mut ids, mut routes) = (BTreeSet::new(), BTreeSet::new());
        for route in rows() {
            let at = format!("{} {}", route.verb, route.path);
            assert!(routes.insert(at.clone()), "{at}: two rows");
            let Part::Api { operation, .. } = route.part else { continue };
            assert!(ids.insert(operation.id), "{at}: operationId {} is another row's too", operation.id);
            assert!(!operation.id.is_empty() && !operation.summary.is_empty(), "{at}: no id or summary");
            let statuses: Vec<&str> = operation.answers.iter().map(|answer| answer.status).collect();
            let distinct: BTreeSet<&str> = statuses.iter().copied().collect();
            assert!(!statuses.is_empty(), "{at}: no answer besides the error body");
            assert_eq!(statuses.len(), distinct.len(), "{at}: a status answered twice: {statuses:?}");
            assert!(!distinct.contains("default"), "{at}: `default` is the error body, added for every operation");
            let declared: BTreeSet<&str> =
                operation.params.iter().filter(|param| param.at == In::Path).map(|param| param.name).collect();
            assert_eq!(declared, template_parameters(route.path), "{at}: path parameters and template differ");
            let mut seen = BTreeSet::new();
            for param in &operation.params {
                assert!(seen.insert((param.name, param.at)), "{at}: parameter {} given twice", param.name);
                assert!(param.at != In::Path || param.required, "{at}: path parameter {} not required", param.name);
            }
        }
        assert!(ids.len() > 20, "found too few operations: {ids:?}");
    }

    /// The serve layer's gate compares a request's path to the signed routes' as it is, so none
    /// may take a parameter in its path; and the git webhook is one of them.
    #[test]
    fn the_signed_routes_have_plain_paths() {
        let signed = super::signed_routes();
        assert!(signed.contains(&(axum::http::Method::POST, "/v1/hooks/git")), "{signed:?}");
        for (method, path) in signed {
            assert!(!path.contains('{'), "{method} {path}: a signed route with a parameter in its path");
        }
    }
}
