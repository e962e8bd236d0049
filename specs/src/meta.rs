//! The envelope every resource shares: `apiVersion`, `kind`, `metadata`, and the keys that name objects.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API version every resource and every JSON output carries.
pub const API_VERSION: &str = "roundtable.dev/v1alpha1";

/// The resource kinds Roundtable reconciles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Kind {
    Adapter,
    Assignment,
    AdmissionPolicy,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Adapter, Kind::Assignment, Kind::AdmissionPolicy];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Adapter => "Adapter",
            Kind::Assignment => "Assignment",
            Kind::AdmissionPolicy => "AdmissionPolicy",
        }
    }

    pub fn parse(text: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.as_str() == text)
    }

    /// The kind as a command line may name it, as kubectl reads resource names: the kind in any
    /// case, its plural, or its short name (`assignment`, `assignments`, `asg`; `adapters`, `ad`;
    /// `admissionpolicies`, `ap`).
    pub fn from_command_line(text: &str) -> Option<Kind> {
        let text = text.to_ascii_lowercase();
        Kind::ALL.into_iter().find(|kind| {
            let singular = kind.as_str().to_ascii_lowercase();
            let plural = match kind {
                Kind::AdmissionPolicy => "admissionpolicies".to_owned(),
                _ => format!("{singular}s"),
            };
            [singular, plural, kind.short_name().to_owned()].contains(&text)
        })
    }

    /// The kind's short name on a command line.
    pub fn short_name(self) -> &'static str {
        match self {
            Kind::Adapter => "ad",
            Kind::Assignment => "asg",
            Kind::AdmissionPolicy => "ap",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `metadata` of a resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectMeta {
    /// Assignment and AdmissionPolicy names are DNS labels; Adapter names may be display names.
    #[schemars(length(min = 1, max = 63), regex(pattern = "[A-Za-z0-9]"))]
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `KIND/NAME`: how objects are addressed on the command line, in the store and in events.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub kind: Kind,
    pub name: String,
}

impl ObjectKey {
    pub fn new(kind: Kind, name: impl Into<String>) -> Self {
        Self { kind, name: name.into() }
    }

    /// Parses `Kind/name`; the kind is matched as [`Kind::from_command_line`] reads it (any
    /// case, plural or short name), the name exactly.
    pub fn parse(text: &str) -> Option<Self> {
        let (kind, name) = text.split_once('/')?;
        let kind = Kind::from_command_line(kind)?;
        (!name.is_empty()).then(|| Self::new(kind, name))
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_keys_round_trip() {
        let key = ObjectKey::parse("assignment/fix-typo").expect("parses");
        assert_eq!(key, ObjectKey::new(Kind::Assignment, "fix-typo"));
        assert_eq!(key.to_string(), "Assignment/fix-typo");
        assert_eq!(ObjectKey::parse("Adapter/Qwen CLI").map(|k| k.name), Some("Qwen CLI".into()));
        for (written, kind) in [
            ("assignments/fix-typo", Kind::Assignment),
            ("asg/fix-typo", Kind::Assignment),
            ("ADAPTERS/fix-typo", Kind::Adapter),
            ("ap/fix-typo", Kind::AdmissionPolicy),
            ("admissionpolicies/fix-typo", Kind::AdmissionPolicy),
        ] {
            assert_eq!(ObjectKey::parse(written), Some(ObjectKey::new(kind, "fix-typo")), "{written}");
        }
        assert_eq!(ObjectKey::parse("assignmentss/fix-typo"), None);
        assert!(ObjectKey::parse("Widget/x").is_none());
        assert!(ObjectKey::parse("Adapter/").is_none());
    }
}
