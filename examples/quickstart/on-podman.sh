#!/usr/bin/env bash
# Runs the quickstart on Podman: Debian's podman (rootful) serving its Docker-compatible API from
# a private root and socket (the machine's own containers and images are untouched), with
# DOCKER_HOST pointed at it; `roundtable doctor` first, which must prove every step there.
# Needs root and podman (apt-get install podman). Usage: examples/quickstart/on-podman.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v podman >/dev/null || { echo "on-podman: podman is not installed (apt-get install podman)" >&2; exit 1; }
dir=$(mktemp -d /tmp/rtp-XXXXXX)
podman=(podman --root "$dir/root" --runroot "$dir/run")
"${podman[@]}" system service --time=0 "unix://$dir/podman.sock" >"$dir/service.log" 2>&1 &
service=$!
cleanup() {
  "${podman[@]}" rm --all --force --time=0 >/dev/null 2>&1 || true
  kill "$service" 2>/dev/null || true
  wait "$service" 2>/dev/null || true
  # conmon outlives an exec by minutes (--exit-delay): whatever names the folder goes too.
  pgrep -f "$dir" | xargs -r kill -KILL 2>/dev/null || true
  awk -v d="$dir" '$5 ~ "^"d {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 1 200); do [ -S "$dir/podman.sock" ] && break; sleep 0.1; done
export DOCKER_HOST="unix://$dir/podman.sock"
cargo build --quiet --bin roundtable
bin=$PWD/target/x86_64-unknown-linux-gnu/debug/roundtable
echo "== roundtable doctor (Podman $(docker version --format '{{.Server.Version}}'))"
"$bin" doctor
bash examples/quickstart/run.sh
cd target/quickstart
count=$("$bin" proposals list --format json | grep -c '"id"' || true)
[ "$count" -ge 2 ] || { echo "on-podman: expected 2 proposals, found $count" >&2; exit 1; }
echo "== the quickstart converged on Podman: $count proposals"
