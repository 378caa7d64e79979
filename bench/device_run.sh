#!/usr/bin/env bash
# On a GPU machine without a package registry: unpacks the Vulkan/GL loaders
# carried in .gl/, then runs every GPU suite on each implementation and the
# GPU benchmarks, writing logs to $1 (default: $OUT). Binaries and the two
# implementation libraries come from .carry/ (built on a CPU machine):
#   .carry/{kiln,kiln_hal_cts,kiln_runtime_test,kiln_differential_test,kiln_te_device_test,
#           kiln_ops_device_test,kiln_ops_more_device_test}
#   .carry/libwebgpu_wrapper.so  .carry/libwgpu_native-release.so
set -uo pipefail
out="${1:-${OUT:-device-results}}"
mkdir -p "$out"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export KILN_SOURCE_DIR="$PWD"
export KILN_DAWN_LIBRARY="$PWD/.carry/libwebgpu_wrapper.so"
export KILN_WGPU_LIBRARY="$PWD/.carry/libwgpu_native-release.so"
k=.carry/kiln
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
"$k" info > "$out/info.txt" 2>&1
for impl in dawn wgpu; do
  export KILN_IMPL=$impl KILN_BACKEND=vulkan
  for trusted in 0 1; do
    for t in kiln_hal_cts kiln_runtime_test kiln_differential_test kiln_te_device_test \
             kiln_ops_device_test kiln_ops_more_device_test; do
      echo "== $t on $impl, KILN_TRUSTED=$trusted" >> "$out/tests.txt"
      KILN_TRUSTED=$trusted ".carry/$t" --gtest_brief=1 >> "$out/tests.txt" 2>&1
      echo "rc=$?" >> "$out/tests.txt"
    done
  done
  "$k" bench dispatch >> "$out/bench-$impl.txt" 2>&1
  "$k" bench matmul --size 4096 --kir examples/matmul_tiled.kir >> "$out/bench-$impl.txt" 2>&1
  echo "-- trusted mode" >> "$out/bench-$impl.txt"
  "$k" bench matmul --size 4096 --kir examples/matmul_tiled.kir --trusted >> "$out/bench-$impl.txt" 2>&1
done
grep -E "^==|rc=|FAILED|PASSED|SKIPPED \]" "$out/tests.txt"
cat "$out"/bench-*.txt
