//! One finding of `validate` (a spec, contract or transcript problem), positioned in its file,
//! and how bad it is.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::list::ListItem;

/// How bad a finding is: errors make `validate` exit 1; warnings are shown but pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    Error,
    Warning,
}

/// One finding of `validate`, positioned in its file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidationError {
    pub file: String,
    /// 1-based; 0 when the problem is with the file as a whole (unreadable, too large).
    pub line: usize,
    pub column: usize,
    /// The field path, like `spec.readablePaths[1]`; empty for the document itself.
    pub path: String,
    pub message: String,
    pub severity: Severity,
}

impl ListItem for ValidationError {
    const LIST_KIND: &'static str = "ValidationErrorList";
}

impl ValidationError {
    /// `LINE:COLUMN: `, or nothing for an error about the file as a whole (a file too large, a
    /// folder missing), which has no line to name.
    pub fn position(&self) -> String {
        if self.line == 0 { String::new() } else { format!("{}:{}: ", self.line, self.column) }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.position())?;
        if self.line == 0 {
            f.write_str(" ")?;
        }
        if self.severity == Severity::Warning {
            f.write_str("warning: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::List;
    use crate::meta::API_VERSION;

    #[test]
    fn envelope_is_kubectl_shaped() {
        let list = List::of(Vec::<ValidationError>::new());
        let json = serde_json::to_value(&list).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({"apiVersion": API_VERSION, "kind": "ValidationErrorList", "metadata": {}, "items": []})
        );
    }
}
