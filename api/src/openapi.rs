//! The OpenAPI 3.1 document of the API, read off the route table (`table.rs`): every row of the
//! JSON API carries its operation, and who may call it gives the operation's `security` as it
//! gives the router's layers, so there is no second list of routes to fall out of step. Its
//! schemas are the same schemars schemas as `schemas/` (OpenAPI 3.1's schema dialect is JSON
//! Schema 2020-12, which they are). Checked in as `schemas/openapi.json`; a test fails when it is
//! stale. The console's rows are not in it (`row::Part::Console` says why).

use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

pub use crate::error::{ErrorBody, ErrorDetail};
use crate::row::{Access, Answer, Operation, Param, Part, of};

/// The document.
pub fn document() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| s.definitions_path = "/components/schemas".into());
    let mut generator = settings.into_generator();
    let mut paths = Map::new();
    // The routes that need no token, for the description, in the table's order.
    let mut exempt: Vec<String> = Vec::new();
    for route in crate::table::rows() {
        let Part::Api { access, operation } = route.part else { continue };
        let named = match access {
            Access::Public => Some(route.path.to_owned()),
            Access::Signed => Some(format!("the signed {}", route.path)),
            Access::Operator => None,
        };
        if let Some(named) = named.filter(|named| !exempt.contains(named)) {
            exempt.push(named);
        }
        let item = paths.entry(route.path.to_owned()).or_insert_with(|| json!({}));
        item[route.verb.openapi_key()] = operation_of(&mut generator, access, operation);
    }
    let schemas = generator.take_definitions(true);
    let but = match exempt.split_last() {
        None => String::new(),
        Some((last, [])) => format!(" but {last}"),
        Some((last, rest)) => format!(" but {} and {last}", rest.join(", ")),
    };
    let mut document = json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Roundtable",
            "version": env!("CARGO_PKG_VERSION"),
            "description": format!("The HTTP API of a Roundtable daemon (`roundtable start`): status, adapters, assignments, sessions, proposals and events; agents with enable, disable and diagnostics; reconcile requests; the admin MCP endpoint. Every endpoint{but} needs the operator token of the daemon's state directory (`Authorization: Bearer …`).")
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

/// One row's operation object: what the row says, the error body every operation may answer
/// with, and the `security` its access means (none written: the document's default, the
/// operator token).
fn operation_of(generator: &mut SchemaGenerator, access: Access, operation: Operation) -> Value {
    let Operation { id, summary, params, body, answers } = operation;
    let mut object = json!({"operationId": id, "summary": summary});
    if !params.is_empty() {
        object["parameters"] = params.iter().map(|param| parameter(generator, param)).collect();
    }
    if let Some(body) = body {
        object["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": body(generator)}}});
    }
    let mut responses = Map::new();
    for answer in answers {
        responses.insert(answer.status.to_owned(), response(generator, answer));
    }
    let error = of::<ErrorBody>(generator);
    responses.insert(
        "default".into(),
        json!({"description": "An error: `{\"error\": {code, message, details}}`.", "content": {"application/json": {"schema": error}}}),
    );
    object["responses"] = Value::Object(responses);
    match access {
        Access::Public => object["security"] = json!([]),
        Access::Signed => object["security"] = json!([{"hookSignature": []}, {"gitlabToken": []}]),
        Access::Operator => {}
    }
    object
}

fn parameter(generator: &mut SchemaGenerator, param: &Param) -> Value {
    json!({
        "name": param.name,
        "in": param.at.as_str(),
        "description": param.description,
        "required": param.required,
        "schema": (param.schema)(generator),
    })
}

fn response(generator: &mut SchemaGenerator, answer: Answer) -> Value {
    let mut object = json!({"description": answer.description});
    if !answer.content.is_empty() {
        let content: Map<String, Value> = answer
            .content
            .into_iter()
            .map(|(media, schema)| (media.to_owned(), json!({"schema": schema(generator)})))
            .collect();
        object["content"] = Value::Object(content);
    }
    if !answer.headers.is_empty() {
        let headers: Map<String, Value> = answer
            .headers
            .into_iter()
            .map(|(name, description, schema)| {
                (name.to_owned(), json!({"description": description, "schema": schema(generator)}))
            })
            .collect();
        object["headers"] = Value::Object(headers);
    }
    object
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use crate::row::{Access, Part};

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

    /// The document is read off the table, so this fails when the reading does: a row of the API
    /// missing from the document, or two rows on one method and path (the second would hide the
    /// first), or an operation that is no row's, or a console row written into it, or a row whose
    /// `security` is not what its access means to the router.
    #[test]
    fn every_row_of_the_api_is_one_operation_of_the_document_and_nothing_else_is() {
        let document = super::document();
        let paths = document["paths"].as_object().expect("paths");
        let mut rows = BTreeSet::new();
        for route in crate::table::rows() {
            let at = format!("{} {}", route.verb, route.path);
            let Part::Api { access, operation } = route.part else {
                assert!(!paths.contains_key(route.path), "{at}: a console page is in the OpenAPI document");
                continue;
            };
            assert!(rows.insert(at.clone()), "{at}: two rows of the table");
            let documented = &document["paths"][route.path][route.verb.openapi_key()];
            assert_eq!(documented["operationId"], json!(operation.id), "{at}: not documented as its row says");
            let security = documented.get("security");
            let expected = match access {
                Access::Public => Some(json!([])),
                Access::Signed => Some(json!([{"hookSignature": []}, {"gitlabToken": []}])),
                Access::Operator => None,
            };
            assert_eq!(security, expected.as_ref(), "{at}: documented with other credentials than it is routed with");
        }
        let operations: BTreeSet<String> = paths
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .expect("a path item")
                    .keys()
                    .map(move |method| format!("{} {path}", method.to_uppercase()))
            })
            .collect();
        assert_eq!(operations, rows, "the document's operations are not exactly the API's rows");
    }

    /// The description names the routes that need no token; it is written from the table, so a
    /// public route added there is named here without an edit.
    #[test]
    fn the_description_names_each_route_that_needs_no_token() {
        let document = super::document();
        let description = document["info"]["description"].as_str().expect("a description");
        for route in crate::table::rows() {
            if let Part::Api { access: Access::Public | Access::Signed, .. } = route.part {
                assert!(description.contains(route.path), "{} is public but not named: {description}", route.path);
            }
        }
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
