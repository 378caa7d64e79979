#!/usr/bin/env bash
# Installs kiln from BUILD_DIR into a temporary prefix, builds the consumer
# project in tests/consumer against the installed CMake package
# (find_package(kiln), kiln::runtime), and runs it on a module compiled by
# the kiln command. Usage: consumer_test.sh BUILD_DIR KILN SOURCE_DIR
set -euo pipefail
build=$1
kiln=$2
src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
[ -f "$tmp/prefix/lib/cmake/kiln/kilnConfig.cmake" ] || { echo "FAIL: no kilnConfig.cmake"; exit 1; }
cmake -S "$src/tests/consumer" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
"$kiln" compile "$src/examples/vector_add.kir" -o "$tmp/v.kmod" >/dev/null
"$tmp/build/kiln_consumer" "$tmp/v.kmod"
# The runtime stands without the compiler: a program that only loads and
# runs modules links none of the IR, its parser and interpreter, the passes
# or the code generator.
linked=$(nm -C "$tmp/build/kiln_consumer" | grep -E " kiln::(ir|interp|transform)::| kiln::codegen::(GenerateWgsl|CompileModule|CompileFunction|FunctionEmitter|KernelGenerator)" | head -5 || true)
[ -z "$linked" ] || { echo "FAIL: kiln::runtime pulled compiler code into the program:"; echo "$linked"; exit 1; }
n_runtime=$(nm -C "$tmp/build/kiln_consumer" | grep -c " kiln::runtime::")
[ "$n_runtime" -gt 0 ] || { echo "FAIL: the symbol check found no runtime symbols at all"; exit 1; }
echo "consumer: links the runtime ($n_runtime symbols) and no compiler code"
