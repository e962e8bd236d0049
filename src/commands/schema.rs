//! `roundtable schema`: the generated JSON Schemas, printed or written to a directory.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;

pub fn run(out: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut schemas = roundtable_specs::schema::all();
    schemas.push(("openapi.json".to_owned(), roundtable_api::openapi::document_text()));
    let Some(out) = out else {
        let combined = schemas.iter().find(|(name, _)| name == "roundtable.json").map(|(_, text)| text.as_str());
        print!("{}", combined.unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    };
    for (name, text) in &schemas {
        let path = out.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    println!("wrote {} schemas to {}", schemas.len(), out.display());
    Ok(ExitCode::SUCCESS)
}
