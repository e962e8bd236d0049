#!/usr/bin/env bash
# Idle daemon cost: the CPU time and memory of `roundtable start` over a quiet window, with
# nothing running and nothing changing. Prints figures, asserts nothing.
# Usage: benches/idle.sh N [SHAPE]
#   N: how many objects (20, 1000, 10000 and 100000 are the sizes issue 50 names), half disabled
#   Adapters and half Assignments naming them (the project benches/api.sh measures), or
#   `quickstart` for the quickstart's few objects (builds the test images). The Assignments are
#   in SHAPE, or in each shape in turn when SHAPE is left out:
#     suspended  spec.suspend: true
#     waiting    waiting for their Adapter, which is disabled
#     finished   each with a Succeeded session
#     failed     each with a Failed session and no retry left
#     stalled    each with a stored spec that no longer reads, so the daemon stalls it at once
#   WINDOW=SECONDS: the quiet window (default 30). SETTLE=SECONDS: the wait after the first pass
#   (default 15). ROUNDTABLE_BIN=PATH: measure that binary (default: this tree's release build,
#   in $CARGO_TARGET_DIR when it is set). RESYNC=DURATION: the daemon's `--resync` (default
#   10m); one shorter than the window puts a resync pass, spread over its period, in it.
#   ROUNDTABLE_BENCH_SMOKE=1: a run of seconds on the debug build (N defaults to 20, the window
#   to 3 s, the settling to 1 s), to show the bench still works; its figures mean nothing.
# Each run starts the daemon on a fresh project, waits until every object has been reconciled
# once (its first condition written), lets it settle, then reads its CPU time, its store round
# trips and reconciles (from /metrics) and its RSS and peak RSS (VmHWM) over the window. The
# periodic resync (10 min) does not fall in the window unless RESYNC makes it: by default these
# are the figures between resyncs.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
source benches/lib.sh
if [ "$smoke" = 1 ]; then n=${1:-20}; window=${WINDOW:-3}; settle=${SETTLE:-1}; else n=${1:?usage: benches/idle.sh N [SHAPE]}; window=${WINDOW:-30}; settle=${SETTLE:-15}; fi
all_shapes=(suspended waiting finished failed stalled)
resync=()
if [ -n "${RESYNC:-}" ]; then resync=(--resync "$RESYNC"); fi
if [ -n "${2:-}" ]; then shapes=("$2"); else shapes=("${all_shapes[@]}"); fi
for shape in "${shapes[@]}"; do
  case "$shape" in
    suspended|waiting|finished|failed|stalled) ;;
    *) echo "idle.sh: unknown shape $shape (${all_shapes[*]})" >&2; exit 2 ;;
  esac
done
case "$n" in
  quickstart) ;;
  *[!0-9]*|"") echo "idle.sh: N is a number of objects or quickstart, not $n" >&2; exit 2 ;;
esac
roundtable_bin
export GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
hz=$(getconf CLK_TCK)
work=""
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; fi
  pid=""
  if [ -n "$work" ]; then rm -rf "$work"; fi
  work=""
}
trap cleanup EXIT

# Whether the daemon still runs; if not, says so with the end of its log.
alive() {
  kill -0 "$pid" 2>/dev/null && return 0
  echo "idle.sh: the daemon exited; the end of its log:" >&2
  tail -5 "$work/daemon.log" >&2
  return 1
}
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
status_kib() { awk -v key="$1:" '$1 == key {print $2}' "/proc/$pid/status"; }
# A figure from the daemon's /metrics (empty when the binary does not export it).
metric() {
  curl -s -H "Authorization: Bearer $(cat .roundtable/state/api-token)" "http://$(cat .roundtable/state/api-address)/metrics" |
    awk -v name="$1" '$1 == name || index($1, name "{") == 1 {sum += $2; found = 1} END {if (found) printf "%d", sum}'
}
# Runs SQL against the state database (python's sqlite3: no other tool needed).
sql() {
  python3 - "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(".roundtable/state/state.db", timeout=30)
for row in db.execute(sys.argv[1]):
    print(*row)
db.commit()
PY
}

# The project: N objects, 100 a file (spec files are limited to 1 MiB).
write_project() {
  python3 - "$1" "$2" <<'PY'
import sys
n, shape = int(sys.argv[1]), sys.argv[2]
api = "apiVersion: roundtable.dev/v1alpha1"
adapters = max(n // 2, 1)
suspend = "true" if shape == "suspended" else "false"
docs = [f"{api}\nkind: Adapter\nmetadata: {{name: agent-{i:06d}}}\nspec: {{command: agent, enabled: false}}\n" for i in range(n // 2)]
docs += [f"{api}\nkind: Assignment\nmetadata: {{name: task-{i:06d}}}\nspec:\n  adapter: agent-{i % adapters:06d}\n  task: {{id: T{i}, prompt: p}}\n  readablePaths: [README.md]\n  suspend: {suspend}\n" for i in range(n - n // 2)]
for start in range(0, len(docs), 100):
    with open(f".roundtable/objects-{start // 100:04d}.yaml", "w") as f:
        f.write("---\n".join(docs[start:start + 100]))
PY
}

# What the shape adds to the store before the daemon starts: the specs are recorded first by
# an in-process reconcile (no daemon), which gives every object its uid.
prepare_store() {
  case "$shape" in
    finished|failed)
      "$bin" reconcile --audit-key "$work/audit.key" Adapter/agent-000000 >/dev/null
      local phase=Succeeded cause=NULL
      [ "$shape" = failed ] && phase=Failed cause="'Exited'"
      sql "INSERT INTO sessions (id, assignment, assignment_uid, execution_generation, attempt, controller_run, adapter, phase, cause, message, created_at, finished_at)
           SELECT 'session-' || name, name, uid, COALESCE(execution_generation, 1), 1, 'bench', 'agent', '$phase', $cause, 'done',
                  strftime('%Y-%m-%dT%H:%M:%S.000000000Z', 'now'), strftime('%Y-%m-%dT%H:%M:%S.000000000Z', 'now')
           FROM objects WHERE kind = 'Assignment'" ;;
    stalled)
      "$bin" reconcile --audit-key "$work/audit.key" Adapter/agent-000000 >/dev/null
      # The digest stays, so the daemon's scan finds the spec unchanged and keeps what is stored.
      sql "UPDATE objects SET spec_json = '{\"not\": \"a spec\"}' WHERE kind = 'Assignment'" ;;
  esac
}

run_objects() {
  local n=$1
  work=$(mktemp -d)
  mkdir -p "$work/project/.roundtable" "$work/executions"
  chmod 700 "$work/executions"
  cd "$work/project"
  echo "# bench" > README.md
  write_project "$n" "$shape"
  git init -q -b main && git add -A && git commit -q -m base
  prepare_store
  local started=$SECONDS
  "$bin" start --api-listen 127.0.0.1:0 --execution-root "$work/executions" --audit-key "$work/audit.key" "${resync[@]}" 2>"$work/daemon.log" &
  pid=$!
  for _ in $(seq 1 600); do [ -s .roundtable/state/api-address ] && break; sleep 0.1; done
  # Every live object reconciled once: each has a condition (Ready, or Stalled).
  local reconciled=0
  for _ in $(seq 1 3600); do
    reconciled=$(sql "SELECT COUNT(*) FROM (SELECT DISTINCT c.kind, c.name FROM conditions c JOIN objects o ON o.kind = c.kind AND o.name = c.name WHERE o.deleted_at IS NULL)")
    [ "$reconciled" -ge "$n" ] && break
    alive || return 1
    sleep 1
  done
  local first_pass=$((SECONDS - started))
  sleep "$settle"
  measure "$n objects, $shape" "$first_pass s to reconcile $reconciled"
  cd "$here"
  cleanup
}

run_quickstart() {
  bash tests/images/build.sh >/dev/null 2>&1
  work=$(mktemp -d)
  bash examples/quickstart/setup.sh "$work/quickstart" >/dev/null
  cd "$work/quickstart"
  "$bin" start --api-listen 127.0.0.1:0 --audit-key "$work/audit.key" "${resync[@]}" >"$work/daemon.log" 2>&1 &
  pid=$!
  sleep 5   # the first scan and the first reconciles
  sleep "$settle"
  measure "quickstart" "$(sql "SELECT COUNT(*) FROM objects WHERE deleted_at IS NULL") objects"
  cd "$here"
  cleanup
}

# Prints the daemon's figures over the window.
measure() {
  local what=$1 note=$2
  local trips_before reconciles_before before after trips_after reconciles_after
  trips_before=$(metric roundtable_store_round_trips_total)
  reconciles_before=$(metric roundtable_reconciles_total)
  before=$(ticks)
  sleep "$window"
  after=$(ticks)
  trips_after=$(metric roundtable_store_round_trips_total)
  reconciles_after=$(metric roundtable_reconciles_total)
  local trips="n/a" reconciles="n/a"
  [ -n "$trips_before" ] && [ -n "$trips_after" ] && trips=$((trips_after - trips_before))
  [ -n "$reconciles_before" ] && [ -n "$reconciles_after" ] && reconciles=$((reconciles_after - reconciles_before))
  # A smoke run (CI) fails on a figure it cannot read, as the other benches do (benches/lib.sh).
  if [ "$smoke" = 1 ] && { [ "$trips" = n/a ] || [ "$reconciles" = n/a ]; }; then
    echo "idle.sh: cannot read the figure \"store round trips\" or \"reconciles\" from /metrics" >&2
    exit 1
  fi
  awk -v what="$what" -v note="$note" -v t=$((after - before)) -v hz="$hz" -v w="$window" \
      -v rss="$(status_kib VmRSS)" -v hwm="$(status_kib VmHWM)" -v trips="$trips" -v reconciles="$reconciles" 'BEGIN {
    printf "%-28s %-32s CPU %6.2f s over %d s = %7.3f %% of one core; reconciles %s, store round trips %s (incl. the two /metrics reads); RSS %.1f MiB, peak %.1f MiB\n",
      what, "(" note ")", t / hz, w, 100 * t / hz / w, reconciles, trips, rss / 1024, hwm / 1024
  }'
}

echo "binary: $bin ($("$bin" --version))"
if [ "$n" = quickstart ]; then
  run_quickstart
else
  for shape in "${shapes[@]}"; do run_objects "$n"; done
fi
