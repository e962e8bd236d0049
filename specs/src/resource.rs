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
