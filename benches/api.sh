#!/usr/bin/env bash
# HTTP API figures from loopback with wrk (Debian package); prints, asserts nothing.
#   1. GET /v1/status of a project with N objects (default 10,000: half Adapters, half suspended
#      Assignments): latency p50/p90/p99 and requests per second, 4 connections.
#   2. GET /healthz with 64 connections: requests per second.
#   3. One `roundtable status --format json` as a CLI process, for comparison.
# Usage: benches/api.sh [OBJECTS]   (needs the engine only for the daemon's Adapter checks)
set -euo pipefail
cd "$(dirname "$0")/.."
objects=${1:-10000}
command -v wrk >/dev/null || { apt-get install -y -q wrk >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q wrk >/dev/null; }; }
cargo build --quiet --release --bin roundtable
bin=$PWD/target/x86_64-unknown-linux-gnu/release/roundtable
source benches/daemon.sh
python3 - "$objects" <<'PY'
import sys
# Spec files are limited to 1 MiB: 100 objects per file.
n = int(sys.argv[1]); api = "apiVersion: roundtable.dev/v1alpha1"
docs = [f"{api}\nkind: Adapter\nmetadata: {{name: agent-{i:05d}}}\nspec: {{command: agent, enabled: false}}\n" for i in range(n // 2)]
docs += [f"{api}\nkind: Assignment\nmetadata: {{name: task-{i:05d}}}\nspec:\n  adapter: agent-{i % max(n // 2, 1):05d}\n  task: {{id: T{i}, prompt: p}}\n  readablePaths: [README.md]\n  suspend: true\n" for i in range(n - n // 2)]
for start in range(0, len(docs), 100):
    with open(f".roundtable/objects-{start // 100:04d}.yaml", "w") as f:
        f.write("---\n".join(docs[start:start + 100]))
PY
start_daemon "$bin"
started=$(date +%s)
for _ in $(seq 1 3000); do
  synced=$("$bin" status --format json | python3 -c 'import json,sys; rows=json.load(sys.stdin)["items"]; print(sum(r["sync"]=="Synced" for r in rows))')
  [ "$synced" -ge "$objects" ] && break
  sleep 1
done
echo "objects: $objects (all Synced after $(( $(date +%s) - started )) s)"
echo
echo "== GET /v1/status, 4 connections, 20 s"
wrk -t2 -c4 -d20s --timeout 10s --latency -H "Authorization: Bearer $token" "http://$address/v1/status" | grep -E "Latency|50%|90%|99%|Requests/sec|requests in|Non-2xx|timeout"
echo
echo "== GET /healthz, 64 connections, 10 s"
wrk -t2 -c64 -d10s --latency "http://$address/healthz" | grep -E "Latency|50%|99%|Requests/sec|requests in"
echo
echo "== roundtable status --format json (CLI process), 3 runs"
for _ in 1 2 3; do /usr/bin/time -f "%e s, %M KiB max RSS" "$bin" status --format json >/dev/null; done
echo
echo "daemon RSS: $(ps -o rss= -p "$daemon") KiB"
