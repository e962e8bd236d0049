//! One row of the route table (`table.rs`): a method on a path template, the handler that serves
//! it, and which part of the listener it belongs to: the JSON API, with who may call it and its
//! OpenAPI operation, or the review console. The router (`router.rs`) and the OpenAPI document
//! (`openapi.rs`) are both read off these rows, so a route cannot be served without being
//! described, or described without being served. This module knows no route: only their shape.

use std::fmt;

use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter, on};
use schemars::JsonSchema;
use schemars::generate::SchemaGenerator;
use serde_json::{Value, json};

use crate::state::ApiState;

/// Who may call a route of the JSON API.
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

    pub(crate) fn method(self) -> axum::http::Method {
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

/// Which part of what the listener serves a route belongs to.
pub(crate) enum Part {
    /// The JSON API: who may call it, and its operation in the OpenAPI document. A row of the API
    /// cannot be written without its operation.
    Api { access: Access, operation: Operation },
    /// The review console (`/ui/`, `docs/console.md`): HTML pages, forms, their two asset files
    /// and redirects, for a person's browser. Its handlers admit a request by the console's own
    /// login (a cookie session, and a CSRF token on every form), not by the operator token, and
    /// the router wraps them in the console's security headers.
    ///
    /// Not in the OpenAPI document, on purpose. An operator reads that document as the contract a
    /// program can call with the operator token, and tools read it the same way: client
    /// generators would make methods of HTML pages, and the conformance run
    /// (`tests/api-conformance/run.sh`) would post forms it cannot hold a session or CSRF token
    /// for and find answers (HTML, redirects) that no JSON schema describes. The document has no
    /// security scheme for a cookie session either. The console is still a row of the same table,
    /// so it is routed from the one list as everything else is.
    Console,
}

/// A schema in the OpenAPI document: a schemars type's (`of::<T>`, its definition kept under
/// `components/schemas`) or one written where it is used (`|_| json!(…)`).
pub(crate) type Schema = fn(&mut SchemaGenerator) -> Value;

/// `T`'s schema: a `$ref` to its definition, which the generator keeps for the document.
pub(crate) fn of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<T>().to_value()
}

/// `{"type": "string"}`: a path parameter's, a header's, a text body's, an event stream's.
pub(crate) fn string(_: &mut SchemaGenerator) -> Value {
    json!({"type": "string"})
}

/// Where a parameter is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum In {
    Path,
    Query,
    Header,
}

impl In {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            In::Path => "path",
            In::Query => "query",
            In::Header => "header",
        }
    }
}

/// One parameter of an operation.
#[derive(Clone)]
pub(crate) struct Param {
    pub(crate) name: &'static str,
    pub(crate) at: In,
    pub(crate) description: &'static str,
    pub(crate) required: bool,
    pub(crate) schema: Schema,
}

impl Param {
    /// A segment of the path template (`{name}`): a required string.
    pub(crate) fn path(name: &'static str, description: &'static str) -> Self {
        Self { name, at: In::Path, description, required: true, schema: string }
    }

    /// An optional query parameter.
    pub(crate) fn query(name: &'static str, description: &'static str, schema: Schema) -> Self {
        Self { name, at: In::Query, description, required: false, schema }
    }

    /// An optional header.
    pub(crate) fn header(name: &'static str, description: &'static str, schema: Schema) -> Self {
        Self { name, at: In::Header, description, required: false, schema }
    }

    /// An optional string header.
    pub(crate) fn text_header(name: &'static str, description: &'static str) -> Self {
        Self::header(name, description, string)
    }

    /// The same parameter with another schema (a path segment that takes only some words).
    pub(crate) fn with_schema(self, schema: Schema) -> Self {
        Self { schema, ..self }
    }
}

/// One answer an operation documents, besides the error body every operation may answer with.
pub(crate) struct Answer {
    /// `200`, `304`…
    pub(crate) status: &'static str,
    pub(crate) description: &'static str,
    /// Each media type it may come as, with its schema; none for an answer without a body.
    pub(crate) content: Vec<(&'static str, Schema)>,
    /// Headers it carries, with what they say.
    pub(crate) headers: Vec<(&'static str, &'static str, Schema)>,
}

impl Answer {
    /// An answer without a body.
    pub(crate) fn empty(status: &'static str, description: &'static str) -> Self {
        Self { status, description, content: Vec::new(), headers: Vec::new() }
    }

    /// A JSON body of type `T`.
    pub(crate) fn json<T: JsonSchema>(status: &'static str, description: &'static str) -> Self {
        Self::empty(status, description).or("application/json", of::<T>)
    }

    /// A text body of `media`.
    pub(crate) fn text(status: &'static str, description: &'static str, media: &'static str) -> Self {
        Self::empty(status, description).or(media, string)
    }

    /// The same answer, also (or only) as `media`.
    pub(crate) fn or(mut self, media: &'static str, schema: Schema) -> Self {
        self.content.push((media, schema));
        self
    }

    /// The same answer with a string header.
    pub(crate) fn header(mut self, name: &'static str, description: &'static str) -> Self {
        self.headers.push((name, description, string));
        self
    }
}

/// What the OpenAPI document says of one route of the JSON API.
pub(crate) struct Operation {
    /// Unique in the document: what generated clients name the call.
    pub(crate) id: &'static str,
    pub(crate) summary: &'static str,
    pub(crate) params: Vec<Param>,
    /// The request body's schema (JSON, required), when it takes one.
    pub(crate) body: Option<Schema>,
    pub(crate) answers: Vec<Answer>,
}

impl Operation {
    pub(crate) fn new(id: &'static str, summary: &'static str) -> Self {
        Self { id, summary, params: Vec::new(), body: None, answers: Vec::new() }
    }

    pub(crate) fn params(mut self, params: impl IntoIterator<Item = Param>) -> Self {
        self.params.extend(params);
        self
    }

    pub(crate) fn body(mut self, schema: Schema) -> Self {
        self.body = Some(schema);
        self
    }

    pub(crate) fn answer(mut self, answer: Answer) -> Self {
        self.answers.push(answer);
        self
    }
}

/// One row of the table.
pub(crate) struct Route {
    pub(crate) verb: Verb,
    /// Axum's path template, which is also OpenAPI's (`/v1/sessions/{id}`).
    pub(crate) path: &'static str,
    pub(crate) part: Part,
    /// The handler, bound to a method only when the router is built, so the router serves it
    /// under `verb` and nothing else.
    handler: Box<dyn FnOnce(MethodFilter) -> MethodRouter<ApiState>>,
}

impl Route {
    /// A route of the JSON API, with who may call it and its operation.
    pub(crate) fn api<H, T>(access: Access, verb: Verb, path: &'static str, handler: H, operation: Operation) -> Self
    where
        H: Handler<T, ApiState>,
        T: 'static,
    {
        Self::new(verb, path, Part::Api { access, operation }, handler)
    }

    /// A route of the review console (see [`Part::Console`]).
    pub(crate) fn console<H, T>(verb: Verb, path: &'static str, handler: H) -> Self
    where
        H: Handler<T, ApiState>,
        T: 'static,
    {
        Self::new(verb, path, Part::Console, handler)
    }

    fn new<H, T>(verb: Verb, path: &'static str, part: Part, handler: H) -> Self
    where
        H: Handler<T, ApiState>,
        T: 'static,
    {
        Self { verb, path, part, handler: Box::new(move |filter| on(filter, handler)) }
    }

    /// Its path, part and handler, the handler bound to its method: what the router needs.
    pub(crate) fn into_served(self) -> (&'static str, Part, MethodRouter<ApiState>) {
        let Self { verb, path, part, handler } = self;
        (path, part, handler(verb.filter()))
    }
}
