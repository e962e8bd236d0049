//! `roundtable sandbox mock`: the built-in `mock` agent, a deterministic stand-in that needs no
//! image contents. It reads the brief, writes the prompt to `roundtable-mock.md` in the
//! workspace and prints a JSON-lines transcript carrying a `session_id`.

use std::io::Write as _;
use std::path::Path;

use roundtable_specs::assignment::Task;
use roundtable_specs::brief::Brief;

/// The file the mock writes in its working directory.
pub const OUTPUT_FILE: &str = "roundtable-mock.md";

/// Runs the mock against `brief` (the task JSON) in `workspace`; returns the transcript lines.
pub fn run(brief: &Path, workspace: &Path) -> std::io::Result<Vec<String>> {
    let text = std::fs::read_to_string(brief)?;
    let brief: Brief =
        serde_json::from_str(&text).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let Task { id, title, prompt } = &brief.task;
    // Deterministic: the session id derives from the brief.
    let session_id = format!("mock-{}", &roundtable_specs::digest::sha256_hex(text.as_bytes())[..16]);
    let mut body = format!("# {id}: {title}\n\n{prompt}\n");
    body.push_str(&format!("\nThe mock agent read {} provided files.\n", brief.manifest.len()));
    let mut file = std::fs::File::create(workspace.join(OUTPUT_FILE))?;
    file.write_all(body.as_bytes())?;
    let lines = vec![
        serde_json::json!({"type": "init", "session_id": session_id, "agent": "roundtable-mock"}).to_string(),
        serde_json::json!({"type": "edit", "path": OUTPUT_FILE, "bytes": body.len()}).to_string(),
        serde_json::json!({"type": "result", "session_id": session_id, "status": "success"}).to_string(),
    ];
    Ok(lines)
}
