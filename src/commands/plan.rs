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
        Format::Json => print!("{}", render::json(&List::of(plan.changes))?),
        Format::Text => {
            for error in &plan.file_errors {
                println!("! {}", render::sanitize(&error.to_string()));
            }
            if plan.changes.is_empty() {
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
    Ok(if errors > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
