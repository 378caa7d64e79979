#!/usr/bin/env bash
# The kiln command line, end to end: info, compile (all outputs), run --check,
# and clear errors for bad input. (That the check can fail is proven in
# src/kiln/runtime/module_test.cc.) Usage: cli_test.sh KILN SOURCE_DIR
set -uo pipefail
kiln=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$kiln" info --json > "$tmp/info.json" || fail "kiln info --json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['adapters'], d" \
  "$tmp/info.json" || fail "kiln info --json is not JSON listing adapters"

"$kiln" compile "$src/examples/vector_add.kir" -o "$tmp/v.kmod" || fail "compile"
"$kiln" compile "$src/examples/vector_add.kir" --emit wgsl | grep -q "@compute" ||
  fail "--emit wgsl prints no compute entry point"
"$kiln" compile "$src/examples/vector_add.kir" --emit ir | grep -q "fn vector_add" ||
  fail "--emit ir prints no function"

out=$("$kiln" run "$tmp/v.kmod" --fn vector_add --arg n=777 --check 2>&1) ||
  fail "run --check exited non-zero: $out"
grep -q "PASS" <<<"$out" || fail "run --check printed no PASS: $out"

out=$("$kiln" run "$tmp/v.kmod" --fn no_such_fn --arg n=10 2>&1) && fail "unknown function accepted"
grep -q "no function 'no_such_fn'" <<<"$out" || fail "unclear error for an unknown function: $out"
out=$("$kiln" run "$tmp/v.kmod" --fn vector_add --check 2>&1) && fail "missing scalar accepted"
grep -q "scalar parameter 'n'" <<<"$out" || fail "unclear error for a missing scalar: $out"

head -c 40 "$tmp/v.kmod" > "$tmp/truncated.kmod"
out=$("$kiln" run "$tmp/truncated.kmod" --fn vector_add --arg n=10 2>&1) && fail "truncated module accepted"
grep -qi "truncated" <<<"$out" || fail "unclear error for a truncated module: $out"

printf 'module {\nfn f(A: buffer<f32>[4]) {\n  A[0] = 1 +\n}\n}\n' > "$tmp/bad.kir"
out=$("$kiln" compile "$tmp/bad.kir" -o "$tmp/bad.kmod" 2>&1) && fail "malformed IR accepted"
grep -q "line 4" <<<"$out" || fail "parse error without its line: $out"
[ ! -e "$tmp/bad.kmod" ] || fail "a failed compile left an output file"
echo "cli: all checks passed"
