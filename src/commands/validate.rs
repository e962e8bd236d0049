//! `roundtable validate`: static checks of every spec file, positioned by file, line, column and field.

use std::process::ExitCode;

use roundtable_specs::List;

use crate::cli::{Format, Global};
use crate::render;

pub fn run(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    // The working tree's files even when committed state is reconciled: they are what is checked
    // before a commit.
    let scanned = match global.working_tree() {
        Ok(project) => roundtable_service::validate(&project),
        Err(error) => roundtable_service::validate_unresolved(&global.dir, &error),
    };
    let errors = scanned.errors().count();
    if !format.is_document()
        && let Some((mode, _)) = roundtable_source::mark::marked(&global.state_dir())
    {
        // `status` and `plan` read the commit the daemon follows; say which files these are.
        let followed = match mode {
            roundtable_source::mark::Mode::Committed => "the checkout's HEAD commit",
            roundtable_source::mark::Mode::Git => "the commits of its git source",
        };
        eprintln!(
            "note: these are the working tree's files; the daemon reconciles {followed} (`roundtable plan --local` previews these against it)"
        );
    }
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(scanned.findings))?)
        }
        Format::Text | Format::Wide => {
            for finding in &scanned.findings {
                println!("{}", render::sanitize(&finding.to_string()));
            }
            let warnings = scanned.findings.len() - errors;
            if errors == 0 {
                println!(
                    "valid: {} in {} ({})",
                    render::count(scanned.objects.len(), "object", "objects"),
                    render::count(scanned.files, "file", "files"),
                    render::count(warnings, "warning", "warnings")
                );
            } else {
                println!(
                    "invalid: {}, {} in {}",
                    render::count(errors, "error", "errors"),
                    render::count(warnings, "warning", "warnings"),
                    render::count(scanned.files, "file", "files")
                );
            }
        }
    }
    Ok(if errors == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
