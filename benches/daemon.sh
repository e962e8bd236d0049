# Sourced by the benches that measure a running daemon: a scratch folder holding an empty project
# (this shell moves into it) and `start_daemon BIN`, which serves the API on a free loopback port
# and sets `daemon`, `address` and `token`; the daemon and the folder are removed on exit.
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
  address=$(cat .roundtable/state/api-address)
  token=$(cat .roundtable/state/api-token)
}
