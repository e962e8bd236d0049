#!/usr/bin/env bash
# Every bench at a tiny size (ROUNDTABLE_BENCH_SMOKE=1, benches/lib.sh), one after the other, each
# timed: a bench fails its smoke run on any error or on a figure it cannot read, never on what a
# figure says. The benches assert nothing about performance, and nobody runs them every day: run
# here, each shows in CI that it still runs to the end. `.ci/run` calls this after the tests;
# it runs alone too (as root, with the Docker engine, on the debug build; packages the benches
# need and lack are installed with apt-get).
# Usage: benches/smoke.sh [NAME…]   (only those benches: api, gateway, broker, …)
set -euo pipefail
cd "$(dirname "$0")/.."
export ROUNDTABLE_BENCH_SMOKE=1
source benches/lib.sh
only=" $* "
started=$(date +%s)
bench() { # name, then the command
  local name=$1 t0
  shift
  [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || return 0
  t0=$(date +%s)
  echo "::: bench $name"
  "$@"
  echo "::: bench $name took $(($(date +%s) - t0)) s"
}
# A Rust bench runs from its package's folder, as `cargo bench` runs it.
rust() { # package folder, package, bench
  local executable
  executable=$(rust_bench "$2" "$3")
  (cd "$1" && ${isolated:+isolated} "$executable")
}
# The broker bench's providers listen on 127.0.0.201:443 and .202:443: in a network namespace of
# its own, with only its loopback, a run of another checkout at the same moment cannot take them
# (where unshare(1) cannot make one, it runs on the host's loopback).
isolated() {
  if unshare --net true 2>/dev/null; then
    unshare --net -- sh -c 'ip link set lo up && exec "$@"' sh "$@"
  else
    "$@"
  fi
}
bench validate bash benches/validate.sh
bench console-render rust api roundtable-api console
bench telemetry rust telemetry roundtable-telemetry versus_prometheus_client
bench patch rust workspace roundtable-workspace patch
bench accept rust delivery roundtable-delivery accept
bench leases rust store roundtable-store leases
bench reconcile rust daemon roundtable-daemon reconcile
bench gitops rust daemon roundtable-daemon gitops
bench endpoint rust agents roundtable-agents endpoint
isolated=1 bench broker rust broker roundtable-broker broker
# gateway/benches/egress.rs, beside Squid and HAProxy.
bench gateway bash benches/gateway.sh
bench api bash benches/api.sh
bench console bash benches/console.sh
bench preauth bash benches/preauth.sh
bench heap bash benches/heap.sh
bench mcp bash benches/mcp.sh
bench execution bash benches/execution.sh
bench runtime-classes bash benches/runtime-classes.sh
bench idle bash benches/idle.sh
echo "::: benches took $(($(date +%s) - started)) s"
