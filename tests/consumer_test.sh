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
