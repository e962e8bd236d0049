#!/usr/bin/env bash
# gVisor's cost, measured on one private engine (tests/private-engine/start.sh: runsc registered
# as docs/runtime-classes.md shows) so both runtimes share the same storage driver and state;
# prints, asserts nothing:
#   1. launch overhead of a no-op execution under runsc and under runc, each beside a plain
#      `docker run` under the same runtime with the same volumes and flags;
#   2. the 10,000-file / 200 MB export and diff under each, beside `docker cp` + `git diff`.
# Usage: benches/runtime-classes.sh [RUNS]   (default 5; needs root, dockerd and runsc)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
cargo build --quiet --release --bin roundtable
export ROUNDTABLE_BENCH_BIN=${CARGO_TARGET_DIR:-$PWD/target}/x86_64-unknown-linux-gnu/release/roundtable
source tests/private-engine/start.sh
for runtime in runc runsc; do
  echo "== runtimeClass: $runtime"
  RUNTIME_CLASS=$runtime SECTIONS="1 2" bash benches/execution.sh "$runs"
done
