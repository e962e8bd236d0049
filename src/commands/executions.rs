//! `roundtable sessions …` and `roundtable proposals …`: what executions recorded. Everything an
//! agent produced is escaped before it reaches the terminal.

use std::io::Write as _;
use std::process::ExitCode;

use roundtable_specs::List;
use roundtable_specs::output::{ProposalItem, SessionItem};
use roundtable_store::{ProposalRecord, SessionRecord};

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::render;

fn session_item(record: SessionRecord) -> SessionItem {
    SessionItem {
        id: record.id,
        assignment: record.assignment,
        execution_generation: record.execution_generation,
        attempt: record.attempt,
        adapter: record.adapter,
        image: record.image,
        phase: record.phase,
        cause: record.cause,
        exit_code: record.exit_code,
        message: record.message,
        base_commit: record.base_commit,
        external_session_id: record.external_session_id,
        stdout_bytes: record.stdout_bytes,
        stderr_bytes: record.stderr_bytes,
        stdout_truncated: record.stdout_truncated,
        stderr_truncated: record.stderr_truncated,
        controller_run: record.controller_run,
        created_at: record.created_at,
        started_at: record.started_at,
        finished_at: record.finished_at,
        detail: record.detail_json.as_deref().and_then(|d| serde_json::from_str(d).ok()),
    }
}

fn proposal_item(record: ProposalRecord) -> ProposalItem {
    ProposalItem {
        id: record.id,
        assignment: record.assignment,
        execution_generation: record.execution_generation,
        session: record.session_id,
        adapter: record.adapter,
        base_commit: record.base_commit,
        sha256: record.sha256,
        files_changed: record.files_changed,
        insertions: record.insertions,
        deletions: record.deletions,
        flags: serde_json::from_str(&record.flags_json).unwrap_or_default(),
        state: record.state,
        created_at: record.created_at,
    }
}

/// A session by ID or unique prefix.
async fn find_session(global: &Global, id: &str) -> anyhow::Result<SessionRecord> {
    let store = open_for_reading(global).await?;
    let matches: Vec<SessionRecord> =
        store.sessions(None).await?.into_iter().filter(|s| s.id.starts_with(id)).collect();
    match matches.len() {
        1 => Ok(matches.into_iter().next().expect("one")),
        0 => anyhow::bail!("no session {id:?}"),
        n => anyhow::bail!("{id:?} matches {n} sessions; give more of the ID"),
    }
}

pub async fn sessions_list(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    let store = open_for_reading(global).await?;
    let items: Vec<SessionItem> = store.sessions(None).await?.into_iter().map(session_item).collect();
    match format {
        Format::Json => print!("{}", render::json(&List::of(items))?),
        Format::Text => {
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|s| {
                    vec![
                        s.id.clone(),
                        s.assignment.clone(),
                        format!("{}/{}", s.execution_generation, s.attempt),
                        s.adapter.clone(),
                        s.phase.clone(),
                        s.exit_code.map_or_else(|| "-".into(), |c| c.to_string()),
                        render::age(&s.created_at),
                        s.message.clone(),
                    ]
                })
                .collect();
            let headers = ["SESSION", "ASSIGNMENT", "GEN/ATTEMPT", "ADAPTER", "PHASE", "EXIT", "AGE", "MESSAGE"];
            print!("{}", render::table(&headers, &rows));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn sessions_show(global: &Global, id: &str, format: Format) -> anyhow::Result<ExitCode> {
    let item = session_item(find_session(global, id).await?);
    match format {
        Format::Json => print!("{}", render::json(&List::of(vec![item]))?),
        Format::Text => print!("{}", render::sanitize_block(&serde_json::to_string_pretty(&item)?)),
    }
    println!();
    Ok(ExitCode::SUCCESS)
}

pub async fn sessions_logs(global: &Global, id: &str) -> anyhow::Result<ExitCode> {
    let session = find_session(global, id).await?;
    let Some(dir) = session.exec_dir else { anyhow::bail!("session {} has no execution folder", session.id) };
    for (stream, truncated) in [("stdout", session.stdout_truncated), ("stderr", session.stderr_truncated)] {
        let path = std::path::Path::new(&dir).join(format!("{stream}.log"));
        let text = std::fs::read(&path).unwrap_or_default();
        println!("==> {stream}{}", if truncated { " (truncated at the capture limit)" } else { "" });
        print!("{}", render::sanitize_block(&String::from_utf8_lossy(&text)));
        if !text.ends_with(b"\n") && !text.is_empty() {
            println!();
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn find_proposal(global: &Global, id: &str) -> anyhow::Result<ProposalRecord> {
    let store = open_for_reading(global).await?;
    store.proposal(id).await?.ok_or_else(|| anyhow::anyhow!("no single proposal matches {id:?}"))
}

pub async fn proposals_list(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    let store = open_for_reading(global).await?;
    let items: Vec<ProposalItem> = store.proposals().await?.into_iter().map(proposal_item).collect();
    match format {
        Format::Json => print!("{}", render::json(&List::of(items))?),
        Format::Text => {
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|p| {
                    vec![
                        p.id.clone(),
                        p.assignment.clone(),
                        p.state.clone(),
                        format!("{} files +{} -{}", p.files_changed, p.insertions, p.deletions),
                        p.base_commit.chars().take(12).collect(),
                        if p.flags.is_empty() { "-".into() } else { p.flags.join("; ") },
                    ]
                })
                .collect();
            print!("{}", render::table(&["PROPOSAL", "ASSIGNMENT", "STATE", "CHANGES", "BASE", "FLAGS"], &rows));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn proposals_show(global: &Global, id: &str, format: Format) -> anyhow::Result<ExitCode> {
    let record = find_proposal(global, id).await?;
    let patch = std::fs::read(&record.patch_path)?;
    let item = proposal_item(record);
    match format {
        Format::Json => print!("{}", render::json(&List::of(vec![item]))?),
        Format::Text => {
            println!("Proposal:    {}", item.id);
            println!("Assignment:  {} (execution generation {})", item.assignment, item.execution_generation);
            println!("Session:     {}", item.session);
            println!("Adapter:     {}", render::sanitize(&item.adapter));
            println!("Base:        {}", item.base_commit);
            println!("State:       {} (nothing applies proposals)", item.state);
            println!("Changes:     {} files, +{} -{}", item.files_changed, item.insertions, item.deletions);
            println!("SHA-256:     {}", item.sha256);
            for flag in &item.flags {
                println!("Flag:        {}", render::sanitize(flag));
            }
            println!();
            print!("{}", render::sanitize_block(&String::from_utf8_lossy(&patch)));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn proposals_export(global: &Global, id: &str) -> anyhow::Result<ExitCode> {
    let record = find_proposal(global, id).await?;
    let patch = std::fs::read(&record.patch_path)?;
    if roundtable_specs::digest::sha256_hex(&patch) != record.sha256 {
        anyhow::bail!("the stored patch of {} does not match its recorded sha256; refusing to export it", record.id);
    }
    std::io::stdout().write_all(&patch)?;
    Ok(ExitCode::SUCCESS)
}
