//! `roundtable sessions …` and `roundtable proposals …`: what executions recorded. Everything an
//! agent produced is escaped before it reaches the terminal.

use std::io::Write as _;
use std::process::ExitCode;

use roundtable_specs::List;

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::render;

pub async fn sessions_list(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    let items = open_for_reading(global).await?.sessions().await?;
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
                        s.phase.to_string(),
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
    let item = open_for_reading(global).await?.session(id).await?;
    match format {
        Format::Json => print!("{}", render::json(&List::of(vec![item]))?),
        Format::Text => print!("{}", render::sanitize_block(&serde_json::to_string_pretty(&item)?)),
    }
    println!();
    Ok(ExitCode::SUCCESS)
}

pub async fn sessions_logs(global: &Global, id: &str) -> anyhow::Result<ExitCode> {
    let logs = open_for_reading(global).await?.session_logs(id).await?;
    for (stream, text, truncated) in
        [("stdout", &logs.stdout, logs.stdout_truncated), ("stderr", &logs.stderr, logs.stderr_truncated)]
    {
        println!("==> {stream}{}", if truncated { " (truncated at the capture limit)" } else { "" });
        print!("{}", render::sanitize_block(&String::from_utf8_lossy(text)));
        if !text.ends_with(b"\n") && !text.is_empty() {
            println!();
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn proposals_list(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    let items = open_for_reading(global).await?.proposals().await?;
    match format {
        Format::Json => print!("{}", render::json(&List::of(items))?),
        Format::Text => {
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|p| {
                    vec![
                        p.id.clone(),
                        p.assignment.clone(),
                        p.state.to_string(),
                        format!("{} files +{} -{}", p.files_changed, p.insertions, p.deletions),
                        p.base_commit.chars().take(12).collect(),
                        if p.flags.is_empty() {
                            "-".into()
                        } else {
                            p.flags.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
                        },
                    ]
                })
                .collect();
            print!("{}", render::table(&["PROPOSAL", "ASSIGNMENT", "STATE", "CHANGES", "BASE", "FLAGS"], &rows));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn proposals_show(global: &Global, id: &str, format: Format) -> anyhow::Result<ExitCode> {
    let found = open_for_reading(global).await?.proposal(id).await?;
    let (item, patch) = (found.item, found.patch);
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
                println!("Flag:        {}", render::sanitize(&flag.to_string()));
            }
            for refused in &item.rejected {
                println!("Rejected:    {} ({})", render::sanitize(&refused.path), render::sanitize(&refused.reason));
            }
            println!();
            print!("{}", render::sanitize_block(&String::from_utf8_lossy(&patch)));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn proposals_export(global: &Global, id: &str) -> anyhow::Result<ExitCode> {
    let found = open_for_reading(global).await?.proposal(id).await?;
    std::io::stdout().write_all(&found.patch)?;
    Ok(ExitCode::SUCCESS)
}
