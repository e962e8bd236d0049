//! What a test asks of a personality, in its prompt, and what the session reads from the brief.
//!
//! Prompt lines (anything else is prose and ignored):
//! - `mcp: <tool> <json-object>`: one more `tools/call`, in order; refusals do not fail the run.
//! - `write: <path> <text>`: write `<text>` and a newline to `<path>` (relative to the workdir).
//! - `sleep: <seconds>`: pause, so a test can look at the running container.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::Edit;

/// The longest pause a prompt can ask for; a typo must not hang a test for hours.
const MAX_SLEEP: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// `invalid`: why the arguments could not be sent (the raw text is then in `arguments`).
    Call {
        tool: String,
        arguments: Value,
        invalid: Option<String>,
    },
    Write {
        path: String,
        text: String,
    },
    Sleep(Duration),
    /// `scan: PATH...`: fail the session if any readable file under these paths holds the
    /// agent's own capability (it must exist only in the agent's environment).
    Scan(Vec<String>),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    pub steps: Vec<Step>,
}

impl Script {
    pub fn parse(prompt: &str) -> Self {
        Self { steps: prompt.lines().filter_map(step).collect() }
    }
}

fn step(line: &str) -> Option<Step> {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix("mcp:") {
        let rest = rest.trim();
        let (tool, arguments) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if tool.is_empty() {
            return None;
        }
        let arguments = arguments.trim();
        let (arguments, invalid) = if arguments.is_empty() {
            (Value::Object(serde_json::Map::new()), None)
        } else {
            match serde_json::from_str::<Value>(arguments) {
                Ok(object @ Value::Object(_)) => (object, None),
                Ok(_) => (Value::String(arguments.to_owned()), Some("the arguments must be a JSON object".to_owned())),
                Err(error) => (Value::String(arguments.to_owned()), Some(format!("invalid JSON arguments: {error}"))),
            }
        };
        return Some(Step::Call { tool: tool.to_owned(), arguments, invalid });
    }
    if let Some(rest) = line.strip_prefix("write:") {
        let rest = rest.trim_start();
        let (path, text) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if path.is_empty() {
            return None;
        }
        return Some(Step::Write { path: path.to_owned(), text: text.trim_start().to_owned() });
    }
    if let Some(rest) = line.strip_prefix("scan:") {
        let paths: Vec<String> = rest.split_whitespace().map(str::to_owned).collect();
        return (!paths.is_empty()).then_some(Step::Scan(paths));
    }
    if let Some(rest) = line.strip_prefix("sleep:") {
        let seconds = rest.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)?;
        return Some(Step::Sleep(Duration::from_secs_f64(seconds.min(MAX_SLEEP.as_secs_f64()))));
    }
    None
}

/// Files under `roots` (recursively; unreadable ones skipped) whose bytes contain `needle`.
pub fn files_holding(roots: &[String], needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending: Vec<std::path::PathBuf> = roots.iter().map(std::path::PathBuf::from).collect();
    while let Some(path) = pending.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                pending.extend(entries.flatten().map(|entry| entry.path()));
            }
        } else if meta.is_file()
            && std::fs::read(&path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            found.push(path.display().to_string());
        }
    }
    found
}

/// Writes `content` to `path`, creating its parent directories.
pub fn write_file(path: &str, content: &str) -> Result<Edit, String> {
    let target = Path::new(path);
    let absolute = std::env::current_dir().map(|dir| dir.join(target)).unwrap_or_else(|_| target.to_path_buf());
    let created = !target.exists();
    if let Some(parent) = target.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    std::fs::write(target, content).map_err(|error| format!("cannot write {path}: {error}"))?;
    Ok(Edit { path: absolute.display().to_string(), created, content: content.to_owned() })
}

/// The parts of the brief (`task.get`'s result) the session uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Brief {
    pub task_id: String,
    pub title: String,
}

impl Brief {
    /// From `structuredContent`, or else the JSON text of the first content block.
    pub fn from_result(result: &Value) -> Result<Self, String> {
        let parsed;
        let brief = match result.get("structuredContent").filter(|value| value.is_object()) {
            Some(brief) => brief,
            None => {
                let text = result
                    .pointer("/content/0/text")
                    .and_then(Value::as_str)
                    .ok_or("task.get returned neither structuredContent nor a text block")?;
                parsed = serde_json::from_str::<Value>(text)
                    .map_err(|error| format!("task.get returned text that is not a JSON brief: {error}"))?;
                &parsed
            }
        };
        let task = brief.get("task").filter(|task| task.is_object()).ok_or("the brief has no `task` object")?;
        let task_id = match task.get("id") {
            Some(Value::String(id)) => id.clone(),
            Some(Value::Number(id)) => id.to_string(),
            _ => return Err("the brief's task has no `id`".into()),
        };
        let title = task.get("title").and_then(Value::as_str).ok_or("the brief's task has no `title`")?.to_owned();
        Ok(Self { task_id, title })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn prompt_lines_become_steps_and_prose_is_ignored() {
        let prompt = "Fix the typo for codex.\n\
                      mcp: proposal.create {\"summary\":\"mine\"}\n\
                      mcp: session.heartbeat\n\
                      \u{20} mcp: claims.acquire {\"paths\":[\"README.md\"],\"ttlSeconds\":60}\n\
                      mcp: bad {not json}\n\
                      mcp: list [1]\n\
                      mcp:\n\
                      write: README.md # Project (edited by codex)\n\
                      write: empty.txt\n\
                      sleep: 1.5\n\
                      sleep: soon\n\
                      sleep: 99999\n";
        let steps = Script::parse(prompt).steps;
        assert_eq!(
            steps[..4],
            [
                Step::Call { tool: "proposal.create".into(), arguments: json!({"summary": "mine"}), invalid: None },
                Step::Call { tool: "session.heartbeat".into(), arguments: json!({}), invalid: None },
                Step::Call {
                    tool: "claims.acquire".into(),
                    arguments: json!({"paths": ["README.md"], "ttlSeconds": 60}),
                    invalid: None
                },
                Step::Call {
                    tool: "bad".into(),
                    arguments: json!("{not json}"),
                    invalid: Some("invalid JSON arguments: key must be a string at line 1 column 2".into())
                },
            ]
        );
        assert!(
            matches!(&steps[4], Step::Call { invalid: Some(why), .. } if why == "the arguments must be a JSON object")
        );
        assert_eq!(
            steps[5..],
            [
                Step::Write { path: "README.md".into(), text: "# Project (edited by codex)".into() },
                Step::Write { path: "empty.txt".into(), text: String::new() },
                Step::Sleep(Duration::from_millis(1500)),
                Step::Sleep(MAX_SLEEP),
            ]
        );
    }

    #[test]
    fn the_brief_comes_from_structured_content_or_text() {
        let brief = json!({"assignment": "a", "task": {"id": "T-1", "title": "Fix it", "prompt": "p"}});
        let want = Ok(Brief { task_id: "T-1".into(), title: "Fix it".into() });
        assert_eq!(Brief::from_result(&json!({"structuredContent": brief})), want);
        assert_eq!(Brief::from_result(&json!({"content": [{"type": "text", "text": brief.to_string()}]})), want);
        assert_eq!(
            Brief::from_result(
                &json!({"content": [{"type": "text", "text": "{\"task\":{\"id\":7,\"title\":\"n\"}}"}]})
            ),
            Ok(Brief { task_id: "7".into(), title: "n".into() })
        );
        for bad in [
            json!({}),
            json!({"content": [{"type": "text", "text": "hello"}]}),
            json!({"structuredContent": {"task": {"title": "x"}}}),
            json!({"structuredContent": {"task": {"id": "x"}}}),
            json!({"structuredContent": {"role": "agent"}}),
        ] {
            assert!(Brief::from_result(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn write_file_reports_creation_and_makes_parents() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a/b.txt");
        let path = path.to_str().expect("utf-8");
        let first = write_file(path, "one\n").expect("write");
        assert!(first.created);
        assert_eq!(first.path, path);
        let second = write_file(path, "two\n").expect("write");
        assert!(!second.created);
        assert_eq!(std::fs::read_to_string(path).ok().as_deref(), Some("two\n"));
    }

    #[test]
    fn scan_finds_a_secret_in_nested_files_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("a/b")).expect("mkdir");
        std::fs::write(dir.path().join("a/b/leak.txt"), "x rtcap_secret y").expect("write");
        std::fs::write(dir.path().join("a/clean.txt"), "rtcap_").expect("write");
        let roots = [dir.path().display().to_string()];
        let found = files_holding(&roots, "rtcap_secret");
        assert_eq!(found, [dir.path().join("a/b/leak.txt").display().to_string()]);
        assert_eq!(Script::parse("scan: /tmp /run").steps, [Step::Scan(vec!["/tmp".into(), "/run".into()])]);
    }
}
