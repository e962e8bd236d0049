#!/usr/bin/env bash
# HTTP API figures from loopback with wrk (Debian package); prints, asserts nothing. Each figure
# is printed beside its baseline from the same run, p50 and p99, in a table at the end.
#   1. GET /v1/status of a project with N objects (default 10,000: half Adapters, half suspended
#      Assignments), served from the materialised status: the whole list, a 500-row page, and
#      If-None-Match (304), 4 connections each. Baseline: what every request cost before, one
#      recompute of the status: the daemon's own refreshes, which it runs every 10 s (and after
#      writes) all through the run, from its log.
#   2. 100 watchers of /v1/status?watch=true and one spec edit: when each received it (p50, p99),
#      counted from the write of the file.
#   3. GET /healthz with 32 connections (the most one address may hold without the token):
#      requests per second.
#   4. `roundtable status --format json` as a CLI process: asking the daemon, and computing it in
#      the process (`--retention 30d`), the baseline, taking turns.
#   5. The daemon's CPU time (utime + stime from /proc/PID/stat) during each part and over the
#      whole run, its RSS and peak RSS (VmHWM), and how much of the RSS is heap and how much the
#      binary's pages (`benches/heap.sh` says who holds the heap).
# Usage: benches/api.sh [OBJECTS]   (needs the engine only for the daemon's Adapter checks)
#   ROUNDTABLE_BIN=PATH measures that binary; ROUNDTABLE_BENCH_SMOKE=1 (benches/lib.sh) runs
#   300 objects, 1 s per wrk run, 5 watchers.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh
objects=${1:-$(sized 10000 300)}
seconds=$(sized 10 1)
watchers=$(sized 100 5)
runs=$(sized 5 2)
command -v wrk >/dev/null || { apt-get install -y -q wrk >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q wrk >/dev/null; }; }
roundtable_bin
here=$PWD
export RUST_LOG=info,roundtable_api::status_view=debug
source benches/daemon.sh
start_daemon_with_objects "$bin" "$objects"
echo "objects: $objects (all Synced after $synced_after s); binary: $bin"
auth="Authorization: Bearer $token"

# The daemon's CPU time in clock ticks (utime + stime, fields 14 and 15; its name has no spaces).
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$daemon/stat"; }
now_ns() { date +%s%N; }
# `cpu_line TICKS_BEFORE NS_BEFORE [REQUESTS]`: the daemon's CPU since then.
cpu_line() {
  awk -v t="$(( $(cpu_ticks) - $1 ))" -v hz="$hz" -v ns="$(( $(now_ns) - $2 ))" -v n="${3:-0}" 'BEGIN {
    printf "daemon CPU: %.2f s over %.1f s (%.0f %% of one core)", t / hz, ns / 1e9, 100 * t / hz / (ns / 1e9)
    if (n > 0) printf ", %.0f µs per request", 1e6 * t / hz / n
    printf "\n"
  }'
}
# Rows of the closing table: label, p50, p99.
table=()
row() { table+=("$(printf '%-58s %12s %12s' "$1" "$2" "$3")"); }

# `measure LABEL WRK_ARGS…`: one wrk run with its latency figures and the daemon's CPU meanwhile.
measure() {
  local label=$1; shift
  echo
  echo "== $label, $seconds s"
  local ticks started out
  ticks=$(cpu_ticks) started=$(now_ns)
  out=$(wrk -t2 -d"${seconds}s" --timeout 10s --latency "$@")
  grep -E "Latency|50%|90%|99%|Requests/sec|requests in|Non-2xx|Socket errors" <<<"$out"
  local requests p50 p99
  requests=$(figure "$label: requests" "$(awk '/requests in/ {print $1}' <<<"$out")")
  p50=$(figure "$label: p50" "$(awk '$1 == "50%" {print $2}' <<<"$out")")
  p99=$(figure "$label: p99" "$(awk '$1 == "99%" {print $2}' <<<"$out")")
  cpu_line "$ticks" "$started" "$requests"
  # At the cap of connections without the token, a closed one is a figure, not an error.
  local errors="Non-2xx|Socket errors"
  if [ -n "${at_the_cap:-}" ]; then errors="Non-2xx"; fi
  if grep -qE "$errors" <<<"$out"; then fail_in_smoke "$label: wrk saw errors (above)"; fi
  row "$label" "$p50" "$p99"
}

# The daemon's refreshes of the whole status, one line each: `took_ms` is the baseline of part 1.
# A refresh that rebuilt only the rows a write can change says `whole=false` and is not one.
full_refreshes() {
  grep "status view refreshed" "$work/daemon.log" | grep -E "rows=$objects( |$)" | grep -v "whole=false" || true
}
run_ticks=$(cpu_ticks) run_started=$(now_ns)
refreshes_before=$(full_refreshes | wc -l)
curl -sf -o /dev/null -w "one response of the whole list: %{size_download} bytes\n" -H "$auth" "http://$address/v1/status"
measure "GET /v1/status, the whole list, 4 connections" -c4 -H "$auth" "http://$address/v1/status"
measure "GET /v1/status?limit=500, one page, 4 connections" -c4 -H "$auth" "http://$address/v1/status?limit=500"
etag=$(curl -sf -D - -o /dev/null -H "$auth" "http://$address/v1/status" | tr -d '\r' | sed -n 's/^etag: //Ip')
[ -n "$etag" ] || fail_in_smoke "GET /v1/status gave no ETag"
measure "GET /v1/status, If-None-Match (304), 4 connections" -c4 -H "$auth" -H "If-None-Match: $etag" "http://$address/v1/status"

echo
echo "== $watchers watchers of /v1/status?watch=true, one spec edit"
ticks=$(cpu_ticks) started=$(now_ns)
out=$(python3 "$here/benches/watchers.py" "$address" "$token" "$watchers" .roundtable)
echo "$out"
cpu_line "$ticks" "$started"
p50=$(figure "watchers: p50" "$(sed -n 's/.* p50 \([0-9]*\) ms.*/\1/p' <<<"$out")")
p99=$(figure "watchers: p99" "$(sed -n 's/.* p99 \([0-9]*\) ms.*/\1/p' <<<"$out")")
row "watchers: the edit delivered" "$p50 ms" "$p99 ms"

# 32 connections: one address may hold no more than 32 that have not shown the token (a probe
# never does); wrk's 33rd and on would be closed at once (read errors), which measures the cap.
at_the_cap=1 measure "GET /healthz, 32 connections" -c32 "http://$address/healthz"

echo
echo "== roundtable status --format json (CLI process), $runs runs each, taking turns"
ask=() computed=()
timed() { /usr/bin/time -f "%e %M" -o "$work/time" "$bin" status --format json "$@" >/dev/null; tail -n 1 "$work/time"; }
for _ in $(seq "$runs"); do
  ask+=("$(timed)")
  computed+=("$(timed --retention 30d)")
done
show_runs() { # label, then "seconds KiB" per run
  local label=$1; shift
  printf '%s: %s\n' "$label" "$(printf '%s\n' "$@" | awk '{printf "%s s (%.0f MiB max RSS)  ", $1, $2 / 1024}')"
  local spread
  spread=$(printf '%s\n' "$@" | awk '{print $1}' | p50_p99)
  row "$label" "$(awk '{print $2}' <<<"$spread") s" "$(awk '{print $4}' <<<"$spread") s"
}
show_runs "status --format json, asking the daemon" "${ask[@]}"
show_runs "baseline: computed in the process (--retention 30d)" "${computed[@]}"

# The baseline of part 1: every full refresh the daemon ran since the measurements began (the
# first of the run when none has run since), each one what a request cost before the view.
refreshes=$(full_refreshes | tail -n +"$((refreshes_before + 1))")
[ -n "$refreshes" ] || refreshes=$(full_refreshes | tail -n 1)
took=$(grep -oE "took_ms=[0-9]+" <<<"$refreshes" | cut -d= -f2 || true)
[ -n "$took" ] || fail_in_smoke "the daemon's log holds no status refresh of $objects rows"
if [ -n "$took" ]; then
  spread=$(p50_p99 <<<"$took")
  row "baseline: one recompute of the status ($(wc -l <<<"$took") refreshes)" \
    "$(awk '{print $2}' <<<"$spread")ms" "$(awk '{print $4}' <<<"$spread")ms"
  # Beside the three figures of GET /v1/status it is the baseline of.
  table=("${table[@]:0:3}" "${table[-1]}" "${table[@]:3:${#table[@]}-4}")
fi

echo
echo "== the daemon"
cpu_line "$run_ticks" "$run_started"
# RSS is the heap and stacks (anonymous) and the binary's pages the daemon touched (file); the
# peak (VmHWM) covers the whole run, the first scan included.
grep -E "^(Rss|Anonymous|Pss_File)" "/proc/$daemon/smaps_rollup" | awk '{printf "daemon %s %d KiB (%.1f MiB)\n", $1, $2, $2 / 1024}'
hwm=$(figure "VmHWM" "$(awk '/^VmHWM/ {print $2}' "/proc/$daemon/status")")
awk -v k="$hwm" 'BEGIN {printf "daemon peak RSS (VmHWM): %d KiB (%.1f MiB)\n", k, k / 1024}'

echo
echo "== each figure beside its baseline, from this run"
printf '%-58s %12s %12s\n' "" p50 p99
printf '%s\n' "${table[@]}"
