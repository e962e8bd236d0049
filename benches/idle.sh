#!/usr/bin/env bash
# Idle daemon cost on the quickstart: CPU time and resident memory of `roundtable start` over a
# quiet window. Prints figures, asserts nothing. Usage: benches/idle.sh [SECONDS]   (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
window=${1:-30}
cargo build --quiet --release --bin roundtable
bin=$PWD/target/x86_64-unknown-linux-gnu/release/roundtable
bash tests/images/build.sh >/dev/null 2>&1
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
bash examples/quickstart/setup.sh "$work/quickstart" >/dev/null
cd "$work/quickstart"
"$bin" start --audit-key "$work/audit.key" >"$work/daemon.log" 2>&1 &
pid=$!
sleep 5   # first scan and first reconciles

ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
before=$(ticks)
sleep "$window"
after=$(ticks)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
awk -v t=$((after - before)) -v hz="$hz" -v w="$window" -v rss="$rss" -v hwm="$hwm" 'BEGIN {
  printf "idle daemon over %d s: CPU %.2f s (%.3f %% of one core); RSS %.1f MiB, peak %.1f MiB\n", w, t / hz, 100 * t / hz / w, rss / 1024, hwm / 1024
}'
"$bin" status
