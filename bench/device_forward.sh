#!/usr/bin/env bash
# On a GPU machine without a package registry: bench/forward_pass.py (GPT-2
# small's sizes) on Dawn and wgpu-native over Vulkan, float32 and float16,
# PyTorch's eager forward beside it where the machine has it. Logs go to $1
# (default: $OUT). Carried from a CPU machine:
#   .gl/*.deb                     the Vulkan/GL loaders (as for bench/device_run.sh)
#   .carry/libwebgpu_wrapper.so  .carry/libwgpu_native-release.so
#   .carry/py/kiln                the Python package built for the GPU machine's
#                                 Python, e.g. for Python 3.12:
#     python3.12 -m venv /tmp/v && /tmp/v/bin/pip install nanobind==3.1.0 numpy
#     cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_PYTHON=ON \
#       -DPython_EXECUTABLE=/tmp/v/bin/python -DBUILD_TESTING=OFF
#     cmake --build /tmp/b --target _kiln && cp -rL /tmp/b/python/kiln .carry/py/
#   numpy (and, for the comparison, PyTorch with CUDA) on the GPU machine;
#   $PYTHON (default python3) the Python the package was built for.
# Extra arguments after $1 go to forward_pass.py (e.g. --layers 4). Each of
# the four runs may take up to 120 s.
set -uo pipefail
shopt -s nullglob
out="${1:-${OUT:-device-results}}"
shift || true
mkdir -p "$out"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES="$icd"
export KILN_DAWN_LIBRARY="$PWD/.carry/libwebgpu_wrapper.so"
export KILN_WGPU_LIBRARY="$PWD/.carry/libwgpu_native-release.so"
export PYTHONPATH="$PWD/.carry/py" PYTHONUNBUFFERED=1 KILN_BACKEND=vulkan
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
for impl in dawn wgpu; do
  for dtype in float32 float16; do
    echo "== $impl $dtype" | tee -a "$out/forward.txt"
    KILN_IMPL=$impl timeout 120 "${PYTHON:-python3}" bench/forward_pass.py --dtype "$dtype" "$@" \
      >> "$out/forward.txt" 2>&1
    echo "rc=$?" >> "$out/forward.txt"
  done
done
cat "$out/gpu.txt" "$out/forward.txt"
