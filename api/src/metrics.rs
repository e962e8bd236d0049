//! `/metrics`: the process's registry (the controller's reconciles, errors, queue depth; the
//! egress gateway's decisions, lookups, dials, ClientHellos and tunnels) and, computed at scrape
//! time from the store, executions by phase and cause, agents by state, live MCP capabilities,
//! the store's round trips, and the process's own (`process_*`: CPU, memory, file descriptors,
//! start time).

use roundtable_telemetry::ComputedFamily;

use crate::error::ApiError;
use crate::state::ApiState;

pub async fn render(state: &ApiState) -> Result<String, ApiError> {
    let store = state.service.store();
    let internal = |error: roundtable_store::Error| ApiError::internal(roundtable_telemetry::error_chain(&error));
    let mut executions = ComputedFamily::gauge(
        "roundtable_executions",
        "Sessions in the store by phase and cause (cause `none` while queued or running).",
        &["phase", "cause"],
    );
    for session in store.sessions(None).await.map_err(internal)? {
        let cause = session.cause.map_or("none", |c| c.as_str());
        executions.add(&[session.phase.as_str(), cause], 1.0);
    }
    let mut agents = ComputedFamily::gauge(
        "roundtable_agent_overrides",
        "Adapters an operator enabled, disabled or is draining through the API, by state.",
        &["state"],
    );
    for found in store.agent_overrides().await.map_err(internal)? {
        agents.add(&[found.state.as_str()], 1.0);
    }
    let mut capabilities = ComputedFamily::gauge(
        "roundtable_mcp_live_capabilities",
        "Agent MCP capabilities that would be accepted now.",
        &[],
    );
    capabilities.set(&[], state.link.live_capabilities() as f64);
    let mut ready = ComputedFamily::gauge("roundtable_ready", "1 once the daemon's first scan is merged.", &[]);
    ready.set(&[], if state.link.is_ready() { 1.0 } else { 0.0 });
    let mut round_trips = ComputedFamily::counter(
        "roundtable_store_round_trips_total",
        "Round trips this process made to its state store: each statement run alone, each transaction.",
        &[],
    );
    round_trips.set(&[], store.round_trips() as f64);
    let mut computed = vec![executions, agents, capabilities, ready, round_trips];
    computed.extend(roundtable_telemetry::process_families());
    Ok(roundtable_telemetry::global().render_with(&computed))
}
