#!/usr/bin/env bash
# Creates the quickstart git repository deterministically (fixed author, dates and content):
# the files under files/ plus the specs under .roundtable/, committed on branch main.
# Usage: examples/quickstart/setup.sh [DEST]   (default: target/quickstart; DEST is replaced)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo_root=$(cd "$here/../.." && pwd)
dest=${1:-$repo_root/target/quickstart}

case "$dest" in
  ""|"/"|"$repo_root"|"$here") echo "setup: refusing to replace $dest" >&2; exit 1 ;;
esac
rm -rf "$dest"
mkdir -p "$dest"
cp -R "$here/files/." "$dest/"
cp -R "$here/.roundtable" "$dest/.roundtable"
rm -rf "$dest/.roundtable/state"

export GIT_AUTHOR_NAME="Roundtable Quickstart" GIT_AUTHOR_EMAIL="quickstart@roundtable.invalid"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="2024-01-01T00:00:00Z" GIT_COMMITTER_DATE="2024-01-01T00:00:00Z"
# No user or system configuration may change the result.
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
git -C "$dest" init -q -b main
git -C "$dest" add -A
git -C "$dest" commit -q -m "Quickstart project"
echo "quickstart: $(git -C "$dest" rev-parse HEAD) in $dest"
