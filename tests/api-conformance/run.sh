#!/usr/bin/env bash
# Runs schemathesis (PyPI) against the OpenAPI document of a real daemon on loopback: every
# operation, generated valid and invalid inputs, and the checks that no answer is a 5xx and that
# every answer's status, content type and body match the document. Then generates a Python client
# from the checked-in document with openapi-python-client (PyPI), which must generate every
# operation without a warning, and calls every read endpoint and one write through it
# (python_client.py); and the official MCP Python SDK drives the admin endpoint (mcp_client.py).
# Called by .ci/run.
#   ROUNDTABLE_BIN   the binary (default: target/x86_64-unknown-linux-gnu/debug/roundtable)
#   MAX_EXAMPLES     examples per operation and phase (default 40)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${ROUNDTABLE_BIN:-$repo/target/x86_64-unknown-linux-gnu/debug/roundtable}"
command -v schemathesis >/dev/null || python3 -m pip install -q --disable-pip-version-check "schemathesis==4.32.5"
command -v openapi-python-client >/dev/null \
  || python3 -m pip install -q --disable-pip-version-check "openapi-python-client==0.29.1"
python3 -c 'import mcp' 2>/dev/null || python3 -m pip install -q --disable-pip-version-check "mcp==1.24.0"

work="$(mktemp -d /tmp/roundtable-conformance.XXXXXX)"
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# A project with an adapter, an Assignment that produces a proposal, and the built-ins.
mkdir -p "$work/project/.roundtable" "$work/executions"
chmod 700 "$work/executions"
cd "$work/project"
printf '# Project\n' > README.md
cat > .roundtable/specs.yaml <<'YAML'
apiVersion: roundtable.dev/v1alpha1
kind: Adapter
metadata: {name: mock}
spec: {timeout: 2m}
---
apiVersion: roundtable.dev/v1alpha1
kind: Assignment
metadata: {name: docs}
spec:
  adapter: mock
  task: {id: DOC-1, prompt: 'append a line to README.md'}
  readablePaths: [README.md]
YAML
git init -q -b main && git add -A && git -c user.email=ci@roundtable.dev -c user.name=ci commit -q -m base
# The audit key stays in the scratch folder, not under the host's /var/lib/roundtable.
"$bin" init --audit-key "$work/audit.key" >/dev/null
"$bin" start --api-listen 127.0.0.1:0 --execution-root "$work/executions" --audit-key "$work/audit.key" \
  --workspace conformance 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 1 100); do
  [ -s .roundtable/state/api-address ] && break
  sleep 0.1
done
address="$(cat .roundtable/state/api-address)"
token="$(cat .roundtable/state/api-token)"
for _ in $(seq 1 100); do
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "http://$address/readyz" 2>/dev/null && break
  sleep 0.1
done
echo "conformance: daemon API on $address"

status=0
# One worker: with two, hypothesis parses lambda sources in both threads at once, and a run on
# CPython 3.11.7 died of it once ("SystemError: AST constructor recursion depth mismatch" inside
# hypothesis: a crash of the tool, not a finding about the API).
schemathesis run "http://$address/v1/openapi.json" \
  --header "Authorization: Bearer $token" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  --max-examples "${MAX_EXAMPLES:-40}" \
  --phases examples,coverage,fuzzing \
  --workers 1 \
  --request-timeout 60 \
  --seed 1 \
  --no-color || status=$?
if [ "$status" -ne 0 ]; then
  echo "conformance: schemathesis failed ($status); the daemon's log:" >&2
  tail -n 50 "$work/daemon.log" >&2
fi

generated=0
openapi-python-client generate --path "$repo/schemas/openapi.json" --meta none \
  --output-path "$work/client/roundtable_client" >"$work/generate.log" 2>&1 || generated=$?
if [ "$generated" -ne 0 ] || grep -qi "warning" "$work/generate.log"; then
  echo "conformance: openapi-python-client did not generate the whole client cleanly:" >&2
  cat "$work/generate.log" >&2
  status=1
elif ! python3 "$repo/tests/api-conformance/python_client.py" "$work/client" "http://$address" "$token" conformance; then
  echo "conformance: the generated Python client failed against the daemon" >&2
  status=1
fi
if ! python3 "$repo/tests/api-conformance/mcp_client.py" "http://$address" "$token"; then
  echo "conformance: the MCP Python SDK failed against the admin endpoint" >&2
  status=1
fi
exit "$status"
