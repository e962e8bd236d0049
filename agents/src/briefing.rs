//! The resume briefing: what a resumed provider session is told (task, earlier sessions, notes
//! left through MCP, live claims, proposals made). One text for `roundtable resume` and for the
//! execution manager's resume launches.

use roundtable_store::{Claim, Note, ProposalRecord, SessionRecord, Store};

/// What the store holds about one assignment beyond its sessions: notes, live claims, proposals.
#[derive(Debug, Clone, Default)]
pub struct Board {
    pub notes: Vec<Note>,
    pub claims: Vec<Claim>,
    pub proposals: Vec<ProposalRecord>,
}

impl Board {
    /// Reads `assignment`'s board from the store.
    pub async fn read(store: &Store, assignment: &str) -> roundtable_store::Result<Self> {
        let now = roundtable_store::now();
        let claims = store.live_claims(&now).await?.into_iter().filter(|c| c.assignment == assignment).collect();
        let proposals = store.proposals().await?.into_iter().filter(|p| p.assignment == assignment).collect();
        Ok(Self { notes: store.notes(assignment).await?, claims, proposals })
    }
}

/// The briefing for `assignment`, bounded: the ten newest sessions and the twenty newest notes.
pub fn text(
    assignment: &str,
    task: Option<&roundtable_specs::assignment::Task>,
    sessions: &[SessionRecord],
    board: &Board,
) -> String {
    let Board { notes, claims, proposals } = board;
    use std::fmt::Write as _;
    let mut text = format!("You are resuming assignment {assignment}.\n");
    if let Some(task) = task {
        let _ = writeln!(text, "\nTask {}: {}\n{}", task.id, task.title, task.prompt.trim_end());
    }
    if !sessions.is_empty() {
        text.push_str("\nEarlier sessions (newest first):\n");
        for session in sessions.iter().take(10) {
            let external = session.external_session_id.as_deref().unwrap_or("-");
            let _ = writeln!(
                text,
                "- {} {} {} (provider session {external}): {}",
                session.id, session.adapter, session.phase, session.message
            );
        }
    }
    if !notes.is_empty() {
        text.push_str("\nNotes left by earlier sessions:\n");
        for note in notes.iter().rev().take(20).rev() {
            let _ = writeln!(text, "- [{}] {}", note.session_id, note.text.trim_end());
        }
    }
    if !claims.is_empty() {
        text.push_str("\nPaths claimed by live sessions (leave them alone):\n");
        for claim in claims {
            let _ = writeln!(text, "- {} (session {}, until {})", claim.path, claim.session_id, claim.expires_at);
        }
    }
    if !proposals.is_empty() {
        text.push_str("\nProposals already made (pending review; nothing applied them):\n");
        for proposal in proposals {
            let _ = writeln!(
                text,
                "- {} {}: {} files, +{} -{}",
                proposal.id, proposal.state, proposal.files_changed, proposal.insertions, proposal.deletions
            );
        }
    }
    text
}
