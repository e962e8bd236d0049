# Sourced: starts a private dockerd whose daemon.json registers gVisor's runsc as
# docs/runtime-classes.md shows (default runtime: $PRIVATE_DEFAULT_RUNTIME, else runc), in its own
# data root, sockets and network namespace, so the machine's engine is neither touched nor
# reconfigured; exports DOCKER_HOST for it and stops and removes it on exit. Needs root, dockerd
# and runsc (apt-get install runsc).
runsc=$(command -v runsc) || { echo "private engine: runsc is not installed (apt-get install runsc)" >&2; exit 1; }
private_dir=$(mktemp -d /tmp/rtg-XXXXXX)
cat > "$private_dir/daemon.json" <<JSON
{"default-runtime": "${PRIVATE_DEFAULT_RUNTIME:-runc}",
 "runtimes": {"runsc": {"path": "$runsc", "runtimeArgs": ["--network=none", "--host-uds=open"]}}}
JSON
# No bridge or iptables (agents have no network); vfs storage works on any backing file system.
unshare --net -- dockerd --config-file="$private_dir/daemon.json" --data-root="$private_dir/data" \
  --exec-root="$private_dir/exec" --pidfile="$private_dir/dockerd.pid" --host="unix://$private_dir/docker.sock" \
  --bridge=none --iptables=false --ip6tables=false --storage-driver=vfs >"$private_dir/dockerd.log" 2>&1 &
private_dockerd=$!
stop_private_engine() {
  kill -TERM "$private_dockerd" 2>/dev/null || true
  for _ in $(seq 1 300); do kill -0 "$private_dockerd" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$private_dockerd" 2>/dev/null || true
  # Its containerd, and any shim or runtime left: their command lines name the folder.
  pgrep -f "$private_dir" | xargs -r kill -KILL 2>/dev/null || true
  # dockerd bind-mounts its data root: unmount what is left under the folder, deepest first.
  awk -v d="$private_dir" '$5 ~ "^"d {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$private_dir"
}
trap stop_private_engine EXIT
export DOCKER_HOST="unix://$private_dir/docker.sock"
for _ in $(seq 1 300); do docker version >/dev/null 2>&1 && break; sleep 0.1; done
docker version >/dev/null || { cat "$private_dir/dockerd.log" >&2; exit 1; }
