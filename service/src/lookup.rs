//! Finding one session or proposal by its ID or a unique prefix, and turning stored records into
//! the output items every front end shows.

use roundtable_specs::output::{ProposalItem, SessionItem};
use roundtable_store::{ProposalRecord, SessionRecord};

use crate::{Result, ServiceError};

/// How many matches an ambiguous prefix names.
pub const SHOWN_MATCHES: i64 = 10;

/// The one record among `found`, or an error that says there is none or names the matches.
pub fn single<T>(what: &'static str, prefix: &str, found: Vec<T>, id: impl Fn(&T) -> String) -> Result<T> {
    match found.len() {
        0 => Err(ServiceError::NotFound { what, id: prefix.to_owned() }),
        1 => found.into_iter().next().ok_or_else(|| ServiceError::NotFound { what, id: prefix.to_owned() }),
        _ => Err(ServiceError::Ambiguous { what, prefix: prefix.to_owned(), matches: found.iter().map(id).collect() }),
    }
}

pub fn session_item(record: SessionRecord) -> SessionItem {
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
        detail: record.detail,
    }
}

pub fn proposal_item(record: ProposalRecord) -> ProposalItem {
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
        flags: record.flags,
        rejected: record.rejected,
        state: record.state,
        created_at: record.created_at,
        reused_from: record.reused_from,
        decision: record.decision,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_names_one_thing_or_says_what_it_matches() {
        let id = |s: &&str| (*s).to_owned();
        assert_eq!(single("session", "ab", vec!["abc"], id).ok(), Some("abc"));
        assert!(matches!(single::<&str>("session", "zz", vec![], id), Err(ServiceError::NotFound { .. })));
        let error = single("proposal", "a", vec!["a1", "a2"], id).expect_err("ambiguous");
        assert_eq!(error.to_string(), "\"a\" matches 2 proposals: a1, a2; give more of the ID");
    }
}
