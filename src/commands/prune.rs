//! `roundtable prune`: retention, run by hand (the daemon also runs it every hour).

use std::process::ExitCode;
use std::time::Duration;

use roundtable_specs::List;
use roundtable_specs::audit::Pruned;
use roundtable_specs::output::ObjectStatus;

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::render;

pub async fn run(global: &Global, retention: Duration, dry_run: bool, format: Format) -> anyhow::Result<ExitCode> {
    let pruned = open_for_reading(global).await?.prune(retention, dry_run).await?;
    let failed = pruned.iter().filter(|p| p.error.is_some()).count();
    let removed: Vec<String> = pruned
        .iter()
        .filter(|p| p.error.is_none() && p.item.skipped.is_none())
        .map(|p| format!("{}/{}", p.item.kind.as_str(), p.item.name))
        .collect();
    if !dry_run && !removed.is_empty() {
        let record = Pruned { removed: &removed, retention_seconds: retention.as_secs() };
        crate::commands::audit::record_operator(global, "Project/prune", record).await?;
    }
    let rows: Vec<ObjectStatus> = pruned
        .iter()
        .map(|pruned| {
            let message = match (&pruned.error, dry_run) {
                _ if pruned.item.skipped.is_some() => {
                    format!("{} ({})", pruned.item.skipped.as_deref().unwrap_or_default(), pruned.item.why)
                }
                (Some(error), _) => format!("not removed: {}", roundtable_telemetry::error_chain(error)),
                (None, true) => format!("would remove: {}", pruned.item.why),
                (None, false) => format!("removed: {}", pruned.item.why),
            };
            let (kind, name) = (pruned.item.kind.as_str(), pruned.item.name.clone());
            roundtable_reconcilers::status::row::pruned(kind, name, pruned.error.is_some(), message)
        })
        .collect();
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(rows))?)
        }
        Format::Text | Format::Wide => {
            if rows.is_empty() {
                println!("Nothing to prune.");
            } else {
                let table: Vec<Vec<String>> =
                    rows.iter().map(|r| vec![r.kind.clone(), r.name.clone(), r.message.clone()]).collect();
                print!("{}", render::table(&["KIND", "NAME", "MESSAGE"], &table));
            }
        }
    }
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
