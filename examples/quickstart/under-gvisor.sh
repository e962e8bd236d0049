#!/usr/bin/env bash
# Runs the quickstart under gVisor: on a private dockerd (its own data root, sockets and network
# namespace, so the machine's engine is neither touched nor reconfigured) whose default runtime
# is runsc, registered as docs/runtime-classes.md shows. Then checks that every session ran under
# runsc with gVisor's kernel proven by its self-check. Needs root, dockerd and runsc
# (apt-get install runsc). Usage: examples/quickstart/under-gvisor.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
runsc=$(command -v runsc) || { echo "under-gvisor: runsc is not installed (apt-get install runsc)" >&2; exit 1; }
dir=$(mktemp -d /tmp/rtg-XXXXXX)
cat > "$dir/daemon.json" <<JSON
{"default-runtime": "runsc",
 "runtimes": {"runsc": {"path": "$runsc", "runtimeArgs": ["--network=none", "--host-uds=open"]}}}
JSON
# No bridge or iptables (agents have no network); vfs storage works on any backing file system.
unshare --net -- dockerd --config-file="$dir/daemon.json" --data-root="$dir/data" --exec-root="$dir/exec" \
  --pidfile="$dir/dockerd.pid" --host="unix://$dir/docker.sock" --bridge=none --iptables=false \
  --ip6tables=false --storage-driver=vfs >"$dir/dockerd.log" 2>&1 &
dockerd=$!
cleanup() {
  kill -TERM "$dockerd" 2>/dev/null || true
  for _ in $(seq 1 300); do kill -0 "$dockerd" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$dockerd" 2>/dev/null || true
  if [ -f "$dir/exec/containerd/containerd.pid" ]; then kill -KILL "$(cat "$dir/exec/containerd/containerd.pid")" 2>/dev/null || true; fi
  # dockerd bind-mounts its data root: unmount what is left under the folder, deepest first.
  awk -v d="$dir" '$5 ~ "^"d {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
export DOCKER_HOST="unix://$dir/docker.sock"
for _ in $(seq 1 300); do docker version >/dev/null 2>&1 && break; sleep 0.1; done
docker version >/dev/null || { cat "$dir/dockerd.log" >&2; exit 1; }
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
