#!/usr/bin/env bash
# Execution figures on the real engine; prints, asserts nothing. Each figure is printed beside its
# baseline, the two taking turns round by round (one daemon runs throughout; each round appends
# its Assignments to the specs), p50 and p99 of each:
#   1. Launch overhead: an agent that runs `true`, through Roundtable (admission, provisioning,
#      volumes, container, PID 1, seed, self-check, exec, pause, export, inventory, patch; the
#      container's removal follows the session's end) against a plain `docker run` with the same
#      volumes and hardening flags, and the ratio of the two p50s.
#   2. Export + diff of a 10,000-file / 200 MB workspace with 1,000 files changed, against
#      `docker cp` + `git diff --no-index` of the same data.
#   3. Peak controller memory while 20 Assignments queue behind --max-executions 4.
#   4. Throughput: 200 `mock` Assignments (THROUGHPUT=N for another count) through 4 slots, in
#      executions per minute, against 200 `docker run`s with the same volumes and flags, 4 at a
#      time, in 4 rounds taking turns; each one's time from queued to finished; the ratio of the
#      two rates.
# Usage: benches/execution.sh [RUNS]   (default 5: the rounds of sections 1 and 2)
#   ROUNDTABLE_BENCH_LOG=FILE appends the daemons' stderr there (with RUST_LOG, the engine calls).
#   RUNTIME_CLASS=runsc runs the Adapter and the plain `docker run` under that OCI runtime
#   (benches/runtime-classes.sh compares runc and runsc on a private engine).
#   SECTIONS=1 (or 2, 3, 4, "1 3") runs only those sections; the binary is built into
#   $CARGO_TARGET_DIR (default target/), or ROUNDTABLE_BIN names one already built.
#   ROUNDTABLE_BENCH_SMOKE=1 (benches/lib.sh): 2 rounds, 200 files with 20 changed, 4 queued
#   behind 2 slots, 8 mock executions in 2 rounds, on the debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh
runs=${1:-$(sized 5 2)}
sections=${SECTIONS:-1 2 3 4}
section() { [[ " $sections " == *" $1 "* ]]; }
roundtable_bin
bash tests/images/build.sh >/dev/null 2>&1
work=$(mktemp -d)
# The baseline's containers and volumes carry this prefix, so the cleanup finds every one.
prefix=rt-bench-$$
daemon=
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  docker ps -aq --filter "name=^$prefix" | xargs -r docker rm -f -v >/dev/null 2>&1
  docker volume ls -q --filter "name=^$prefix" | xargs -r docker volume rm -f >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
export GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
api='apiVersion: roundtable.dev/v1alpha1'
runtime=${RUNTIME_CLASS:-}
# The plain `docker run` gets what Roundtable gives the engine: under gVisor the pids limit also
# covers the sandbox's own tasks (64 agent processes: 64 × 8 + 64, docs/runtime-classes.md).
docker_runtime=() docker_pids=64
if [ -n "$runtime" ]; then docker_runtime=(--runtime "$runtime"); fi
if [[ "$runtime" == runsc* ]]; then docker_pids=576; fi
adapter() {
  printf '%s\nkind: Adapter\nmetadata: {name: generic}\nspec:\n  image: roundtable-test/agent:latest\n  resources: {memory: %s, cpus: 1, pids: 64, workspaceSize: %s, tmpSize: 64Mi}\n' "$api" "$1" "$2"
  if [ -n "$runtime" ]; then printf '  runtimeClass: %s\n' "$runtime"; fi
  printf -- '---\n'
}
assignment() { printf "%s\nkind: Assignment\nmetadata: {name: %s}\nspec:\n  adapter: %s\n  task: {id: %s, prompt: '%s'}\n  readablePaths: [%s]\n---\n" "$api" "$1" "${4:-generic}" "$1" "$2" "$3"; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
# `show LABEL`: LABEL, then p50 and p99 of the numbers on stdin; none, or one that is not a
# number, fails the script.
show() { local spread; spread=$(p50_p99); echo "$1 $spread ms"; }
# `p50_of`: the p50 of the numbers on stdin, alone; `ratio A B`: A / B to two places.
p50_of() { p50_p99 | awk '{print $2}'; }
ratio() { awk -v a="$(figure ratio "$1")" -v b="$(figure ratio "$2")" 'BEGIN {printf "%.2f×", a / b}'; }

# What the sessions of one project say, as a Python helper reads `sessions list --format json`.
cat >"$work/sessions.py" <<'PY'
"""sessions.py JSON WHAT PREFIX [FROM]: over the sessions whose Assignment's name starts with
PREFIX: `count` (succeeded, then failed), `failures` (one line each), `ms` (FROM, startedAt or
createdAt, to finishedAt, one line per succeeded session), `span` (first createdAt to last
finishedAt, ms), `phases` (p50 of each timingsMs phase), `timing NAME` (that phase, one line each)."""
import datetime, json, math, sys

def at(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))

items, what, prefix = json.load(open(sys.argv[1]))["items"], sys.argv[2], sys.argv[3]
mine = [s for s in items if s["assignment"].startswith(prefix)]
done = [s for s in mine if s["phase"] == "Succeeded"]
failed = [s for s in mine if s["phase"] in ("Failed", "Cancelled", "Interrupted")]
if what == "count":
    print(len(done), len(failed))
elif what == "failures":
    for s in failed:
        print(f"{s['assignment']} {s['phase']}: {s['message']}")
elif what == "ms":
    for s in done:
        print(int((at(s["finishedAt"]) - at(s[sys.argv[4]])).total_seconds() * 1000))
elif what == "span":
    print(int((max(at(s["finishedAt"]) for s in done) - min(at(s["createdAt"]) for s in done)).total_seconds() * 1000))
elif what == "phases":
    phases = sorted({k for s in done for k in s["detail"]["timingsMs"]})
    # Nearest rank, as benches/lib.sh's p50_p99 reads it.
    p50 = lambda values: sorted(values)[math.ceil(len(values) / 2) - 1]
    print(", ".join(f"{k} {p50([s['detail']['timingsMs'].get(k, 0) for s in done]):.0f}" for k in phases))
elif what == "timing":
    for s in done:
        print(s["detail"]["timingsMs"][sys.argv[4]])
PY
sessions() { # project, then what sessions.py is asked
  local project=$1; shift
  (cd "$project" && "$bin" sessions list --format json) >"$work/sessions.json"
  python3 "$work/sessions.py" "$work/sessions.json" "$@"
}

new_project() { # folder: a repository with a README and an empty spec file
  mkdir -p "$1/.roundtable"; echo '# x' >"$1/README.md"; : >"$1/.roundtable/specs.yaml"
}
commit() { git -C "$1" init -q -b main 2>/dev/null || true; git -C "$1" add -A && git -C "$1" commit -qm "${2:-base}"; }
start_daemon_in() { # project, max-executions
  (cd "$1" && exec "$bin" start --api-listen 127.0.0.1:0 --max-executions "$2" --execution-root "$work/exec-$(basename "$1")" \
    --audit-key "$work/audit-$(basename "$1").key" >/dev/null 2>>"${ROUNDTABLE_BENCH_LOG:-/dev/null}") &
  daemon=$!
}
wait_succeeded() { # project, assignment prefix, count: back once that many have succeeded
  local succeeded=0 failed=0
  for _ in $(seq 1 2400); do
    read -r succeeded failed < <(sessions "$1" count "$2")
    [ "$failed" = 0 ] || break
    [ "$succeeded" -ge "$3" ] && return 0
    sleep 0.25
  done
  # Figures over executions that did not all succeed would measure something else.
  echo "executions $2*: $succeeded of $3 succeeded, $failed failed:" >&2
  sessions "$1" failures "$2" >&2
  exit 1
}
stop_daemon() { # sets hwm, the daemon's peak RSS in KiB
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status")
  kill -TERM "$daemon"; wait "$daemon" || true; daemon=
}
# `docker_run NAME SIZE`: a plain `docker run` of `true` with Roundtable's volumes and flags.
docker_run() {
  docker volume create --driver local --opt type=tmpfs --opt device=tmpfs --opt o="size=$2,uid=1000,gid=1000" "$prefix-ws-$1" >/dev/null
  docker volume create --driver local --opt type=tmpfs --opt device=tmpfs --opt o=size=64m,uid=1000,gid=1000 "$prefix-tmp-$1" >/dev/null
  docker run --rm "${docker_runtime[@]}" --user 1000:1000 --cap-drop ALL --security-opt no-new-privileges --read-only --pids-limit "$docker_pids" \
    --memory 256m --memory-swap 256m --cpus 1 --network none -v "$prefix-ws-$1:/roundtable/workspace" -v "$prefix-tmp-$1:/tmp" \
    roundtable-test/agent:latest true
  docker volume rm "$prefix-ws-$1" "$prefix-tmp-$1" >/dev/null
}

# --- 1. launch overhead ---
if section 1; then
p=$work/noop; new_project "$p"; adapter 256Mi 64Mi >"$p/.roundtable/specs.yaml"; commit "$p"
start_daemon_in "$p" 1
docker_ms=()
for i in $(seq 1 "$runs"); do
  assignment "noop-$i" true README.md >>"$p/.roundtable/specs.yaml"
  wait_succeeded "$p" noop- "$i"
  t0=$(date +%s%N)
  docker_run "noop-$i" 64m
  docker_ms+=("$(ms_since "$t0")")
done
stop_daemon
echo "launch overhead, $runs rounds taking turns (ms):"
sessions "$p" ms noop- startedAt >"$work/noop-ms"
show "  roundtable full execution (provision → proposal, incl. self-check and export):" <"$work/noop-ms"
printf '%s\n' "${docker_ms[@]}" >"$work/docker-ms"
show "  baseline: docker run with the same volumes and flags:                        " <"$work/docker-ms"
echo "  roundtable / baseline, p50: $(ratio "$(p50_of <"$work/noop-ms")" "$(p50_of <"$work/docker-ms")")"
echo "  roundtable's phases, p50: $(sessions "$p" phases noop-)"
fi

# --- 2. export + diff of 10,000 files / 200 MB ---
if section 2; then
files=$(sized 10000 200) changed=$(sized 1000 20)
p=$work/big; new_project "$p"; mkdir -p "$p/data"
python3 - "$p/data" "$files" <<'PY'
import os, sys
root, files = sys.argv[1], int(sys.argv[2])
block = os.urandom(20000)
for i in range(files):
    d = os.path.join(root, f"d{i // 500:02}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:05}.bin"), "wb") as f:
        f.write(block[i % 100:] + block[:i % 100])
PY
change="for f in \$(find data -type f | sort | head -$changed); do echo changed >> \$f; done"
adapter 1Gi 512Mi >"$p/.roundtable/specs.yaml"; commit "$p"
start_daemon_in "$p" 1
cp_ms=() diff_ms=()
for i in $(seq 1 "$runs"); do
  assignment "big-$i" "$change" data/ >>"$p/.roundtable/specs.yaml"
  wait_succeeded "$p" big- "$i"
  # Baseline: the same tree in a tmpfs volume, changed in place, then docker cp + git diff --no-index.
  docker volume create --driver local --opt type=tmpfs --opt device=tmpfs --opt o=size=512m,uid=1000,gid=1000 "$prefix-big" >/dev/null
  docker run -d --name "$prefix-big" "${docker_runtime[@]}" --user 1000:1000 -v "$prefix-big:/w" roundtable-test/agent:latest sleep 600 >/dev/null
  tar -C "$p" -c data | docker cp - "$prefix-big:/w"
  docker exec -u 0 "$prefix-big" sh -c "cd /w && $change"
  rm -rf "$work/cp"; mkdir -p "$work/cp"
  t0=$(date +%s%N)
  docker cp "$prefix-big:/w/data" "$work/cp/data"
  cp_ms+=("$(ms_since "$t0")")
  t0=$(date +%s%N)
  # `git diff --no-index` exits 1 when the trees differ, as they must.
  status=0; (cd "$work" && git diff --no-index --binary big/data cp/data >"$work/baseline.patch") || status=$?
  diff_ms+=("$(ms_since "$t0")")
  [ "$status" = 1 ] || fail_in_smoke "git diff --no-index exited $status (1: the trees differ)"
  docker rm -f -v "$prefix-big" >/dev/null; docker volume rm "$prefix-big" >/dev/null
done
stop_daemon
echo "$files files / $(( files * 20 / 1000 )) MB, $changed changed, $runs rounds taking turns (ms):"
sessions "$p" timing big- export | show "  roundtable export (pause, download, rooted extract):"
printf '%s\n' "${cp_ms[@]}" | show "  baseline: docker cp:                                "
sessions "$p" timing big- patch | show "  roundtable patch (diff + verify against the base):  "
printf '%s\n' "${diff_ms[@]}" | show "  baseline: git diff --no-index --binary:             "
echo "  roundtable's phases, p50: $(sessions "$p" phases big-)"
fi

# --- 3. peak controller memory with 20 queued ---
if section 3; then
queued=$(sized 20 4) slots=$(sized 4 2)
p=$work/queued; new_project "$p"
{ adapter 128Mi 16Mi; for i in $(seq 1 "$queued"); do assignment "q-$i" "sleep 1; echo $i > out.txt" README.md; done; } >"$p/.roundtable/specs.yaml"
commit "$p"
start_daemon_in "$p" "$slots"
wait_succeeded "$p" q- "$queued"
stop_daemon
echo "peak controller memory with $queued Assignments behind --max-executions $slots: $(awk -v k="$(figure VmHWM "$hwm")" 'BEGIN {printf "%.1f", k/1024}') MiB"
fi

# --- 4. throughput: N mock Assignments through 4 slots ---
if section 4; then
n=${THROUGHPUT:-$(sized 200 8)} rounds=$(sized 4 2)
p=$work/many; new_project "$p"; commit "$p"
start_daemon_in "$p" 4
span_ms=0 docker_wall_ms=0 done_count=0
: >"$work/docker-runs"
for round in $(seq 1 "$rounds"); do
  count=$(( n / rounds + (round <= n % rounds ? 1 : 0) ))
  for i in $(seq 1 "$count"); do
    printf "%s\nkind: Assignment\nmetadata: {name: m-%d-%03d}\nspec:\n  adapter: mock\n  task: {id: M%d-%d, prompt: Write a note.}\n  readablePaths: [README.md]\n---\n" "$api" "$round" "$i" "$round" "$i"
  done >>"$p/.roundtable/specs.yaml"
  done_count=$(( done_count + count ))
  wait_succeeded "$p" "m-$round-" "$count"
  span_ms=$(( span_ms + $(sessions "$p" span "m-$round-") ))
  # The baseline's round: as many plain `docker run`s, 4 at a time, each timed.
  t0=$(date +%s%N)
  export -f docker_run ms_since
  export prefix docker_pids
  seq 1 "$count" | DOCKER_RUNTIME="${docker_runtime[*]}" xargs -P4 -I{} bash -c '
    docker_runtime=($DOCKER_RUNTIME); t0=$(date +%s%N); docker_run "tp-'"$round"'-{}" 16m; ms_since "$t0"' >>"$work/docker-runs"
  docker_wall_ms=$(( docker_wall_ms + $(ms_since "$t0") ))
done
stop_daemon
echo "throughput, $n executions through 4 slots in $rounds rounds taking turns with the baseline:"
sessions "$p" ms m- createdAt | show "  roundtable: $(awk -v n="$n" -v ms="$span_ms" 'BEGIN {printf "%.0f/min", n * 60000 / ms}') (first queued to last finished, each round); queued → finished"
show "  baseline: docker run with the same volumes and flags, 4 at a time: $(awk -v n="$n" -v ms="$docker_wall_ms" 'BEGIN {printf "%.0f/min", n * 60000 / ms}'); each" <"$work/docker-runs"
# Executions per minute are n / span, so the ratio of the rates is the baseline's wall over ours.
echo "  roundtable / baseline, executions per minute: $(ratio "$docker_wall_ms" "$span_ms")"
echo "  roundtable's phases, p50: $(sessions "$p" phases m-)"
fi
