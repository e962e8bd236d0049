#!/usr/bin/env bash
# The review console's status page at N objects (default 10,000: half Adapters, half suspended
# Assignments), in Debian's chromium driven by Selenium: the page's weight (HTML, stylesheet,
# script) and its time to first contentful paint, for the first page and the next, each load
# taking turns with the same run's baseline: GET /v1/status, the whole list as JSON, which a
# console that drew every row at once would have to fetch. p50 and p99 of each. Prints figures,
# asserts nothing.
# Usage: benches/console.sh [OBJECTS]   (ROUNDTABLE_BIN: a binary other than the release build;
#   ROUNDTABLE_BENCH_SMOKE=1, benches/lib.sh: 300 objects, 2 loads of each page)
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh
objects=${1:-$(sized 10000 300)}
repo=$PWD
roundtable_bin
source benches/daemon.sh
start_daemon_with_objects "$bin" "$objects"
echo "objects: $objects (all Synced after $synced_after s); binary: $bin"
echo
echo "== the console's status page in chromium, $(sized 5 2) loads of each page, each after one baseline request"
# Chromium leaves its singleton folder in TMPDIR: the scratch folder, removed on exit.
TMPDIR=$work CONSOLE_URL="http://$address" CONSOLE_TOKEN="$token" CONSOLE_LOADS=$(sized 5 2) \
  python3 "$repo/benches/console_page.py"
