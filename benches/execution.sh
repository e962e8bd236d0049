#!/usr/bin/env bash
# Execution figures on the real engine; prints, asserts nothing.
#   1. Launch overhead: an agent that runs `true`, through Roundtable (volumes, container, PID 1,
#      seed, self-check, exec, pause, export, cleanup) against a plain `docker run` with the same
#      volumes and hardening flags.
#   2. Export + diff of a 10,000-file / 200 MB workspace with 1,000 files changed, against
#      `docker cp` + `git diff --no-index` of the same data.
#   3. Peak controller memory while 20 Assignments queue behind --max-executions 4.
#   4. Throughput: 200 `mock` Assignments (THROUGHPUT=N for another count) through 4 slots, in
#      executions per minute, against 200 `docker run`s with the same volumes and flags, 4 at a time.
# Usage: benches/execution.sh [RUNS]   (default 5)
#   ROUNDTABLE_BENCH_LOG=FILE appends the daemons' stderr there (with RUST_LOG, the engine calls).
#   RUNTIME_CLASS=runsc runs the Adapter and the plain `docker run` under that OCI runtime
#   (benches/runtime-classes.sh compares runc and runsc on a private engine).
#   SECTIONS=1 (or 2, 3, 4, "1 3") runs only those sections; the binary is built into
#   $CARGO_TARGET_DIR (default target/), or ROUNDTABLE_BENCH_BIN names one already built.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
sections=${SECTIONS:-1 2 3 4}
section() { [[ " $sections " == *" $1 "* ]]; }
if [ -n "${ROUNDTABLE_BENCH_BIN:-}" ]; then
  bin=$ROUNDTABLE_BENCH_BIN
else
  cargo build --quiet --release --bin roundtable
  bin=${CARGO_TARGET_DIR:-$PWD/target}/x86_64-unknown-linux-gnu/release/roundtable
fi
bash tests/images/build.sh >/dev/null 2>&1
work=$(mktemp -d)
cleanup() { [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null; docker rm -f rt-bench-big >/dev/null 2>&1; docker volume rm -f rt-bench-big >/dev/null 2>&1; rm -rf "$work"; }
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
assignment() { printf "%s\nkind: Assignment\nmetadata: {name: %s}\nspec:\n  adapter: generic\n  task: {id: %s, prompt: '%s'}\n  readablePaths: [%s]\n---\n" "$api" "$1" "$1" "$2" "$3"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms_between() { python3 -c "import sys,datetime as d; p=lambda s: d.datetime.fromisoformat(s.replace('Z','+00:00')[:26]+'+00:00'); print(int((p(sys.argv[2])-p(sys.argv[1])).total_seconds()*1000))" "$1" "$2"; }
run_daemon() { # project, max-executions, expected sessions
  (cd "$1" && exec "$bin" start --max-executions "$2" --execution-root "$work/exec-$(basename "$1")" --audit-key "$work/audit-$(basename "$1").key" >/dev/null 2>>"${ROUNDTABLE_BENCH_LOG:-/dev/null}") &
  daemon=$!
  for _ in $(seq 1 1200); do
    done_count=$(cd "$1" && "$bin" sessions list --format json | grep -c '"phase": "Succeeded"' || true)
    [ "$done_count" -ge "$3" ] && break
    sleep 0.25
  done
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status" 2>/dev/null || echo 0)
  kill -TERM "$daemon"; wait "$daemon" || true; daemon=
}

# --- 1. launch overhead ---
if section 1; then
p=$work/noop; mkdir -p "$p/.roundtable"; echo '# x' > "$p/README.md"
{ adapter 256Mi 64Mi; for i in $(seq 1 "$runs"); do assignment "noop-$i" true README.md; done; } > "$p/.roundtable/specs.yaml"
git -C "$p" init -q -b main && git -C "$p" add -A && git -C "$p" commit -qm base
run_daemon "$p" 1 "$runs"
(cd "$p" && "$bin" sessions list --format json) > "$work/noop.json"
python3 -c '
import json,sys,statistics as st
items=json.load(open(sys.argv[1]))["items"]
phases=sorted({k for s in items for k in s["detail"]["timingsMs"]})
print("  no-op execution, median per phase (ms):", {k: st.median(s["detail"]["timingsMs"].get(k,0) for s in items) for k in phases})' "$work/noop.json"
ours=$(cat "$work/noop.json" | python3 -c '
import json,sys,datetime as d
p=lambda s: d.datetime.fromisoformat(s.replace("Z","")[:26])
for s in json.load(sys.stdin)["items"]:
    print(int((p(s["finishedAt"])-p(s["startedAt"])).total_seconds()*1000))' | median)
docker_ms=()
for i in $(seq 1 "$runs"); do
  t0=$(date +%s%N)
  docker volume create --driver local --opt type=tmpfs --opt device=tmpfs --opt o=size=64m,uid=1000,gid=1000 rt-bench-ws >/dev/null
  docker volume create --driver local --opt type=tmpfs --opt device=tmpfs --opt o=size=64m,uid=1000,gid=1000 rt-bench-tmp >/dev/null
  docker run --rm "${docker_runtime[@]}" --user 1000:1000 --cap-drop ALL --security-opt no-new-privileges --read-only --pids-limit "$docker_pids" \
    --memory 256m --memory-swap 256m --cpus 1 --network none -v rt-bench-ws:/roundtable/workspace -v rt-bench-tmp:/tmp \
    roundtable-test/agent:latest true
  docker volume rm rt-bench-ws rt-bench-tmp >/dev/null
  docker_ms+=($(( ($(date +%s%N) - t0) / 1000000 )))
done
base=$(printf '%s\n' "${docker_ms[@]}" | median)
echo "launch overhead, median of $runs: roundtable full execution $ours ms (provision → cleanup, incl. self-check and export); docker run with the same volumes and flags $base ms"

fi

# --- 2. export + diff of 10,000 files / 200 MB ---
if section 2; then
p=$work/big; mkdir -p "$p/.roundtable" "$p/data"
python3 - "$p/data" <<'PY'
import os, sys
root = sys.argv[1]
block = os.urandom(20000)
for i in range(10000):
    d = os.path.join(root, f"d{i // 500:02}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:05}.bin"), "wb") as f:
        f.write(block[i % 100:] + block[:i % 100])
PY
{ adapter 1Gi 512Mi; assignment big 'for f in $(find data -type f | sort | head -1000); do echo changed >> $f; done' data/; } > "$p/.roundtable/specs.yaml"
git -C "$p" init -q -b main && git -C "$p" add -A && git -C "$p" commit -qm base
run_daemon "$p" 1 1
(cd "$p" && "$bin" sessions list --format json) | python3 -c '
import json,sys
s=json.load(sys.stdin)["items"][0]; t=s["detail"]["timingsMs"]
print("roundtable on 10,000 files / 200 MB, 1,000 changed: export (pause, download, rooted extract) %s ms, patch (diff + verify against the base) %s ms; provision %s ms, launch %s ms, self-check %s ms, agent %s ms" % (t.get("export"), t.get("patch"), t.get("provision"), t.get("launch"), t.get("selfCheck"), t.get("agent")))'
# Baseline: the same tree in a tmpfs volume, changed in place, then docker cp + git diff --no-index.
docker volume create --driver local --opt type=tmpfs --opt device=tmpfs --opt o=size=512m,uid=1000,gid=1000 rt-bench-big >/dev/null
docker run -d --name rt-bench-big "${docker_runtime[@]}" --user 1000:1000 -v rt-bench-big:/w roundtable-test/agent:latest sleep 600 >/dev/null
tar -C "$p" -c data | docker cp - rt-bench-big:/w
docker exec -u 0 rt-bench-big sh -c 'cd /w && for f in $(find data -type f | sort | head -1000); do echo changed >> $f; done'
t0=$(date +%s%N)
mkdir -p "$work/cp"
docker cp rt-bench-big:/w/data "$work/cp/data"
t1=$(date +%s%N)
(cd "$work" && git diff --no-index --binary big/data cp/data > "$work/baseline.patch" || true)
t2=$(date +%s%N)
echo "baseline: docker cp $(( (t1 - t0) / 1000000 )) ms, git diff --no-index --binary $(( (t2 - t1) / 1000000 )) ms"

fi

# --- 3. peak controller memory with 20 queued ---
if section 3; then
p=$work/queued; mkdir -p "$p/.roundtable"; echo '# x' > "$p/README.md"
{ adapter 128Mi 16Mi; for i in $(seq 1 20); do assignment "q-$i" "sleep 1; echo $i > out.txt" README.md; done; } > "$p/.roundtable/specs.yaml"
git -C "$p" init -q -b main && git -C "$p" add -A && git -C "$p" commit -qm base
run_daemon "$p" 4 20
echo "peak controller memory with 20 Assignments behind --max-executions 4: $(awk -v k="$hwm" 'BEGIN {printf "%.1f", k/1024}') MiB"
fi

# --- 4. throughput: N mock Assignments through 4 slots ---
if section 4; then
n=${THROUGHPUT:-200}
p=$work/many; mkdir -p "$p/.roundtable"; echo '# x' > "$p/README.md"
for i in $(seq 1 "$n"); do
  printf "%s\nkind: Assignment\nmetadata: {name: m-%03d}\nspec:\n  adapter: mock\n  task: {id: M%d, prompt: Write a note.}\n  readablePaths: [README.md]\n---\n" "$api" "$i" "$i"
done > "$p/.roundtable/specs.yaml"
git -C "$p" init -q -b main && git -C "$p" add -A && git -C "$p" commit -qm base
t0=$(date +%s%N)
run_daemon "$p" 4 "$n"
wall=$(( ($(date +%s%N) - t0) / 1000000 ))
ours=$( (cd "$p" && "$bin" sessions list --format json) | python3 -c '
import json,sys,datetime as d
p=lambda s: d.datetime.fromisoformat(s.replace("Z","")[:26])
items=[s for s in json.load(sys.stdin)["items"] if s["phase"] == "Succeeded"]
span=(max(p(s["finishedAt"]) for s in items)-min(p(s["createdAt"]) for s in items)).total_seconds()
print("%d in %.1f s: %.0f/min" % (len(items), span, len(items)/span*60))')
t0=$(date +%s%N)
seq 1 "$n" | xargs -P4 -I{} sh -c '
  docker volume create --driver local --opt type=tmpfs --opt device=tmpfs --opt o=size=16m,uid=1000,gid=1000 rt-tp-ws-{} >/dev/null
  docker volume create --driver local --opt type=tmpfs --opt device=tmpfs --opt o=size=64m,uid=1000,gid=1000 rt-tp-tmp-{} >/dev/null
  docker run --rm --user 1000:1000 --cap-drop ALL --security-opt no-new-privileges --read-only --pids-limit 64 \
    --memory 256m --memory-swap 256m --cpus 1 --network none -v rt-tp-ws-{}:/roundtable/workspace -v rt-tp-tmp-{}:/tmp \
    roundtable-test/agent:latest true
  docker volume rm rt-tp-ws-{} rt-tp-tmp-{} >/dev/null'
base=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "throughput, $n executions through 4 slots: roundtable $ours (first queued to last finished; $(( wall / 1000 )) s from daemon start to all recorded); docker run with the same volumes and flags, 4 at a time: $n in $(( base / 1000 )) s: $(( n * 60000 / base ))/min"
fi
