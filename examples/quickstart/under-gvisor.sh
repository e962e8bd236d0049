#!/usr/bin/env bash
# Runs the quickstart under gVisor: on a private dockerd (its own data root, sockets and network
# namespace, so the machine's engine is neither touched nor reconfigured) whose default runtime
# is runsc, registered as docs/runtime-classes.md shows. Then checks that every session ran under
# runsc with gVisor's kernel proven by its self-check. Needs root, dockerd and runsc
# (apt-get install runsc). Usage: examples/quickstart/under-gvisor.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PRIVATE_DEFAULT_RUNTIME=runsc source tests/private-engine/start.sh
echo "== a private engine whose default runtime is $(docker info --format '{{.DefaultRuntime}}')"
bash examples/quickstart/run.sh
bin=$PWD/target/x86_64-unknown-linux-gnu/debug/roundtable
cd target/quickstart
ids=$("$bin" sessions list --format json | sed -n 's/^      "id": "\(.*\)",$/\1/p')
[ -n "$ids" ] || { echo "under-gvisor: no sessions" >&2; exit 1; }
for id in $ids; do
  line=$("$bin" sessions show "$id" | grep '^Runtime:' || true)
  echo "session $id: $line"
  case "$line" in
    *"runsc (gVisor's user-space kernel, proven by the self-check)"*) ;;
    *) echo "under-gvisor: session $id did not run under gVisor with its kernel proven" >&2; exit 1 ;;
  esac
done
echo "== every session ran under gVisor"
