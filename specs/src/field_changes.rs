//! Which fields of a resource changed between two versions of it, by path, with their old and
//! new values: what `plan` shows under a changed object, as terraform shows attributes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One field whose value differs: absent on one side when it was added or removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldChange {
    /// The field's path, like `spec.task.prompt` or `metadata.labels.team`.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
    /// A change of this field starts a new execution (terraform's "forces replacement").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replaces: bool,
}

/// The fields that differ between `old` and `new`, in path order. Maps are compared key by key;
/// a list or a scalar is one value, shown whole when it changes. `replacing` names the path
/// prefixes whose change starts a new execution.
pub fn changed_fields(old: &Value, new: &Value, replacing: &[String]) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    walk("", Some(old), Some(new), &mut changes);
    for change in &mut changes {
        change.replaces = replacing.iter().any(|prefix| {
            change.path == *prefix
                || change.path.strip_prefix(prefix.as_str()).is_some_and(|rest| rest.starts_with('.'))
        });
    }
    changes
}

fn walk(path: &str, old: Option<&Value>, new: Option<&Value>, changes: &mut Vec<FieldChange>) {
    match (old, new) {
        (Some(Value::Object(old)), Some(Value::Object(new))) => {
            let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let path = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                walk(&path, old.get(key), new.get(key), changes);
            }
        }
        (old, new) if old == new => {}
        (old, new) => {
            changes.push(FieldChange { path: path.to_owned(), old: old.cloned(), new: new.cloned(), replaces: false })
        }
    }
}

/// A value as one short line: JSON, cut to `width` characters with the full length said, so a
/// long prompt does not flood a plan.
pub fn short_value(value: Option<&Value>, width: usize) -> String {
    let Some(value) = value else { return "(absent)".into() };
    let text = value.to_string();
    let length = text.chars().count();
    if length <= width {
        return text;
    }
    let head: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{head}… ({length} characters)")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nested_changes_are_named_by_path_with_both_values() {
        let old =
            json!({"spec": {"task": {"id": "T", "prompt": "fix typos"}, "retries": 1}, "metadata": {"name": "a"}});
        let new = json!({"spec": {"task": {"id": "T", "prompt": "fix all typos"}}, "metadata": {"name": "a", "labels": {"team": "docs"}}});
        let changes = changed_fields(&old, &new, &["spec.task".into()]);
        let summary: Vec<(&str, bool)> = changes.iter().map(|c| (c.path.as_str(), c.replaces)).collect();
        assert_eq!(summary, [("metadata.labels", false), ("spec.retries", false), ("spec.task.prompt", true)]);
        assert_eq!(changes[1].old, Some(json!(1)));
        assert_eq!(changes[1].new, None);
        assert_eq!(changes[2].new, Some(json!("fix all typos")));
    }

    #[test]
    fn a_list_changes_as_one_value_and_equal_specs_have_none() {
        let old = json!({"spec": {"readablePaths": ["a", "b"]}});
        let new = json!({"spec": {"readablePaths": ["a", "c"]}});
        let changes = changed_fields(&old, &new, &[]);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "spec.readablePaths");
        assert!(changed_fields(&old, &old, &[]).is_empty());
    }

    #[test]
    fn a_prefix_replaces_only_its_own_fields() {
        let old = json!({"spec": {"task": 1, "taskTimeout": 1}});
        let new = json!({"spec": {"task": 2, "taskTimeout": 2}});
        let replaces: Vec<bool> =
            changed_fields(&old, &new, &["spec.task".into()]).iter().map(|c| c.replaces).collect();
        assert_eq!(replaces, [true, false]);
    }

    #[test]
    fn long_values_are_cut_and_say_their_length() {
        let long = json!("x".repeat(500));
        let short = short_value(Some(&long), 40);
        assert!(short.chars().count() < 70, "{short}");
        assert!(short.ends_with("(502 characters)"), "{short}");
        assert_eq!(short_value(None, 40), "(absent)");
        assert_eq!(short_value(Some(&json!("ok")), 40), "\"ok\"");
    }
}
