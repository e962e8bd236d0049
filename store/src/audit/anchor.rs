//! Finding the chain entries that anchor what was sealed, each accepted only when its MAC
//! verifies under the key in use, so a receipt copied from another project, or an entry written
//! without the key, anchors nothing: the `admission.receipt` entry naming a receipt's id, and the
//! `proposal.submitted` entry of a proposal, whose digest is the patch the agent made.

use roundtable_specs::audit::EntryKind;

use super::{AuditKey, ChainRow, chain_row};
use crate::{Result, Store};

/// The kind of the entry that anchors a sealed receipt; its record names the receipt's id
/// ([`roundtable_specs::audit::ReceiptSealed`]).
pub const RECEIPT_ENTRY: &str = EntryKind::AdmissionReceipt.as_str();

/// An audited entry found by what it records, its MAC verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub seq: i64,
    /// When the chain recorded it (the entry's `at`, which the MAC covers).
    pub at: String,
}

/// `text` as a `LIKE` pattern matching itself only (`\` escapes).
fn literal(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '%' | '_') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// The anchor `row` is for receipt `id`, when its entry is a [`RECEIPT_ENTRY`] naming exactly
/// `id` and its MAC verifies under `key`.
fn anchor_of(key: &AuditKey, row: &ChainRow, id: &str) -> Option<Anchor> {
    if key.mac(&row.prev_mac, &row.entry) != row.mac {
        return None;
    }
    let entry: serde_json::Value = serde_json::from_str(&row.entry).ok()?;
    let text = |field: &str| entry.get(field).and_then(serde_json::Value::as_str);
    if text("kind")? != RECEIPT_ENTRY || entry["record"]["receipt"].as_str()? != id {
        return None;
    }
    if entry["seq"].as_i64()? != row.seq {
        return None;
    }
    Some(Anchor { seq: row.seq, at: text("at")?.to_owned() })
}

/// The kind of the entry that seals a proposal's patch digest
/// ([`roundtable_specs::audit::ProposalSubmitted`]), under the subject `Proposal/ID`.
pub const PROPOSAL_ENTRY: &str = EntryKind::ProposalSubmitted.as_str();

/// The patch digest `row` seals for proposal `id`, when its entry is a [`PROPOSAL_ENTRY`] of
/// exactly `Proposal/ID` and its MAC verifies under `key`.
fn sealed_digest_of(key: &AuditKey, row: &ChainRow, id: &str) -> Option<String> {
    if key.mac(&row.prev_mac, &row.entry) != row.mac {
        return None;
    }
    let entry: serde_json::Value = serde_json::from_str(&row.entry).ok()?;
    if entry["kind"].as_str()? != PROPOSAL_ENTRY || entry["subject"].as_str()? != format!("Proposal/{id}") {
        return None;
    }
    if entry["seq"].as_i64()? != row.seq {
        return None;
    }
    entry["record"]["sha256"].as_str().map(str::to_owned)
}

impl Store {
    /// The patch digest the chain sealed when proposal `id` was submitted, from the newest
    /// [`PROPOSAL_ENTRY`] of it that verifies under `key`; `None` when none does. The proposal's
    /// row and its patch can be edited together; this entry cannot, unseen.
    pub async fn sealed_patch_digest(&self, key: &AuditKey, id: &str) -> Result<Option<String>> {
        let rows = self.sealed_rows_containing(&format!("\"subject\":\"Proposal/{id}\"")).await?;
        Ok(rows.iter().find_map(|row| sealed_digest_of(key, row, id)))
    }

    /// The newest [`RECEIPT_ENTRY`] entry that names receipt `id` and verifies under `key`.
    /// Entries sealed under a key that was since replaced do not verify: their receipts are
    /// sealed again.
    pub async fn receipt_anchor(&self, key: &AuditKey, id: &str) -> Result<Option<Anchor>> {
        let rows = self.sealed_rows_containing(&format!("\"receipt\":\"{id}\"")).await?;
        Ok(rows.iter().find_map(|row| anchor_of(key, row, id)))
    }

    /// The audited rows whose entry holds `text` literally, newest first. Canonical entries have
    /// no whitespace, so a field stands exactly like `"name":"value"` in them; the text narrows
    /// the rows, the MAC and the parsed entry decide.
    async fn sealed_rows_containing(&self, text: &str) -> Result<Vec<ChainRow>> {
        let rows = sqlx::query(
            "SELECT seq, prev_mac, mac, record FROM events \
             WHERE seq IS NOT NULL AND record LIKE $1 ESCAPE '\\' ORDER BY seq DESC",
        )
        .bind(format!("%{}%", literal(text)))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(chain_row).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_wildcards_in_an_id_match_only_themselves() {
        assert_eq!(literal(r"a%b_c\d"), r"a\%b\_c\\d");
        assert_eq!(literal("sha256"), "sha256");
    }
}
