//! JSON Schemas generated from the types: one per kind, a combined one for editors, and one per
//! JSON output. `schemas/` in the repository is exactly [`all`] written out.

use schemars::{JsonSchema, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use crate::admission::{AdmissionItem, CanaryItem, SealedReceipt};
use crate::contract::Contract;
use crate::diagnostics::DiagnosticReport;
use crate::finding::ValidationError;
use crate::list::List;
use crate::output::{
    AdapterItem, DescribeItem, DoctorReport, EventItem, ObjectStatus, PlannedChange, ProposalItem, SessionItem,
};
use crate::resource::{Adapter, AdmissionPolicy, AnyResource, Assignment};

const BASE_ID: &str = "https://roundtable.dev/schemas/v1alpha1/";

/// An Assignment's or AdmissionPolicy's name, as `names::check_object_name` has it (a DNS label).
const OBJECT_NAME: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// The kinds whose names are DNS labels (an Adapter's may be a display name).
const LABEL_NAMED: [&str; 2] = ["Assignment", "AdmissionPolicy"];

fn render<T: JsonSchema>(file: &str, title: &str) -> (String, String) {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut schema = schema.to_value();
    for_generators(&mut schema);
    if LABEL_NAMED.contains(&title) {
        label_named(&mut schema);
    }
    if let Some(defs) = schema.get_mut("$defs").and_then(Value::as_object_mut) {
        for kind in LABEL_NAMED {
            defs.get_mut(kind).into_iter().for_each(label_named);
        }
    }
    if title == COMBINED_TITLE {
        branch_on_kind(&mut schema);
    }
    if let Some(root) = schema.as_object_mut() {
        root.insert("$id".into(), format!("{BASE_ID}{file}").into());
        root.insert("title".into(), title.into());
    }
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    (file.to_owned(), text)
}

const COMBINED_TITLE: &str = "Roundtable resource (any kind)";

/// A kind's schema whose `metadata.name` must be a DNS label: the shared `ObjectMeta`, with the
/// name's pattern on top.
fn label_named(kind: &mut Value) {
    let Some(metadata) = kind.pointer_mut("/properties/metadata") else { return };
    let shared = metadata.take();
    *metadata = json!({
        "allOf": [shared],
        "properties": {"name": {
            "description": "A DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit.",
            "pattern": OBJECT_NAME,
            "maxLength": crate::names::MAX_NAME_LEN,
        }},
    });
}

/// The combined schema chooses the kind's schema by `kind` (`if`/`then`), so an editor reports
/// the field that is wrong in that kind rather than "not one of" every kind.
fn branch_on_kind(schema: &mut Value) {
    let Some(root) = schema.as_object_mut() else { return };
    let Some(Value::Array(branches)) = root.remove("anyOf") else { return };
    let mut kinds = Vec::new();
    let mut chosen = Vec::new();
    for branch in branches {
        let Some(reference) = branch.get("$ref").and_then(Value::as_str) else { continue };
        let kind = reference.rsplit('/').next().unwrap_or_default().to_owned();
        chosen.push(json!({
            "if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
            "then": {"$ref": reference},
        }));
        kinds.push(kind);
    }
    root.insert("type".into(), "object".into());
    root.insert("required".into(), json!(["apiVersion", "kind", "metadata", "spec"]));
    root.insert("properties".into(), json!({"kind": {"enum": kinds}}));
    root.insert("allOf".into(), Value::Array(chosen));
}

/// Rewrites a generated schema into the shapes code generators read (OpenAPI clients, datamodel
/// generators): a choice among fixed words becomes a plain `enum` (schemars writes `oneOf` of
/// `const`s when the words are documented, which generators turn into one class per word), with
/// each word's description kept in the schema's; and the `true` schema (any value) becomes `{}`.
pub fn for_generators(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            words_as_enum(object);
            for (key, value) in object.iter_mut() {
                match key.as_str() {
                    "items" | "not" | "contains" | "propertyNames" | "if" | "then" | "else" => any_as_empty(value),
                    "properties" | "$defs" | "patternProperties" | "schemas" => {
                        value.as_object_mut().into_iter().flat_map(|m| m.values_mut()).for_each(any_as_empty);
                    }
                    "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                        value.as_array_mut().into_iter().flatten().for_each(any_as_empty);
                    }
                    _ => {}
                }
                for_generators(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(for_generators),
        _ => {}
    }
}

/// The `true` schema, where a schema stands, as `{}`: the same meaning, and an object.
fn any_as_empty(schema: &mut Value) {
    if schema == &Value::Bool(true) {
        *schema = json!({});
    }
}

/// `oneOf: [{const: "a", description}, {enum: ["b", "c"]}, …]` (every branch documented words
/// or a plain list of them; schemars groups the undocumented ones) as
/// `type: string, enum: ["a", "b", "c", …]`.
fn words_as_enum(object: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = object.get("oneOf") else { return };
    let words_of = |branch: &Value| -> Option<Vec<(String, Option<String>)>> {
        let branch = branch.as_object()?;
        if !branch.keys().all(|k| matches!(k.as_str(), "const" | "enum" | "description" | "type")) {
            return None;
        }
        let description = branch.get("description").and_then(Value::as_str).map(str::to_owned);
        match (branch.get("const"), branch.get("enum")) {
            (Some(word), None) => Some(vec![(word.as_str()?.to_owned(), description)]),
            (None, Some(Value::Array(words))) => {
                words.iter().map(|w| Some((w.as_str()?.to_owned(), description.clone()))).collect()
            }
            _ => None,
        }
    };
    let Some(words) = branches.iter().map(words_of).collect::<Option<Vec<_>>>() else { return };
    let words: Vec<(String, Option<String>)> = words.into_iter().flatten().collect();
    let documented: Vec<String> =
        words.iter().filter_map(|(w, d)| d.as_ref().map(|d| format!("- `{w}`: {d}"))).collect();
    object.remove("oneOf");
    object.insert("type".into(), "string".into());
    object.insert("enum".into(), words.iter().map(|(w, _)| Value::from(w.as_str())).collect());
    if !documented.is_empty() {
        let own = object.get("description").and_then(Value::as_str).map(|d| format!("{d}\n\n")).unwrap_or_default();
        object.insert("description".into(), format!("{own}{}", documented.join("\n")).into());
    }
}

/// Every schema as `(relative file name, JSON text)`, in a fixed order.
pub fn all() -> Vec<(String, String)> {
    vec![
        render::<Adapter>("adapter.json", "Adapter"),
        render::<Assignment>("assignment.json", "Assignment"),
        render::<AdmissionPolicy>("admission-policy.json", "AdmissionPolicy"),
        render::<AnyResource>("roundtable.json", COMBINED_TITLE),
        render::<Contract>("contract.json", "Admission contract"),
        render::<SealedReceipt>("admission-receipt.json", "Admission receipt"),
        render::<List<ValidationError>>("outputs/validation-error-list.json", "ValidationErrorList"),
        render::<List<AdapterItem>>("outputs/adapter-list.json", "AdapterList"),
        render::<List<DoctorReport>>("outputs/doctor-report-list.json", "DoctorReportList"),
        render::<List<ObjectStatus>>("outputs/object-status-list.json", "ObjectStatusList"),
        render::<List<PlannedChange>>("outputs/planned-change-list.json", "PlannedChangeList"),
        render::<List<EventItem>>("outputs/event-list.json", "EventList"),
        render::<DescribeItem>("outputs/describe.json", "DescribeItem"),
        render::<List<SessionItem>>("outputs/session-list.json", "SessionList"),
        render::<List<ProposalItem>>("outputs/proposal-list.json", "ProposalList"),
        render::<List<AdmissionItem>>("outputs/admission-list.json", "AdmissionList"),
        render::<List<CanaryItem>>("outputs/canary-list.json", "CanaryList"),
        render::<List<DiagnosticReport>>("outputs/diagnostic-report-list.json", "DiagnosticReportList"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_constants_and_unknown_fields_are_closed() {
        let (_, text) = render::<Adapter>("adapter.json", "Adapter");
        let schema: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(schema["additionalProperties"], serde_json::json!(false));
        let rendered = schema.to_string();
        assert!(rendered.contains("\"Adapter\""), "{rendered}");
        assert!(rendered.contains("roundtable.dev/v1alpha1"));
    }
}
