# Sourced by the benches that measure a running daemon: a scratch folder holding an empty project
# (this shell moves into it) and `start_daemon BIN`, which serves the API on a free loopback port
# and sets `daemon`, `address` and `token`; the daemon and the folder are removed on exit. `start_daemon_with_objects BIN N` (below) fills the project first.
work=$(mktemp -d)
daemon=""
cleanup() { [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
export GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b

mkdir -p "$work/project/.roundtable" "$work/executions"
chmod 700 "$work/executions"
cd "$work/project"
echo "# bench" > README.md

start_daemon() {
  git init -q -b main && git add -A && git commit -q -m base
  "$1" start --api-listen 127.0.0.1:0 --execution-root "$work/executions" --audit-key "$work/audit.key" 2>"$work/daemon.log" &
  daemon=$!
  for _ in $(seq 1 600); do [ -s .roundtable/state/api-address ] && break; sleep 0.1; done
  [ -s .roundtable/state/api-address ] || { echo "the daemon did not serve its API within 60 s:" >&2; cat "$work/daemon.log" >&2; exit 1; }
  address=$(cat .roundtable/state/api-address)
  token=$(cat .roundtable/state/api-token)
}

# `start_daemon_with_objects BIN N`: N objects (half Adapters, half suspended Assignments that
# name them) written as specs, the daemon started, and back once every one is Synced; sets
# `synced_after` (seconds).
start_daemon_with_objects() {
  python3 - "$2" <<'PY'
import sys
# Spec files are limited to 1 MiB: 100 objects per file.
n = int(sys.argv[1]); api = "apiVersion: roundtable.dev/v1alpha1"
docs = [f"{api}\nkind: Adapter\nmetadata: {{name: agent-{i:05d}}}\nspec: {{command: agent, enabled: false}}\n" for i in range(n // 2)]
docs += [f"{api}\nkind: Assignment\nmetadata: {{name: task-{i:05d}}}\nspec:\n  adapter: agent-{i % max(n // 2, 1):05d}\n  task: {{id: T{i}, prompt: p}}\n  readablePaths: [README.md]\n  suspend: true\n" for i in range(n - n // 2)]
for start in range(0, len(docs), 100):
    with open(f".roundtable/objects-{start // 100:04d}.yaml", "w") as f:
        f.write("---\n".join(docs[start:start + 100]))
PY
  start_daemon "$1"
  local started synced
  started=$(date +%s)
  for _ in $(seq 1 3000); do
    synced=$("$1" status --format json | python3 -c 'import json,sys; rows=json.load(sys.stdin)["items"]; print(sum(r["sync"]=="Synced" for r in rows))')
    [ "$synced" -ge "$2" ] && break
    sleep 1
  done
  # Figures of a project still syncing would measure something else.
  [ "$synced" -ge "$2" ] || { echo "only $synced of $2 objects Synced after $(( $(date +%s) - started )) s" >&2; exit 1; }
  synced_after=$(( $(date +%s) - started ))
}
