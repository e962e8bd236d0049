# Sourced by the bench scripts (from the repository's root): the smoke switch, the binaries they
# measure, and reading figures back.
#
# ROUNDTABLE_BENCH_SMOKE=1 runs a bench at a tiny size, seconds long, on the debug build, and any
# error or figure that cannot be read fails it. CI runs every bench so (benches/smoke.sh): a bench
# nobody runs stops working unnoticed when what it measures changes. A smoke run's figures mean
# nothing, and no run of any size asserts anything about them.
smoke=${ROUNDTABLE_BENCH_SMOKE:-0}
# The Rust benches a script starts read it too.
export ROUNDTABLE_BENCH_SMOKE=$smoke
target_dir=${CARGO_TARGET_DIR:-$PWD/target}/x86_64-unknown-linux-gnu

# `sized FULL SMOKE`: the size of this run.
sized() { if [ "$smoke" = 1 ]; then echo "$2"; else echo "$1"; fi; }

# `roundtable_bin`: sets `bin`, the binary measured: ROUNDTABLE_BIN when set, else this tree's
# release build (built first), or in a smoke run its debug build, which CI has already built.
roundtable_bin() {
  if [ -n "${ROUNDTABLE_BIN:-}" ]; then
    bin=$ROUNDTABLE_BIN
  elif [ "$smoke" = 1 ]; then
    cargo build --quiet --bin roundtable
    bin=$target_dir/debug/roundtable
  else
    cargo build --quiet --release --bin roundtable
    bin=$target_dir/release/roundtable
  fi
}

# `rust_bench PACKAGE BENCH`: builds that Rust bench and prints its executable's path: the bench
# profile's build, or in a smoke run the test profile's. The bench profile is the release one,
# with fat LTO, minutes per bench, which a smoke run does not need; built for the whole workspace,
# the test profile's benches are the very files CI's `cargo build --workspace --all-targets`
# made (the same features), so nothing is compiled again.
rust_bench() {
  local build=(bench -p "$1" --bench "$2")
  if [ "$smoke" = 1 ]; then build=(test --workspace --benches); fi
  cargo "${build[@]}" --quiet --no-run --message-format=json \
    | python3 -c '
import json, sys
found = [m["executable"] for m in map(json.loads, sys.stdin)
         if m.get("reason") == "compiler-artifact" and m["target"]["kind"] == ["bench"]
         and m["target"]["name"] == sys.argv[1] and m.get("executable")]
if not found:
    sys.exit(f"cargo built no executable for the bench {sys.argv[1]}")
print(found[-1])' "$2"
}

# `figure LABEL VALUE`: prints VALUE if it reads as a number (a unit may follow: 1.5ms, 12%);
# otherwise says which figure could not be read, and the assignment it feeds fails the script.
figure() {
  if [[ $2 =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?[a-zA-Z%]*$ ]]; then
    echo "$2"
  else
    echo "cannot read the figure \"$1\" (got \"$2\")" >&2
    return 1
  fi
}

# `p50_p99 [SCALE]`: "p50 X p99 Y" (nearest rank) of the numbers on stdin, each divided by SCALE;
# fails when there are none or one does not read as a number.
p50_p99() {
  sort -g | awk -v scale="${1:-1}" '
    !/^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ { bad = 1 }
    { v[++n] = $1 / scale }
    END {
      if (bad || n == 0) { print "p50_p99: no figures, or one that is not a number" > "/dev/stderr"; exit 1 }
      r50 = int(0.50 * n); if (r50 < 0.50 * n) r50++
      r99 = int(0.99 * n); if (r99 < 0.99 * n) r99++
      printf "p50 %s p99 %s\n", shown(v[r50]), shown(v[r99])
    }
    # Three significant digits, whole numbers without a fraction.
    function shown(x,  a) { a = x < 0 ? -x : x; return sprintf(a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : a >= 1 ? "%.2f" : "%.3g", x) }'
}

# `fail_in_smoke MESSAGE`: a full run reports the condition among its figures; a smoke run, which
# exists to show the bench works, stops on it.
fail_in_smoke() {
  echo "$1" >&2
  if [ "$smoke" = 1 ]; then exit 1; fi
}
