#!/usr/bin/env bash
# The kiln command line, end to end: info, compile (all outputs), run --check,
# and clear errors for bad input. (That the check can fail is proven in
# src/kiln/runtime/module_test.cc.)
# Usage: cli_test.sh KILN SOURCE_DIR DAWN_LIBRARY WGPU_LIBRARY
set -uo pipefail
kiln=$1
src=$2
dawn_library=$3
wgpu_library=$4
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
# expect_error WHAT PATTERN COMMAND...: the command must exit non-zero (not
# by a signal) and print PATTERN (an extended regular expression).
expect_error() {
  local what=$1 pattern=$2
  shift 2
  out=$("$@" 2>&1)
  local rc=$?
  [ $rc -ne 0 ] || fail "$what: accepted: $out"
  [ $rc -lt 128 ] || fail "$what: killed by signal $((rc - 128)): $out"
  grep -Eq -- "$pattern" <<<"$out" || fail "$what: unclear error: $out"
}
run_v=("$kiln" run "$tmp/v.kmod" --fn vector_add)

# --help on every command: its usage, on stdout, exit 0.
for cmd in info demo compile run "bench dispatch" "bench matmul" "bench compile" bench; do
  out=$("$kiln" $cmd --help 2>&1) || fail "kiln $cmd --help exited non-zero: $out"
  grep -q "usage: kiln ${cmd%% *}" <<<"$out" || fail "kiln $cmd --help printed no usage: $out"
  "$kiln" $cmd -h >/dev/null 2>&1 || fail "kiln $cmd -h exited non-zero"
done

# Scalars are decimal, whole, in range, and named.
out=$("${run_v[@]}" --arg n=010 --check 2>&1) || fail "--arg n=010: $out"
grep -q "C (f32\[10\])" <<<"$out" || fail "--arg n=010 is not read as decimal 10: $out"
expect_error "--arg junk" "'n'.*'12abc' is not a decimal i32" "${run_v[@]}" --arg n=12abc
expect_error "--arg hex" "'0x10' is not a decimal" "${run_v[@]}" --arg n=0x10
expect_error "--arg out of range" "'2147483648' is out of range for i32" "${run_v[@]}" \
  --arg n=2147483648
expect_error "unknown --arg" "no scalar parameter 'm' \(its scalar parameters: n\)" \
  "${run_v[@]}" --arg n=10 --arg m=3
expect_error "repeated --arg" "--arg n is given more than once" "${run_v[@]}" --arg n=1 --arg n=2
expect_error "repeated --fn" "flag --fn is given more than once" "${run_v[@]}" --arg n=1 --fn x
expect_error "--tolerance junk" "--tolerance needs a finite non-negative number, got 'abc'" \
  "${run_v[@]}" --arg n=10 --check --tolerance abc
expect_error "negative --tolerance" "got '-1'" "${run_v[@]}" --arg n=10 --check --tolerance -1
expect_error "--seed junk" "--seed needs a decimal integer" "${run_v[@]}" --arg n=10 --seed 1x

# A kernel the device cannot run: SKIP with the reason, and under --check a
# non-zero exit (nothing was checked).
"$kiln" compile "$src/tests/corpus/f16_elementwise.kir" -o "$tmp/f16.kmod" || fail "compile f16"
f16_fn=$(sed -n 's/^fn \([a-z0-9_]*\).*/\1/p' "$src/tests/corpus/f16_elementwise.kir" | head -1)
out=$("$kiln" run "$tmp/f16.kmod" --fn "$f16_fn" --arg n=16 --arg a=1.5 --check 2>&1)
rc=$?
if grep -q "SKIP" <<<"$out"; then
  [ $rc -ne 0 ] || fail "SKIP under --check exited 0: $out"
  grep -q "SKIP: .*shader-f16" <<<"$out" || fail "SKIP without its reason: $out"
fi

# Limits given to compile are the ones it verifies with, and are 32-bit.
cat > "$tmp/wide.kir" <<'EOF'
module {
fn wide(A: buffer<f32>[512]) {
  for ty in threadIdx.y(0, 2) {
    for tx in threadIdx.x(0, 256) {
      A[ty * 256 + tx] = 1.0
    }
  }
}
}
EOF
expect_error "512 threads by default" "more than 256 threads" "$kiln" compile "$tmp/wide.kir" --emit wgsl
out=$("$kiln" compile "$tmp/wide.kir" --max-invocations 512 --emit wgsl 2>&1)
grep -q "@workgroup_size(256, 2" <<<"$out" || fail "--max-invocations 512 allows no 512 threads: $out"
expect_error "--max-invocations 2^32" "from 0 to 4294967295, got '4294967296'" \
  "$kiln" compile "$tmp/wide.kir" --max-invocations 4294967296 --emit wgsl
expect_error "--max-invocations -1" "got '-1'" \
  "$kiln" compile "$tmp/wide.kir" --max-invocations -1 --emit wgsl

# Verifier errors point into the user's file.
printf 'module {\n// a comment\n\nfn f(A: buffer<f32>[4], n: i32) {\n    A[0] = A[1] + n\n}\n}\n' \
  > "$tmp/typo.kir"
expect_error "ill-typed IR" "line 5, column 5: .A\[0\] = A\[1\] \+ n.: operands" \
  "$kiln" compile "$tmp/typo.kir" --emit wgsl

# Inputs that are not regular files, or too large.
mkfifo "$tmp/fifo"
for input in "$tmp" "$tmp/fifo" /dev/zero; do
  expect_error "compile $input" "'$input' is a (directory|FIFO|character device)" \
    timeout 20 "$kiln" compile "$input" --emit wgsl
  expect_error "run $input" "'$input' is a (directory|FIFO|character device)" \
    timeout 20 "$kiln" run "$input" --fn f
done

# Sizes beyond the device: refused before anything is allocated, within a
# small address space, and sizes that overflow 64 bits are not taken as 0.
"$kiln" compile "$src/examples/matmul_tiled.kir" -o "$tmp/mm.kmod" || fail "compile matmul"
# Under a memory limit (3 GB of address space), unless the binary is built
# with AddressSanitizer, whose shadow memory needs terabytes of address space.
memory_limit="ulimit -v 3000000;"
# (grep reads all of ldd's output: with -q it could stop early, and ldd's SIGPIPE
# would fail the pipeline under pipefail.)
if ldd "$kiln" 2>/dev/null | grep libasan >/dev/null; then memory_limit=""; fi
expect_error "a matmul larger than the device" \
  "parameter '[ABC]'.* bytes, more than the device's max(StorageBufferBinding|Buffer)Size" \
  bash -c "$memory_limit exec timeout 60 \"\$@\"" _ \
  "$kiln" run "$tmp/mm.kmod" --fn matmul_tiled --arg M=1000000 --arg N=96 --arg K=64
printf 'module {\nfn cube(A: buffer<f32>[n, n, n], n: i32) {\n  A[0, 0, 0] = 1.0\n}\n}\n' \
  > "$tmp/cube.kir"
"$kiln" compile "$tmp/cube.kir" -o "$tmp/cube.kmod" || fail "compile cube"
expect_error "a shape overflowing 64 bits" "shape of parameter 'A' has more elements than 64 bits" \
  "$kiln" run "$tmp/cube.kmod" --fn cube --arg n=2147483647

# $KILN_DAWN_LIBRARY / $KILN_WGPU_LIBRARY name the library or nothing.
expect_error "Dawn variable naming wgpu-native" \
  "KILN_DAWN_LIBRARY: '$wgpu_library' is wgpu-native, not Dawn" \
  env KILN_IMPL=dawn KILN_DAWN_LIBRARY="$wgpu_library" "${run_v[@]}" --arg n=10
expect_error "wgpu variable naming Dawn" "KILN_WGPU_LIBRARY: '$dawn_library' is Dawn, not wgpu-native" \
  env KILN_IMPL=wgpu KILN_WGPU_LIBRARY="$dawn_library" "${run_v[@]}" --arg n=10
expect_error "missing library" "KILN_DAWN_LIBRARY: cannot load dawn from '$tmp/none.so'" \
  env KILN_IMPL=dawn KILN_DAWN_LIBRARY="$tmp/none.so" "${run_v[@]}" --arg n=10
expect_error "kiln info with a missing library" "KILN_DAWN_LIBRARY: cannot load" \
  env KILN_DAWN_LIBRARY="$tmp/none.so" "$kiln" info

# Implementations' diagnostics stay off the terminal unless asked for.
out=$(env -u KILN_LOG "$kiln" info 2>&1 >/dev/null) || fail "kiln info failed: $out"
[ -z "$out" ] || fail "kiln info wrote to stderr without --verbose: $out"

# The benchmarks find their inputs from any folder.
out=$(cd "$tmp" && "$kiln" bench matmul --size 32 --iterations 1 2>&1) ||
  fail "bench matmul outside the source tree: $out"
# The pass pipeline can be watched: IR after named passes, pass times.
out=$("$kiln" compile "$src/tests/corpus/vectorize_loops.kir" --emit wgsl \
  --print-after unroll,flatten-buffers --time-passes --verify-each 2>"$tmp/times") ||
  fail "compile --print-after: $out"
grep -q "^// IR after unroll: " <<<"$out" || fail "--print-after printed no IR after unroll"
grep -q "^// IR after flatten-buffers: " <<<"$out" || fail "--print-after printed no IR after flatten-buffers"
grep -q "^// IR after vectorize: " <<<"$out" && fail "--print-after printed a pass not asked for"
for pass in lower-thread-bindings unroll vectorize flatten-buffers narrow-indices simplify total; do
  grep -q "^$pass " "$tmp/times" || fail "--time-passes has no line for $pass: $(cat "$tmp/times")"
done
n_all=$("$kiln" compile "$src/examples/vector_add.kir" --emit ir --print-after all | grep -c "^// IR after")
[ "$n_all" = 6 ] || fail "--print-after all printed $n_all passes, expected 6"
expect_error "an unknown pass" "no pass 'fuse'.*lower-thread-bindings" \
  "$kiln" compile "$src/examples/vector_add.kir" --emit ir --print-after fuse

# Kernels with more buffers than the target allows are refused at compile
# time, naming the kernel; the limit is a flag.
params=""; for b in 0 1 2 3 4 5 6 7 8; do params+="B$b: buffer<f32>[1], "; done
printf 'module {\nfn nine(%sn: i32) {\n  B0[0] = B8[0]\n}\n}\n' "$params" > "$tmp/nine.kir"
expect_error "nine buffers for eight" "function 'nine'.*9 buffer parameters.*8 storage buffers" \
  "$kiln" compile "$tmp/nine.kir" -o "$tmp/nine.kmod"
"$kiln" compile "$tmp/nine.kir" -o "$tmp/nine.kmod" --max-storage-buffers 9 >/dev/null ||
  fail "--max-storage-buffers 9 did not allow nine buffers"

echo "cli: all checks passed"
