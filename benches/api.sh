#!/usr/bin/env bash
# HTTP API figures from loopback with wrk (Debian package); prints, asserts nothing. Each figure
# is printed beside its baseline from the same run.
#   1. GET /v1/status of a project with N objects (default 10,000: half Adapters, half suspended
#      Assignments), served from the materialised status: the whole list, a 500-row page, and
#      If-None-Match (304), 4 connections each. Baseline: what every request cost before, one
#      recompute of the status (the daemon's own refresh, from its log).
#   2. 100 watchers of /v1/status?watch=true and one spec edit: when each received it (p50, p99),
#      counted from the write of the file.
#   3. GET /healthz with 32 connections (the most one address may hold without the token):
#      requests per second.
#   4. `roundtable status --format json` as a CLI process: asking the daemon, and computing it in
#      the process (`--retention 30d`), the baseline.
#   5. The daemon's RSS, and how much of it is heap and how much the binary's pages
#      (`benches/heap.sh` says who holds the heap).
# Usage: benches/api.sh [OBJECTS]   (needs the engine only for the daemon's Adapter checks)
set -euo pipefail
cd "$(dirname "$0")/.."
objects=${1:-10000}
command -v wrk >/dev/null || { apt-get install -y -q wrk >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q wrk >/dev/null; }; }
cargo build --quiet --release --bin roundtable
bin=$PWD/target/x86_64-unknown-linux-gnu/release/roundtable
here=$PWD
export RUST_LOG=info,roundtable_api::status_view=debug
source benches/daemon.sh
start_daemon_with_objects "$bin" "$objects"
echo "objects: $objects (all Synced after $synced_after s)"
auth="Authorization: Bearer $token"
wrk_figures() { grep -E "Latency|50%|90%|99%|Requests/sec|requests in|Non-2xx|timeout"; }

echo
echo "== baseline: one recompute of the status (what each request cost before), last 5 refreshes"
grep "status view refreshed" "$work/daemon.log" | tail -5 | grep -oE "rows=[0-9]+|took_ms=[0-9]+" | paste -sd' ' | fold -w 100
echo
echo "== GET /v1/status, the whole list, 4 connections, 10 s"
curl -s -o /dev/null -w "one response: %{size_download} bytes\n" -H "$auth" "http://$address/v1/status"
wrk -t2 -c4 -d10s --timeout 10s --latency -H "$auth" "http://$address/v1/status" | wrk_figures
echo
echo "== GET /v1/status?limit=500, one page, 4 connections, 10 s"
wrk -t2 -c4 -d10s --latency -H "$auth" "http://$address/v1/status?limit=500" | wrk_figures
echo
etag=$(curl -s -D - -o /dev/null -H "$auth" "http://$address/v1/status" | tr -d '\r' | sed -n 's/^etag: //Ip')
echo "== GET /v1/status with If-None-Match: $etag (304), 4 connections, 10 s"
wrk -t2 -c4 -d10s --latency -H "$auth" -H "If-None-Match: $etag" "http://$address/v1/status" | wrk_figures
echo
echo "== 100 watchers of /v1/status?watch=true, one spec edit"
python3 "$here/benches/watchers.py" "$address" "$token" 100 .roundtable
echo
# 32 connections: one address may hold no more than 32 that have not shown the token (a probe
# never does); wrk's 33rd and on would be closed at once (read errors), which measures the cap.
echo "== GET /healthz, 32 connections, 10 s"
wrk -t2 -c32 -d10s --latency "http://$address/healthz" | grep -E "Latency|50%|99%|Requests/sec|requests in|Socket errors"
echo
echo "== roundtable status --format json (CLI process), 3 runs each"
echo "asking the daemon:"
for _ in 1 2 3; do /usr/bin/time -f "  %e s, %M KiB max RSS" "$bin" status --format json >/dev/null; done
echo "baseline, computed in the process (--retention 30d):"
for _ in 1 2 3; do /usr/bin/time -f "  %e s, %M KiB max RSS" "$bin" status --format json --retention 30d >/dev/null; done
echo
# RSS is the heap and stacks (anonymous) and the binary's pages the daemon touched (file).
grep -E "^(Rss|Anonymous|Pss_File)" "/proc/$daemon/smaps_rollup" | awk '{printf "daemon %s %d KiB (%.1f MiB)\n", $1, $2, $2 / 1024}'
