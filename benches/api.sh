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
start_daemon_with_objects "$bin" "$objects"
echo "objects: $objects (all Synced after $synced_after s)"
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
