//! `roundtable prune`: retention, run by hand (the daemon also runs it every hour).

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::Duration;

use roundtable_reconcilers::prune::{find, remove};
use roundtable_reconcilers::source::{project_id, scan};
use roundtable_specs::Kind;
use roundtable_specs::List;
use roundtable_specs::output::{Health, ObjectStatus, SyncStatus};

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::render;

pub async fn run(global: &Global, retention: Duration, dry_run: bool, format: Format) -> anyhow::Result<ExitCode> {
    let store = open_for_reading(global).await?;
    let dir = global.dir.clone();
    let scanned = tokio::task::spawn_blocking(move || scan(&dir)).await?;
    let declared: BTreeSet<String> =
        scanned.accepted().filter(|o| o.kind() == Kind::Assignment).map(|o| o.metadata.name.clone()).collect();
    let engine = roundtable_sandbox::Engine::connect().await.ok();
    let found = find(&store, engine.as_ref(), &project_id(&global.dir), &declared, retention).await?;
    let failed = if dry_run { Vec::new() } else { remove(&store, engine.as_ref(), &found).await };
    let rows: Vec<ObjectStatus> = found
        .iter()
        .map(|item| {
            let error = failed.iter().find(|(f, _)| f == item).map(|(_, e)| e.clone());
            ObjectStatus {
                kind: item.kind.into(),
                name: item.name.clone(),
                generation: None,
                observed_generation: None,
                sync: if error.is_some() { SyncStatus::Error } else { SyncStatus::OutOfSync },
                health: Health::None,
                created_at: None,
                message: match (&error, dry_run) {
                    (Some(error), _) => format!("not removed: {error}"),
                    (None, true) => format!("would remove: {}", item.why),
                    (None, false) => format!("removed: {}", item.why),
                },
                conditions: Vec::new(),
            }
        })
        .collect();
    match format {
        Format::Json => print!("{}", render::json(&List::of(rows))?),
        Format::Text => {
            if rows.is_empty() {
                println!("Nothing to prune.");
            } else {
                let table: Vec<Vec<String>> =
                    rows.iter().map(|r| vec![r.kind.clone(), r.name.clone(), r.message.clone()]).collect();
                print!("{}", render::table(&["KIND", "NAME", "MESSAGE"], &table));
            }
        }
    }
    Ok(if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
