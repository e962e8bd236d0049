//! JSON Schemas generated from the types: one per kind, a combined one for editors, and one per
//! JSON output. `schemas/` in the repository is exactly [`all`] written out.

use schemars::{JsonSchema, generate::SchemaSettings};

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

fn render<T: JsonSchema>(file: &str, title: &str) -> (String, String) {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let mut schema = generator.into_root_schema_for::<T>();
    schema.insert("$id".into(), format!("{BASE_ID}{file}").into());
    schema.insert("title".into(), title.into());
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    (file.to_owned(), text)
}

/// Every schema as `(relative file name, JSON text)`, in a fixed order.
pub fn all() -> Vec<(String, String)> {
    vec![
        render::<Adapter>("adapter.json", "Adapter"),
        render::<Assignment>("assignment.json", "Assignment"),
        render::<AdmissionPolicy>("admission-policy.json", "AdmissionPolicy"),
        render::<AnyResource>("roundtable.json", "Roundtable resource (any kind)"),
        render::<Contract>("contract.json", "Admission contract"),
        render::<SealedReceipt>("admission-receipt.json", "Admission receipt"),
        render::<List<ValidationError>>("outputs/validation-error-list.json", "ValidationErrorList"),
        render::<List<AdapterItem>>("outputs/adapter-list.json", "AdapterList"),
        render::<List<DoctorReport>>("outputs/doctor-report-list.json", "DoctorReportList"),
        render::<List<ObjectStatus>>("outputs/object-status-list.json", "ObjectStatusList"),
        render::<List<PlannedChange>>("outputs/planned-change-list.json", "PlannedChangeList"),
        render::<List<EventItem>>("outputs/event-list.json", "EventList"),
        render::<List<DescribeItem>>("outputs/describe-list.json", "DescribeList"),
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
