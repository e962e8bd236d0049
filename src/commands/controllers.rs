//! `roundtable controllers`: the controllers registered in the store (one on SQLite, several on
//! a shared PostgreSQL store), whether each is live, its last heartbeat, and the executions it
//! holds leases on.

use std::process::ExitCode;

use serde::Serialize;

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::render;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ControllerItem {
    id: String,
    host: String,
    pid: i64,
    checkout: String,
    live: bool,
    started_at: String,
    heartbeat_at: String,
    expires_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped_at: Option<String>,
    /// Its checkout's git commit at its last scan.
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<String>,
    /// Why its last scan wrote no desired state (its checkout is behind the store's).
    #[serde(skip_serializing_if = "Option::is_none")]
    sync_note: Option<String>,
    /// Assignments whose execution it holds the lease on, with the fence.
    running: Vec<Running>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Running {
    assignment: String,
    fence: i64,
    expires_at: String,
}

pub async fn run(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    let service = open_for_reading(global).await?;
    let store = service.store();
    let leases = store.execution_leases().await?;
    let at = store.lease_clock().await?;
    let items: Vec<ControllerItem> = store
        .controllers()
        .await?
        .into_iter()
        .map(|c| ControllerItem {
            live: c.is_live(&at),
            running: leases
                .iter()
                .filter(|l| l.holder == c.id && l.held())
                .map(|l| Running { assignment: l.assignment.clone(), fence: l.fence, expires_at: l.expires_at.clone() })
                .collect(),
            id: c.id,
            host: c.host,
            pid: c.pid,
            checkout: c.checkout,
            started_at: c.started_at,
            heartbeat_at: c.heartbeat_at,
            expires_at: c.expires_at,
            stopped_at: c.stopped_at,
            revision: c.revision,
            sync_note: c.sync_note,
        })
        .collect();
    let desired = store.desired_revision().await?;
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            let desired =
                desired.map(|d| serde_json::json!({"revision": d.revision, "controller": d.controller, "at": d.at}));
            let body =
                serde_json::json!({"store": store.url().to_string(), "desiredRevision": desired, "items": items});
            print!("{}", render::document(format, &body)?);
        }
        Format::Text | Format::Wide => {
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|c| {
                    let state = match (&c.stopped_at, c.live) {
                        (Some(_), _) => "stopped".to_owned(),
                        (None, true) => "live".to_owned(),
                        (None, false) => "expired".to_owned(),
                    };
                    let running: Vec<String> = c.running.iter().map(|r| r.assignment.clone()).collect();
                    vec![
                        render::sanitize(&c.id),
                        state,
                        format!("{} pid {}", render::sanitize(&c.host), c.pid),
                        render::age(&c.heartbeat_at),
                        c.revision.as_deref().map_or("-", |r| r.get(..12).unwrap_or(r)).to_owned(),
                        if running.is_empty() { "-".into() } else { render::sanitize(&running.join(", ")) },
                        render::sanitize(c.sync_note.as_deref().unwrap_or("")),
                    ]
                })
                .collect();
            println!("store {}", store.url());
            if let Some(desired) = desired {
                println!(
                    "desired state from revision {} (by {} at {})",
                    desired.revision, desired.controller, desired.at
                );
            }
            print!(
                "{}",
                render::table(&["CONTROLLER", "STATE", "HOST", "HEARTBEAT", "REVISION", "RUNNING", "NOTE"], &rows)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
