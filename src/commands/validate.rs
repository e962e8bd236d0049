//! `roundtable validate`: static checks of every spec file, positioned by file, line, column and field.

use std::process::ExitCode;

use roundtable_specs::{List, Severity, ValidationError, validate};

use crate::cli::{Format, Global};
use crate::project::load;
use crate::render;

/// Loads and validates the spec directory; parse errors first, then rule findings, by position.
pub fn findings(global: &Global) -> (Vec<ValidationError>, usize, usize) {
    let loaded = load(&global.dir);
    let mut all = loaded.errors;
    all.extend(validate(&loaded.objects));
    all.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    (all, loaded.objects.len(), loaded.files)
}

pub fn run(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    let (all, objects, files) = findings(global);
    let errors = all.iter().filter(|f| f.severity == Severity::Error).count();
    match format {
        Format::Json => print!("{}", render::json(&List::of(all))?),
        Format::Text => {
            for finding in &all {
                println!("{}", render::sanitize(&finding.to_string()));
            }
            let warnings = all.len() - errors;
            if errors == 0 {
                println!("valid: {objects} objects in {files} files ({warnings} warnings)");
            } else {
                println!("invalid: {errors} errors, {warnings} warnings in {files} files");
            }
        }
    }
    Ok(if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
