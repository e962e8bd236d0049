#!/usr/bin/env bash
# The review console's status page at N objects (default 10,000: half Adapters, half suspended
# Assignments), in Debian's chromium driven by Selenium: the page's weight (HTML, stylesheet,
# script) and its time to first contentful paint, for the first page and the next, beside the
# same run's baseline: GET /v1/status, the whole list as JSON, which a console that drew every
# row at once would have to fetch. Prints figures, asserts nothing.
# Usage: benches/console.sh [OBJECTS]   (ROUNDTABLE_BIN: a binary other than the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
objects=${1:-10000}
repo=$PWD
if [ -z "${ROUNDTABLE_BIN:-}" ]; then
  cargo build --quiet --release --bin roundtable
  ROUNDTABLE_BIN=$PWD/target/x86_64-unknown-linux-gnu/release/roundtable
fi
bin=$ROUNDTABLE_BIN
source benches/daemon.sh
start_daemon_with_objects "$bin" "$objects"
echo "objects: $objects (all Synced after $synced_after s); binary: $bin"
echo
echo "== baseline: GET /v1/status (the whole list as JSON), 5 requests"
for _ in 1 2 3 4 5; do
  curl -s -o /dev/null -w "%{size_download} bytes in %{time_total} s\n" -H "Authorization: Bearer $token" "http://$address/v1/status"
done
echo
echo "== the console's status page in chromium, 5 loads of each page"
CONSOLE_URL="http://$address" CONSOLE_TOKEN="$token" python3 "$repo/benches/console_page.py"
