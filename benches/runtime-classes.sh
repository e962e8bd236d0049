#!/usr/bin/env bash
# gVisor's cost, measured on one private engine (tests/private-engine/start.sh: runsc registered
# as docs/runtime-classes.md shows) so both runtimes share the same storage driver and state;
# prints, asserts nothing:
#   1. launch overhead of a no-op execution under runsc and under runc, each beside a plain
#      `docker run` under the same runtime with the same volumes and flags;
#   2. the 10,000-file / 200 MB export and diff under each, beside `docker cp` + `git diff`.
# Usage: benches/runtime-classes.sh [RUNS]   (default 5; needs root, dockerd and runsc;
#   ROUNDTABLE_BIN=PATH measures that binary; ROUNDTABLE_BENCH_SMOKE=1, benches/lib.sh: 1 round
#   of each at benches/execution.sh's smoke sizes, the debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh
runs=${1:-$(sized 5 1)}
roundtable_bin
export ROUNDTABLE_BIN=$bin
source tests/private-engine/start.sh
for runtime in runc runsc; do
  echo "== runtimeClass: $runtime"
  RUNTIME_CLASS=$runtime SECTIONS="1 2" bash benches/execution.sh "$runs"
done
