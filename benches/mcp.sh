#!/usr/bin/env bash
# MCP figures; prints, asserts nothing.
#   1. Tool-call round trip through the bridge inside a hardened container: an agent launched with
#      Codex's plan starts `roundtable mcp stdio` from its manifest, presents its capability and
#      times CALLS `task.get` calls one after the other (p50, p99).
#   2. The same calls on the socket without the bridge or a container, and the daemon's memory per
#      live MCP session (cargo bench -p roundtable-agents --bench endpoint).
# Usage: benches/mcp.sh [CALLS]   (default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-1000}
cargo build --quiet --release --bin roundtable
bin=$PWD/target/x86_64-unknown-linux-gnu/release/roundtable
bash tests/images/build.sh >/dev/null 2>&1
work=$(mktemp -d)
cleanup() { [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
export GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
p=$work/project; mkdir -p "$p/.roundtable"; echo '# x' > "$p/README.md"
cat > "$p/.roundtable/specs.yaml" <<YAML
apiVersion: roundtable.dev/v1alpha1
kind: Adapter
metadata: {name: mcp-bench}
spec: {provider: codex, command: mcp-bench, image: roundtable-test/agent:latest, supportsMcp: true}
---
apiVersion: roundtable.dev/v1alpha1
kind: Assignment
metadata: {name: bench}
spec:
  adapter: mcp-bench
  task: {id: B, prompt: '$calls'}
  readablePaths: [README.md]
YAML
git -C "$p" init -q -b main && git -C "$p" add -A && git -C "$p" commit -qm base
mkdir -m 700 "$work/exec"
(cd "$p" && exec "$bin" start --execution-root "$work/exec" --audit-key "$work/audit.key" >/dev/null 2>&1) &
daemon=$!
for _ in $(seq 1 600); do
  (cd "$p" && "$bin" sessions list --format json) | grep -q '"finishedAt"' && break
  sleep 0.25
done
kill -TERM "$daemon"; wait "$daemon" || true; daemon=
id=$(cd "$p" && "$bin" sessions list --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["id"])')
line=$(cd "$p" && "$bin" sessions logs "$id" | grep '"type":"bench"' || true)
if [ -z "$line" ]; then echo "mcp-bench: no figures; session:"; (cd "$p" && "$bin" sessions show "$id"); exit 1; fi
python3 - "$line" <<'PY'
import json, sys
b = json.loads(sys.argv[1])
print(f"through the bridge in a hardened container, {b['calls']} task.get calls: p50 {b['p50Us']:.0f} µs, p99 {b['p99Us']:.0f} µs, mean {b['meanUs']:.0f} µs (bridge start + auth + initialize {b['connectMs']:.1f} ms)")
PY
cargo bench --quiet -p roundtable-agents --bench endpoint 2>/dev/null | grep -E 'memory|round trip'
