//! `roundtable plan`: what reconciling now would change, `+ ~ - -/+` lines, nothing changed.

use std::process::ExitCode;

use roundtable_reconcilers::ObjectReconciler;
use roundtable_reconcilers::backend::EngineImages;
use roundtable_reconcilers::source::scan;
use roundtable_specs::List;

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::render;

pub async fn engine_images() -> EngineImages {
    match roundtable_sandbox::Engine::connect().await {
        Ok(engine) => EngineImages::connected(engine),
        Err(error) => EngineImages::unavailable(error.to_string()),
    }
}

pub async fn run(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    let store = open_for_reading(global).await?;
    let dir = global.dir.clone();
    let scanned = tokio::task::spawn_blocking(move || scan(&dir)).await?;
    let reconciler = ObjectReconciler::new(store.clone(), engine_images().await, store.clone());
    let changes = roundtable_reconcilers::status::plan(&store, &reconciler, &scanned).await?;
    let errors = scanned.errors().count();
    match format {
        Format::Json => print!("{}", render::json(&List::of(changes))?),
        Format::Text => {
            for error in scanned.errors() {
                println!("! {}", render::sanitize(&error.to_string()));
            }
            if changes.is_empty() {
                println!("No changes. The world matches the specs.");
            }
            for change in &changes {
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
