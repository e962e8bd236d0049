//! `roundtable status`: drift as a `kubectl get`-style table, with or without a daemon.

use std::process::ExitCode;

use roundtable_core::status::exit_code;
use roundtable_specs::List;
use roundtable_specs::output::{Health, SyncStatus};

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::render;

pub async fn run(
    global: &Global,
    format: Format,
    with_exit_code: bool,
    retention: std::time::Duration,
) -> anyhow::Result<ExitCode> {
    let rows = open_for_reading(global).await?.status(retention).await?;
    match format {
        Format::Json | Format::Yaml => print!("{}", render::document(format, &List::of(rows.clone()))?),
        Format::Text => {
            let source = rows.iter().find(|row| row.kind == "Source").map_or("working tree", |row| row.name.as_str());
            println!("source: {source}");
            let table: Vec<Vec<String>> = rows
                .iter()
                .map(|row| {
                    let number = |n: Option<i64>| n.map_or_else(|| "-".into(), |n| n.to_string());
                    vec![
                        row.kind.clone(),
                        row.name.clone(),
                        number(row.generation),
                        number(row.observed_generation),
                        sync_text(row.sync).into(),
                        health_text(row.health).into(),
                        row.created_at.as_deref().map_or_else(|| "-".into(), render::age),
                        row.message.clone(),
                    ]
                })
                .collect();
            let headers = ["KIND", "NAME", "GENERATION", "OBSERVED", "SYNC", "HEALTH", "AGE", "MESSAGE"];
            print!("{}", render::table(&headers, &table));
        }
    }
    Ok(ExitCode::from(status_exit(exit_code(&rows), with_exit_code)))
}

/// A status that could not be read whole (no project, a file that does not load, the engine
/// unreachable: an Error row) fails plain `status` too (1); drift (2) is reported only when
/// `--exit-code` asks, as `kubectl get` shows drift and still succeeds.
fn status_exit(code: u8, drift_too: bool) -> u8 {
    match code {
        2 if !drift_too => 0,
        code => code,
    }
}

pub fn sync_text(sync: SyncStatus) -> &'static str {
    match sync {
        SyncStatus::Synced => "Synced",
        SyncStatus::OutOfSync => "OutOfSync",
        SyncStatus::Unknown => "Unknown",
        SyncStatus::Error => "Error",
    }
}

pub fn health_text(health: Health) -> &'static str {
    match health {
        Health::Healthy => "Healthy",
        Health::Degraded => "Degraded",
        Health::Unhealthy => "Unhealthy",
        Health::Suspended => "Suspended",
        Health::Stalled => "Stalled",
        Health::Unknown => "Unknown",
        Health::None => "-",
    }
}
