#!/usr/bin/env bash
# Runs one fuzz target for a number of seconds from the committed seeds (a scratch corpus keeps
# what it finds). Usage: fuzz/run.sh [client_hello|connect_head|dns_response] [seconds]
set -euo pipefail
cd "$(dirname "$0")"
target=${1:-client_hello}
seconds=${2:-60}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --quiet
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp seeds/"$target"/* "$corpus"/
# The workspace links statically (crt-static); the sanitizer runtime needs a dynamic link.
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS=""
RUSTC_BOOTSTRAP=1 cargo fuzz run --target x86_64-unknown-linux-gnu "$target" "$corpus" -- -max_total_time="$seconds" -max_len=20000
