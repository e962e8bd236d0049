"""Calls a live daemon through the client openapi-python-client generated from the checked-in
OpenAPI document: every read endpoint and one write, each answer parsed into the generated
models (a served value the document does not allow fails here, as it would in a user's code).

    python3 python_client.py CLIENT_PARENT_DIR BASE_URL TOKEN WORKSPACE
"""

import sys
import time

client_dir, base_url, token, workspace = sys.argv[1:5]
sys.path.insert(0, client_dir)

from roundtable_client import AuthenticatedClient  # noqa: E402
from roundtable_client.api.default import (  # noqa: E402
    adapters,
    agent,
    agent_diagnostics,
    agents,
    assignment,
    events,
    healthz,
    metrics,
    openapi,
    proposal,
    proposals,
    readyz,
    reconcile,
    session,
    session_logs,
    sessions,
    status,
)
from roundtable_client.models.reconcile_kind import ReconcileKind  # noqa: E402

client = AuthenticatedClient(base_url=base_url, token=token, raise_on_unexpected_status=True)
called = []


def call(what, module, model=None, expect=200, **arguments):
    """One endpoint: its status, and the generated model it parses into."""
    answer = module.sync_detailed(client=client, **arguments)
    if answer.status_code != expect:
        sys.exit(f"{what}: status {answer.status_code}, expected {expect}: {answer.content[:400]!r}")
    if model is not None and type(answer.parsed).__name__ != model:
        sys.exit(f"{what}: parsed as {type(answer.parsed).__name__}, expected {model}")
    called.append(what)
    return answer.parsed


# The mock agent's session must end first: its phase is what an enum of consts once broke.
deadline = time.time() + 120
while True:
    listed = call("sessions", sessions, "SessionList")
    ended = [s for s in listed.items if str(s.phase) == "Succeeded"]
    if ended:
        break
    if time.time() > deadline:
        sys.exit(f"no session succeeded within 120 s: {[str(s.phase) for s in listed.items]}")
    time.sleep(0.5)
session_id = ended[0].id

call("healthz", healthz)
call("readyz", readyz)
call("openapi", openapi)
call("metrics", metrics)
call("status", status, "ObjectStatusList")
call("adapters", adapters, "AdapterList")
call("assignment", assignment, "DescribeItem", name="docs")
call("session", session, "SessionItem", id=session_id)
call("session logs", session_logs, id=session_id)
listed = call("proposals", proposals, "ProposalList")
call("proposal", proposal, "ProposalItem", id=listed.items[0].id)
call("events", events, "EventList")
known = call("agents", agents, "AgentList", ws=workspace)
for item in known.items:
    # Built-in templates have no declared health: the served value must be in the document.
    call(f"agent {item.id}", agent, "AgentItem", ws=workspace, id=item.id)
call("agent diagnostics", agent_diagnostics, "DiagnosticReportList", ws=workspace, id="mock")
call("reconcile", reconcile, expect=202, kind=ReconcileKind.ASSIGNMENT, name="docs")
print(f"python client: {len(called)} calls parsed: {', '.join(called)}")
