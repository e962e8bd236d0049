//! `roundtable admission check|list|canary`: receipt-gated admission from the operator's side.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use roundtable_service::{Service, ServiceError};
use roundtable_specs::List;
use roundtable_specs::admission::{AdmissionItem, CanaryVerdict};
use roundtable_specs::policy::AdmissionMode;
use roundtable_store::audit::AuditKey;

use crate::cli::{Format, Global};
use crate::commands::state::{open_for_reading, open_for_writing, open_for_writing_specs};
use crate::render;

fn binary() -> anyhow::Result<std::path::PathBuf> {
    std::env::current_exe().context("cannot find roundtable's own binary (it is mounted into probes)")
}

/// The writer's key: sealing and attesting anchor in the chain, so they take it like `start`.
async fn writer_key(global: &Global, service: &Service) -> anyhow::Result<Arc<AuditKey>> {
    Ok(Arc::new(crate::commands::audit::writer_key(global, service.store()).await?))
}

/// The refusal of a view that has no audit key to verify a sealed receipt with.
const UNVERIFIED: &str = roundtable_specs::admission::RefusalReason::ReceiptUnverified.as_str();

fn verdict_text(item: &AdmissionItem) -> String {
    match item.decisions.first() {
        _ if item.exempt => "exempt".into(),
        Some(d) if d.admitted() => "admitted".into(),
        Some(d) if d.reason.as_deref() == Some(UNVERIFIED) => "unverified (no audit key)".into(),
        Some(d) => format!("refused ({})", d.reason.as_deref().unwrap_or("?")),
        None => "unknown".into(),
    }
}

fn print_check(item: &AdmissionItem) {
    let admission = item.decisions.first();
    println!("adapter {}: {}", render::sanitize(&item.adapter), verdict_text(item));
    if let Some(decision) = admission {
        println!("  decision:      {}", render::sanitize(&decision.message));
        if !decision.remediation.is_empty() {
            println!("  remediation:   {}", render::sanitize(&decision.remediation));
        }
    }
    let consequence = match (item.mode, item.spawn) {
        (AdmissionMode::Off, _) => "the gates are off",
        (_, true) => "spawns go ahead",
        (_, false) => "spawns are refused",
    };
    println!(
        "  policy:        mode {}{}; {consequence}",
        item.mode.as_str(),
        if item.exempt { ", exempt" } else { "" }
    );
    let e = &item.evidence;
    let image = e.image.as_deref().unwrap_or("(the empty image)");
    let id = if e.image_id.is_empty() { "not resolved".to_owned() } else { e.image_id.clone() };
    println!("  image:         {} → {id}", render::sanitize(image));
    println!("  version:       {}", e.installed_version.as_deref().map_or("unknown".into(), render::sanitize));
    let contract =
        if e.contract.is_empty() { "none".to_owned() } else { format!("{} (sha256 {})", e.contract, e.contract_hash) };
    println!("  contract:      {}", render::sanitize(&contract));
    println!("  conformance:   {}: {}", e.conformance, render::sanitize(&e.conformance_detail));
    for transcript in &e.transcripts {
        let outcome = if transcript.passed { "replays clean".to_owned() } else { transcript.diverged.join("; ") };
        println!("  transcript:    {}: {}", render::sanitize(&transcript.name), render::sanitize(&outcome));
    }
    println!("  canary:        {}", e.canary);
    println!("  fingerprint:   {}", e.replay_fingerprint);
    if let Some(floor) = item.decisions.get(1) {
        println!("  security floor: {}", render::sanitize(&floor.to_string()));
    }
    match &item.receipt {
        Some(r) => println!(
            "  receipt:       {} ({}{}) sealed {}, expires {}; {}",
            r.id,
            r.verdict,
            r.reason.map(|reason| format!(": {reason}")).unwrap_or_default(),
            render::timestamp(&r.generated_at),
            r.expires_at
                .as_deref()
                .map_or_else(|| "never: not anchored in this project's audit chain".into(), render::timestamp),
            render::sanitize(&r.path)
        ),
        None => println!("  receipt:       none"),
    }
}

/// Exit 0 when it is admitted (or exempt), 1 when refused, 2 when no adapter has the name.
pub async fn check(global: &Global, name: &str, seal: bool, format: Format) -> anyhow::Result<ExitCode> {
    let (service, key, to_commit): (Service, Option<Arc<AuditKey>>, _) = if seal {
        let (service, to_commit) = open_for_writing_specs(global).await?;
        let key = writer_key(global, &service).await?;
        (service, Some(key), to_commit)
    } else {
        (open_for_reading(global).await?, None, None)
    };
    let admitter = service.admitter(binary()?, key);
    let item = match service.admission_check(&admitter, name, seal).await {
        Ok(item) => item,
        Err(ServiceError::NotFound { .. }) => {
            let (adapters, _) = roundtable_service::adapters(&global.dir, global.project().as_deref());
            let names: Vec<String> = adapters.into_iter().map(|a| a.name).collect();
            eprintln!("error: no adapter named {:?}; known adapters: {}", render::sanitize(name), names.join(", "));
            return Ok(ExitCode::from(2));
        }
        Err(error) => return Err(error.into()),
    };
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(vec![item.clone()]))?)
        }
        Format::Text | Format::Wide => print_check(&item),
    }
    if let Some(spec_dir) = to_commit {
        eprintln!(
            "note: the daemon reads receipts from the commit it follows: commit {} for it to use this one",
            spec_dir.join("admission").display()
        );
    }
    let admitted = item.exempt || item.decisions.first().is_some_and(|d| d.admitted());
    Ok(if admitted { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

pub async fn list(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    let service = open_for_reading(global).await?;
    let admitter = service.admitter(binary()?, None);
    let items = service.admission_list(&admitter).await?;
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(items))?)
        }
        Format::Text | Format::Wide => {
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|item| {
                    vec![
                        item.adapter.clone(),
                        item.mode.as_str().into(),
                        verdict_text(item),
                        if item.spawn { "yes".into() } else { "no".into() },
                        item.evidence.installed_version.clone().unwrap_or_else(|| "-".into()),
                        item.receipt.as_ref().map_or("-".into(), |r| r.id[..12].to_owned()),
                        item.receipt
                            .as_ref()
                            .and_then(|r| r.expires_at.as_deref())
                            .map_or_else(|| "-".into(), render::timestamp),
                    ]
                })
                .map(|row| row.iter().map(|cell| render::sanitize(cell)).collect())
                .collect();
            print!(
                "{}",
                render::table(&["ADAPTER", "MODE", "ADMISSION", "SPAWN", "VERSION", "RECEIPT", "EXPIRES"], &rows)
            );
            // A receipt this command could not verify is not "no receipt": say why, once each.
            for item in &items {
                if let Some(decision) = item.decisions.first().filter(|d| d.reason.as_deref() == Some(UNVERIFIED)) {
                    println!(
                        "{}: {}; {}",
                        render::sanitize(&item.adapter),
                        render::sanitize(&decision.message),
                        render::sanitize(&decision.remediation)
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Exit 0 when the canary is green, 1 when red.
pub async fn canary(global: &Global, name: &str, ttl: std::time::Duration, format: Format) -> anyhow::Result<ExitCode> {
    let service = open_for_writing(global).await?;
    let admitter = service.admitter(binary()?, Some(writer_key(global, &service).await?));
    let item = match service.admission_canary(&admitter, name, ttl).await {
        Ok(item) => item,
        Err(ServiceError::NotFound { .. }) => {
            eprintln!("error: no adapter named {:?}", render::sanitize(name));
            return Ok(ExitCode::from(2));
        }
        Err(error) => return Err(error.into()),
    };
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(vec![item.clone()]))?)
        }
        Format::Text | Format::Wide => {
            println!(
                "canary {} in {}: {} ({})",
                item.adapter,
                item.image_id,
                item.verdict,
                render::sanitize(&item.detail)
            );
            println!("  ran:      {}", render::sanitize(&crate::render::command_line(&item.argv)));
            println!("  expires:  {}", render::timestamp(&item.expires_at));
            if !item.output.is_empty() {
                println!("{}", render::sanitize_block(&item.output));
            }
        }
    }
    Ok(if item.verdict == CanaryVerdict::Green { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
