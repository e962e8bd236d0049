//! `roundtable plan`: what reconciling now would change, `+ ~ - -/+` lines, nothing changed.

use std::process::ExitCode;

use roundtable_specs::List;

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::render;

pub async fn run(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    let plan = open_for_reading(global).await?.plan().await?;
    let errors = plan.file_errors.len();
    match format {
        Format::Json | Format::Yaml => {
            // An engine that does not answer is a `?` entry: the plan cannot tell.
            let mut changes: Vec<_> = plan.engine_unreachable.iter().map(|e| e.planned_change()).collect();
            changes.extend(plan.changes);
            print!("{}", render::document(format, &List::of(changes))?);
        }
        Format::Text | Format::Wide => {
            if let Some(unreachable) = &plan.engine_unreachable {
                println!("! {}", render::sanitize(&unreachable.planned_change().summary));
            }
            for error in &plan.file_errors {
                println!("! {}", render::sanitize(&error.to_string()));
            }
            if plan.changes.is_empty() && plan.engine_unreachable.is_none() {
                println!("No changes. The world matches the specs.");
            }
            for change in &plan.changes {
                println!(
                    "{:>3} {}: {}",
                    change.op,
                    render::sanitize(&change.object),
                    render::sanitize(&change.summary)
                );
            }
            if errors > 0 {
                println!("{errors} errors keep files from loading; their objects keep their last valid spec.");
            }
        }
    }
    let failed = errors > 0 || plan.engine_unreachable.is_some();
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
