#!/usr/bin/env bash
# Validates every golden WGSL file with Naga's command-line tool (the WGSL
# front end of wgpu-native). Usage: validate_wgsl.sh [testdata-dir]
#
# Naga (through version 30) rejects the `enable subgroups;` directive that
# Tint requires, so that line is removed first, exactly as a runtime on
# wgpu-native does (abi::StripSubgroupsEnable). Exits non-zero on the first
# file Naga rejects; prints "N passed, 0 failed" when all pass.
set -euo pipefail

dir="${1:-$(dirname "$0")/testdata}"
naga="${NAGA:-naga}"
if ! command -v "$naga" >/dev/null 2>&1; then
  echo "validate_wgsl.sh: '$naga' not found (cargo install naga-cli); skipping" >&2
  exit 0
fi

passed=0
failed=0
for file in "$dir"/*.wgsl; do
  if sed '/^enable subgroups;$/d' "$file" | "$naga" --stdin-file-path "$file" >/dev/null 2>&1; then
    passed=$((passed + 1))
  else
    echo "FAILED: $file" >&2
    sed '/^enable subgroups;$/d' "$file" | "$naga" --stdin-file-path "$file" >&2 || true
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
