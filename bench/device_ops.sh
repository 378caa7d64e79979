#!/usr/bin/env bash
# On a GPU machine (see device_run.sh for what .carry/ and .gl/ hold): the
# operator benchmark on both implementations, in the default and the
# trusted mode, then any extra `kiln bench ops` flag sets given as
# arguments after the output folder (each one quoted), on Dawn.
set -uo pipefail
out="${1:-${OUT:-device-results}}"
shift || true
mkdir -p "$out"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export KILN_DAWN_LIBRARY="$PWD/.carry/libwebgpu_wrapper.so"
export KILN_WGPU_LIBRARY="$PWD/.carry/libwgpu_native-release.so"
k=.carry/kiln
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
for impl in dawn wgpu; do
  for mode in "" --trusted; do
    name="ops-$impl${mode:+-trusted}"
    "$k" bench ops --impl "$impl" --backend vulkan $mode > "$out/$name.txt" 2>&1
    "$k" bench ops --impl "$impl" --backend vulkan $mode --json > "$out/$name.json" 2>&1
  done
done
for extra in "$@"; do
  echo "== dawn: kiln bench ops $extra" >> "$out/extra.txt"
  # shellcheck disable=SC2086
  "$k" bench ops --impl dawn --backend vulkan $extra >> "$out/extra.txt" 2>&1
done
cat "$out"/ops-*.txt "$out/extra.txt" 2>/dev/null
