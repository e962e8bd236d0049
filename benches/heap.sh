#!/usr/bin/env bash
# Who holds a daemon's heap: a daemon with N objects (default 3,000; half Adapters, half
# suspended Assignments) runs under heaptrack (Debian package) until every object is Synced and
# 30 s more, then is killed, so what was never freed is what it held at that moment. Prints the
# total and the top holders, each allocation counted at the deepest frame of our code or SQLite's.
# heaptrack hooks malloc, so this builds the binary with the system's malloc
# (`--features system-allocator`), dynamically linked and without LTO (the heap is the same; the
# build is shorter), into target/heap (under CARGO_TARGET_DIR when set). Prints, asserts nothing.
# Usage: benches/heap.sh [OBJECTS] [HOLDERS]   (ROUNDTABLE_BENCH_SMOKE=1, benches/lib.sh: 100
#   objects, 2 s, the debug profile: the heap's holders are the same code)
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh
objects=${1:-$(sized 3000 100)}
holders=${2:-15}
command -v heaptrack >/dev/null || { apt-get install -y -q heaptrack >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q heaptrack >/dev/null; }; }
heap_target=${CARGO_TARGET_DIR:-$PWD/target}/heap
profile=$(sized release debug)
RUSTFLAGS="-C target-feature=-crt-static" CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
  cargo build --quiet --profile "$(sized release dev)" --bin roundtable \
  --features system-allocator --target-dir "$heap_target"
bin=$heap_target/x86_64-unknown-linux-gnu/$profile/roundtable
data=$(mktemp -d)
wrapper=$data/roundtable
# Only the daemon runs under heaptrack; the CLI calls that wait for it do not.
cat >"$wrapper" <<WRAP
#!/usr/bin/env bash
if [ "\$1" = start ]; then exec heaptrack -o "$data/daemon" "$bin" "\$@" >/dev/null; fi
exec "$bin" "\$@"
WRAP
chmod +x "$wrapper"
source benches/daemon.sh
trap 'cleanup; rm -rf "$data"' EXIT
start_daemon_with_objects "$wrapper" "$objects"
echo "objects: $objects (all Synced after $synced_after s under heaptrack)"
sleep "$(sized 30 2)"
traced=$(pgrep -f "^$bin start" | head -1)
echo "RSS under heaptrack: $(awk '/VmRSS/ {print $2}' "/proc/$traced/status") KiB"
kill -KILL "$traced"
for _ in $(seq 1 120); do pgrep -f "heaptrack.*$data" >/dev/null || break; sleep 1; done
daemon=""
heaptrack_print -f "$data/daemon.zst" --flamegraph-cost-type leaked -F "$data/live.stacks" >"$data/print.txt" 2>&1
grep -E "^peak heap memory consumption" "$data/print.txt"
python3 - "$data/live.stacks" "$holders" <<'PY'
import collections, sys
holders, total = collections.Counter(), 0
for line in open(sys.argv[1]):
    stack, _, size = line.rstrip().rpartition(" ")
    total += int(size)
    frames = stack.split(";")
    ours = [f for f in frames if "roundtable" in f or "sqlite3" in f]
    holders[ours[-1].split("::h")[0][:110] if ours else "(elsewhere)"] += int(size)
print(f"held when killed: {total / 2**20:.1f} MiB")
for holder, size in holders.most_common(int(sys.argv[2])):
    print(f"{size / 2**20:8.2f} MiB  {holder}")
if not holders:
    sys.exit("heaptrack recorded no allocation held: nothing to report")
PY
