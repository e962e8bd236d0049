//! `roundtable sessions …` and `roundtable proposals …`: what executions recorded. Everything an
//! agent produced is escaped before it reaches the terminal.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use roundtable_specs::List;
use roundtable_specs::output::{LogLine, SessionItem, SessionLogsBody};

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::render;

pub async fn sessions_list(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    crate::commands::state::refuse_outside_a_project(global)?;
    let items = open_for_reading(global).await?.sessions().await?;
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(items))?)
        }
        Format::Text | Format::Wide => {
            let rows = items
                .iter()
                .map(|s| {
                    let cells = vec![
                        s.id.clone(),
                        s.assignment.clone(),
                        format!("{}/{}", s.execution_generation, s.attempt),
                        s.adapter.clone(),
                        s.phase.to_string(),
                        s.exit_code.map_or_else(|| "-".into(), |c| c.to_string()),
                        render::age(&s.created_at),
                        s.message.clone(),
                    ];
                    let usage = s.detail.agent.as_ref().and_then(|a| a.usage.as_ref());
                    let wide = vec![
                        s.cause.map_or_else(|| "-".into(), |c| c.to_string()),
                        s.started_at
                            .as_deref()
                            .map_or_else(|| "-".into(), |at| render::duration(at, s.finished_at.as_deref())),
                        usage.map_or_else(|| "-".into(), |u| format!("{}/{}", u.input_tokens, u.output_tokens)),
                        s.detail.runtime.as_ref().map_or_else(|| "-".into(), |r| r.class.to_string()),
                        s.image.clone().unwrap_or_else(|| "-".into()),
                    ];
                    (cells, wide)
                })
                .collect();
            let headers = ["SESSION", "ASSIGNMENT", "GEN/ATTEMPT", "ADAPTER", "PHASE", "EXIT", "AGE", "MESSAGE"];
            let wide_headers = ["CAUSE", "DURATION", "TOKENS IN/OUT", "RUNTIME", "IMAGE"];
            print!("{}", render::table_maybe_wide(&headers, &wide_headers, rows, format == Format::Wide));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn sessions_show(global: &Global, id: &str, format: Format) -> anyhow::Result<ExitCode> {
    let item = open_for_reading(global).await?.session(id).await?;
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(vec![item]))?)
        }
        Format::Text | Format::Wide => print!("{}", session_text(&item)),
    }
    Ok(ExitCode::SUCCESS)
}

/// One `Label:  value` line; the value escaped, so nothing in it can start a line of its own or
/// drive the terminal.
fn field(out: &mut String, label: &str, value: &str) {
    let _ = writeln!(out, "{:<12} {}", format!("{label}:"), render::sanitize(value));
}

/// `sessions show` for a terminal: the session's record as a readable block, like `proposals show`.
fn session_text(item: &SessionItem) -> String {
    let or_dash = |value: Option<&str>| value.unwrap_or("-").to_owned();
    let detail = &item.detail;
    let mut out = String::new();
    field(&mut out, "Session", &item.id);
    field(
        &mut out,
        "Assignment",
        &format!("{} (execution generation {}, attempt {})", item.assignment, item.execution_generation, item.attempt),
    );
    field(&mut out, "Adapter", &item.adapter);
    field(&mut out, "Image", &or_dash(item.image.as_deref()));
    field(&mut out, "Phase", item.phase.as_str());
    field(&mut out, "Cause", item.cause.map_or("-", |cause| cause.as_str()));
    field(&mut out, "Exit code", &item.exit_code.map_or_else(|| "-".into(), |code| code.to_string()));
    field(&mut out, "Message", &item.message);
    field(&mut out, "Base commit", &or_dash(item.base_commit.as_deref()));
    if let Some(external) = &item.external_session_id {
        field(&mut out, "External ID", external);
    }
    field(&mut out, "Controller", &item.controller_run);
    let at = |value: Option<&str>| value.map_or_else(|| "-".into(), render::timestamp);
    field(&mut out, "Created", &render::timestamp(&item.created_at));
    field(&mut out, "Started", &at(item.started_at.as_deref()));
    field(&mut out, "Finished", &at(item.finished_at.as_deref()));
    if let Some(started) = &item.started_at {
        field(&mut out, "Duration", &render::duration(started, item.finished_at.as_deref()));
    }
    if !detail.timings_ms.is_empty() {
        let timings: Vec<String> = roundtable_specs::session::in_phase_order(&detail.timings_ms)
            .iter()
            .map(|(phase, ms)| format!("{phase} {ms} ms"))
            .collect();
        field(&mut out, "Timings", &timings.join(", "));
    }
    let stream = |bytes: Option<i64>, truncated: bool| {
        let bytes = bytes.map_or_else(|| "-".into(), |b| format!("{b} bytes"));
        if truncated { format!("{bytes} (truncated at the capture limit)") } else { bytes }
    };
    field(&mut out, "Stdout", &stream(item.stdout_bytes, item.stdout_truncated));
    field(&mut out, "Stderr", &stream(item.stderr_bytes, item.stderr_truncated));
    field(
        &mut out,
        "Manifest",
        &format!("{} given to the agent", render::count(detail.manifest.len(), "file", "files")),
    );
    for withheld in &detail.withheld {
        field(&mut out, "Withheld", &format!("{} ({})", withheld.path, withheld.reason));
    }
    if let Some(runtime) = &detail.runtime {
        let proven = match detail.self_check.as_ref().and_then(|c| c.items.iter().find(|i| i.name == "kernel")) {
            Some(item) if item.ok => "proven by the self-check",
            Some(_) => "NOT shown by the self-check",
            None => "not checked",
        };
        field(&mut out, "Runtime", &format!("{} ({}, {proven})", runtime.class, runtime.kernel.described()));
    }
    if let Some(check) = &detail.self_check {
        let failures: Vec<String> = check.failures().map(|f| format!("{}: {}", f.name, f.detail)).collect();
        let verdict = if check.ok { format!("passed ({} items)", check.items.len()) } else { "FAILED".into() };
        field(&mut out, "Self-check", &verdict);
        for failure in failures {
            field(&mut out, "Check failed", &failure);
        }
    }
    if let Some(paused) = detail.paused_for_export {
        field(&mut out, "Paused", if paused { "yes, before the export" } else { "no" });
    }
    if let Some(export) = &detail.export {
        field(
            &mut out,
            "Export",
            &format!(
                "{}, {}",
                render::count(export.files, "file", "files"),
                render::count(export.bytes, "byte", "bytes")
            ),
        );
        for rejected in &export.rejected {
            field(&mut out, "Rejected", &format!("{} ({})", rejected.path, rejected.reason));
        }
        for stripped in &export.stripped_bits {
            field(&mut out, "Stripped", &format!("{stripped} (setuid, setgid or sticky bit dropped)"));
        }
        for link in &export.hard_links {
            field(&mut out, "Hard link", link);
        }
    }
    for not_given in &detail.not_given {
        field(&mut out, "Not given", &format!("{} ({})", not_given.path, not_given.reason));
    }
    if let Some(egress) = &detail.egress {
        let counters = &egress.counters;
        field(&mut out, "Egress", &format!("{} via {} to {}", egress.state, egress.socket, egress.hosts.join(", ")));
        field(
            &mut out,
            "Tunnels",
            &format!(
                "{} allowed, {} denied, {} abandoned, {} active; {} bytes in, {} bytes out",
                counters.allowed,
                counters.denied,
                counters.abandoned,
                counters.active,
                counters.bytes_in,
                counters.bytes_out
            ),
        );
        for (reason, count) in &counters.denials {
            field(&mut out, "Denied", &format!("{count} × {}", reason.as_str()));
        }
    }
    if let Some(broker) = &detail.broker {
        field(&mut out, "Broker", &format!("{} via {} for {}", broker.state, broker.socket, broker.hosts.join(", ")));
        let refused: u64 = broker.refused.values().sum();
        field(
            &mut out,
            "Requests",
            &format!(
                "{} passed, {refused} refused; tokens {} in, {} out",
                broker.requests, broker.tokens.input, broker.tokens.output
            ),
        );
        for (reason, count) in &broker.refused {
            field(&mut out, "Refused", &format!("{count} × {reason}"));
        }
        if !broker.budget.is_unlimited() {
            field(&mut out, "Budget", &budget_line(broker));
        }
        if broker.unreadable_usage > 0 {
            field(
                &mut out,
                "Unreadable",
                &format!("{} responses whose usage could not be read", broker.unreadable_usage),
            );
        }
    }
    out
}

/// What a budget allowed, what was spent and what is left, for `sessions show`.
fn budget_line(broker: &roundtable_specs::broker::BrokerReport) -> String {
    let (tokens_left, requests_left) = broker.left();
    let mut parts = Vec::new();
    if let (Some(cap), Some(left)) = (broker.budget.tokens, tokens_left) {
        parts.push(format!("tokens {} spent of {cap}, {left} left", broker.tokens.total()));
    }
    if let (Some(cap), Some(left)) = (broker.budget.requests, requests_left) {
        parts.push(format!("requests {} spent of {cap}, {left} left", broker.requests));
    }
    if broker.exhausted {
        parts.push("spent: the next model request is refused".into());
    }
    parts.join("; ")
}

pub async fn sessions_logs(global: &Global, id: &str, follow: bool, format: Format) -> anyhow::Result<ExitCode> {
    if follow {
        match follow_logs(global, id, format).await? {
            Followed::Ended => return Ok(ExitCode::SUCCESS),
            // Finished, or no daemon runs here: its kept output is all there is.
            Followed::NotRunning(why) => eprintln!("roundtable: {why}; printing its kept output"),
        }
    }
    let logs = open_for_reading(global).await?.session_logs(id).await?;
    if format.is_document() {
        let body = SessionLogsBody {
            session: logs.session,
            stdout: String::from_utf8_lossy(&logs.stdout).into_owned(),
            stdout_truncated: logs.stdout_truncated,
            stderr: String::from_utf8_lossy(&logs.stderr).into_owned(),
            stderr_truncated: logs.stderr_truncated,
        };
        print!("{}", render::document(format, &body)?);
        return Ok(ExitCode::SUCCESS);
    }
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

/// How following a session's output ended.
enum Followed {
    /// It was followed to its end.
    Ended,
    /// There was nothing to follow: why.
    NotRunning(String),
}

/// Prints session `id`'s output as the daemon streams it, until the session ends.
async fn follow_logs(global: &Global, id: &str, format: Format) -> anyhow::Result<Followed> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        anyhow::bail!("{id:?} is not a session ID (letters, digits, '-' and '_')");
    }
    let state_dir = global.state_dir();
    if roundtable_store::lock::holder(&state_dir).is_none() {
        return Ok(Followed::NotRunning("no daemon runs here, so no session is running".into()));
    }
    let path = format!("/v1/sessions/{id}/logs?follow=true");
    let mut stream = match roundtable_api::client::stream(&state_dir, &path).await? {
        Ok(stream) => stream,
        Err(answer) => anyhow::bail!(
            "the daemon answered {}: {}",
            answer.status,
            crate::commands::status::daemon_message(&answer.body)
        ),
    };
    let mut printed = false;
    while let Some(event) = stream.next().await? {
        match event.event.as_str() {
            "line" => {
                let line: LogLine = serde_json::from_str(&event.data)
                    .map_err(|error| anyhow::anyhow!("the daemon sent a line that is not one: {error}"))?;
                match format {
                    Format::Text | Format::Wide => println!("{}", render::sanitize(&line.text)),
                    _ => println!("{}", serde_json::to_string(&line)?),
                }
                std::io::stdout().flush()?;
                printed = true;
            }
            "end" => {
                let end: serde_json::Value = serde_json::from_str(&event.data).unwrap_or_default();
                let reason = end["reason"].as_str().unwrap_or("the session ended").to_owned();
                let phase = end["phase"].as_str().unwrap_or("unknown").to_owned();
                if !printed && phase != "Running" && phase != "Queued" {
                    return Ok(Followed::NotRunning(format!("session {id} is {phase}")));
                }
                eprintln!("roundtable: {reason} ({phase})");
                return Ok(Followed::Ended);
            }
            _ => {}
        }
    }
    eprintln!("roundtable: the daemon stopped; the follow ended");
    Ok(Followed::Ended)
}

pub async fn proposals_list(
    global: &Global,
    state: Option<roundtable_specs::session::ProposalState>,
    format: Format,
) -> anyhow::Result<ExitCode> {
    crate::commands::state::refuse_outside_a_project(global)?;
    let mut items = open_for_reading(global).await?.proposals().await?;
    items.retain(|item| state.is_none_or(|state| item.state == state));
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(items))?)
        }
        Format::Text | Format::Wide => {
            let rows = items
                .iter()
                .map(|p| {
                    let cells = vec![
                        p.id.clone(),
                        p.assignment.clone(),
                        p.state.to_string(),
                        format!(
                            "{} +{} -{}",
                            render::count(p.files_changed, "file", "files"),
                            p.insertions,
                            p.deletions
                        ),
                        p.base_commit.chars().take(12).collect(),
                        if p.flags.is_empty() {
                            "-".into()
                        } else {
                            p.flags.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
                        },
                    ];
                    let wide = vec![p.session.clone(), p.adapter.clone(), render::age(&p.created_at)];
                    (cells, wide)
                })
                .collect();
            let headers = ["PROPOSAL", "ASSIGNMENT", "STATE", "CHANGES", "BASE", "FLAGS"];
            print!(
                "{}",
                render::table_maybe_wide(&headers, &["SESSION", "ADAPTER", "AGE"], rows, format == Format::Wide)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn proposals_show(global: &Global, id: &str, format: Format) -> anyhow::Result<ExitCode> {
    let service = open_for_reading(global).await?;
    let found = service.proposal(id).await?;
    // What the review gates would find at accept, first: a reviewer reads these before the diff.
    // Where the audit key can be read, the added lines are compared with the held credentials.
    let key = crate::commands::audit::reader_key(global).ok().flatten();
    let findings = service.proposal_findings(&found.item.id, key.as_ref()).await?;
    let (item, patch) = (found.item, found.patch);
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(vec![item]))?)
        }
        Format::Text | Format::Wide => {
            println!("Proposal:    {}", render::sanitize(&item.id));
            println!(
                "Assignment:  {} (execution generation {})",
                render::sanitize(&item.assignment),
                item.execution_generation
            );
            println!("Session:     {}", render::sanitize(&item.session));
            println!("Adapter:     {}", render::sanitize(&item.adapter));
            println!("Base:        {}", item.base_commit);
            match &item.decision {
                Some(decision) => println!(
                    "State:       {} by {} at {}{}",
                    item.state,
                    render::sanitize(&decision.by),
                    decision.at,
                    match (&decision.branch, &decision.commit) {
                        (Some(branch), Some(commit)) => format!(" as {commit} on {}", render::sanitize(branch)),
                        _ => format!(": {}", render::sanitize(&decision.reason)),
                    }
                ),
                None => println!("State:       {} (only an operator's accept makes it a commit)", item.state),
            }
            println!(
                "Changes:     {}, +{} -{}",
                render::count(item.files_changed, "file", "files"),
                item.insertions,
                item.deletions
            );
            println!("SHA-256:     {}", item.sha256);
            for finding in &findings {
                println!("Finding:     {}", render::sanitize(&finding.to_string()));
            }
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
