//! `roundtable proposals accept|reject|provenance` and `roundtable provenance key|verify`: an
//! operator turning a pending proposal into a branch (or rejecting it), and checking what was
//! signed. The decisions are the service's (`service/src/delivery.rs`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use roundtable_delivery::provenance::{self, Envelope, PublicKey, SigningKey};
use roundtable_service::delivery::AcceptOptions;
use roundtable_specs::delivery::{GateOverride, ProposalGate};

use crate::cli::{Format, Global};
use crate::commands::audit::writer_key;
use crate::commands::state::{open_for_reading, open_for_writing};
use crate::render;

/// The project's provenance key: beside its audit key, `PROJECT.provenance.key`.
pub fn signing_key_path(global: &Global) -> anyhow::Result<PathBuf> {
    Ok(provenance::key_path_beside(&global.audit_key_path()?))
}

/// `--override` and `--reason` paired in order; one reason serves every override.
fn overrides(gates: &[ProposalGate], reasons: &[String]) -> anyhow::Result<Vec<GateOverride>> {
    if gates.is_empty() {
        anyhow::ensure!(reasons.is_empty(), "--reason goes with --override GATE");
        return Ok(Vec::new());
    }
    anyhow::ensure!(
        reasons.len() == 1 || reasons.len() == gates.len(),
        "{} --override but {} --reason: give one reason for all, or one per override",
        gates.len(),
        reasons.len()
    );
    Ok(gates
        .iter()
        .enumerate()
        .map(|(at, gate)| GateOverride { gate: *gate, reason: reasons[at.min(reasons.len() - 1)].clone() })
        .collect())
}

pub struct AcceptArgs<'a> {
    pub id: &'a str,
    pub branch: Option<String>,
    pub push: Option<String>,
    pub repo: Option<PathBuf>,
    pub gates: &'a [ProposalGate],
    pub reasons: &'a [String],
    pub format: Format,
}

pub async fn accept(global: &Global, args: AcceptArgs<'_>) -> anyhow::Result<ExitCode> {
    let overrides = overrides(args.gates, args.reasons)?;
    let service = open_for_writing(global).await?;
    let key = writer_key(global, service.store()).await?;
    let options = AcceptOptions {
        repo: args.repo,
        branch: args.branch,
        push: args.push,
        overrides,
        signing_key: signing_key_path(global)?,
    };
    let accepted = match service.accept_proposal(args.id, &options, &key).await {
        Ok(accepted) => accepted,
        Err(error) => {
            eprintln!("roundtable: {}", render::sanitize_block(&format!("{error}")));
            return Ok(ExitCode::from(1));
        }
    };
    let decision = &accepted.decision;
    refresh_assignment(global, &service, &accepted.proposal).await;
    match args.format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(args.format, &decision)?)
        }
        Format::Text | Format::Wide => {
            println!(
                "accepted {} as {} on {}",
                accepted.proposal,
                decision.commit.as_deref().unwrap_or_default(),
                render::sanitize(decision.branch.as_deref().unwrap_or_default())
            );
            for finding in &decision.findings {
                println!("  passed by override: {}", render::sanitize(&finding.to_string()));
            }
            if let Some(remote) = &decision.pushed_to {
                println!("  pushed to {}", render::sanitize(remote));
            }
            println!(
                "  provenance: git notes --ref {} show {}",
                roundtable_service::delivery::NOTES_REF,
                decision.commit.as_deref().unwrap_or_default()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn reject(global: &Global, id: &str, reason: &str) -> anyhow::Result<ExitCode> {
    let service = open_for_writing(global).await?;
    let key = writer_key(global, service.store()).await?;
    let by = std::env::var("USER").unwrap_or_else(|_| format!("uid {}", rustix_uid()));
    match service.reject_proposal(id, reason, &by, &key).await {
        Ok(rejected) => {
            refresh_assignment(global, &service, &rejected.proposal).await;
            println!("rejected {}", render::sanitize(&rejected.proposal));
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("roundtable: {}", render::sanitize_block(&format!("{error}")));
            Ok(ExitCode::from(1))
        }
    }
}

/// The Assignment of proposal `id` reconciled now, so `status` says where its review stands.
async fn refresh_assignment(global: &Global, service: &roundtable_service::Service, id: &str) {
    if let Ok(found) = service.proposal(id).await {
        let key = roundtable_specs::ObjectKey::new(roundtable_specs::Kind::Assignment, found.item.assignment);
        crate::commands::reconcile::refresh(global, service, &key).await;
    }
}

fn rustix_uid() -> u32 {
    std::fs::metadata("/proc/self").map(|meta| std::os::unix::fs::MetadataExt::uid(&meta)).unwrap_or(u32::MAX)
}

pub async fn diff(global: &Global, id: &str, stat: bool) -> anyhow::Result<ExitCode> {
    let found = open_for_reading(global).await?.proposal(id).await?;
    if !stat {
        print!("{}", render::sanitize_block(&String::from_utf8_lossy(&found.patch)));
        return Ok(ExitCode::SUCCESS);
    }
    let read = roundtable_delivery::added::read(&found.patch);
    let width = read.files.iter().map(|f| f.path.chars().count()).max().unwrap_or(0).min(60);
    for file in &read.files {
        let counts = if file.binary { "binary".to_owned() } else { format!("+{} -{}", file.added.len(), file.removed) };
        println!(" {:<width$} | {counts}", render::sanitize(&file.path));
    }
    let (added, removed): (usize, u64) =
        read.files.iter().map(|f| (f.added.len(), f.removed)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    // As git's own summary reads.
    println!(
        " {} changed, {}(+), {}(-)",
        render::count(read.files.len(), "file", "files"),
        render::count(added, "insertion", "insertions"),
        render::count(removed, "deletion", "deletions")
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn provenance_of(global: &Global, id: &str) -> anyhow::Result<ExitCode> {
    let envelope = open_for_reading(global).await?.proposal_provenance(id).await?;
    println!("{}", serde_json::to_string_pretty(&envelope)?);
    Ok(ExitCode::SUCCESS)
}

pub fn public_key(global: &Global) -> anyhow::Result<ExitCode> {
    let key = SigningKey::load_or_create(&signing_key_path(global)?)?;
    println!("{}", serde_json::to_string_pretty(&key.public())?);
    Ok(ExitCode::SUCCESS)
}

pub fn verify(
    file: &PathBuf,
    public_key: &PathBuf,
    commit: Option<&str>,
    keyid: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let envelope: Envelope =
        serde_json::from_slice(&std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?)
            .with_context(|| format!("{} is not a DSSE envelope", file.display()))?;
    let key_text =
        std::fs::read_to_string(public_key).with_context(|| format!("cannot read {}", public_key.display()))?;
    let expected = provenance::Expected { keyid, commit };
    match PublicKey::parse(&key_text).and_then(|key| provenance::verify(&envelope, &key, expected)) {
        Ok(verified) => {
            println!("verified: signed by {}", verified.keyid);
            for subject in verified.statement["subject"].as_array().into_iter().flatten() {
                println!(
                    "  subject {} {}",
                    render::sanitize(subject["name"].as_str().unwrap_or_default()),
                    render::sanitize(&subject["digest"].to_string())
                );
            }
            if commit.is_none() {
                eprintln!(
                    "roundtable: the subject was not compared with a commit: pass --commit SHA (the commit whose note this is)"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("roundtable: not verified: {}", render::sanitize_block(&error.to_string()));
            Ok(ExitCode::from(1))
        }
    }
}
