//! The brief: what a session's agent is told about its work, written to `task.json` in the
//! execution folder and mounted read-only at [`crate::layout::TASK`]; the MCP `task.get` tool
//! answers with it too.

use serde::{Deserialize, Serialize};

use crate::assignment::{Role, Task};
use crate::session::ManifestEntry;

/// One session's brief.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Brief {
    pub assignment: String,
    pub role: Role,
    pub task: Task,
    /// The commit the source was exported at.
    pub base_commit: String,
    pub readable_paths: Vec<String>,
    /// Every file given to the agent.
    pub manifest: Vec<ManifestEntry>,
}

impl Brief {
    /// The brief as JSON with its keys sorted at every level, the form agents have always read.
    pub fn to_value(&self) -> serde_json::Value {
        // Through `Value`, whose maps are sorted: the field order of the types above (and of
        // `Task` and `ManifestEntry`, which other contracts fix) never reaches the file.
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The bytes of `task.json`: [`Brief::to_value`], pretty-printed.
    pub fn to_file_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec_pretty(&self.to_value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Brief {
        Brief {
            assignment: "fix-typos".into(),
            role: Role::Reviewer,
            task: Task { id: "T-1".into(), title: String::new(), prompt: "Fix the typos.".into() },
            base_commit: "0123456789abcdef0123456789abcdef01234567".into(),
            readable_paths: vec!["README.md".into(), "docs/".into()],
            manifest: vec![ManifestEntry {
                path: "README.md".into(),
                size: 12,
                sha256: "ab".repeat(32),
                executable: false,
            }],
        }
    }

    #[test]
    fn the_brief_file_is_exactly_what_agents_have_always_read() {
        let written = String::from_utf8(sample().to_file_bytes().expect("serialises")).expect("UTF-8");
        let expected = r#"{
  "assignment": "fix-typos",
  "baseCommit": "0123456789abcdef0123456789abcdef01234567",
  "manifest": [
    {
      "executable": false,
      "path": "README.md",
      "sha256": "abababababababababababababababababababababababababababababababab",
      "size": 12
    }
  ],
  "readablePaths": [
    "README.md",
    "docs/"
  ],
  "role": "reviewer",
  "task": {
    "id": "T-1",
    "prompt": "Fix the typos."
  }
}"#;
        assert_eq!(written, expected);
        let read: Brief = serde_json::from_str(&written).expect("reads back");
        assert_eq!(read, sample());
    }
}
