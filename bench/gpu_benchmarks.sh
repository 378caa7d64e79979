#!/usr/bin/env bash
# Runs kiln's GPU benchmarks on every implementation on this machine's GPU
# and writes text and JSON results to $1 (default: bench-results/).
#   KILN=path/to/kiln  KILN_DAWN_LIBRARY=...  KILN_WGPU_LIBRARY=...
set -uo pipefail
out="${1:-bench-results}"
kiln="${KILN:-build/tools/kiln/kiln}"
mkdir -p "$out"
"$kiln" info --json > "$out/info.json" 2> "$out/info.err"
for impl in dawn wgpu; do
  for bench in dispatch "matmul --size 4096"; do
    name="${bench%% *}"
    "$kiln" bench $bench --impl "$impl" 2>&1 | tee "$out/$name-$impl.txt"
    "$kiln" bench $bench --impl "$impl" --json > "$out/$name-$impl.json" 2> "$out/$name-$impl.err"
  done
done
"$kiln" bench compile | tee "$out/compile.txt"
