#!/usr/bin/env bash
# Sets up and runs the quickstart: builds roundtable and the test images, creates the
# quickstart repository (target/quickstart), runs the daemon until both Assignments end as
# pending proposals, and shows them. Nothing is applied to the repository.
# Usage: examples/quickstart/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --quiet --bin roundtable
bash tests/images/build.sh
bash examples/quickstart/setup.sh target/quickstart
bin=$PWD/target/x86_64-unknown-linux-gnu/debug/roundtable
cd target/quickstart
echo; echo "== roundtable validate"; "$bin" validate
echo; echo "== roundtable plan"; "$bin" plan
# The project (and its state) was just recreated: so is its audit chain, and the key's head
# checkpoint with it. The key lives outside the state directory, as in production.
# Every command below reads it from the environment, so views verify what `--seal` wrote.
key=$PWD/../quickstart-audit.key
rm -f "$key" "$key.head"
export ROUNDTABLE_AUDIT_KEY=$key
echo; echo "== roundtable admission check generic --seal (the policy enforces admission)"
"$bin" admission check generic --seal
echo; echo "== roundtable admission list"; "$bin" admission list
echo; echo "== roundtable start (until both Assignments have proposals)"
# TCP is opt-in (the CLI uses a private socket): any free loopback port; the daemon writes the
# one it got to api-address.
"$bin" start --execution-root "$PWD/../quickstart-executions" --api-listen 127.0.0.1:0 &
daemon=$!
trap 'kill "$daemon" 2>/dev/null || true' EXIT
count=0
for _ in $(seq 1 120); do
  count=$("$bin" proposals list --format json | grep -c '"id"' || true)
  [ "$count" -ge 2 ] && break
  sleep 0.5
done
# The quickstart shows two proposals or it failed: say so, with what the daemon saw.
if [ "$count" -lt 2 ]; then
  echo "quickstart: $count of 2 proposals after 60 s" >&2
  "$bin" status >&2 || true
  "$bin" sessions list >&2 || true
  exit 1
fi
echo; echo "== the HTTP API: GET /v1/workspaces/quickstart/agents/generic (operator token from the state directory)"
python3 - .roundtable/state <<'PY'
import json, pathlib, sys, urllib.request
state = pathlib.Path(sys.argv[1])
address, token = (state / "api-address").read_text().strip(), (state / "api-token").read_text().strip()
request = urllib.request.Request(f"http://{address}/v1/workspaces/quickstart/agents/generic", headers={"Authorization": f"Bearer {token}"})
agent = json.load(urllib.request.urlopen(request, timeout=10))
print(json.dumps({k: agent.get(k) for k in ("id", "state", "capabilities", "executableVersion", "activeSessions", "health")}, indent=2))
PY
kill -TERM "$daemon"; wait "$daemon" || true
trap - EXIT
echo; echo "== roundtable status"; "$bin" status
echo; echo "== roundtable sessions list"; "$bin" sessions list
echo; echo "== roundtable proposals list"; "$bin" proposals list
echo; echo "== roundtable audit verify"; "$bin" audit verify
for id in $("$bin" proposals list --format json | sed -n 's/^      "id": "\(.*\)",$/\1/p'); do
  echo; echo "== roundtable proposals show $id"; "$bin" proposals show "$id"
done
