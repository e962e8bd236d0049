//! The typed resource documents (`apiVersion`, `kind`, `metadata`, `spec`) as they appear in files.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::adapter::AdapterSpec;
use crate::assignment::AssignmentSpec;
use crate::meta::ObjectMeta;
use crate::policy::AdmissionPolicySpec;

/// `apiVersion`: only `roundtable.dev/v1alpha1` exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ApiVersion {
    #[serde(rename = "roundtable.dev/v1alpha1")]
    V1alpha1,
}

macro_rules! resource {
    ($(#[$doc:meta])* $name:ident, $tag:ident, $spec:ty) => {
        /// The `kind` value of this resource.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        pub enum $tag {
            $name,
        }

        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            pub api_version: ApiVersion,
            pub kind: $tag,
            pub metadata: ObjectMeta,
            pub spec: $spec,
        }
    };
}

resource!(
    /// How to run one agent CLI: image, command, capabilities, hosts, credentials, limits.
    Adapter,
    AdapterKind,
    AdapterSpec
);
resource!(
    /// A run-to-completion unit of agent work.
    Assignment,
    AssignmentKind,
    AssignmentSpec
);
resource!(
    /// How admission receipts gate adapters; at most one per project.
    AdmissionPolicy,
    AdmissionPolicyKind,
    AdmissionPolicySpec
);

/// Any resource; the schema editors use for every file under `.roundtable/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum AnyResource {
    Adapter(Adapter),
    Assignment(Assignment),
    AdmissionPolicy(AdmissionPolicy),
}

/// The resource as stored: `{apiVersion, kind, metadata, spec}`, the same shape as in files.
pub fn to_value(metadata: &ObjectMeta, spec: &crate::object::Spec) -> serde_json::Value {
    use crate::object::Spec;
    let resource = match spec {
        Spec::Adapter(spec) => AnyResource::Adapter(Adapter {
            api_version: ApiVersion::V1alpha1,
            kind: AdapterKind::Adapter,
            metadata: metadata.clone(),
            spec: spec.clone(),
        }),
        Spec::Assignment(spec) => AnyResource::Assignment(Assignment {
            api_version: ApiVersion::V1alpha1,
            kind: AssignmentKind::Assignment,
            metadata: metadata.clone(),
            spec: spec.clone(),
        }),
        Spec::AdmissionPolicy(spec) => AnyResource::AdmissionPolicy(AdmissionPolicy {
            api_version: ApiVersion::V1alpha1,
            kind: AdmissionPolicyKind::AdmissionPolicy,
            metadata: metadata.clone(),
            spec: spec.clone(),
        }),
    };
    serde_json::to_value(resource).unwrap_or_default()
}

/// Reads back what [`to_value`] wrote.
pub fn from_json(text: &str) -> Result<(ObjectMeta, crate::object::Spec), serde_json::Error> {
    use crate::object::Spec;
    Ok(match serde_json::from_str::<AnyResource>(text)? {
        AnyResource::Adapter(r) => (r.metadata, Spec::Adapter(r.spec)),
        AnyResource::Assignment(r) => (r.metadata, Spec::Assignment(r.spec)),
        AnyResource::AdmissionPolicy(r) => (r.metadata, Spec::AdmissionPolicy(r.spec)),
    })
}
