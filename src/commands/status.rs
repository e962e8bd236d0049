//! `roundtable status`: drift as a `kubectl get`-style table, with or without a daemon.

use std::process::ExitCode;

use roundtable_reconcilers::status::exit_code;
use roundtable_specs::List;
use roundtable_specs::output::{Health, ObjectStatus, SyncStatus};

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::render;

/// What `status` is without `--retention`: what the daemon uses, else this.
pub const DEFAULT_RETENTION: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

pub async fn run(
    global: &Global,
    format: Format,
    with_exit_code: bool,
    retention: Option<std::time::Duration>,
) -> anyhow::Result<ExitCode> {
    let rows = rows(global, retention).await?;
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(rows.clone()))?)
        }
        Format::Text | Format::Wide => {
            let source = rows.iter().find(|row| row.kind == "Source").map_or("working tree", |row| row.name.as_str());
            println!("source: {source}");
            let table = rows.iter().map(|row| (cells(row), wide_cells(row))).collect();
            print!("{}", render::table_maybe_wide(&HEADERS, &WIDE_HEADERS, table, format == Format::Wide));
        }
    }
    Ok(ExitCode::from(status_exit(exit_code(&rows), with_exit_code)))
}

/// Every row: the running daemon's materialised status when one runs here (and no `--retention`
/// of this command's own is asked for), else computed in this process.
pub async fn rows(global: &Global, retention: Option<std::time::Duration>) -> anyhow::Result<Vec<ObjectStatus>> {
    let state_dir = global.state_dir();
    if retention.is_none() && roundtable_store::lock::holder(&state_dir).is_some() {
        match roundtable_api::client::request(&state_dir, "GET", "/v1/status", None).await {
            Ok(answer) if answer.status == 200 => {
                let list: List<ObjectStatus> = serde_json::from_slice(&answer.body)
                    .map_err(|error| anyhow::anyhow!("the daemon's status is not a status list: {error}"))?;
                return Ok(list.items);
            }
            Ok(answer) => anyhow::bail!("the daemon answered {}: {}", answer.status, daemon_message(&answer.body)),
            // A daemon that holds the lock but does not answer (starting, or stopping): compute here.
            Err(error) if error.no_daemon() => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(open_for_reading(global).await?.status(retention.unwrap_or(DEFAULT_RETENTION)).await?)
}

/// The message of the API's error body, or the body as text.
pub fn daemon_message(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|body| body["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())
}

/// The cells of a row in the status table.
pub fn cells(row: &ObjectStatus) -> Vec<String> {
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
}

/// What `-o wide` adds: every condition as `TYPE=STATUS(REASON)`.
pub const WIDE_HEADERS: [&str; 1] = ["CONDITIONS"];

pub fn wide_cells(row: &ObjectStatus) -> Vec<String> {
    let conditions: Vec<String> = row
        .conditions
        .iter()
        .map(|c| {
            let status =
                serde_json::to_value(c.status).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            format!("{}={status}({})", c.type_, c.reason)
        })
        .collect();
    vec![if conditions.is_empty() { "-".into() } else { conditions.join(",") }]
}

pub const HEADERS: [&str; 8] = ["KIND", "NAME", "GENERATION", "OBSERVED", "SYNC", "HEALTH", "AGE", "MESSAGE"];

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
        Health::Progressing => "Progressing",
        Health::Unknown => "Unknown",
        Health::None => "-",
    }
}
