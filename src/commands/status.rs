//! `roundtable status`: drift as a `kubectl get`-style table, with or without a daemon.

use std::process::ExitCode;

use roundtable_reconcilers::source::{project_id, scan};
use roundtable_reconcilers::status::{Leftover, exit_code, status};
use roundtable_sandbox::labels::{ASSIGNMENT, SESSION};
use roundtable_specs::List;
use roundtable_specs::output::{Health, SyncStatus};

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::render;

/// Labelled containers and volumes of this project; none when no engine answers.
async fn leftovers(global: &Global) -> Vec<Leftover> {
    let Ok(engine) = roundtable_sandbox::Engine::connect().await else {
        return Vec::new();
    };
    match engine.labelled(&project_id(&global.dir)).await {
        Ok(found) => found
            .into_iter()
            .map(|item| Leftover {
                kind: item.kind.into(),
                name: item.name,
                assignment: item.labels.get(ASSIGNMENT).cloned(),
                session: item.labels.get(SESSION).cloned(),
            })
            .collect(),
        Err(error) => {
            tracing::warn!(%error, "cannot list labelled resources");
            Vec::new()
        }
    }
}

pub async fn run(
    global: &Global,
    format: Format,
    with_exit_code: bool,
    retention: std::time::Duration,
) -> anyhow::Result<ExitCode> {
    let store = open_for_reading(global).await?;
    let dir = global.dir.clone();
    let scanned = tokio::task::spawn_blocking(move || scan(&dir)).await?;
    let mut rows = status(&store, &scanned, &leftovers(global).await).await?;
    rows.extend(roundtable_reconcilers::egress::status_rows(&store.sessions(None).await?));
    // Finished sessions and proposals past retention (labelled leftovers are listed above).
    let declared = std::collections::BTreeSet::new();
    for item in
        roundtable_reconcilers::prune::find(&store, None, &project_id(&global.dir), &declared, retention).await?
    {
        rows.push(roundtable_specs::output::ObjectStatus {
            kind: item.kind.into(),
            name: item.name,
            generation: None,
            observed_generation: None,
            sync: SyncStatus::OutOfSync,
            health: Health::None,
            created_at: None,
            message: format!("requires pruning: {}", item.why),
            conditions: Vec::new(),
        });
    }
    match format {
        Format::Json => print!("{}", render::json(&List::of(rows.clone()))?),
        Format::Text => {
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
    Ok(if with_exit_code { ExitCode::from(exit_code(&rows)) } else { ExitCode::SUCCESS })
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
        Health::Stalled => "Stalled",
        Health::Unknown => "Unknown",
        Health::None => "-",
    }
}
