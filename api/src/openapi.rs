//! The OpenAPI 3.1 document of the API, assembled from the same schemars schemas as `schemas/`
//! (OpenAPI 3.1's schema dialect is JSON Schema 2020-12, which they are). Checked in as
//! `schemas/openapi.json`; a test fails when it is stale, and another when it and the route table
//! (`routes::table`) differ by an operation or by whether it needs the token.

use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde::Serialize;
use serde_json::{Map, Value, json};

use roundtable_specs::List;
use roundtable_specs::diagnostics::DiagnosticReport;
use roundtable_specs::output::{
    AdapterItem, AgentItem, DescribeItem, EventItem, ObjectStatus, ProposalItem, SessionItem,
};

use crate::routes::Verb::{self, Delete, Get, Post};
use crate::routes::agents::AgentChangeBody;
use crate::routes::hooks::HookBody;
use crate::routes::write::{ReconcileBody, RegisterSessionBody};
use roundtable_specs::output::SessionLogsBody;

/// The error body every failure has.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorDetail {
    /// Stable and machine-readable, like `agent_not_found` or `idempotency_key_reused`.
    pub code: String,
    pub message: String,
    pub details: Value,
}

struct Builder {
    generator: SchemaGenerator,
    paths: Map<String, Value>,
}

fn parameter(name: &str, location: &str, description: &str, schema: Value, required: bool) -> Value {
    json!({"name": name, "in": location, "description": description, "required": required, "schema": schema})
}

fn path_parameter(name: &str, description: &str) -> Value {
    parameter(name, "path", description, json!({"type": "string"}), true)
}

fn page_parameters() -> Vec<Value> {
    vec![
        parameter(
            "limit",
            "query",
            "Items per page, 1 to 200 (default 50).",
            json!({"type": "integer", "minimum": 1, "maximum": 200}),
            false,
        ),
        parameter(
            "continue",
            "query",
            "The `metadata.continue` of the previous page, verbatim.",
            json!({"type": "string"}),
            false,
        ),
    ]
}

fn idempotency_parameter() -> Value {
    parameter(
        "Idempotency-Key",
        "header",
        "Makes a retry safe: the same key and request replay the stored response for 24 hours; the same key with another request is 409.",
        json!({"type": "string", "minLength": 1, "maxLength": 255}),
        false,
    )
}

fn workspace_parameters() -> Vec<Value> {
    vec![
        path_parameter("ws", "The workspace this daemon serves (its project's name)."),
        path_parameter("id", "The agent: an adapter's name."),
    ]
}

impl Builder {
    fn new() -> Self {
        let settings = SchemaSettings::draft2020_12().with(|s| s.definitions_path = "/components/schemas".into());
        Self { generator: settings.into_generator(), paths: Map::new() }
    }

    fn schema<T: JsonSchema>(&mut self) -> Value {
        self.generator.subschema_for::<T>().to_value()
    }

    fn json_response<T: JsonSchema>(&mut self, description: &str) -> Value {
        json!({"description": description, "content": {"application/json": {"schema": self.schema::<T>()}}})
    }

    fn text_response(description: &str, media: &str) -> Value {
        json!({"description": description, "content": {media: {"schema": {"type": "string"}}}})
    }

    #[allow(clippy::too_many_arguments)]
    fn operation(
        &mut self,
        verb: Verb,
        path: &str,
        id: &str,
        summary: &str,
        parameters: Vec<Value>,
        body: Option<Value>,
        responses: Vec<(&str, Value)>,
        public: bool,
    ) {
        let mut operation = json!({"operationId": id, "summary": summary});
        if !parameters.is_empty() {
            operation["parameters"] = Value::Array(parameters);
        }
        if let Some(body) = body {
            operation["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": body}}});
        }
        let mut answers = Map::new();
        for (status, response) in responses {
            answers.insert(status.to_owned(), response);
        }
        let error = self.schema::<ErrorBody>();
        answers.insert("default".into(), json!({"description": "An error: `{\"error\": {code, message, details}}`.", "content": {"application/json": {"schema": error}}}));
        operation["responses"] = Value::Object(answers);
        if public {
            operation["security"] = json!([]);
        }
        let entry = self.paths.entry(path.to_owned()).or_insert_with(|| json!({}));
        entry[verb.openapi_key()] = operation;
    }
}

/// The document.
pub fn document() -> Value {
    let mut b = Builder::new();
    b.operation(
        Get,
        "/healthz",
        "healthz",
        "Liveness: the process answers.",
        vec![],
        None,
        vec![("200", Builder::text_response("Alive.", "text/plain"))],
        true,
    );
    b.operation(
        Get,
        "/readyz",
        "readyz",
        "Readiness: the first scan of the spec directory is merged.",
        vec![],
        None,
        vec![("200", Builder::text_response("Ready.", "text/plain"))],
        true,
    );
    b.operation(Get, "/v1/openapi.json", "openapi", "This document.", vec![], None, vec![("200", json!({"description": "The OpenAPI 3.1 document.", "content": {"application/json": {"schema": {"type": "object"}}}}))], true);
    b.operation(
        Get,
        "/.well-known/oauth-protected-resource",
        "protectedResource",
        "OAuth protected resource metadata (RFC 9728), where a 401's WWW-Authenticate points MCP clients: the resource, and that its token goes in the Authorization header. No authorization server: the operator token is handed over out of band.",
        vec![],
        None,
        vec![("200", json!({"description": "The metadata.", "content": {"application/json": {"schema": {
            "type": "object",
            "required": ["resource", "bearer_methods_supported"],
            "properties": {
                "resource": {"type": "string"},
                "bearer_methods_supported": {"type": "array", "items": {"type": "string"}},
                "resource_name": {"type": "string"},
                "resource_documentation": {"type": "string"}
            }
        }}}}))],
        true,
    );
    b.operation(
        Get,
        "/metrics",
        "metrics",
        "Prometheus metrics (text format 0.0.4).",
        vec![],
        None,
        vec![("200", Builder::text_response("Metrics.", "text/plain"))],
        false,
    );
    let mut r = b.json_response::<List<ObjectStatus>>(
        "Every object's sync and health, as `roundtable status --format json` lists them, in compact JSON (`?pretty=true` indents it), served from the daemon's materialised status. `metadata.resourceVersion` is the version a watch resumes from; the `ETag` header carries it too. With `?watch=true` (and `resourceVersion`, or `Last-Event-ID` when reconnecting) the answer is `text/event-stream` instead: without a version every row as an `ADDED` event then a `BOOKMARK`, then each change as `ADDED`, `MODIFIED` or `DELETED` (its `id` the change's version, its `data` the row); a version older than what is kept is answered `410 expired` (list again).",
    );
    r["headers"] = json!({"ETag": {"description": "The list's version, quoted.", "schema": {"type": "string"}}});
    r["content"]["text/event-stream"] = json!({"schema": {"type": "string"}});
    let mut status_parameters = page_parameters();
    status_parameters[0] = parameter(
        "limit",
        "query",
        "Rows per page, 1 to 1000. Without `limit` and `continue`, every row at once.",
        json!({"type": "integer", "minimum": 1, "maximum": 1000}),
        false,
    );
    status_parameters.push(parameter(
        "pretty",
        "query",
        "Indented JSON, for a person reading it.",
        json!({"type": "boolean"}),
        false,
    ));
    status_parameters.push(parameter(
        "If-None-Match",
        "header",
        "An `ETag` from before: `304` while the status is the same.",
        json!({"type": "string"}),
        false,
    ));
    let mut gone = b.json_response::<ErrorBody>("");
    gone["description"] = json!("`expired`: the version asked for is no longer kept; list again.");
    b.operation(
        Get,
        "/v1/status",
        "status",
        "Drift of every object.",
        status_parameters,
        None,
        vec![
            ("200", r),
            ("304", json!({"description": "Not modified since the `If-None-Match` version."})),
            ("410", gone),
        ],
        false,
    );
    let r = b.json_response::<List<AdapterItem>>("Built-in and declared adapters, merged.");
    b.operation(Get, "/v1/adapters", "adapters", "Adapters.", vec![], None, vec![("200", r)], false);
    let r = b.json_response::<DescribeItem>("Status, stored spec, observed status and recent events.");
    b.operation(
        Get,
        "/v1/assignments/{name}",
        "assignment",
        "One Assignment, as `roundtable describe`.",
        vec![path_parameter("name", "The Assignment's name.")],
        None,
        vec![("200", r)],
        false,
    );
    let r = b.json_response::<List<SessionItem>>("Sessions, newest first.");
    b.operation(Get, "/v1/sessions", "sessions", "Sessions.", page_parameters(), None, vec![("200", r)], false);
    let body = b.schema::<RegisterSessionBody>();
    let r = b.json_response::<SessionItem>("The recorded session.");
    b.operation(
        Post,
        "/v1/sessions",
        "registerSession",
        "Records a session run outside Roundtable (as `roundtable sessions register`).",
        vec![idempotency_parameter()],
        Some(body),
        vec![("201", r)],
        false,
    );
    let r = b.json_response::<SessionItem>("The session.");
    b.operation(
        Get,
        "/v1/sessions/{id}",
        "session",
        "One session by ID or unique prefix.",
        vec![path_parameter("id", "A session ID or a unique prefix of one.")],
        None,
        vec![("200", r)],
        false,
    );
    let mut r =
        b.json_response::<SessionLogsBody>("Captured output; `?stream=` returns one stream's raw bytes instead. With `?follow=true` the answer is `text/event-stream`: each line of a running session's output as a `line` event (`LogLine`, its `id` the line number: `Last-Event-ID` resumes after it), then one `end` event (`{\"reason\", \"phase\"}`) once the session has finished.");
    r["content"]["application/octet-stream"] = json!({"schema": {"type": "string", "format": "binary"}});
    r["content"]["text/event-stream"] = json!({"schema": {"type": "string"}});
    let stream = parameter(
        "stream",
        "query",
        "`stdout` or `stderr`: that stream's bytes as captured.",
        json!({"type": "string", "enum": ["stdout", "stderr"]}),
        false,
    );
    b.operation(
        Get,
        "/v1/sessions/{id}/logs",
        "sessionLogs",
        "A session's captured output.",
        vec![path_parameter("id", "A session ID or a unique prefix of one."), stream],
        None,
        vec![("200", r)],
        false,
    );
    let r = b.json_response::<List<ProposalItem>>("Proposals, newest first.");
    b.operation(
        Get,
        "/v1/proposals",
        "proposals",
        "Pending proposals.",
        page_parameters(),
        None,
        vec![("200", r)],
        false,
    );
    let item = b.schema::<ProposalItem>();
    b.operation(
        Get,
        "/v1/proposals/{id}",
        "proposal",
        "One proposal; its patch with `Accept: text/x-diff` (refused when it does not match its recorded digest).",
        vec![path_parameter("id", "A proposal ID or a unique prefix of one.")],
        None,
        vec![("200", json!({"description": "The proposal, or its patch.", "content": {"application/json": {"schema": item}, "text/x-diff": {"schema": {"type": "string"}}}}))],
        false,
    );
    let decision = b.json_response::<roundtable_specs::delivery::Decision>(
        "The decision recorded (also when the proposal already was in that state: idempotent).",
    );
    let error = b.json_response::<ErrorBody>("");
    let refusal = |description: &str| {
        let mut answer = error.clone();
        answer["description"] = json!(description);
        answer
    };
    let body = b.schema::<crate::routes::delivery::AcceptBody>();
    b.operation(
        Post,
        "/v1/proposals/{id}/accept",
        "acceptProposal",
        "Accepts a pending proposal (as `roundtable proposals accept`): the review gates, one commit on its base in a scratch index on a new branch, signed provenance as a git note, the optional push.",
        vec![path_parameter("id", "A proposal ID or a unique prefix of one."), idempotency_parameter()],
        Some(body),
        vec![
            ("200", decision.clone()),
            ("409", refusal("`not_pending` (rejected or superseded), `branch_exists`.")),
            ("422", refusal("`gates_refused` (details.unmet names each finding), `base_missing`.")),
        ],
        false,
    );
    let body = b.schema::<crate::routes::delivery::RejectBody>();
    b.operation(
        Post,
        "/v1/proposals/{id}/reject",
        "rejectProposal",
        "Rejects a pending proposal with a reason (as `roundtable proposals reject`).",
        vec![path_parameter("id", "A proposal ID or a unique prefix of one."), idempotency_parameter()],
        Some(body),
        vec![("200", decision), ("409", refusal("`not_pending`: it was accepted or superseded."))],
        false,
    );
    let mut r = b.json_response::<List<EventItem>>(
        "Events of every object, newest first. With `?watch=true` (and `resourceVersion`, an event's ID, or `Last-Event-ID` when reconnecting) the answer is `text/event-stream` instead: a `BOOKMARK` with the version it starts after (the newest event, without one), then each new event as `ADDED`, its `id` the event's.",
    );
    r["content"]["text/event-stream"] = json!({"schema": {"type": "string"}});
    b.operation(Get, "/v1/events", "events", "Events.", page_parameters(), None, vec![("200", r)], false);
    let r = b.json_response::<ReconcileBody>("Queued: the daemon's controller has it now.");
    b.operation(
        Post,
        "/v1/reconcile/{kind}/{name}",
        "reconcile",
        "Reconciles one object now, clearing a stall; `rerun=true` makes an Assignment run afresh.",
        vec![
            parameter(
                "kind",
                "path",
                "The object's kind.",
                json!({"type": "string", "enum": ["Adapter", "Assignment", "AdmissionPolicy"]}),
                true,
            ),
            path_parameter("name", "The object's name."),
            parameter(
                "rerun",
                "query",
                "Assignments: run the agent afresh in a new execution generation instead of reusing the result of an earlier one with the same run fields at the same commit.",
                json!({"type": "boolean", "default": false}),
                false,
            ),
            idempotency_parameter(),
        ],
        None,
        vec![("202", r)],
        false,
    );
    let r = b.json_response::<HookBody>("Signed: the daemon fetches its git source now.");
    let duplicate = b.json_response::<HookBody>(
        "Signed, and its delivery id was acted on already: nothing is done (`fetch`: `duplicate`).",
    );
    let error = b.json_response::<ErrorBody>("");
    let answer = |description: &str| {
        let mut answer = error.clone();
        answer["description"] = json!(description);
        answer
    };
    b.operation(
        Post,
        "/v1/hooks/git",
        "gitHook",
        "A forge's push webhook: asks the daemon to fetch its git source now. Authenticated by the signature over the exact body (GitHub, Gitea, Forgejo) or GitLab's token, never the operator token; the payload is not otherwise read.",
        vec![
            parameter(
                "X-Hub-Signature-256",
                "header",
                "`sha256=` and the hex HMAC-SHA256 of the body under the webhook secret.",
                json!({"type": "string"}),
                false,
            ),
            parameter("X-Gitlab-Token", "header", "GitLab's form: the webhook secret itself.", json!({"type": "string"}), false),
            parameter(
                "X-GitHub-Delivery",
                "header",
                "The forge's delivery id (GitHub, Gitea, Forgejo): one seen within 24 h is answered as a duplicate and not acted on again.",
                json!({"type": "string"}),
                false,
            ),
            parameter("X-Gitlab-Event-UUID", "header", "GitLab's delivery id, as X-GitHub-Delivery.", json!({"type": "string"}), false),
        ],
        Some(json!({"description": "The forge's payload, at most 1 MiB; only its signature is checked."})),
        vec![
            ("200", duplicate),
            ("202", r),
            ("401", answer("`bad_signature`: no signature, a malformed one, or one of other bytes or another secret; nothing is fetched.")),
            ("404", answer("`hook_not_configured`: the daemon was started without `--webhook-secret-file`.")),
            ("409", answer("`no_git_source`: the signature is good but the daemon reconciles no git source.")),
            ("413", answer("`body_too_large`: over 1 MiB.")),
        ],
        true,
    );
    b.paths["/v1/hooks/git"]["post"]["security"] = json!([{"hookSignature": []}, {"gitlabToken": []}]);
    let mut list_parameters = vec![path_parameter("ws", "The workspace this daemon serves (its project's name).")];
    list_parameters.extend(page_parameters());
    let r = b.json_response::<List<AgentItem>>("Agents in name order.");
    b.operation(
        Get,
        "/v1/workspaces/{ws}/agents",
        "agents",
        "Agents (adapters) with capabilities, version, sessions and heartbeat.",
        list_parameters,
        None,
        vec![("200", r)],
        false,
    );
    let r = b.json_response::<AgentItem>("The agent.");
    b.operation(
        Get,
        "/v1/workspaces/{ws}/agents/{id}",
        "agent",
        "One agent.",
        workspace_parameters(),
        None,
        vec![("200", r)],
        false,
    );
    let mut enable_parameters = workspace_parameters();
    enable_parameters.push(idempotency_parameter());
    let r = b.json_response::<AgentChangeBody>("The agent after the change.");
    b.operation(
        Post,
        "/v1/workspaces/{ws}/agents/{id}/enable",
        "enableAgent",
        "Enables an agent (a runtime override of spec.enabled).",
        enable_parameters.clone(),
        None,
        vec![("200", r)],
        false,
    );
    let mut disable_parameters = enable_parameters.clone();
    disable_parameters.push(parameter(
        "force",
        "query",
        "Cancel the agent's active sessions instead of waiting for them.",
        json!({"type": "string", "enum": ["true", "false"]}),
        false,
    ));
    let r = b.json_response::<AgentChangeBody>(
        "The agent after the change: `draining` while active sessions finish, else `disabled`.",
    );
    b.operation(
        Post,
        "/v1/workspaces/{ws}/agents/{id}/disable",
        "disableAgent",
        "Disables an agent, draining its active sessions first.",
        disable_parameters,
        None,
        vec![("200", r)],
        false,
    );
    let r = b.json_response::<DiagnosticReport>("The stored report (its checks say what passed).");
    b.operation(
        Post,
        "/v1/workspaces/{ws}/agents/{id}/diagnostics",
        "diagnoseAgent",
        "Probes inside the agent's image under the full hardening, with no network and no credentials.",
        enable_parameters,
        None,
        vec![("201", r)],
        false,
    );
    let r = b.json_response::<List<DiagnosticReport>>("The agent's stored reports, newest first.");
    b.operation(
        Get,
        "/v1/workspaces/{ws}/agents/{id}/diagnostics",
        "agentDiagnostics",
        "An agent's diagnostic reports.",
        workspace_parameters(),
        None,
        vec![("200", r)],
        false,
    );
    let mut one = workspace_parameters();
    one.push(path_parameter("diagnostic", "A diagnostic report's ID."));
    let r = b.json_response::<DiagnosticReport>("The report.");
    b.operation(
        Get,
        "/v1/workspaces/{ws}/agents/{id}/diagnostics/{diagnostic}",
        "agentDiagnostic",
        "One diagnostic report.",
        one,
        None,
        vec![("200", r)],
        false,
    );
    let refused = [
        ("400", "Not a JSON-RPC message, or an unsupported `MCP-Protocol-Version`."),
        ("403", "`origin_not_allowed`: a request from a page of another site."),
        ("406", "`not_acceptable`: the client does not accept both `application/json` and `text/event-stream`."),
        ("415", "`unsupported_media_type`: the body is not `application/json`."),
    ];
    let mut responses = vec![
        (
            "200",
            json!({"description": "The JSON-RPC response.", "content": {"application/json": {"schema": {"type": "object"}}}}),
        ),
        ("202", json!({"description": "A notification or a response: accepted."})),
    ];
    responses.extend(refused.map(|(status, why)| (status, b.json_response::<ErrorBody>(why))));
    b.operation(
        Post,
        "/mcp",
        "adminMcp",
        "The admin MCP endpoint (streamable HTTP, JSON responses): tools status, adapters, assignments, sessions, proposals, reconcile, accept_proposal, reject_proposal.",
        vec![],
        Some(json!({"type": "object", "description": "One JSON-RPC 2.0 message. The transport requires `Accept: application/json, text/event-stream`."})),
        responses,
        false,
    );
    // MCP's streamable HTTP transport has clients try these two; they are served, to refuse.
    let refusals = [
        (Get, "adminMcpStream", "Refused: this MCP endpoint sends no server-initiated stream (POST requests to it)."),
        (Delete, "adminMcpEndSession", "Refused: this MCP endpoint keeps no sessions to end."),
    ];
    for (verb, id, summary) in refusals {
        let r = b.json_response::<ErrorBody>("Always: `method_not_allowed`.");
        b.operation(verb, "/mcp", id, summary, vec![], None, vec![("405", r)], false);
    }
    let Builder { mut generator, paths } = b;
    let schemas = generator.take_definitions(true);
    let mut document = json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Roundtable",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The HTTP API of a Roundtable daemon (`roundtable start`): status, adapters, assignments, sessions, proposals and events; agents with enable, disable and diagnostics; reconcile requests; the admin MCP endpoint. Every endpoint but /healthz, /readyz, this document and the signed git webhook (/v1/hooks/git) needs the operator token of the daemon's state directory (`Authorization: Bearer …`)."
        },
        "security": [{"operatorToken": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "operatorToken": {"type": "http", "scheme": "bearer", "description": "The token in the state directory's api-token file."},
                "hookSignature": {"type": "apiKey", "in": "header", "name": "X-Hub-Signature-256", "description": "`sha256=<hex HMAC-SHA256 of the body under the secret of --webhook-secret-file>`; the git webhook only."},
                "gitlabToken": {"type": "apiKey", "in": "header", "name": "X-Gitlab-Token", "description": "The secret of --webhook-secret-file itself, as GitLab sends it; the git webhook only."}
            },
            "schemas": schemas
        }
    });
    // Plain enums and no boolean schemas: what client generators read (openapi-python-client).
    roundtable_specs::schema::for_generators(&mut document);
    document
}

/// The document as served and checked in: pretty, with a trailing newline.
pub fn document_text() -> String {
    crate::respond::json_text(&document())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use crate::routes::{self, Access};

    #[test]
    fn the_checked_in_document_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/openapi.json");
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == super::document_text(),
            "{} is stale: run `roundtable schema --out schemas` and commit it",
            path.display()
        );
    }

    /// Every operation of the document as `METHOD /path/template`, with whether it says it needs
    /// no token (`security: []`).
    fn documented() -> BTreeMap<String, Access> {
        let document = super::document();
        let mut operations = BTreeMap::new();
        for (path, item) in document["paths"].as_object().expect("paths") {
            for (method, operation) in item.as_object().expect("a path item") {
                let access = match operation.get("security") {
                    Some(security) if *security == json!([]) => Access::Public,
                    Some(security) if security.to_string().contains("hookSignature") => Access::Signed,
                    _ => Access::Operator,
                };
                operations.insert(format!("{} {path}", method.to_uppercase()), access);
            }
        }
        operations
    }

    /// Every route of the table the router is built from, as `METHOD /path/template`.
    fn routed() -> BTreeMap<String, Access> {
        routes::table().into_iter().map(|route| (format!("{} {}", route.verb, route.path), route.access)).collect()
    }

    #[test]
    fn every_route_is_documented_and_every_operation_is_routed() {
        let (routed, documented) = (routed(), documented());
        let undocumented: Vec<&String> = routed.keys().filter(|route| !documented.contains_key(*route)).collect();
        let unrouted: Vec<&String> = documented.keys().filter(|operation| !routed.contains_key(*operation)).collect();
        assert!(
            undocumented.is_empty() && unrouted.is_empty(),
            "the OpenAPI document (api/src/openapi.rs) and the route table (api/src/routes/mod.rs) differ:\n\
             routes with no operation in the document: {undocumented:?}\n\
             documented operations with no route: {unrouted:?}"
        );
    }

    #[test]
    fn the_document_says_which_routes_need_the_token_as_the_router_does() {
        let documented = documented();
        let differing: Vec<String> = routed()
            .into_iter()
            .filter_map(|(route, access)| {
                let said = documented.get(&route)?;
                (*said != access).then(|| format!("{route}: routed {access:?}, documented {said:?}"))
            })
            .collect();
        assert!(differing.is_empty(), "the document's `security` disagrees with the router: {differing:?}");
    }

    #[test]
    fn every_reference_resolves() {
        let document = super::document();
        let text = document.to_string();
        let schemas = document["components"]["schemas"].as_object().expect("schemas");
        for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = reference.split('"').next().unwrap_or_default();
            assert!(schemas.contains_key(name), "dangling $ref to {name}");
        }
    }
}
