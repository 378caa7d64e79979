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
# Subgroup sizes as the adapter reports them (0 where it does not), the
# fewest no more than the most.
python3 -c "
import json, sys
for a in json.load(open(sys.argv[1]))['adapters']:
    lo, hi = a['subgroupMinSize'], a['subgroupMaxSize']
    assert isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi <= 1024, a
" "$tmp/info.json" || fail "kiln info --json subgroup sizes: $(cat "$tmp/info.json")"

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

# Output that cannot be written (a full disk) fails the command.
if [ -w /dev/full ]; then
  if "$kiln" compile "$src/examples/vector_add.kir" --emit wgsl > /dev/full 2> "$tmp/full.err"; then
    fail "--emit wgsl to a full device exited 0"
  fi
  grep -q "writing to standard output failed" "$tmp/full.err" || fail "full stdout: $(cat "$tmp/full.err")"
fi

# --help on every command: its usage, on stdout, exit 0.
for cmd in info demo compile run "bench dispatch" "bench matmul" "bench compile" "bench kernel" \
  bench; do
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
# Such a module runs, and is checked against the interpreter, on a device that allows it.
"$kiln" compile "$tmp/wide.kir" --max-invocations 512 -o "$tmp/wide.kmod" > /dev/null ||
  fail "compile wide.kir with --max-invocations 512"
if out=$("$kiln" run "$tmp/wide.kmod" --fn wide 2>&1); then
  out=$("$kiln" run "$tmp/wide.kmod" --fn wide --check 2>&1) ||
    fail "--check of a module compiled past the default limits: $out"
fi
expect_error "--max-invocations 2^32" "from 1 to 4294967295, got '4294967296'" \
  "$kiln" compile "$tmp/wide.kir" --max-invocations 4294967296 --emit wgsl
expect_error "--max-invocations -1" "got '-1'" \
  "$kiln" compile "$tmp/wide.kir" --max-invocations -1 --emit wgsl
expect_error "--max-invocations 0" "--max-invocations needs a decimal integer from 1 to 4294967295, got '0'" \
  "$kiln" compile "$tmp/wide.kir" --max-invocations 0 --emit wgsl

# Verifier errors point into the user's file.
printf 'module {\n// a comment\n\nfn f(A: buffer<f32>[4], n: i32) {\n    A[0] = A[1] + n\n}\n}\n' \
  > "$tmp/typo.kir"
expect_error "ill-typed IR" "line 5, column 5: .A\[0\] = A\[1\] \+ n.: operands" \
  "$kiln" compile "$tmp/typo.kir" --emit wgsl

# What lowering and code generation would refuse is refused at its line too.
printf 'module {\nfn f(A: buffer<f32>[1000]) {\n  for i in unroll(0, 1000) {\n    A[i] = 1.0\n  }\n}\n}\n' \
  > "$tmp/unroll.kir"
expect_error "a long unrolled loop" "line 3, column 3: .for i in unroll\(0, 1000\).: unrolled loop 'i' has extent 1000, more than the limit of 256" \
  "$kiln" compile "$tmp/unroll.kir" -o "$tmp/unroll.kmod"
printf 'module {\nfn f(A: buffer<f32>[n], n: i32) {\n  A[n - 1] = 1.0\n  A[0 - 1] = 2.0\n}\n}\n' \
  > "$tmp/negative.kir"
expect_error "a constant negative index" "line 4, column 3: .A\[0 - 1\] = 2.0.: .0 - 1., the index of buffer 'A' in dimension 0, is -1; an index is never negative" \
  "$kiln" compile "$tmp/negative.kir" -o "$tmp/negative.kmod"
printf 'module {\nfn f(A: buffer<f32>[4]) {\n  while (true) {\n    A[0] = 1.0\n  }\n}\n}\n' \
  > "$tmp/forever.kir"
expect_error "a while loop that never ends" "line 3, column 3: .while \(true\).: the condition .true. is always true, so the loop never ends" \
  "$kiln" compile "$tmp/forever.kir" -o "$tmp/forever.kmod"
# Deeper than WGSL functions hold: ifs at their line; ternaries (blocks the
# code generator adds) by the function.
# 62 levels, the most, load on the device and pass the check.
python3 - "$tmp" <<'PY'
import sys
for depth in (62, 63):
    body = "A[0] = 1.0"
    value = "1.0"
    for d in range(depth):
        body = f"if (n > {d}) {{\n{body}\n}}"
        value = f"if_then_else(n > {d}, {value}, 0.0)"
    suffix = "" if depth == 63 else "62"
    open(f"{sys.argv[1]}/deep{suffix}.kir", "w").write(
        "module {\nfn f(A: buffer<f32>[4], n: i32) {\n" + body + "\n}\n}\n")
    open(f"{sys.argv[1]}/ternaries{suffix}.kir", "w").write(
        "module {\nfn f(A: buffer<f32>[4], n: i32) {\nA[0] = " + value + "\n}\n}\n")
PY
for k in deep62 ternaries62; do
  "$kiln" compile "$tmp/$k.kir" -o "$tmp/$k.kmod" >/dev/null || fail "compile $k"
  out=$("$kiln" run "$tmp/$k.kmod" --fn f --arg n=70 --check 2>&1) || fail "$k on the device: $out"
  grep -q "PASS" <<<"$out" || fail "$k printed no PASS: $out"
done
expect_error "ifs nested 63 deep" "deep.kir: function 'f', line 65, column 1: .if \(n > 0\).: loops and ifs nest more than 62 deep here" \
  "$kiln" compile "$tmp/deep.kir" -o "$tmp/deep.kmod"
expect_error "ternaries nested 63 deep" "kernel 'f': its WGSL nests blocks 63 deep .*more than the 62 WebGPU implementations accept" \
  "$kiln" compile "$tmp/ternaries.kir" -o "$tmp/ternaries.kmod"
# A loop the vectorizer refuses is named at its line and column, for the
# WGSL and for the lowered IR.
cat > "$tmp/unvectorizable.kir" <<'KIR'
module {
fn f(A: buffer<f32>[64]) {
  for i in threadIdx.x(0, 16) {
    for j in vectorize(0, 4) {
      if (j < 2) {
        A[i * 4 + j] = 1.0
      }
    }
  }
}
}
KIR
for emit in wgsl ir; do
  expect_error "an unvectorizable loop ($emit)" "unvectorizable.kir: .*line 4, column 5: in loop \`j\`: cannot vectorize an if condition that depends on the loop variable" \
    "$kiln" compile "$tmp/unvectorizable.kir" --emit $emit
done
cat > "$tmp/unvectorizable.kir" <<'KIR'
module {
fn f(A: buffer<f32>[64]) {
  for i in threadIdx.x(0, 16) {
    for j in vectorize(0, 4) {
      A[i * 4] = A[i * 4 + j] + 1.0
    }
  }
}
}
KIR
expect_error "lanes storing one element" "unvectorizable.kir: .*line 4, column 5: cannot vectorize loop \`j\`:" \
  "$kiln" compile "$tmp/unvectorizable.kir" -o "$tmp/unvectorizable.kmod"
# A loop that never ends on the device is an error after --timeout, on
# every device (Dawn's OpenGL backend runs it inside the submit), and a
# kernel that ends within it passes.
cp "$src/tests/kernels/spin.kir" "$tmp/spin.kir"
"$kiln" compile "$tmp/spin.kir" -o "$tmp/spin.kmod" >/dev/null || fail "compile spin"
out=$("$kiln" run "$tmp/spin.kmod" --fn spin --arg n=4 --arg stop=1000 --timeout 60 --check 2>&1) ||
  fail "a loop that ends, under --timeout: $out"
grep -q "PASS" <<<"$out" || fail "a loop that ends printed no PASS: $out"
expect_error "a loop that never ends" "function 'spin': the device had not finished after 1 s \(--timeout\); a loop that never ends\?" \
  "$kiln" run "$tmp/spin.kmod" --fn spin --arg n=4 --arg stop=1001 --timeout 1
expect_error "a loop that never ends, benchmarked" "function 'spin': the device had not finished after 0.5 s" \
  "$kiln" bench kernel "$tmp/spin.kmod" --fn spin --arg n=4 --arg stop=1001 --timeout 0.5
expect_error "a loop that never ends, benchmarked without warm-up" \
  "function 'spin' \(3 timed dispatches\): the device had not finished after 0.5 s" \
  "$kiln" bench kernel "$tmp/spin.kmod" --fn spin --arg n=4 --arg stop=1001 --timeout 0.5 \
  --warmup 0 --repetitions 3
expect_error "--timeout negative" "flag --timeout needs a finite non-negative number, got '-1'" \
  "$kiln" run "$tmp/spin.kmod" --fn spin --arg n=4 --arg stop=1000 --timeout -1
expect_error "--timeout too long" "flag --timeout is 0 \(no limit\) or from 1e-9 \(a nanosecond\) to 1000000 seconds, got '1e7'" \
  "$kiln" run "$tmp/spin.kmod" --fn spin --arg n=4 --arg stop=1000 --timeout 1e7
printf 'module {\nfn g(A: buffer<f32>[4],\n     B: buffer<f64>[4]) {\n}\n}\n' > "$tmp/f64.kir"
expect_error "an f64 buffer" "line 2, column 1: .*buffer parameter 'B' has element type f64; kernel buffers hold" \
  "$kiln" compile "$tmp/f64.kir" --emit wgsl

# A lexical error is reported where it is, and junk after the module is refused.
printf 'module {\nfn f(A: buffer<f32>[n], n: i32) {\n  let x: i32 = 1 @ 2\n}\n}\n' > "$tmp/at.kir"
expect_error "a stray character" "at.kir: line 3, column 18: unexpected character '@'" \
  "$kiln" compile "$tmp/at.kir" -o "$tmp/at.kmod"
{ cat "$src/examples/vector_add.kir"; printf '@@@ junk\n'; } > "$tmp/junk.kir"
expect_error "junk after the module" "unexpected character '@'" \
  "$kiln" compile "$tmp/junk.kir" -o "$tmp/junk.kmod"
[ ! -e "$tmp/junk.kmod" ] || fail "a refused module was written"
expect_error "-o and --emit" "-o and --emit are alternatives" \
  "$kiln" compile "$src/examples/vector_add.kir" -o "$tmp/both.kmod" --emit wgsl
expect_error "-o twice" "flag -o is given more than once" \
  "$kiln" compile "$src/examples/vector_add.kir" -o "$tmp/a.kmod" -o "$tmp/b.kmod"

# --output paths are checked before anything runs.
expect_error "--output into a missing folder" "--output C: '$tmp/none/c.npy': folder '$tmp/none' does not exist" \
  "${run_v[@]}" --arg n=4 --output C="$tmp/none/c.npy"
grep -q "device:" <<<"$out" && fail "--output checked only after the device was opened: $out"
printf 'module {\nfn two(A: buffer<f32>[4], B: buffer<f32>[4]) {\n  A[0] = 1.0\n  B[0] = 2.0\n}\n}\n' \
  > "$tmp/two.kir"
"$kiln" compile "$tmp/two.kir" -o "$tmp/two.kmod" >/dev/null || fail "compile two"
expect_error "--output twice to one file" "--output B: '$tmp/./same.npy' is also the file of --output A" \
  "$kiln" run "$tmp/two.kmod" --fn two --output A="$tmp/same.npy" --output B="$tmp/./same.npy"
expect_error "--output a folder" "is a directory" "${run_v[@]}" --arg n=4 --output C="$tmp"
# Never replaced: a FIFO (or a device) and a link.
mkfifo "$tmp/out_fifo"
expect_error "--output a FIFO" "exists and is not a regular file" \
  "${run_v[@]}" --arg n=4 --output C="$tmp/out_fifo"
[ -p "$tmp/out_fifo" ] || fail "--output replaced a FIFO"
ln -s "$tmp/target.npy" "$tmp/link.npy"
expect_error "--output a link" "is a symbolic link" "${run_v[@]}" --arg n=4 --output C="$tmp/link.npy"
expect_error "--output empty" "--output C: no file given" "${run_v[@]}" --arg n=4 --output C=

# compile -o is checked the same way, and never overwrites its input.
cp "$src/examples/vector_add.kir" "$tmp/self.kir"
expect_error "compile -o its input" "-o: '$tmp/./self.kir' is the input file" \
  "$kiln" compile "$tmp/self.kir" -o "$tmp/./self.kir"
ln "$tmp/self.kir" "$tmp/hard.kir"
expect_error "compile -o a hard link to its input" "is the input file" \
  "$kiln" compile "$tmp/self.kir" -o "$tmp/hard.kir"
cmp -s "$tmp/self.kir" "$src/examples/vector_add.kir" || fail "compile -o destroyed its input"
expect_error "compile -o a FIFO" "-o: '$tmp/out_fifo' exists and is not a regular file" \
  "$kiln" compile "$src/examples/vector_add.kir" -o "$tmp/out_fifo"
[ -p "$tmp/out_fifo" ] || fail "compile -o replaced a FIFO"
expect_error "compile -o a link" "-o: '$tmp/link.npy' is a symbolic link" \
  "$kiln" compile "$src/examples/vector_add.kir" -o "$tmp/link.npy"
expect_error "compile -o a folder" "-o: '$tmp' is a directory" \
  "$kiln" compile "$src/examples/vector_add.kir" -o "$tmp"
expect_error "compile -o into a missing folder" "-o: '$tmp/none/v.kmod': folder '$tmp/none' does not exist" \
  "$kiln" compile "$src/examples/vector_add.kir" -o "$tmp/none/v.kmod"
expect_error "compile -o empty" "-o: no file given" "$kiln" compile "$src/examples/vector_add.kir" -o ""
# run --output never overwrites the module being run.
cp "$tmp/v.kmod" "$tmp/self.kmod"
expect_error "run --output its module" "--output C: '$tmp/./self.kmod' is the input file" \
  "$kiln" run "$tmp/self.kmod" --fn vector_add --arg n=4 --output C="$tmp/./self.kmod"
cmp -s "$tmp/self.kmod" "$tmp/v.kmod" || fail "run --output destroyed its module"

# The demo's matmul size: a multiple of 16 up to 4096 (its CPU check is n^3),
# refused before the device.
expect_error "--matmul-size past 4096" "--matmul-size needs a decimal integer from 1 to 4096, got '65552'" \
  "$kiln" demo --matmul-size 65552
grep -q "device:" <<<"$out" && fail "--matmul-size checked only after the device was opened: $out"
expect_error "--matmul-size 0" "from 1 to 4096, got '0'" "$kiln" demo --matmul-size 0
expect_error "--matmul-size not of 16" "--matmul-size needs a multiple of 16 .*got 40" \
  "$kiln" demo --matmul-size 40
out=$("$kiln" demo --matmul-size 16 2>&1) || fail "demo --matmul-size 16: $out"
grep -q "matmul: 16x16 tiled f32, 16^3 .* PASS" <<<"$out" || fail "demo at the smallest size: $out"

# Scalars are checked before the device too.
expect_error "a missing --arg" "needs a value for scalar parameter 'n'" "${run_v[@]}"
grep -q "device:" <<<"$out" && fail "a missing --arg found only after the device was opened: $out"
expect_error "a malformed --arg" "'5=6' is not a decimal i32" "${run_v[@]}" --arg n=5=6
grep -q "device:" <<<"$out" && fail "a malformed --arg found only after the device was opened: $out"

# Commands without arguments refuse them; an unknown command exits 1.
for cmd in info demo "bench ops" "bench matmul" "bench dispatch"; do
  expect_error "kiln $cmd extra" "kiln $cmd takes no arguments, got 'extra'" "$kiln" $cmd extra
done
# --matmul-schedule: five to nine whole integers, or an error naming the form.
for bad in "2,2,16,0,1x" "2,2,16,0,1 " "2,2,16,0,1,,1" "2,2,16,0,1," "2,2,16,0,1,1,1,1,1" \
  "2,2,16,0,1,1,1,1,16,1" "2,2,16,0,1,1,1,1,12" \
  "2,2,16,0,2" "" "99999999999,2,16,0,1" "2,2,16,0,1,1,4" "2,2,16,0,1,1,-1" "2,2,16,0,1,2"; do
  expect_error "--matmul-schedule '$bad'" "--matmul-schedule takes ROWS,COLS,K_TILE,DOUBLE,UNROLL" \
    "$kiln" bench ops --compile-only --matmul-schedule "$bad"
done
out=$("$kiln" bench ops --compile-only --filter "matmul f32" --matmul-schedule 2,2,16,0,1,1,1,1 2>&1) ||
  fail "--matmul-schedule with eight fields: $out"
out=$("$kiln" bench ops --compile-only --filter "matmul f32" --matmul-schedule 2,2,16,0,1,1,1,1,8 \
  --wgsl "$tmp/eight" 2>&1) || fail "--matmul-schedule with nine fields: $out"
grep -q "@workgroup_size(16, 8, 1)" "$tmp/eight/matmul_f32_4096x4096___4096x4096.wgsl" ||
  fail "--matmul-schedule ...,8 did not take workgroups of 16 x 8 threads"
# BRANCH_FREE 3 peels the last k-step of tiles copied through registers; of
# tiles copied directly it is an error naming the schedule.
out=$("$kiln" bench ops --compile-only --filter "matmul f32" --matmul-schedule 2,2,16,0,1,1,3,1 \
  --wgsl "$tmp/peeled" 2>&1) || fail "--matmul-schedule with a peeled last k-step: $out"
grep -q "k_outer < 255i" "$tmp/peeled/matmul_f32_4096x4096___4096x4096.wgsl" ||
  fail "--matmul-schedule 2,2,16,0,1,1,3,1 did not peel the last k-step"
expect_error "--matmul-schedule peeled without registers" \
  "only tiles copied through registers or double-buffered treat the last k-step apart" \
  "$kiln" bench ops --compile-only --filter "matmul f32" --matmul-schedule 2,2,16,0,1,0,3
# A filter that matches nothing is an error listing the workloads.
expect_error "--filter matching nothing" "--filter 'no such op' matches no workload; the workloads: 'elementwise add f32'" \
  "$kiln" bench ops --compile-only --small --filter "no such op"
# Full size on a device that cannot bind its buffers (the CPU drivers):
# one clear error up front, naming the limit and --small.
if out=$("$kiln" bench ops --filter "elementwise add" --repetitions 1 2>&1); then
  echo "skip: full-size bench ops error (this device binds 2^28-byte buffers)"
else
  grep -Eq "the full-size workloads bind 268435456 bytes .* binds at most [0-9]+ \(maxStorageBufferBindingSize\); --small runs" \
    <<<"$out" || fail "bench ops at full size on a small device: $out"
fi
expect_error "bench matmul --size 0" "flag --size needs a decimal integer from 1 to 4294967295, got '0'" \
  "$kiln" bench matmul --size 0
expect_error "bench matmul --size 24" "matmul size 24 is not a positive multiple of 16" \
  "$kiln" bench matmul --size 24
"$kiln" no_such_command >/dev/null 2>&1
[ $? -eq 1 ] || fail "an unknown command does not exit 1"

# bench compile finds the source tree's kernels from any folder, and names a
# path that is not there.
out=$(cd "$tmp" && "$kiln" bench compile --megabytes 0.02 2>&1) || fail "bench compile --megabytes from $tmp: $out"
expect_error "bench compile of a missing folder" "'$tmp/none' does not exist" \
  "$kiln" bench compile "$tmp/none"
expect_error "bench compile --megabytes 1x" "--megabytes takes sizes in MB" \
  "$kiln" bench compile --megabytes 1x
expect_error "bench compile --megabytes past 512" "--megabytes takes sizes in MB, each above 0 and at most 512, separated by commas, got '1000000'" \
  "$kiln" bench compile --megabytes 2,1000000

# Any seed repeats its inputs, 0 included.
for k in 1 2; do
  out=$("${run_v[@]}" --arg n=64 --seed 0 --output C="$tmp/seed$k.npy" 2>&1) ||
    fail "--seed 0: $out"
  grep -q "seed 0$" <<<"$out" || fail "--seed 0 not used: $out"
done
cmp -s "$tmp/seed1.npy" "$tmp/seed2.npy" || fail "--seed 0 gave different inputs"

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
# (The sanitizer's runtime may be linked in statically, as clang does: the
# binary names its entry point either way.)
if grep -q -a __asan_init "$kiln"; then memory_limit=""; fi
expect_error "a matmul larger than the device" \
  "parameter '[ABC]'.* bytes, more than the device's max(StorageBufferBinding|Buffer)Size" \
  bash -c "$memory_limit exec timeout 60 \"\$@\"" _ \
  "$kiln" run "$tmp/mm.kmod" --fn matmul_tiled --arg M=1000000 --arg N=96 --arg K=64
# A benchmark size beyond the device is refused before anything is allocated.
for size in 65536 4294967280; do
  expect_error "bench matmul --size $size" "each ${size}x${size} f32 matrix takes .* bytes, more than the device's max" \
    bash -c "$memory_limit exec timeout 60 \"\$@\"" _ "$kiln" bench matmul --size $size
done

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
env -u KILN_LOG "$kiln" info >"$tmp/info.txt" 2>"$tmp/info.err" ||
  fail "kiln info failed (exit $?): $(cat "$tmp/info.txt" "$tmp/info.err")"
out=$(cat "$tmp/info.err")
[ -z "$out" ] || fail "kiln info wrote to stderr without --verbose: $out"

# The benchmarks find their inputs from any folder.
out=$(cd "$tmp" && "$kiln" bench matmul --size 32 --iterations 1 2>&1) ||
  fail "bench matmul outside the source tree (exit $?): $out"
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

# .npy inputs and outputs (tests/npy_files.py writes and reads them with
# Python's standard library).
npy=("python3" "$src/tests/npy_files.py")
n=100
"${npy[@]}" vectors "$tmp" $n || fail "writing .npy inputs"
out=$("${run_v[@]}" --arg n=$n --input A="$tmp/a.npy" --input B="$tmp/b.npy" \
  --output C="$tmp/c.npy" 2>&1) || fail "run with .npy inputs: $out"
"${npy[@]}" check_sum "$tmp/c.npy" $n || fail "the output .npy is not A + B: $out"
grep -q "^  C: \[$n\] f32 min 0 max 148.5 mean 74.25 first \[0, 1.5, 3, 4.5, 6, 7.5, ...\]$" \
  <<<"$out" || fail "no summary line for C: $out"
grep -q "interpreter" <<<"$out" && fail "the interpreter ran without --check: $out"
compgen -G "$tmp/c.npy.*tmp" >/dev/null && fail "a temporary output file was left behind"
# Files and links named like a temporary are never written, followed or
# removed: the module being run, a link to a precious file, another output.
cp "$tmp/v.kmod" "$tmp/m.npy.tmp"
echo precious > "$tmp/precious.txt"
ln -s "$tmp/precious.txt" "$tmp/linked.kmod.tmp"
out=$("$kiln" run "$tmp/m.npy.tmp" --fn vector_add --arg n=4 --output C="$tmp/m.npy" 2>&1) ||
  fail "run a module named like a temporary: $out"
cmp -s "$tmp/v.kmod" "$tmp/m.npy.tmp" || fail "writing m.npy changed the module m.npy.tmp"
"$kiln" compile "$src/examples/vector_add.kir" -o "$tmp/linked.kmod" >/dev/null || fail "compile beside a link"
[ "$(cat "$tmp/precious.txt")" = precious ] && [ -L "$tmp/linked.kmod.tmp" ] && [ ! -L "$tmp/linked.kmod" ] ||
  fail "compile -o linked.kmod wrote through the link linked.kmod.tmp"
printf 'module {\nfn two(A: buffer<f32>[4], B: buffer<f32>[4]) {\n  A[0] = 1.0\n  B[0] = 2.0\n}\n}\n' \
  > "$tmp/two2.kir"
"$kiln" compile "$tmp/two2.kir" -o "$tmp/two2.kmod" >/dev/null || fail "compile two2"
"$kiln" run "$tmp/two2.kmod" --fn two --output A="$tmp/f.npy" --output B="$tmp/f.npy.tmp" >/dev/null ||
  fail "two outputs, one named like the other's temporary"
[ -f "$tmp/f.npy" ] && [ -f "$tmp/f.npy.tmp" ] || fail "an output named like a temporary was lost"
# Any shape of the right element count; --check compares on the same inputs.
out=$("${run_v[@]}" --arg n=$n --input A="$tmp/a.npy" --input=B="$tmp/b2d.npy" \
  --output C="$tmp/c2.npy" --check 2>&1) || fail "run --check with .npy inputs: $out"
grep -q "PASS" <<<"$out" || fail "run --check with .npy inputs printed no PASS: $out"
grep -q "interpreter" <<<"$out" || fail "run --check did not run the interpreter: $out"
"${npy[@]}" check_sum "$tmp/c2.npy" $n || fail "--check's output .npy is not A + B"
# Buffers not given get random data (written ones poisoned).
out=$("${run_v[@]}" --arg n=$n --input A="$tmp/a.npy" 2>&1) || fail "run with one input: $out"
grep -q "^  C: \[$n\] f32 min " <<<"$out" || fail "no summary line for C: $out"
# Integer buffers are summarized with exact integers (hashes are large u32s).
"$kiln" compile "$src/tests/corpus/hash_u32.kir" -o "$tmp/hash.kmod" >/dev/null || fail "compile hash"
out=$("$kiln" run "$tmp/hash.kmod" --fn hash --arg n=1000 --arg seed=12345 2>&1) || fail "run hash: $out"
grep -Eq "^  H: \[1000\] u32 min [0-9]+ max [0-9]{10} mean [0-9.e+]+ first \[[0-9]+, [0-9]+, " \
  <<<"$out" || fail "u32 summary not exact: $out"
# Outputs take the parameter's N-D shape.
out=$("$kiln" run "$tmp/mm.kmod" --fn matmul_tiled --arg M=32 --arg N=16 --arg K=16 \
  --output C="$tmp/mm.npy" 2>&1) || fail "matmul --output: $out"
header=$("${npy[@]}" header "$tmp/mm.npy") || fail "matmul output unreadable"
grep -q "'shape': (32, 16)" <<<"$header" || fail "matmul output is not 32x16: $header"
grep -q "^  C: \[32, 16\] f32 " <<<"$out" || fail "matmul summary without its shape: $out"

# Errors in --input and --output name the parameter and what is wrong.
expect_error "--input of an unknown parameter" \
  "--input X: function 'vector_add' has no parameter 'X' \(its buffer parameters: A, B, C\)" \
  "${run_v[@]}" --arg n=$n --input X="$tmp/a.npy"
expect_error "--output of an unknown parameter" "--output D: .*no parameter 'D'" \
  "${run_v[@]}" --arg n=$n --output D="$tmp/d.npy"
expect_error "--input of a scalar" "--input n: 'n' is a scalar parameter \(i32\); give it with --arg" \
  "${run_v[@]}" --arg n=$n --input n="$tmp/a.npy"
expect_error "--output of a read-only parameter" \
  "--output A: parameter 'A' is read-only .*written parameters: C" \
  "${run_v[@]}" --arg n=$n --output A="$tmp/o.npy"
expect_error "repeated --input" "--input A is given more than once" \
  "${run_v[@]}" --arg n=$n --input A="$tmp/a.npy" --input A="$tmp/b.npy"
expect_error "repeated --output" "--output C is given more than once" \
  "${run_v[@]}" --arg n=$n --output C="$tmp/1.npy" --output C="$tmp/2.npy"
expect_error "--input without a file" "--input takes name=file.npy, got 'A'" \
  "${run_v[@]}" --arg n=$n --input A
expect_error "--input of the wrong dtype" \
  "--input A: parameter 'A' is f32 \(<f4\), '.*int.npy' holds <i4 \(i32\)" \
  "${run_v[@]}" --arg n=$n --input A="$tmp/int.npy"
expect_error "--input of the wrong size" \
  "--input A: parameter 'A' \(f32\[n\]\) needs \[$n\] = $n elements .*short.npy' holds \($((n - 1)),\) = $((n - 1)) elements" \
  "${run_v[@]}" --arg n=$n --input A="$tmp/short.npy"
expect_error "a missing --input file" "--input A: .*none.npy" \
  "${run_v[@]}" --arg n=$n --input A="$tmp/none.npy"
expect_error "an --output into no folder" "--output C: '$tmp/no/c.npy': folder '$tmp/no' does not exist" \
  "${run_v[@]}" --arg n=$n --output C="$tmp/no/c.npy"
# Malformed .npy files.
for bad in "fortran:fortran_order is True" "f8:unsupported dtype '<f8'" \
  "bigendian:unsupported dtype '>f4': big-endian" \
  "truncated:truncated: shape \($n,\) of <f4 needs $((4 * n)) bytes of data, the file has $((4 * n - 12))" \
  "trailing:2 bytes after the data" "header:malformed header" "noshape:malformed header: the header has no 'shape'" \
  "version:unsupported .npy format version 9.0" "magic:not a .npy file"; do
  file=${bad%%:*}
  expect_error "a $file .npy file" "--input A: '$tmp/$file.npy': ${bad#*:}" \
    "${run_v[@]}" --arg n=$n --input A="$tmp/$file.npy"
done

# kiln bench kernel: its fields, its JSON and its errors (no timing is checked).
out=$("$kiln" bench kernel "$tmp/v.kmod" --fn vector_add --arg n=1000 --repetitions 3 \
  --warmup 1 --flops 1000 2>&1) || fail "bench kernel: $out"
for field in "3 dispatches after 1 warm-up; (gpu timestamps|wall time)" \
  "^  C +f32 +1000 elements +4000 bytes" "^median [0-9.]+ ms, min [0-9.]+ ms per dispatch" \
  "^bytes 12000, [0-9.]+ GB/s" "^flops 1000, [0-9.]+ GFLOP/s"; do
  grep -Eq "$field" <<<"$out" || fail "bench kernel printed no '$field': $out"
done
"$kiln" bench kernel "$tmp/v.kmod" --fn vector_add --arg n=1000 --repetitions 3 --json \
  > "$tmp/bench.json" || fail "bench kernel --json"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["benchmark"] == "kernel" and d["function"] == "vector_add", d
assert d["repetitions"] == 3 and d["bytes"] == 12000, d
assert d["median_ms"] >= d["min_ms"] >= 0 and d["gb_per_s"] >= 0, d
assert d["timing"].startswith(("gpu timestamps", "wall time")), d
assert [b["name"] for b in d["buffers"]] == ["A", "B", "C"], d
assert "flops" not in d, d
' "$tmp/bench.json" || fail "bench kernel --json: $(cat "$tmp/bench.json")"
# kiln bench ops --compile-only: every workload built and compiled, valid JSON, nothing run.
"$kiln" bench ops --compile-only --json > "$tmp/ops.json" || fail "bench ops --compile-only"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["benchmark"] == "ops" and len(d["ops"]) >= 10, d
assert isinstance(d["subgroups"], bool), d
assert all(o.get("compile_ms", -1) >= 0 and "ms" not in o for o in d["ops"] if "skip" not in o), d
assert d["compile_only"] is True and "timing" not in d and "copy_gb_per_s" not in d, d
' "$tmp/ops.json" || fail "bench ops --compile-only --json: $(cat "$tmp/ops.json")"
expect_error "bench compile --megabytes ''" "--megabytes takes sizes in MB, each above 0 and at most 512, separated by commas, got ''" \
  "$kiln" bench compile --megabytes ""
expect_error "bench compile --megabytes 1," "got '1,' \(a comma with no size after it\)" \
  "$kiln" bench compile --megabytes 1,
# The rules' attention tile and subgroup use replaced; malformed and unusable tiles.
out=$("$kiln" bench ops --small --filter "attention fused" --attention-tile 16,8 --no-subgroups \
  --repetitions 1 2>&1) || fail "bench ops --attention-tile 16,8: $out"
grep -Eq "16 queries x 8 keys per block, 8 threads" <<<"$out" || fail "attention tile: $out"
grep -Eq "^attention fused f32 .* PASS" <<<"$out" || fail "attention tile check: $out"
grep -Eq "^row combines: shared-memory tree \(--no-subgroups\)" <<<"$out" || fail "no-subgroups: $out"
# --wgsl-from runs a hand-edited kernel in place of the generated one, still
# checked: the written WGSL passes, an edited sum fails the check, WGSL
# without the entry point is a clear error.
"$kiln" bench ops --small --filter "elementwise add" --repetitions 1 --wgsl "$tmp/wgsl" \
  > /dev/null 2>&1 || fail "bench ops --wgsl"
add_wgsl=$(ls "$tmp"/wgsl/elementwise_add_*.wgsl)
out=$("$kiln" bench ops --small --filter "elementwise add" --repetitions 1 \
  --wgsl-from "$tmp/wgsl" 2>&1) || fail "bench ops --wgsl-from: $out"
grep -Eq "WGSL from .*elementwise_add_" <<<"$out" || fail "--wgsl-from not named: $out"
grep -Eq "^elementwise add f32 .* PASS" <<<"$out" || fail "--wgsl-from check: $out"
sed -i 's/A\[i\] + B\[i\]/A[i] - B[i]/' "$add_wgsl"
out=$("$kiln" bench ops --small --filter "elementwise add" --repetitions 1 \
  --wgsl-from "$tmp/wgsl" 2>&1) && fail "--wgsl-from with a wrong kernel passed: $out"
grep -Eq "^elementwise add f32 .* FAIL" <<<"$out" || fail "--wgsl-from wrong kernel: $out"
# Another workgroup size is the kernel's own (the dispatch's workgroup count
# stays the generated kernel's): half the threads leave half the output
# poisoned, which the check finds; a malformed size is an error naming it.
sed -i 's/A\[i\] - B\[i\]/A[i] + B[i]/; s/@workgroup_size(256, 1, 1)/@workgroup_size(128u, 1i)/' "$add_wgsl"
out=$("$kiln" bench ops --small --filter "elementwise add" --repetitions 1 \
  --wgsl-from "$tmp/wgsl" 2>&1) && fail "--wgsl-from with half the threads passed: $out"
grep -Eq "^elementwise add f32 .* FAIL" <<<"$out" || fail "--wgsl-from workgroup size: $out"
grep -Eq "WGSL from .*elementwise_add_.*, workgroup 128x1x1" <<<"$out" ||
  fail "--wgsl-from's own workgroup size not shown: $out"
sed -i 's/@workgroup_size(128u, 1i)/@workgroup_size(256, 0)/' "$add_wgsl"
expect_error "--wgsl-from with a zero workgroup size" \
  "the @workgroup_size of .* is not one to three positive decimal integer literals" \
  "$kiln" bench ops --small --filter "elementwise add" --repetitions 1 --wgsl-from "$tmp/wgsl"
# WGSL the device refuses names the file it came from.
sed -i 's/@workgroup_size(256, 0)/@workgroup_size(256)/' "$add_wgsl"
echo "const kiln_broken: f32 = no_such_name;" >> "$add_wgsl"
expect_error "--wgsl-from WGSL the device refuses" "COMPILE_ERROR: .*--wgsl-from: $add_wgsl: loading function 'elementwise_add': compiling the WGSL of 'elementwise_add'" \
  "$kiln" bench ops --small --filter "elementwise add" --repetitions 1 --wgsl-from "$tmp/wgsl"
echo "fn broken(" > "$add_wgsl"
expect_error "--wgsl-from a missing folder" "--wgsl-from: '$tmp/no_such_dir' is not a directory" \
  "$kiln" bench ops --small --filter "elementwise add" --wgsl-from "$tmp/no_such_dir"
expect_error "--wgsl-from a file" "is not a directory" \
  "$kiln" bench ops --small --filter "elementwise add" --wgsl-from "$add_wgsl"
expect_error "--wgsl with no folder" "--wgsl needs a directory" \
  "$kiln" bench ops --compile-only --filter "elementwise add" --wgsl ""
expect_error "--wgsl-from without the entry point" "INVALID_ARGUMENT: .*--wgsl-from: $add_wgsl: .*entry point 'elementwise_add' is not declared" \
  "$kiln" bench ops --small --filter "elementwise add" --repetitions 1 --wgsl-from "$tmp/wgsl"
# A hand-edited kernel that never ends stops the benchmark after --timeout
# (its first, checked run), and one that asks the device for more than it
# has names its file.
"$kiln" bench ops --small --filter "elementwise add" --repetitions 1 --wgsl "$tmp/spin_wgsl" \
  > /dev/null 2>&1 || fail "bench ops --wgsl"
spin_wgsl=$(ls "$tmp"/spin_wgsl/elementwise_add_*.wgsl)
sed -i 's/^fn elementwise_add(.*{$/&\n  var spin : u32 = 1u;\n  loop { C[0] = f32(spin); spin = spin * 3u; if (spin == 0u) { break; } }/' "$spin_wgsl"
grep -q "spin = spin \* 3u" "$spin_wgsl" || fail "the spinning kernel was not written: $(cat "$spin_wgsl")"
expect_error "bench ops --wgsl-from a kernel that never ends" \
  "kiln: elementwise add f32 [0-9]+: the checked run: the device had not finished after 1 s \(--timeout\); a loop that never ends\?" \
  "$kiln" bench ops --small --filter "elementwise add" --repetitions 1 --timeout 1 \
  --wgsl-from "$tmp/spin_wgsl"
expect_error "bench ops --timeout malformed" "flag --timeout needs a finite non-negative number" \
  "$kiln" bench ops --small --filter "elementwise add" --timeout x
sed -i 's/^  var spin : u32 = 1u;$//; s/^  loop { C\[0\] = f32(spin).*$//' "$spin_wgsl"
sed -i 's/@workgroup_size(256, 1, 1)/@workgroup_size(65536, 1, 1)/' "$spin_wgsl"
expect_error "bench ops --wgsl-from a workgroup the device lacks" \
  "--wgsl-from: $spin_wgsl: .*needs a workgroup of \(65536, 1, 1\)" \
  "$kiln" bench ops --small --filter "elementwise add" --repetitions 1 --wgsl-from "$tmp/spin_wgsl"
# A schedule or tile given is checked even where the filter runs no workload
# that takes it.
expect_error "--matmul-schedule with no matmul run" "--matmul-schedule schedule \(rows 3, .*rows must be 1, 2 or 4" \
  "$kiln" bench ops --compile-only --filter "elementwise add" --matmul-schedule 3,2,16,1,1
expect_error "--attention-tile with no attention run" "--attention-tile: attention tile \(queries 6, keys 4\): queries must be a multiple of 4" \
  "$kiln" bench ops --compile-only --filter "elementwise add" --attention-tile 6,4
printf '// binary\n\x00\xff\xfe' > "$add_wgsl"
expect_error "--wgsl-from a binary file" "--wgsl-from: $add_wgsl is not UTF-8 text: byte 10 of 13 is malformed or NUL" \
  "$kiln" bench ops --small --filter "elementwise add" --repetitions 1 --wgsl-from "$tmp/wgsl"
# A workload of several kernels is written one file per kernel, each WGSL
# of its own; each may be replaced, and WGSL the device refuses names the
# file of its kernel.
"$kiln" bench ops --compile-only --small --filter "attention unfused" --wgsl "$tmp/wgsl_multi" \
  > /dev/null 2>&1 || fail "bench ops --wgsl, several kernels"
[ "$(ls "$tmp"/wgsl_multi/attention_unfused_*.wgsl | wc -l)" = 3 ] ||
  fail "--wgsl wrote $(ls "$tmp"/wgsl_multi) for three kernels"
for f in "$tmp"/wgsl_multi/attention_unfused_*.wgsl; do
  [ "$(grep -c '@compute' "$f")" = 1 ] || fail "$f holds not exactly one kernel"
done
out=$("$kiln" bench ops --small --filter "attention unfused" --repetitions 1 \
  --wgsl-from "$tmp/wgsl_multi" 2>&1) || fail "bench ops --wgsl-from, several kernels: $out"
grep -Eq "^attention unfused f32 .* PASS" <<<"$out" || fail "--wgsl-from, several kernels: $out"
[ "$(grep -o 'WGSL from ' <<<"$out" | wc -l)" = 3 ] || fail "--wgsl-from, three files not named: $out"
softmax_wgsl=$(ls "$tmp"/wgsl_multi/attention_unfused_*.softmax.wgsl)
echo "const kiln_broken: f32 = no_such_name;" >> "$softmax_wgsl"
expect_error "--wgsl-from one kernel of several the device refuses" \
  "COMPILE_ERROR: .*--wgsl-from: $softmax_wgsl: loading function 'softmax'" \
  "$kiln" bench ops --small --filter "attention unfused" --repetitions 1 --wgsl-from "$tmp/wgsl_multi"
touch "${softmax_wgsl%.softmax.wgsl}.wgsl"
expect_error "--wgsl-from one file for several kernels" \
  "has 3 kernels, each replaced by a file of its own \(such as .*\), not by ${softmax_wgsl%.softmax.wgsl}.wgsl" \
  "$kiln" bench ops --small --filter "attention unfused" --repetitions 1 --wgsl-from "$tmp/wgsl_multi"
# A folder holding no file named for a workload run is refused (a misnamed
# file would otherwise go unnoticed).
mkdir -p "$tmp/wgsl_other" && touch "$tmp/wgsl_other/elementwise_add.wgsl"
expect_error "--wgsl-from with no file for the workload" "--wgsl-from: '$tmp/wgsl_other' holds no file named for a workload that ran \(names as --wgsl writes them, such as '$tmp/wgsl_other/elementwise_add_f32_[0-9]+.wgsl'\)" \
  "$kiln" bench ops --small --filter "elementwise add" --repetitions 1 --wgsl-from "$tmp/wgsl_other"
# Timed back to back too: the workload's time per run and the copy's, in the JSON.
"$kiln" bench ops --small --filter "elementwise add" --repetitions 1 --json > "$tmp/b2b.json" ||
  fail "bench ops --json back to back"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["copy_back_to_back_gb_per_s"] > 0, d
# What one workgroup'"'"'s dispatch costs, beside them.
assert 0 < d["one_workgroup_dispatch_ms"] and 0 < d["one_workgroup_dispatch_back_to_back_ms"], d
(o,) = d["ops"]
assert o["back_to_back_ms"] > 0 and o["back_to_back_fraction_of_copy"] > 0, o
assert o["check"] == "PASS", o
# A memory-bound workload also has the copy of its own bytes, a different
# ceiling from the big copy, and its ratio to it.
assert o["same_bytes_copy_gb_per_s"] > 0, o
assert o["same_bytes_copy_gb_per_s"] != d["copy_gb_per_s"], o
r = o["gb_per_s"] / o["same_bytes_copy_gb_per_s"]
assert abs(o["fraction_of_same_bytes_copy"] - r) < 1e-6 * r, o
assert o["back_to_back_fraction_of_same_bytes_copy"] > 0, o
' "$tmp/b2b.json" || fail "bench ops back to back: $(cat "$tmp/b2b.json")"
# A workload with flops has no same-bytes copy.
"$kiln" bench ops --small --filter "matmul int8" --repetitions 1 --json > "$tmp/mm.json" ||
  fail "bench ops --json int8"
python3 -c '
import json, sys
(o,) = json.load(open(sys.argv[1]))["ops"]
assert "same_bytes_copy_gb_per_s" not in o and o["check"] == "PASS", o
' "$tmp/mm.json" || fail "bench ops int8: $(cat "$tmp/mm.json")"
expect_error "--attention-tile junk" "--attention-tile takes QUERIES,KEYS\[,OWN_V\[,UNROLL\[,UNSIGNED\]\]\] \(two integers, then 0 or 1 each\), got '16x8'" \
  "$kiln" bench ops --small --filter attention --attention-tile 16x8
for bad in 16,8,2 16,8, 16,8,1,2 16,8,1,1,2 16,8,1,1,1,1 "16, 8" +16,8 99999999999999999999,8; do
  expect_error "--attention-tile $bad" "--attention-tile takes QUERIES,KEYS\[,OWN_V\[,UNROLL\[,UNSIGNED\]\]\]" \
    "$kiln" bench ops --small --filter attention --attention-tile "$bad"
done
# V's own buffer: run and checked where the read-ahead holds; refused where not.
out=$("$kiln" bench ops --small --filter "attention fused" --attention-tile 16,16,1 \
  --repetitions 1 2>&1) || fail "bench ops --attention-tile 16,16,1: $out"
grep -Eq "16 queries x 16 keys per block, 16 threads, V in a buffer of its own" <<<"$out" ||
  fail "attention tile with V's own buffer: $out"
grep -Eq "^attention fused f32 .* PASS" <<<"$out" || fail "own V check: $out"
out=$("$kiln" bench ops --small --filter "attention fused" --attention-tile 16,16,1,1 \
  --repetitions 1 2>&1) || fail "bench ops --attention-tile 16,16,1,1: $out"
grep -Eq "16 queries x 16 keys per block, 16 threads, V in a buffer of its own, the scores' loop over D unrolled" <<<"$out" ||
  fail "attention tile with the scores' loop unrolled: $out"
grep -Eq "^attention fused f32 .* PASS" <<<"$out" || fail "unrolled scores check: $out"
out=$("$kiln" bench ops --small --filter "attention fused" --attention-tile 16,16,1,1,1 \
  --repetitions 1 2>&1) || fail "bench ops --attention-tile 16,16,1,1,1: $out"
grep -Eq "16 queries x 16 keys per block, 16 threads, V in a buffer of its own, the scores' loop over D unrolled, unsigned indices" <<<"$out" ||
  fail "attention tile with unsigned indices: $out"
grep -Eq "^attention fused f32 .* PASS" <<<"$out" || fail "unsigned indices check: $out"
expect_error "--matmul-schedule with a space" "--matmul-schedule takes ROWS,COLS" \
  "$kiln" bench ops --compile-only --filter "matmul f32" --matmul-schedule "2, 2,16,0,1"
expect_error "--matmul-schedule out of range" "--matmul-schedule takes ROWS,COLS" \
  "$kiln" bench ops --compile-only --filter "matmul f32" --matmul-schedule 99999999999,2,16,0,1
# Fields that fit the flag but no tile are quoted as given.
expect_error "--matmul-schedule rows INT_MAX" "schedule \(rows 2147483647, cols 2, k_tile 16, threads_y 16\): rows must be 1, 2 or 4" \
  "$kiln" bench ops --compile-only --filter "matmul f32" --matmul-schedule 2147483647,2,16,0,1
expect_error "--attention-tile queries INT64_MAX" "attention tile \(queries 9223372036854775807, keys 16\): queries must be a multiple of 4" \
  "$kiln" bench ops --compile-only --filter "attention fused" --attention-tile 9223372036854775807,16
expect_error "--attention-tile own V without read-ahead" "V's own buffer needs the read-ahead" \
  "$kiln" bench ops --small --filter "attention fused" --attention-tile 8,8,1
expect_error "--attention-tile too large" "attention tile 256 queries x 128 keys per block, 2048 threads: .*2048 invocations" \
  "$kiln" bench ops --small --filter "attention fused" --attention-tile 256,128
# The work a kernel declares: its "flops" attribute, evaluated with the --arg values.
"$kiln" compile "$src/examples/matmul_tiled.kir" -o "$tmp/mm.kmod" >/dev/null || fail "compile mm"
out=$("$kiln" bench kernel "$tmp/mm.kmod" --fn matmul_tiled --arg M=2048 --arg N=1024 --arg K=1024 \
  --repetitions 1 --warmup 0 2>&1) || fail "bench kernel, declared flops: $out"
grep -Eq "^flops 4.29497e\+09, [0-9.]+ GFLOP/s" <<<"$out" || fail "declared flops: $out"
out=$("$kiln" bench kernel "$tmp/mm.kmod" --fn matmul_tiled --arg M=16 --arg N=16 --arg K=16 \
  --repetitions 1 --warmup 0 --flops 7 2>&1) || fail "bench kernel, --flops: $out"
grep -Eq "^flops 7, " <<<"$out" || fail "--flops over the declared work: $out"
# A malformed attribute is refused by compile, at the function; one whose
# value only the arguments make invalid, by bench kernel.
flops_kir() {
  sed "s|\"flops\": \"2 \* M \* N \* K\"|\"flops\": $1|" "$src/examples/matmul_tiled.kir" > "$tmp/flops.kir"
}
for bad in '"M + nope"@.nope. is not a scalar parameter \(they are: K, M, N\)' \
    '"M < N"@column 3: expected an operator or the end, found .<.' \
    '"i32(M)"@.i32. is not a scalar parameter' '"2 * "@column 5: expected a number' \
    '"1e999 * M"@expected a number \("1e999" is not one\)' '-5@is negative \(-5\)'; do
  flops_kir "${bad%%@*}"
  expect_error "flops attribute ${bad%%@*}" "attribute \"flops\" of matmul_tiled.*${bad#*@}" \
    "$kiln" compile "$tmp/flops.kir" -o "$tmp/flops.kmod"
done
flops_kir '"M - 2 * N"'
"$kiln" compile "$tmp/flops.kir" -o "$tmp/flops.kmod" >/dev/null || fail "compile M - 2 * N"
expect_error "flops attribute negative for the arguments" \
  "attribute \"flops\" of matmul_tiled .*is -48 for these arguments; it must be finite and >= 0" \
  "$kiln" bench kernel "$tmp/flops.kmod" --fn matmul_tiled --arg M=16 --arg N=32 --arg K=16 \
  --repetitions 1 --warmup 0
flops_kir '"4294967296 * max(M, N) / (K - -1.5e0)"'
"$kiln" compile "$tmp/flops.kir" -o "$tmp/flops.kmod" >/dev/null || fail "compile a large flops"
out=$("$kiln" bench kernel "$tmp/flops.kmod" --fn matmul_tiled --arg M=16 --arg N=32 --arg K=16 \
  --repetitions 1 --warmup 0 2>&1) || fail "bench kernel, a large flops: $out"
grep -Eq "^flops 7.85365e\+09, " <<<"$out" || fail "flops beyond 32 bits: $out"
# Nesting is bounded (no stack to exhaust) and the quote of a long
# attribute is cut; a NUL in it is escaped, not the end of the message.
flops_kir "\"$(printf '(%.0s' $(seq 300))M$(printf ')%.0s' $(seq 300))\""
expect_error "flops attribute nested 300 deep" \
  "attribute \"flops\" of matmul_tiled \(\"\(+ \.\.\. \(441 more characters\)\"\): column 257: the expression nests more than 256 deep" \
  "$kiln" compile "$tmp/flops.kir" -o "$tmp/flops.kmod"
flops_kir "\"$(printf -- '-%.0s' $(seq 100000))M\""
expect_error "flops attribute of 100000 minus signs" "column 257: the expression nests more than 256 deep" \
  "$kiln" compile "$tmp/flops.kir" -o "$tmp/flops.kmod"
flops_kir '"M@NUL@ * 2"'
python3 -c "import sys; d = open(sys.argv[1], 'rb').read(); open(sys.argv[1], 'wb').write(d.replace(b'@NUL@', bytes(1)))" "$tmp/flops.kir"
expect_error "a NUL in a flops attribute" 'column 2: expected an operator or the end, found .\\x00.$' \
  "$kiln" compile "$tmp/flops.kir" -o "$tmp/flops.kmod"
flops_kir '"0 - 0"'
"$kiln" compile "$tmp/flops.kir" -o "$tmp/flops.kmod" >/dev/null || fail "compile flops 0 - 0"
out=$("$kiln" bench kernel "$tmp/flops.kmod" --fn matmul_tiled --arg M=16 --arg N=16 --arg K=16 \
  --repetitions 1 --warmup 0 2>&1) || fail "bench kernel, flops 0 - 0: $out"
grep -q '^flops -' <<<"$out" && fail "flops of -0 printed with its sign: $out"
flops_kir '"(M - M) / (N - N)"'
"$kiln" compile "$tmp/flops.kir" -o "$tmp/flops.kmod" >/dev/null || fail "compile flops 0 / 0"
expect_error "flops attribute NaN for the arguments" "is nan for these arguments" \
  "$kiln" bench kernel "$tmp/flops.kmod" --fn matmul_tiled --arg M=16 --arg N=16 --arg K=16 \
  --repetitions 1 --warmup 0
out=$("$kiln" bench kernel "$tmp/v.kmod" --fn vector_add --arg n=64 --repetitions 1 --warmup 0 \
  --flops 1e-320 2>&1) || fail "--flops of a subnormal: $out"
expect_error "--flops 1e308" "the flop count 1e\+308 of 'vector_add' \(--flops\) is above 1e30" \
  "$kiln" bench kernel "$tmp/v.kmod" --fn vector_add --arg n=64 --repetitions 1 --warmup 0 \
  --flops 1e308
flops_kir '"1e40 * M"'
"$kiln" compile "$tmp/flops.kir" -o "$tmp/flops.kmod" >/dev/null || fail "compile flops 1e40 * M"
expect_error "a flops attribute above 1e30" "of 'matmul_tiled' \(its \"flops\" attribute\) is above 1e30" \
  "$kiln" bench kernel "$tmp/flops.kmod" --fn matmul_tiled --arg M=16 --arg N=16 --arg K=16 \
  --repetitions 1 --warmup 0
expect_error "bench dispatch --dispatches 2^32 - 1" \
  "flag --dispatches needs a decimal integer from 1 to 1000000, got '4294967295'" \
  "$kiln" bench dispatch --dispatches 4294967295
expect_error "-o ending in /" "'$tmp/v.kmod/' ends in '/': it names a folder, not a file" \
  "$kiln" compile "$src/examples/vector_add.kir" -o "$tmp/v.kmod/"
expect_error "-o inside a file" "folder '$tmp/v.kmod' is not a folder" \
  "$kiln" compile "$src/examples/vector_add.kir" -o "$tmp/v.kmod/x.kmod"
printf 'module {\nfn f(A: buffer<f32>[4]) {\n  for b in blockIdx.x(0, 2 - 6) {\n    A[0] = 1.0\n  }\n}\n}\n' \
  > "$tmp/negative_grid.kir"
expect_error "a negative constant grid" "line 3, column 3: .for b in blockIdx.x.0, 2 - 6..: blockIdx.x extent .2 - 6. is -4; a launch extent may be 0" \
  "$kiln" compile "$tmp/negative_grid.kir" --emit wgsl
expect_error "bench kernel without a scalar" "scalar parameter 'n'" \
  "$kiln" bench kernel "$tmp/v.kmod" --fn vector_add
expect_error "bench kernel of an unknown function" "no function 'nope'" \
  "$kiln" bench kernel "$tmp/v.kmod" --fn nope --arg n=10
expect_error "compile with nothing to make" "kiln compile .*casts.kir: say what to make: -o K.kmod \(a module\) or --emit wgsl\|ir" \
  "$kiln" compile "$src/tests/corpus/casts.kir"
expect_error "compile of two files" "kiln compile takes one input file; got 2: 'a.kir', 'b.kir'" \
  "$kiln" compile a.kir b.kir -o "$tmp/two.kmod"
expect_error "--print-after all in a list" "--print-after: 'all' stands alone \(every pass\), not in a list: 'unroll,all'" \
  "$kiln" compile "$src/tests/corpus/casts.kir" --emit wgsl --print-after unroll,all
expect_error "run without --fn" "kiln run .*v.kmod: --fn NAME is needed" "$kiln" run "$tmp/v.kmod"
expect_error "run of two modules" "kiln run takes one module file; got 2: 'a', 'b'" \
  "$kiln" run a b --fn vector_add
# A NaN prints as "nan", never "-nan": +inf and -inf summed have no mean.
h="{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
printf '\x93NUMPY\x01\x00\x76\x00%s%*s\n\x00\x00\x80\x7f\x00\x00\x80\xff' "$h" $((117 - ${#h})) "" \
  > "$tmp/infs.npy"
out=$("${run_v[@]}" --arg n=2 --input A="$tmp/infs.npy" --input B="$tmp/infs.npy" 2>&1) ||
  fail "run with infinite inputs: $out"
grep -q "C: \[2\] f32 min -inf max inf mean nan first \[inf, -inf\]" <<<"$out" ||
  fail "the summary of +inf and -inf: $out"
expect_error "bench kernel of an empty grid" "'vector_add' launches no workgroup with these arguments \(its grid is 0 x 1 blocks\): there is nothing to time" \
  "$kiln" bench kernel "$tmp/v.kmod" --fn vector_add --arg n=0
expect_error "bench kernel --repetitions 0" "--repetitions needs a decimal integer from 1 to 1000000, got '0'" \
  "$kiln" bench kernel "$tmp/v.kmod" --fn vector_add --arg n=10 --repetitions 0
expect_error "bench kernel --flops junk" "--flops needs a finite non-negative number" \
  "$kiln" bench kernel "$tmp/v.kmod" --fn vector_add --arg n=10 --flops lots
expect_error "bench kernel beyond the device" "more than the device's max" \
  "$kiln" bench kernel "$tmp/mm.kmod" --fn matmul_tiled --arg M=1000000 --arg N=96 --arg K=64

# A value-taking flag followed by another flag: the value was forgotten.
expect_error "--print-after followed by a flag" "flag --print-after needs a value, but the next argument is the flag '--emit' \(write --print-after=--emit" \
  "$kiln" compile "$src/tests/corpus/casts.kir" --print-after --emit wgsl
expect_error "--arg followed by a flag" "flag --arg needs a value, but the next argument is the flag '--check'" \
  "${run_v[@]}" --arg --check
expect_error "-o followed by a flag" "flag -o needs a value, but the next argument is the flag '--x.kmod' \(write --o=--x.kmod" \
  "$kiln" compile "$src/tests/corpus/casts.kir" -o --x.kmod
expect_error "--timeout below a nanosecond" "flag --timeout is 0 \(no limit\) or from 1e-9 \(a nanosecond\) to 1000000 seconds, got '1e-300'" \
  "${run_v[@]}" --arg n=10 --timeout 1e-300

# A buffer read only as aligned vec4s binds at least 16 bytes, however few
# elements the call gives it (n = 0 to 3 reach none of them).
"$kiln" compile "$src/tests/corpus/vec4_small_buffers.kir" -o "$tmp/vec4.kmod" > /dev/null ||
  fail "compile vec4_small_buffers.kir"
for n in 0 1 2 3 5 8; do
  out=$("$kiln" run "$tmp/vec4.kmod" --fn twice --arg n=$n --check 2>&1) ||
    fail "run of a vec4 kernel with n=$n: $out"
  grep -q "PASS" <<<"$out" || fail "run of a vec4 kernel with n=$n: $out"
done

# An empty grid dispatches nothing, however large its other extent.
cat > "$tmp/grid2d.kir" <<'KIR'
module {
fn g(A: buffer<f32>[m, n], m: i32, n: i32) {
  for by in blockIdx.y(0, m) {
    for bx in blockIdx.x(0, n) {
      A[by, bx] = 1.0
    }
  }
}
}
KIR
"$kiln" compile "$tmp/grid2d.kir" -o "$tmp/grid2d.kmod" > /dev/null || fail "compile grid2d.kir"
for mn in "m=70000 n=0" "m=0 n=70000"; do
  set -- $mn
  out=$("$kiln" run "$tmp/grid2d.kmod" --fn g --arg $1 --arg $2 --check 2>&1) ||
    fail "an empty grid ($mn): $out"
done

# More scalar parameters than a uniform block holds: refused by the compiler.
python3 - "$tmp/scalars.kir" <<'PY'
import sys
params = ", ".join(f"p{i}: i32" for i in range(16382))
open(sys.argv[1], "w").write("module {\nfn many(" + params + ", A: buffer<i32>[2]) {\n"
                             "  A[0] = p0 + p16381\n}\n}\n")
PY
expect_error "16382 scalar parameters" "kernel 'many': it has 16382 scalar parameters; a kernel takes at most 16381" \
  "$kiln" compile "$tmp/scalars.kir" -o "$tmp/scalars.kmod"

# --help anywhere wins over other mistakes on the line; short flags take =.
for line in "compile --help --emit" "run --help --bogus" "bench ops --help --small=1" \
  "run x.kmod --arg x --help" "bench kernel --arg --help" "bench --json --help" "help -h"; do
  out=$("$kiln" $line 2>&1) || fail "kiln $line exited non-zero: $out"
  grep -q "usage: kiln" <<<"$out" || fail "kiln $line printed no usage: $out"
done
out=$("$kiln" run --help 2>&1)
grep -q -- "--impl dawn|wgpu" <<<"$out" || fail "run --help names no device flags: $out"
out=$("$kiln" help help 2>&1) || fail "kiln help help: $out"
grep -q "usage: kiln <command>" <<<"$out" || fail "kiln help help printed: $out"
expect_error "help with two commands" "help takes one command name; found 'extra' after 'run'" \
  "$kiln" help run extra
expect_error "help bench with two subcommands" "help takes one command name and bench's subcommand; found 'x' after 'ops'" \
  "$kiln" help bench ops x
out=$("$kiln" help bench ops 2>&1) || fail "kiln help bench ops: $out"
grep -q "usage: kiln bench ops" <<<"$out" || fail "kiln help bench ops printed: $out"
"$kiln" compile "$src/examples/vector_add.kir" -o="$tmp/short.kmod" || fail "compile -o=FILE"
[ -s "$tmp/short.kmod" ] || fail "compile -o=FILE wrote nothing"
expect_error "--verbose twice" "flag --verbose is given more than once" "$kiln" info --verbose --verbose
expect_error "--tolerance without --check" "--tolerance applies to --check" \
  "$kiln" run "$tmp/v.kmod" --fn vector_add --arg n=10 --tolerance 5
expect_error "bench kernel without --fn" "kiln bench kernel $tmp/v.kmod: --fn NAME is needed" \
  "$kiln" bench kernel "$tmp/v.kmod" --arg n=10
expect_error "bench kernel of two modules" "kiln bench kernel takes one module file; got 2" \
  "$kiln" bench kernel "$tmp/v.kmod" "$tmp/v.kmod" --fn vector_add --arg n=10
expect_error "bench compile --megabytes --repetitions" "--repetitions does not apply to --megabytes" \
  "$kiln" bench compile --megabytes 0.01 --repetitions 3
expect_error "empty --filter" "--filter is empty" "$kiln" bench ops --small --filter ""
expect_error "--filter matching nothing at full size" "--filter 'nomatch' matches no workload" \
  "$kiln" bench ops --filter nomatch
expect_error "bench matmul --kir of another kernel" "vector_add.kir: the module has no function 'matmul_tiled'" \
  "$kiln" bench matmul --size 16 --kir "$src/examples/vector_add.kir"
# More timed dispatches than one query set holds (2048 each).
out=$("$kiln" bench kernel "$tmp/v.kmod" --fn vector_add --arg n=64 --repetitions 2049 \
  --warmup 0 2>&1) || fail "bench kernel --repetitions 2049: $out"
grep -q "2049 dispatches" <<<"$out" || fail "bench kernel --repetitions 2049: $out"
# A file replaced keeps its permissions.
cp "$tmp/v.kmod" "$tmp/private.kmod" && chmod 600 "$tmp/private.kmod"
"$kiln" compile "$src/examples/vector_add.kir" -o "$tmp/private.kmod" || fail "compile over a file"
[ "$(stat -c %a "$tmp/private.kmod")" = 600 ] || fail "compile -o widened a file's permissions"
# --compile-only prints a workload the device cannot run as skipped.
out=$("$kiln" bench ops --compile-only --backend opengl --filter "matmul f16" 2>&1) ||
  fail "bench ops --compile-only on OpenGL: $out"
grep -Eq "^matmul f16 .*SKIP: " <<<"$out" || fail "--compile-only shows a skip as compiled: $out"

echo "cli: all checks passed"
