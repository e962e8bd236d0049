//! The console's pages, each a template filled from the service functions the CLI and the API
//! call: the status table, an Assignment, a session, the proposals and one proposal, the
//! controllers and the audit chain.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use roundtable_specs::assignment::AssignmentSpec;
use roundtable_specs::output::{Health, ObjectStatus, SyncStatus};
use roundtable_specs::session::{ProposalState, SessionPhase};
use roundtable_specs::units::count;
use roundtable_specs::{Kind, ObjectKey};
use serde::Deserialize;

use super::links::{Linked, linked};
use super::review::{FileView, Layout, review};
use super::view::{When, rows_of, shown, timeline_svg, word};
use super::{Csrf, html, not_found};
use crate::state::ApiState;

/// Rows per status page.
pub const PAGE_ROWS: usize = 100;

/// What the status page is asked for.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct StatusQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    sort: String,
    #[serde(default)]
    page: Option<usize>,
}

struct StatusRow {
    kind: String,
    name: String,
    link: Option<String>,
    sync: String,
    sync_class: &'static str,
    health: String,
    health_class: &'static str,
    message: Linked,
}

#[derive(Template)]
#[template(path = "status.html")]
struct StatusPage {
    csrf: String,
    query: String,
    sort: String,
    sorts: Vec<String>,
    rows: Vec<StatusRow>,
    total: usize,
    matched: usize,
    out_of_sync: usize,
    page: usize,
    pages: usize,
    previous: Option<String>,
    next: Option<String>,
}

const SORTS: &[&str] = &["kind", "name", "sync", "health"];

/// A health's colour: well, wrong, under way, or nothing to say.
fn health_class(health: Health) -> &'static str {
    match health {
        Health::Healthy => "good",
        Health::Degraded | Health::Unhealthy | Health::Stalled => "bad",
        Health::Progressing => "busy",
        Health::Suspended | Health::Unknown | Health::None => "quiet",
    }
}

/// The link of a status row's page, for the kinds that have one.
fn link_of(row: &ObjectStatus) -> Option<String> {
    (row.kind == Kind::Assignment.as_str()).then(|| format!("/ui/assignments/{}", percent(&row.name)))
}

/// A path segment or query value with everything but unreserved characters percent-encoded.
pub(crate) fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Sorts, filters and cuts `rows` to pages of `page_rows`: the status page.
fn status_page(rows: Vec<ObjectStatus>, query: &StatusQuery, csrf: String, page_rows: usize) -> StatusPage {
    let total = rows.len();
    let out_of_sync = rows.iter().filter(|r| r.sync == SyncStatus::OutOfSync).count();
    let needle = query.q.trim().to_lowercase();
    let mut matched: Vec<ObjectStatus> = rows
        .into_iter()
        .filter(|r| {
            needle.is_empty()
                || [r.kind.as_str(), r.name.as_str(), &word(&r.sync), &word(&r.health), r.message.as_str()]
                    .iter()
                    .any(|field| field.to_lowercase().contains(&needle))
        })
        .collect();
    let sort = if SORTS.contains(&query.sort.as_str()) { query.sort.clone() } else { "kind".into() };
    match sort.as_str() {
        "name" => matched.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.kind.cmp(&b.kind))),
        "sync" => matched.sort_by_key(|r| (word(&r.sync), r.kind.clone(), r.name.clone())),
        "health" => matched.sort_by_key(|r| (word(&r.health), r.kind.clone(), r.name.clone())),
        _ => matched.sort_by(|a, b| a.kind.cmp(&b.kind).then_with(|| a.name.cmp(&b.name))),
    }
    let pages = matched.len().div_ceil(page_rows).max(1);
    let page = query.page.unwrap_or(1).clamp(1, pages);
    let (q, by) = (percent(&query.q), percent(&sort));
    let link = |page: usize| format!("/ui/?q={q}&sort={by}&page={page}");
    let count = matched.len();
    let rows = matched
        .into_iter()
        .skip((page - 1).saturating_mul(page_rows))
        .take(page_rows)
        .map(|r| StatusRow {
            link: link_of(&r),
            kind: shown(&r.kind),
            name: shown(&r.name),
            sync: word(&r.sync),
            sync_class: if r.sync == SyncStatus::OutOfSync { "outofsync" } else { "" },
            health: word(&r.health),
            health_class: health_class(r.health),
            message: linked(&r.message),
        })
        .collect();
    StatusPage {
        csrf,
        query: query.q.clone(),
        sort,
        sorts: SORTS.iter().map(|s| (*s).to_owned()).collect(),
        rows,
        total,
        matched: count,
        out_of_sync,
        page,
        pages,
        previous: (page > 1).then(|| link(page - 1)),
        next: (page < pages).then(|| link(page + 1)),
    }
}

/// The status page's HTML for `rows`, filtered by `filter`, sorted by `sort`, page `page` of
/// `page_rows` rows: what `GET /ui/` renders (the benchmark measures it, and the whole table in one
/// page as its baseline).
pub fn status_html(rows: Vec<ObjectStatus>, filter: &str, sort: &str, page: usize, page_rows: usize) -> String {
    let query = StatusQuery { q: filter.to_owned(), sort: sort.to_owned(), page: Some(page) };
    status_page(rows, &query, String::new(), page_rows.max(1)).render().unwrap_or_default()
}

pub(crate) async fn status(
    State(state): State<ApiState>,
    Csrf(csrf): Csrf,
    Query(query): Query<StatusQuery>,
) -> Response {
    match state.status_rows().await {
        Ok(rows) => html(&status_page(rows, &query, csrf, PAGE_ROWS)),
        Err(error) => super::message(error.status, &csrf, "Something failed", super::view::shown(&error.message)),
    }
}

struct ConditionRow {
    kind: String,
    status: String,
    reason: String,
    since: When,
    message: Linked,
}

struct SessionRow {
    href: String,
    id: String,
    /// The execution generation the session ran, and its attempt at it.
    generation: i64,
    attempt: i64,
    adapter: String,
    phase: String,
    phase_class: &'static str,
    created: When,
    tokens: String,
    budget: String,
    message: Linked,
}

impl SessionRow {
    fn of(s: &roundtable_specs::output::SessionItem) -> Self {
        let usage = s.detail.agent.as_ref().and_then(|a| a.usage.as_ref());
        let budget = s.detail.broker.as_ref().map_or_else(
            || "-".into(),
            |b| {
                let limit = b.budget.tokens.map_or_else(|| "unlimited".into(), |t| t.to_string());
                format!("{} of {limit} tokens{}", b.tokens.total(), if b.exhausted { ", spent" } else { "" })
            },
        );
        Self {
            href: format!("/ui/sessions/{}", percent(&s.id)),
            id: shown(&s.id),
            generation: s.execution_generation,
            attempt: s.attempt,
            adapter: shown(&s.adapter),
            phase: word(&s.phase),
            phase_class: phase_class(s.phase),
            created: When::of(&s.created_at),
            tokens: usage.map_or_else(|| "-".into(), |u| format!("{} in, {} out", u.input_tokens, u.output_tokens)),
            budget,
            message: linked(&s.message),
        }
    }
}

struct ProposalRow {
    href: String,
    id: String,
    assignment: String,
    state: String,
    changes: String,
    flags: String,
    created: When,
}

struct EventRow {
    at: When,
    kind: String,
    reason: String,
    message: Linked,
}

/// What an Assignment asks: its task, the agent that does it and what it may read.
struct Asked {
    adapter: String,
    task: String,
    title: String,
    prompt: String,
    readable_paths: Vec<String>,
    role: String,
    model: Option<String>,
    source: String,
}

impl Asked {
    /// From the stored spec `describe` returns (the whole resource as recorded).
    fn of(spec: &serde_json::Value) -> Option<Self> {
        let spec: AssignmentSpec = match roundtable_specs::resource::from_json(&spec.to_string()) {
            Ok((_, roundtable_specs::Spec::Assignment(spec))) => spec,
            _ => serde_json::from_value(spec.get("spec").unwrap_or(spec).clone()).ok()?,
        };
        Some(Self {
            adapter: shown(&spec.adapter),
            task: shown(&spec.task.id),
            title: shown(&spec.task.title),
            // Line by line: its line breaks stay breaks, any other hidden character is escaped.
            prompt: spec.task.prompt.lines().map(|l| shown(&l.replace('\t', "    "))).collect::<Vec<_>>().join("\n"),
            readable_paths: spec.readable_paths.iter().map(|p| shown(p)).collect(),
            role: word(&spec.role),
            model: spec.model.as_deref().map(shown),
            source: shown(&format!("{} at {}", spec.source.repo, spec.source.revision)),
        })
    }
}

#[derive(Template)]
#[template(path = "assignment.html")]
struct AssignmentPage {
    csrf: String,
    name: String,
    sync: String,
    health: String,
    health_class: &'static str,
    message: Linked,
    asked: Option<Asked>,
    conditions: Vec<ConditionRow>,
    sessions: Vec<SessionRow>,
    live: Option<String>,
    proposals: Vec<ProposalRow>,
    events: Vec<EventRow>,
}

fn proposal_row(p: &roundtable_specs::output::ProposalItem) -> ProposalRow {
    ProposalRow {
        href: format!("/ui/proposals/{}", percent(&p.id)),
        id: shown(&p.id),
        assignment: shown(&p.assignment),
        state: word(&p.state),
        changes: format!("{}, +{} -{}", count(p.files_changed, "file", "files"), p.insertions, p.deletions),
        flags: shown(&p.flags.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")),
        created: When::of(&p.created_at),
    }
}

pub(crate) async fn assignment(State(state): State<ApiState>, Csrf(csrf): Csrf, Path(name): Path<String>) -> Response {
    let key = ObjectKey::new(Kind::Assignment, &name);
    let described = match state.service.describe(&key).await {
        Ok(described) => described,
        Err(roundtable_service::ServiceError::UnknownObject { .. }) => return not_found(&csrf, "Assignment", &name),
        Err(error) => return super::failed(&csrf, &error),
    };
    let (sessions, proposals) = match (state.service.sessions().await, state.service.proposals().await) {
        (Ok(sessions), Ok(proposals)) => (sessions, proposals),
        (Err(error), _) | (_, Err(error)) => return super::failed(&csrf, &error),
    };
    let sessions: Vec<_> = sessions.into_iter().filter(|s| s.assignment == name).collect();
    // A running session's tail, when its output is on this controller.
    let live = sessions
        .iter()
        .find(|s| s.phase == SessionPhase::Running && state.link.live_log(&s.id).is_some())
        .map(|s| percent(&s.id));
    let status = &described.status;
    let page = AssignmentPage {
        csrf,
        name: shown(&name),
        sync: word(&status.sync),
        health: word(&status.health),
        health_class: health_class(status.health),
        message: linked(&status.message),
        asked: described.spec.as_ref().and_then(Asked::of),
        conditions: status
            .conditions
            .iter()
            .map(|c| ConditionRow {
                kind: shown(&c.type_),
                status: word(&c.status),
                reason: shown(&c.reason),
                since: When::of(&c.last_transition_time),
                message: linked(&c.message),
            })
            .collect(),
        sessions: sessions.iter().map(SessionRow::of).collect(),
        live,
        proposals: proposals.iter().filter(|p| p.assignment == name).map(proposal_row).collect(),
        events: described
            .events
            .iter()
            .map(|e| EventRow {
                at: When::of(&e.at),
                kind: shown(&e.type_),
                reason: shown(&e.reason),
                message: linked(&e.message),
            })
            .collect(),
    };
    html(&page)
}

/// What the agent did over MCP: its calls by tool, refusals, and the clients that connected.
fn mcp_rows(agent: &roundtable_specs::session::AgentSession) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> =
        agent.tool_calls.iter().map(|(tool, n)| (format!("calls of {}", shown(tool)), n.to_string())).collect();
    rows.push(("calls refused".into(), agent.tool_calls_refused.to_string()));
    rows.push(("tools listed".into(), agent.tools_listed.to_string()));
    rows.extend(
        agent
            .mcp_clients
            .iter()
            .map(|c| ("client".into(), shown(&format!("{} {} (MCP {})", c.name, c.version, c.protocol_version)))),
    );
    rows
}

struct Section {
    title: &'static str,
    rows: Vec<(String, String)>,
}

/// One spawn-path gate's decision, a row of the session's admission table.
struct AdmissionRow {
    gate: String,
    verdict: String,
    /// `admit` or `refuse`: the row's colour.
    class: String,
    reason: String,
    message: String,
    remediation: String,
    receipt: String,
}

#[derive(Template)]
#[template(path = "session.html")]
struct SessionPage {
    csrf: String,
    id: String,
    assignment_href: String,
    assignment: String,
    adapter: String,
    generation: i64,
    attempt: i64,
    phase: String,
    phase_class: &'static str,
    cause: Option<String>,
    message: Linked,
    created: When,
    timeline: String,
    admission: Vec<AdmissionRow>,
    /// What admission compared the run with: image, contract, version, receipt.
    admitted_under: Vec<(&'static str, String)>,
    /// The sections that have something to show.
    sections: Vec<Section>,
    live: Option<String>,
    gateway_log: String,
    broker_log: String,
    stdout: String,
    stderr: String,
}

/// The newest decisions shown of each sidecar's log.
const DECISION_LINES: usize = 200;

/// The last `count` lines of `text`.
fn last_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

/// A session phase's colour: how it ended, or that it goes on.
fn phase_class(phase: SessionPhase) -> &'static str {
    match phase {
        SessionPhase::Succeeded => "good",
        SessionPhase::Failed => "bad",
        SessionPhase::Running => "busy",
        _ => "quiet",
    }
}

pub(crate) async fn session(State(state): State<ApiState>, Csrf(csrf): Csrf, Path(id): Path<String>) -> Response {
    let item = match state.service.session(&id).await {
        Ok(item) => item,
        Err(error) if super::is_not_found(&error) => return not_found(&csrf, "session", &id),
        Err(error) => return super::failed(&csrf, &error),
    };
    // The tail while the output is on this controller; the kept log otherwise (what there is of
    // it: a session running elsewhere has none here yet).
    let live = state.link.live_log(&item.id).is_some();
    let logs = if live { None } else { state.service.session_logs(&item.id).await.ok() };
    // What is shaped like a secret is redacted here as the tail redacts it.
    let text = |bytes: &[u8]| {
        roundtable_specs::secrets::redact(bytes)
            .split('\n')
            .map(|l| shown(&l.replace('\t', "    ")))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let detail = &item.detail;
    // While the agent runs (its output is live here), its phase is drawn with the time so far.
    let running = match (&item.started_at, live && item.phase == SessionPhase::Running) {
        (Some(started), true) if !detail.timings_ms.contains_key("agent") => {
            super::view::running_for(started, &detail.timings_ms, time::OffsetDateTime::now_utc())
        }
        _ => None,
    };
    let usage = detail.agent.as_ref().and_then(|a| a.usage.as_ref());
    let sections: Vec<Section> = [
        Section { title: "Token usage", rows: rows_of(&usage) },
        Section {
            title: "Budget",
            rows: detail.broker.as_ref().map(|b| rows_of(&(&b.tokens, &b.budget))).unwrap_or_default(),
        },
        Section { title: "Gateway", rows: rows_of(&detail.egress) },
        Section { title: "Broker", rows: rows_of(&detail.broker) },
        Section { title: "MCP", rows: detail.agent.as_ref().map(mcp_rows).unwrap_or_default() },
    ]
    .into_iter()
    .filter(|section| !section.rows.is_empty())
    .collect();
    let admission = detail
        .admission
        .iter()
        .map(|d| AdmissionRow {
            gate: word(&d.gate),
            verdict: word(&d.verdict),
            class: word(&d.verdict),
            reason: shown(d.reason.as_deref().unwrap_or_default()),
            message: shown(&d.message),
            remediation: shown(&d.remediation),
            receipt: shown(d.receipt.as_deref().unwrap_or_default()),
        })
        .collect();
    let admitted_under = detail
        .admitted_under
        .as_ref()
        .map(|under| {
            let mut rows = vec![("Image", shown(&under.image_id)), ("Contract", shown(&under.contract_hash))];
            rows.extend(under.installed_version.as_deref().map(|v| ("Installed version", shown(v))));
            rows.extend(under.receipt.as_deref().map(|r| ("Receipt", shown(r))));
            rows
        })
        .unwrap_or_default();
    let decisions = state.service.session_sidecar_logs(&item.id).await.unwrap_or_default();
    let page = SessionPage {
        csrf,
        id: shown(&item.id),
        assignment_href: format!("/ui/assignments/{}", percent(&item.assignment)),
        assignment: shown(&item.assignment),
        adapter: shown(&item.adapter),
        generation: item.execution_generation,
        attempt: item.attempt,
        phase: word(&item.phase),
        phase_class: phase_class(item.phase),
        cause: item.cause.as_ref().map(word),
        message: linked(&item.message),
        created: When::of(&item.created_at),
        timeline: timeline_svg(&detail.timings_ms, running.map(|ms| ("agent", ms))),
        admission,
        admitted_under,
        sections,
        live: live.then(|| percent(&item.id)),
        gateway_log: last_lines(&text(&decisions.egress), DECISION_LINES),
        broker_log: last_lines(&text(&decisions.broker), DECISION_LINES),
        stdout: logs.as_ref().map(|l| text(&l.stdout)).unwrap_or_default(),
        stderr: logs.as_ref().map(|l| text(&l.stderr)).unwrap_or_default(),
    };
    html(&page)
}

#[derive(Template)]
#[template(path = "proposals.html")]
struct ProposalsPage {
    csrf: String,
    proposals: Vec<ProposalRow>,
}

pub(crate) async fn proposals(State(state): State<ApiState>, Csrf(csrf): Csrf) -> Response {
    match state.service.proposals().await {
        Ok(mut items) => {
            // Those awaiting review first, then newest first (the service's order).
            items.sort_by_key(|p| p.state != ProposalState::Pending);
            html(&ProposalsPage { csrf, proposals: items.iter().map(proposal_row).collect() })
        }
        Err(error) => super::failed(&csrf, &error),
    }
}

/// A finding or a flag in the lists above the diff, linked to where the diff shows it.
struct FindingRow {
    action: String,
    text: String,
    href: Option<String>,
}

/// A link that changes how the diff is shown, and whether it names the current choice.
struct ViewLink {
    href: String,
    label: &'static str,
    current: bool,
}

#[derive(Template)]
#[template(path = "proposal.html")]
pub(crate) struct ProposalPage {
    csrf: String,
    /// `/ui/proposals/ID`, encoded.
    path: String,
    id: String,
    assignment_href: String,
    assignment: String,
    session_href: String,
    session: String,
    adapter: String,
    base: String,
    state: String,
    changes: String,
    decision: Option<String>,
    findings: Vec<FindingRow>,
    flags: Vec<FindingRow>,
    rejected: Vec<String>,
    pending: bool,
    default_branch: String,
    overridable: Vec<String>,
    /// The files of the diff as shown, with their notes.
    files: Vec<FileView>,
    /// Lines added and removed in the files as shown (whitespace ignored or not).
    added: u64,
    removed: u64,
    split: bool,
    ignore_whitespace: bool,
    layouts: Vec<ViewLink>,
    whitespace: Vec<ViewLink>,
    /// Why the diff shown is not the one asked for.
    diff_note: Option<String>,
    pub(crate) notice: Option<String>,
    pub(crate) error: Option<String>,
}

/// What a proposal's page shows: after an action, and how its diff is laid out.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ProposalQuery {
    #[serde(default)]
    done: Option<String>,
    /// `split` for the old and new files side by side; unified otherwise.
    #[serde(default)]
    view: Option<String>,
    /// `ignore` to leave out changes of whitespace alone.
    #[serde(default)]
    whitespace: Option<String>,
}

/// How the diff is asked to be shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DiffChoice {
    pub(crate) split: bool,
    pub(crate) ignore_whitespace: bool,
}

impl DiffChoice {
    fn of(query: &ProposalQuery) -> Self {
        Self {
            split: query.view.as_deref() == Some("split"),
            ignore_whitespace: query.whitespace.as_deref() == Some("ignore"),
        }
    }

    /// The page's link for this choice (the default choice's words left out).
    fn href(self, path: &str) -> String {
        let mut words = Vec::new();
        if self.split {
            words.push("view=split");
        }
        if self.ignore_whitespace {
            words.push("whitespace=ignore");
        }
        if words.is_empty() { path.to_owned() } else { format!("{path}?{}", words.join("&")) }
    }
}

/// The proposal page of `id` with its diff as `choice` asks, or the response that stands for it
/// when there is none.
pub(crate) async fn proposal_page(
    state: &ApiState,
    csrf: String,
    id: &str,
    choice: DiffChoice,
) -> Result<ProposalPage, Response> {
    let found = match state.service.proposal(id).await {
        Ok(found) => found,
        Err(error) if super::is_not_found(&error) => return Err(not_found(&csrf, "proposal", id)),
        Err(error) => return Err(super::failed(&csrf, &error)),
    };
    let review_of = state.service.proposal_review(&found.item.id, state.audit_key.as_deref()).await;
    let (findings, asked) = match review_of {
        Ok(review) => (review.findings, review.asked),
        Err(error) => return Err(super::failed(&csrf, &error)),
    };
    let item = &found.item;
    // The stored patch is what an accept applies, byte for byte (renames were found when it was
    // made); ignoring whitespace, the page shows git's diff of the tree that patch makes.
    let (patch, diff_note) = if choice.ignore_whitespace {
        match state.service.proposal_diff(&item.id, true).await {
            Ok(shown) => (shown, None),
            Err(error) => {
                let why = roundtable_telemetry::error_chain(&error);
                (found.patch.clone(), Some(shown(&format!("Whitespace is shown: the diff without it failed: {why}"))))
            }
        }
    } else {
        (found.patch.clone(), None)
    };
    let layout = if choice.split { Layout::Split } else { Layout::Unified };
    let parsed = super::diff::parse(&patch);
    // What accept applies, counted from the stored patch itself: the counts stored beside it are
    // columns no MAC covers, which an edit of the database could change alone.
    let changes =
        if choice.ignore_whitespace { changes_of(&super::diff::parse(&found.patch)) } else { changes_of(&parsed) };
    let reviewed = review(&parsed, &findings, &item.flags, layout);
    let decision = item.decision.as_ref().map(|d| {
        let mut text = format!("Decided by {} at {}", shown(&d.by), shown(&d.at));
        if let (Some(branch), Some(commit)) = (&d.branch, &d.commit) {
            text.push_str(&format!(": commit {commit} on {}", shown(branch)));
        }
        if !d.reason.is_empty() {
            text.push_str(&format!(": {}", shown(&d.reason)));
        }
        text
    });
    let path = format!("/ui/proposals/{}", percent(&item.id));
    let link = |label, choice: DiffChoice, current| ViewLink { href: choice.href(&path), label, current };
    let layouts = vec![
        link("Unified", DiffChoice { split: false, ..choice }, !choice.split),
        link("Split", DiffChoice { split: true, ..choice }, choice.split),
    ];
    let whitespace = vec![
        link("Show whitespace changes", DiffChoice { ignore_whitespace: false, ..choice }, !choice.ignore_whitespace),
        link("Ignore whitespace", DiffChoice { ignore_whitespace: true, ..choice }, choice.ignore_whitespace),
    ];
    let anchored = |href: &Option<String>| href.as_ref().map(|anchor| format!("#{anchor}"));
    Ok(ProposalPage {
        csrf,
        id: shown(&item.id),
        assignment_href: format!("/ui/assignments/{}", percent(&item.assignment)),
        assignment: shown(&item.assignment),
        session_href: format!("/ui/sessions/{}", percent(&item.session)),
        session: shown(&item.session),
        adapter: shown(&item.adapter),
        base: shown(&item.base_commit),
        state: word(&item.state),
        changes,
        decision,
        findings: findings
            .iter()
            .zip(&reviewed.finding_links)
            .map(|((action, finding), href)| FindingRow {
                action: word(action),
                text: shown(&finding.to_string()),
                href: anchored(href),
            })
            .collect(),
        flags: item
            .flags
            .iter()
            .zip(&reviewed.flag_links)
            .map(|(flag, href)| FindingRow {
                action: "flag".into(),
                text: shown(&flag.to_string()),
                href: anchored(href),
            })
            .collect(),
        rejected: item
            .rejected
            .iter()
            .map(|r| shown(&rows_of(r).into_iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")))
            .collect(),
        pending: item.state == ProposalState::Pending,
        default_branch: shown(&format!("roundtable/{}/{}", item.assignment, item.id)),
        overridable: asked.overridable.iter().map(word).collect(),
        added: reviewed.files.iter().map(|f| f.added).sum(),
        removed: reviewed.files.iter().map(|f| f.removed).sum(),
        files: reviewed.files,
        split: choice.split,
        ignore_whitespace: choice.ignore_whitespace,
        layouts,
        whitespace,
        diff_note,
        path,
        notice: None,
        error: None,
    })
}

/// `N files changed, +A -R` of a patch's files.
fn changes_of(files: &[super::diff::FileDiff]) -> String {
    let (added, removed) = files.iter().fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
    format!("{} changed, +{added} -{removed}", count(files.len(), "file", "files"))
}

pub(crate) async fn proposal(
    State(state): State<ApiState>,
    Csrf(csrf): Csrf,
    Path(id): Path<String>,
    Query(query): Query<ProposalQuery>,
) -> Response {
    match proposal_page(&state, csrf, &id, DiffChoice::of(&query)).await {
        Ok(mut page) => {
            page.notice = match query.done.as_deref() {
                Some("accepted") => Some("Accepted.".into()),
                Some("rejected") => Some("Rejected.".into()),
                _ => None,
            };
            html(&page)
        }
        Err(response) => response,
    }
}

struct ControllerRow {
    id: String,
    host: String,
    pid: i64,
    state: &'static str,
    heartbeat: When,
    revision: String,
    note: String,
}

#[derive(Template)]
#[template(path = "controllers.html")]
struct ControllersPage {
    csrf: String,
    controllers: Vec<ControllerRow>,
}

pub(crate) async fn controllers(State(state): State<ApiState>, Csrf(csrf): Csrf) -> Response {
    let listed = match state.service.store().controllers().await {
        Ok(listed) => listed,
        Err(error) => return super::failed(&csrf, &error),
    };
    let now = roundtable_store::now();
    let controllers = listed
        .iter()
        .map(|c| ControllerRow {
            id: shown(&c.id),
            host: shown(&c.host),
            pid: c.pid,
            state: if c.stopped_at.is_some() {
                "stopped"
            } else if c.expires_at < now {
                "expired"
            } else {
                "live"
            },
            heartbeat: When::of(&c.heartbeat_at),
            revision: shown(c.revision.as_deref().unwrap_or("-")),
            note: shown(c.sync_note.as_deref().unwrap_or_default()),
        })
        .collect();
    html(&ControllersPage { csrf, controllers })
}

#[derive(Template)]
#[template(path = "audit.html")]
pub(crate) struct AuditPage {
    pub(crate) csrf: String,
    pub(crate) head: String,
    pub(crate) verdict: Option<String>,
    pub(crate) verdict_class: &'static str,
}

/// The chain's head as a sentence.
pub(crate) async fn head_of(state: &ApiState) -> String {
    let store = state.service.store();
    let head = match store.chain_length().await {
        Ok(0) => return "The chain is empty.".into(),
        Ok(length) => store.chain(length, length).await.map(|rows| (length, rows)),
        Err(error) => Err(error),
    };
    match head {
        Ok((length, rows)) => {
            let mac = rows.first().map(|row| row.mac.chars().take(16).collect::<String>()).unwrap_or_default();
            format!("{length} entries; the head is entry {length}, MAC {mac}…")
        }
        Err(error) => format!("The chain cannot be read: {}", shown(&roundtable_telemetry::error_chain(&error))),
    }
}

pub(crate) async fn audit(State(state): State<ApiState>, Csrf(csrf): Csrf, _headers: HeaderMap) -> Response {
    let head = head_of(&state).await;
    html(&AuditPage { csrf, head, verdict: None, verdict_class: "" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, health: Health, message: &str) -> ObjectStatus {
        ObjectStatus {
            kind: "Assignment".into(),
            name: name.into(),
            generation: None,
            observed_generation: None,
            sync: SyncStatus::Synced,
            health,
            created_at: None,
            message: message.into(),
            conditions: Vec::new(),
        }
    }

    #[test]
    fn health_has_its_colour_and_messages_link_to_pages() {
        let rows = vec![
            row("fine", Health::Healthy, "ok"),
            row("broken", Health::Degraded, "agent exited 1; its output: `roundtable sessions logs s-9`"),
        ];
        let html = status_html(rows, "", "name", 1, 10);
        assert!(html.contains(r#"<td class="health bad">Degraded</td>"#), "{html}");
        assert!(html.contains(r#"<td class="health good">Healthy</td>"#), "{html}");
        assert!(html.contains(r#"<a href="/ui/sessions/s-9#output">the output of session s-9</a>"#), "{html}");
        assert!(!html.contains("`roundtable sessions logs"), "{html}");
    }

    /// Hostile: the proposal page's "N files changed" line was the store's columns, which an
    /// edit of the database changes without touching the patch (no MAC covers them): it said
    /// "1 files changed, +1 -0" of a patch accept applies to three files. It is counted from the
    /// stored patch.
    #[test]
    fn the_changes_line_counts_the_stored_patch() {
        let patch = "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1,2 @@\n-x\n+y\n+z\n\
diff --git a/b b/b\nnew file mode 100644\n--- /dev/null\n+++ b/b\n@@ -0,0 +1 @@\n+q\n\
diff --git a/c b/c\nnew file mode 100644\nindex 0000000..e69de29\n";
        assert_eq!(changes_of(&crate::console::diff::parse(patch.as_bytes())), "3 files changed, +3 -1");
    }

    #[test]
    fn what_an_assignment_asks_is_read_from_its_stored_spec() {
        let stored = serde_json::json!({
            "apiVersion": roundtable_specs::API_VERSION,
            "kind": "Assignment",
            "metadata": {"name": "fix"},
            "spec": {
                "adapter": "codex",
                "task": {"id": "T-1", "title": "Fix it", "prompt": "line one\nprintf 'a\\nb'\u{202e}"},
                "readablePaths": ["src", "README.md"],
            },
        });
        let asked = Asked::of(&stored).expect("an Assignment's spec");
        assert_eq!((asked.adapter.as_str(), asked.task.as_str(), asked.title.as_str()), ("codex", "T-1", "Fix it"));
        assert_eq!(
            asked.prompt, "line one\nprintf 'a\\nb'\\u{202e}",
            "breaks kept, a written \\n and hidden characters not"
        );
        assert_eq!(asked.readable_paths, ["src", "README.md"]);
        assert_eq!((asked.role.as_str(), asked.source.as_str()), ("implementer", ". at HEAD"));
        assert!(Asked::of(&serde_json::json!({"kind": "Adapter"})).is_none());
    }
}
