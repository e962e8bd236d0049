//! Agent diagnostic reports, kept whole as the JSON that was first returned, by id and by adapter.

use roundtable_specs::diagnostics::DiagnosticReport;
use sqlx::Row;

use crate::{Error, Result, Store, now};

fn parse(id: &str, json: &str) -> Result<DiagnosticReport> {
    serde_json::from_str(json).map_err(|error| Error::Corrupt(format!("diagnostic {id}: {error}")))
}

impl Store {
    /// Keeps `report`; its id is new (a second save of the same id is refused).
    pub async fn save_diagnostic(&self, report: &DiagnosticReport) -> Result<()> {
        let json = serde_json::to_string(report)
            .map_err(|error| Error::Corrupt(format!("diagnostic {}: {error}", report.id)))?;
        sqlx::query("INSERT INTO diagnostics (id, adapter, report_json, created_at) VALUES ($1, $2, $3, $4)")
            .bind(&report.id)
            .bind(&report.agent)
            .bind(json)
            .bind(now())
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// The report stored as `id`.
    pub async fn diagnostic(&self, id: &str) -> Result<Option<DiagnosticReport>> {
        let row = sqlx::query("SELECT report_json FROM diagnostics WHERE id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        match row {
            Some(row) => Ok(Some(parse(id, &row.try_get::<String, _>("report_json")?)?)),
            None => Ok(None),
        }
    }

    /// Every report of `adapter`, newest first.
    pub async fn diagnostics_of(&self, adapter: &str) -> Result<Vec<DiagnosticReport>> {
        let rows =
            sqlx::query("SELECT id, report_json FROM diagnostics WHERE adapter = $1 ORDER BY created_at DESC, id DESC")
                .bind(adapter)
                .fetch_all(self.pool())
                .await?;
        rows.iter()
            .map(|row| parse(&row.try_get::<String, _>("id")?, &row.try_get::<String, _>("report_json")?))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use roundtable_specs::diagnostics::{DiagnosticCheck, DiagnosticStatus};

    use super::*;

    fn report(id: &str, agent: &str) -> DiagnosticReport {
        DiagnosticReport {
            id: id.into(),
            agent: agent.into(),
            image: None,
            image_id: Some("sha256:0123".into()),
            status: DiagnosticStatus::Passed,
            started_at: now(),
            finished_at: now(),
            checks: vec![DiagnosticCheck::passed("image", "resolves")],
            excerpt: "codex 1.0 é\n".into(),
            excerpt_truncated: false,
        }
    }

    #[tokio::test]
    async fn reports_come_back_whole_by_id_and_newest_first_by_adapter() {
        let store = Store::open_in_memory().await.expect("store");
        let first = report("diag-000000000001", "codex");
        let second = report("diag-000000000002", "codex");
        store.save_diagnostic(&first).await.expect("save");
        store.save_diagnostic(&report("diag-000000000003", "generic")).await.expect("save");
        store.save_diagnostic(&second).await.expect("save");
        let read = store.diagnostic(&first.id).await.expect("read").expect("found");
        assert_eq!(serde_json::to_string(&read).ok(), serde_json::to_string(&first).ok());
        assert_eq!(store.diagnostic("diag-ffffffffffff").await.expect("read"), None);
        let ids: Vec<String> = store.diagnostics_of("codex").await.expect("list").into_iter().map(|r| r.id).collect();
        assert_eq!(ids, ["diag-000000000002", "diag-000000000001"]);
        assert!(store.diagnostics_of("gemini").await.expect("list").is_empty());
        assert!(store.save_diagnostic(&first).await.is_err(), "an id is kept once");
    }
}
