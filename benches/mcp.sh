#!/usr/bin/env bash
# MCP figures; prints, asserts nothing. In rounds, each figure beside its baseline:
#   1. Tool-call round trip through the bridge inside a hardened container: an agent launched with
#      Codex's plan starts `roundtable mcp stdio` from its manifest, presents its capability and
#      times CALLS `task.get` calls one after the other (p50, p99).
#   2. The baseline, right after in the same round: the same calls on the socket without the bridge
#      or a container (cargo bench -p roundtable-agents --bench endpoint, its round trip alone).
#   Then the daemon's memory per live MCP session (the same bench, its memory part).
# Usage: benches/mcp.sh [CALLS]   (default 1000; ROUNDS=3 rounds; ROUNDTABLE_BIN=PATH measures
#   that binary; ROUNDTABLE_BENCH_SMOKE=1, benches/lib.sh: 20 calls, 1 round, the debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh
calls=${1:-$(sized 1000 20)}
rounds=${ROUNDS:-$(sized 3 1)}
roundtable_bin
endpoint=$(rust_bench roundtable-agents endpoint)
bash tests/images/build.sh >/dev/null 2>&1
work=$(mktemp -d)
daemon=
cleanup() { [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
export GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
p=$work/project; mkdir -p "$p/.roundtable"; echo '# x' > "$p/README.md"
cat > "$p/.roundtable/specs.yaml" <<YAML
apiVersion: roundtable.dev/v1alpha1
kind: Adapter
metadata: {name: mcp-bench}
spec: {provider: codex, command: mcp-bench, image: roundtable-test/agent:latest, supportsMcp: true}
---
YAML
git -C "$p" init -q -b main && git -C "$p" add -A && git -C "$p" commit -qm base
mkdir -m 700 "$work/exec"
(cd "$p" && exec "$bin" start --api-listen 127.0.0.1:0 --execution-root "$work/exec" --audit-key "$work/audit.key" >/dev/null 2>&1) &
daemon=$!

# `session_of NAME`: the id of the Assignment's finished session, once there is one.
session_of() {
  (cd "$p" && "$bin" sessions list --format json) | python3 -c '
import json, sys
print(next((s["id"] for s in json.load(sys.stdin)["items"] if s["assignment"] == sys.argv[1] and s.get("finishedAt")), ""))' "$1"
}

echo "$calls task.get calls per round, $rounds rounds; through the bridge in a hardened container, then the baseline on the socket"
for round in $(seq 1 "$rounds"); do
  printf "apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata: {name: bench-%d}\nspec:\n  adapter: mcp-bench\n  task: {id: B%d, prompt: '%d'}\n  readablePaths: [README.md]\n---\n" \
    "$round" "$round" "$calls" >>"$p/.roundtable/specs.yaml"
  id=
  for _ in $(seq 1 1200); do
    id=$(session_of "bench-$round")
    [ -n "$id" ] && break
    sleep 0.25
  done
  [ -n "$id" ] || { echo "bench-$round: no finished session within 5 minutes" >&2; exit 1; }
  line=$(cd "$p" && "$bin" sessions logs "$id" | grep '"type":"bench"' || true)
  if [ -z "$line" ]; then echo "mcp-bench: no figures; session:" >&2; (cd "$p" && "$bin" sessions show "$id") >&2; exit 1; fi
  python3 - "$line" "$round" <<'PY'
import json, sys
b = json.loads(sys.argv[1])
print(f"round {sys.argv[2]}: through the bridge in a hardened container: p50 {b['p50Us']:.0f} µs, p99 {b['p99Us']:.0f} µs, mean {b['meanUs']:.0f} µs (bridge start + auth + initialize {b['connectMs']:.1f} ms)")
PY
  socket=$(BENCH_PARTS=round-trip BENCH_CALLS=$calls "$endpoint" 2>/dev/null | grep 'round trip')
  figure "round trip on the socket: p50" "$(sed -n 's/.*p50 \([0-9]*\) µs.*/\1/p' <<<"$socket")" >/dev/null
  echo "round $round: baseline, $socket"
done
kill -TERM "$daemon"; wait "$daemon" || true; daemon=
memory=$(BENCH_PARTS=memory "$endpoint" 2>/dev/null | grep '^memory')
figure "memory per session" "$(sed -n 's/.*, \([0-9.]*\) KiB per session/\1/p' <<<"$memory")" >/dev/null
echo "$memory"
