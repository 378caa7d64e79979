#!/usr/bin/env bash
# Runs every kiln test on a fresh or set-up machine:
#   1. set-up (scripts/setup.sh): dependencies, the release build, the
#      address+undefined sanitizer build and the fuzz targets;
#   2. the unit tests and the HAL conformance suite, once per WebGPU
#      device (Dawn on Vulkan and on OpenGL, wgpu-native on Vulkan), in the
#      release build; then the Python package's tests (pytest, per device),
#      including its wheel built and installed into a clean venv;
#   3. in the sanitizer build, the unit tests and the device suites (each
#      device where the host code depends on it; see that phase);
#   4. each parser fuzzer for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's heading says how long the run has taken so far.
phase() { echo "== $1 (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"; }

KILN_SANITIZE=1 KILN_FUZZ=1 scripts/setup.sh

# Mesa's drivers want a runtime directory; CI machines may not set one.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

# Tests run in parallel, one per core: most of their time is the CPU
# drivers compiling kernels, one thread each.
jobs="$(nproc)"

phase "tests (release build)"
ctest --test-dir build --output-on-failure -j "$jobs"

phase "Python package (pytest on Dawn/Vulkan, Dawn/OpenGL and wgpu-native/Vulkan; the wheel in a clean venv)"
# (The wheel is built with the release build's compilers, through ccache.)
CC=gcc CXX=g++ CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache \
  KILN_TEST_WHEEL=1 PYTHONPATH="$PWD/build/python" .venv/bin/python -m pytest -q -rs python/tests

phase "tests (address+undefined sanitizers)"
# Leaks inside the WebGPU implementations and Mesa are theirs, not kiln's.
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The sanitizers check kiln's host code. Every unit test, and the HAL
# conformance, runtime and differential suites and the examples on every
# device, run under them; the operator, TE and CLI suites, whose host code
# does not depend on the implementation (their time is the drivers
# compiling kernels), run on Dawn on Vulkan (core: f16, subgroups) only: the
# rules' host code for other limits (compatibility mode, no subgroups) runs
# under the sanitizers in kiln_ops_targets_test, on the interpreter. The
# trusted-mode variants' host code is the default mode's.
not_sanitized='^((ops|ops_more|te|kiln_cli|kiln_bench_ops_small)[.](wgpu|dawn_gl)|.*_trusted)$'
# The Vulkan loader unloads lavapipe when an implementation's instance goes
# away, so lavapipe's own leaks come back with no module to suppress them by:
# the suites on Vulkan run with address and undefined checks but no leak check.
ctest --test-dir build-asan --output-on-failure -j "$jobs" --label-exclude backend_vulkan \
  -E "$not_sanitized"
ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" --label-regex backend_vulkan \
  -E "$not_sanitized"

phase "fuzzing (bounded)"
for fuzzer in build-asan/src/kiln/*/*_fuzzer; do
  [ -x "$fuzzer" ] || continue
  corpus="$(dirname "$fuzzer")/corpus"
  mkdir -p "$corpus"
  seeds="src/kiln/$(basename "$(dirname "$fuzzer")")/testdata tests/corpus examples"
  echo "-- $(basename "$fuzzer") for ${KILN_FUZZ_SECONDS:-30} s"
  "$fuzzer" -max_total_time="${KILN_FUZZ_SECONDS:-30}" -print_final_stats=0 "$corpus" $seeds 2>&1 | tail -n 3
done
phase "all tests passed"
