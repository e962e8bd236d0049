//! `roundtable audit verify|export`: the HMAC audit chain from the operator's side, and the keys
//! commands write and read it with (where the key lives is `crate::project`'s to say).

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use roundtable_specs::audit::{Operated, Operator, OperatorAction};
use roundtable_store::audit::{AuditKey, ChainRow, KeyChoice, Verified, verify_rows};

use crate::cli::Global;
use crate::commands::state::open_for_reading;

/// The key a command that writes `store`'s chain uses: the existing one, the first one, or a
/// refusal when it was lost (only `start --new-audit-key` replaces a lost key).
pub async fn writer_key(global: &Global, store: &roundtable_store::Store) -> anyhow::Result<AuditKey> {
    Ok(store.audit_key(&global.audit_key_path()?, KeyChoice::Existing).await?)
}

/// The key a command that only reads `store`'s chain verifies with: the key file when it is
/// there, none when it is not (a reader never creates one).
pub fn reader_key(global: &Global) -> anyhow::Result<Option<AuditKey>> {
    let path = global.audit_key_path()?;
    if !path.try_exists().with_context(|| format!("cannot look for the audit key {}", path.display()))? {
        return Ok(None);
    }
    Ok(Some(AuditKey::load(&path)?))
}

/// Anchors an operator's action (`operator.reconcile`, `operator.prune`, `operator.register`) in
/// the project's audit chain. A project with no recorded state has no chain to anchor in yet;
/// the key is taken like `start` takes it.
pub async fn record_operator(global: &Global, subject: &str, action: impl OperatorAction) -> anyhow::Result<()> {
    let Some(store) = roundtable_store::Store::open_existing(&global.store_url()).await? else { return Ok(()) };
    let key = writer_key(global, &store).await?;
    let user = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_default();
    let record = Operated { action, by: Operator::Cli { pid: std::process::id(), user } };
    let entry = roundtable_store::audit::AuditedEntry::of(subject, &record)?;
    store.append_audited(&key, &entry).await?;
    store.close().await;
    Ok(())
}

pub async fn verify(
    global: &Global,
    from: Option<i64>,
    to: Option<i64>,
    slice: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let key = AuditKey::load(&global.audit_key_path()?)?;
    let verified = match slice {
        Some(file) => {
            let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
            let rows: Vec<ChainRow> = text
                .lines()
                .filter(|line| !line.trim().is_empty())
                .enumerate()
                .map(|(n, line)| {
                    serde_json::from_str(line).with_context(|| format!("{}:{}: not a chain row", file.display(), n + 1))
                })
                .collect::<anyhow::Result<_>>()?;
            if rows.is_empty() {
                println!("audit chain: the slice {} holds no entries; nothing is verified", file.display());
                return Ok(ExitCode::from(1));
            }
            // A slice proves its own entries; the link into it is taken as given.
            let start = rows.first().map(|row| row.prev_mac.clone()).unwrap_or_default();
            verify_rows(&key, &rows, start, None)
        }
        None => open_for_reading(global).await?.store().verify_chain(&key, from, to).await?,
    };
    match verified {
        Ok(verified) => Ok(report(&verified)),
        Err(broken) => {
            println!("audit chain broken: {broken}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Prints what a verification established. Entries sealed under a lost key are never called
/// verified: exit 0 needs at least the entries under the key in use to verify.
fn report(verified: &Verified) -> ExitCode {
    if let Some(lost) = &verified.unverified {
        println!(
            "audit chain NOT verified for entries {}-{}: they were sealed under an audit key that was lost and replaced at entry {} (`start --new-audit-key`); only their order and links were checked, their content may have been changed",
            lost.first, lost.last, lost.replaced_at
        );
    }
    match &verified.head {
        Some(head) => {
            let first = verified.unverified.map_or(String::new(), |lost| format!("from entry {} ", lost.last + 1));
            println!(
                "audit chain verified {first}through entry {} (head {})",
                head.seq,
                &head.mac[..16.min(head.mac.len())]
            );
            ExitCode::SUCCESS
        }
        None if verified.unverified.is_some() => ExitCode::from(1),
        None => {
            println!("audit chain: no entries in range");
            ExitCode::SUCCESS
        }
    }
}

pub async fn export(global: &Global, from: i64, to: i64) -> anyhow::Result<ExitCode> {
    let rows = open_for_reading(global).await?.store().chain(from, to).await?;
    let mut out = std::io::stdout().lock();
    for row in rows {
        writeln!(out, "{}", serde_json::to_string(&row)?)?;
    }
    Ok(ExitCode::SUCCESS)
}
