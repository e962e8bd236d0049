#!/usr/bin/env bash
# Sets up and runs the quickstart: builds roundtable and the test images, creates the
# quickstart repository (target/quickstart), then checks it the way an operator would.
# Usage: examples/quickstart/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --quiet --bin roundtable
bash tests/images/build.sh
bash examples/quickstart/setup.sh target/quickstart
bin=$PWD/target/x86_64-unknown-linux-gnu/debug/roundtable
cd target/quickstart
echo; echo "== roundtable validate"; "$bin" validate
echo; echo "== roundtable adapters list"; "$bin" adapters list
echo; echo "== roundtable doctor"; "$bin" doctor
