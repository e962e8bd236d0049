#!/usr/bin/env bash
# Builds Roundtable's test images from scratch (no registry is reachable):
#   roundtable-test/agent:latest   busybox-static + the static agent-double test binary, linked
#                                  as each behaviour (fake-agent, …, codex, claude, gemini, opencode)
#   roundtable-test/empty:latest   nothing at all (enough for the built-in mock adapter)
# Usage: tests/images/build.sh            (idempotent; rebuilds when inputs changed)
set -euo pipefail
cd "$(dirname "$0")/../.."

busybox=/bin/busybox
have_static_busybox() { dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; }
if ! have_static_busybox && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "images: installing busybox-static" >&2
  apt-get install -y -q busybox-static >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q busybox-static >/dev/null; }
fi
if ! have_static_busybox; then
  echo "images: need a static busybox at $busybox (Debian package busybox-static)" >&2
  exit 1
fi

cargo build --quiet -p agent-double
# Cargo puts it under CARGO_TARGET_DIR when that is set (relative to this checkout, as cargo reads it).
double=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/debug/agent-double

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root"/{bin,usr/local/bin,tmp,etc,roundtable}
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
cp "$double" "$root/usr/local/bin/agent-double"
# The names agent-double answers to; the list is part of the image's inputs below.
behaviours="fake-agent memory-hog egress-probe https-fetch codex claude gemini opencode mcp-bench"
for behaviour in $behaviours; do
  ln -s agent-double "$root/usr/local/bin/$behaviour"
done
printf 'root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/tmp/roundtable/home:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\nagent:x:1000:\n' > "$root/etc/group"
chmod 1777 "$root/tmp"

# Fixed owners and times make the layer reproducible; the label records its inputs.
inputs=$( { sha256sum "$busybox" "$double"; echo "$behaviours"; } | sha256sum | cut -c1-16)
current=$(docker image inspect -f '{{ index .Config.Labels "roundtable.dev/test-image-inputs" }}' roundtable-test/agent:latest 2>/dev/null || true)
if [ "$current" != "$inputs" ]; then
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2024-01-01 00:00Z' -C "$root" -c . \
    | docker import --change "LABEL roundtable.dev/test-image-inputs=$inputs" \
        --change 'ENV PATH=/usr/local/bin:/bin' - roundtable-test/agent:latest >/dev/null
  echo "images: built roundtable-test/agent:latest ($inputs)" >&2
else
  echo "images: roundtable-test/agent:latest is current ($inputs)" >&2
fi

if ! docker image inspect roundtable-test/empty:latest >/dev/null 2>&1; then
  mkdir -p "$work/empty"
  tar -C "$work/empty" -c . | docker import - roundtable-test/empty:latest >/dev/null
  echo "images: built roundtable-test/empty:latest" >&2
fi
