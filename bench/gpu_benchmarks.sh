#!/usr/bin/env bash
# Runs kiln's benchmarks on every implementation on this machine's GPU and
# writes the raw results to $1 (default: bench-results/).
#   KILN=path/to/kiln  KILN_DAWN_LIBRARY=...  KILN_WGPU_LIBRARY=...
set -uo pipefail
out="${1:-bench-results}"
kiln="${KILN:-build/tools/kiln/kiln}"
mkdir -p "$out"
"$kiln" info --json > "$out/info.json" 2> "$out/info.err"
for impl in dawn wgpu; do
  "$kiln" bench dispatch --impl "$impl" --json > "$out/dispatch-$impl.json" 2> "$out/dispatch-$impl.err"
  "$kiln" bench dispatch --impl "$impl" 2>&1 | tee "$out/dispatch-$impl.txt"
done
