#!/usr/bin/env bash
# Measures the YAML loader and `validate` on adversarial and large inputs; prints figures, asserts
# nothing. Usage: benches/validate.sh   (builds the release binary first; ROUNDTABLE_BIN=PATH
#   measures that one; ROUNDTABLE_BENCH_SMOKE=1, benches/lib.sh: a 1 MB file and 100 objects in
#   10 files, the debug build, and a crash or a figure that cannot be read fails it)
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh
roundtable_bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
megabytes=$(sized 50 1) files=$(sized 1000 10)

measure() { # label, then the command; prints wall seconds, peak RSS and the exit code
  local label=$1; shift
  local code=0 secs kib
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >"$work/out" 2>&1 || code=$?
  read -r secs kib < <(tail -n 1 "$work/time")
  secs=$(figure "$label: seconds" "${secs:-}")
  kib=$(figure "$label: KiB" "${kib:-}")
  printf '%-44s %8.3f s %8.1f MiB  exit %s\n' "$label" "$secs" "$(awk -v k="$kib" 'BEGIN{print k/1024}')" "$code"
  # A refusal is a figure (the bomb and the big file are refused); a signal is a crash.
  if [ "$code" -ge 128 ]; then fail_in_smoke "$label: killed by signal $(( code - 128 ))"; fi
}

# 1. An alias bomb: 12 levels of 10 aliases each (10^12 nodes if expanded).
mkdir -p "$work/bomb"
{
  echo 'apiVersion: roundtable.dev/v1alpha1'
  echo 'kind: Adapter'
  echo 'metadata: {name: bomb}'
  echo 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]'
  for level in $(seq 1 12); do
    p=$((level - 1))
    echo "a$level: &a$level [*a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p]"
  done
  echo 'spec: {args: *a12}'
} >"$work/bomb/bomb.yaml"
measure "alias bomb (validate)" "$bin" validate --dir "$work/bomb"

# 2. A 50 MB spec file.
mkdir -p "$work/big"
python3 -c "
import sys
line = '# ' + 'x' * 97 + '\n'
sys.stdout.write('apiVersion: roundtable.dev/v1alpha1\n' + line * ($megabytes * 1024 * 1024 // len(line)))
" >"$work/big/big.yaml"
measure "$megabytes MB file (validate)" "$bin" validate --dir "$work/big"

# 3. 10,000 objects in 1,000 files.
python3 - "$work/many" "$files" <<'PY'
import os, sys
root = sys.argv[1]
os.makedirs(root)
for f in range(int(sys.argv[2])):
    docs = []
    for i in range(10):
        n = f * 10 + i
        if i == 0:
            docs.append(f"apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {{name: agent-{n}}}\nspec:\n  image: sha256:{n:064x}\n  command: agent\n  providerHosts: [api.example.com]\n  credentialEnv: [AGENT_KEY]\n  resources: {{memory: 1Gi, cpus: 1, pids: 128}}\n")
        else:
            docs.append(f"apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata:\n  name: task-{n}\n  labels: {{team: t{f % 7}}}\nspec:\n  adapter: agent-{f * 10}\n  task: {{id: T-{n}, title: Task {n}, prompt: Fix issue {n} in the docs.}}\n  source: {{repo: ., revision: main}}\n  readablePaths: [README.md, docs/, src/module{n % 13}/]\n  timeout: 20m\n  retries: 1\n")
    with open(os.path.join(root, f"specs-{f:04}.yaml"), "w") as out:
        out.write("---\n".join(docs))
PY
measure "$(( files * 10 )) objects in $files files (validate)" "$bin" validate --dir "$work/many"
grep -E '^(valid|invalid)' "$work/out" || { tail -3 "$work/out"; fail_in_smoke "validate printed no verdict"; }
