#!/usr/bin/env bash
# Installs everything kiln needs on a fresh Debian 12 machine, then builds it.
#   scripts/setup.sh            release build in build/
#   KILN_SANITIZE=1 scripts/setup.sh   also the address+undefined build in build-asan/
#   KILN_FUZZ=1 scripts/setup.sh       also the fuzzers, in build-asan/
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian 12 (bookworm) packages: the toolchain (ccache: the Python wheel's
# build reuses the release build's objects), GoogleTest, the Vulkan and GL
# loaders, and clang for the sanitizer build, the fuzzer and the
# format/tidy checks.
APT_PACKAGES=(
  cmake ninja-build g++ pkg-config ccache
  libgtest-dev
  libvulkan1 libegl1 libgles2
  clang-14 libclang-rt-14-dev clang-format-14 clang-tidy-14
)
# Mesa's CPU drivers, lavapipe (Vulkan) and llvmpipe (GL), from
# bookworm-backports (Mesa 25): Dawn's Vulkan back end refuses Mesa 22.3's
# lavapipe, and Mesa 25's gives both implementations shader-f16, and Dawn
# subgroups, on the CPU.
MESA_BACKPORTS_RELEASE=bookworm-backports
MESA_PACKAGES=(mesa-vulkan-drivers libgl1-mesa-dri libegl-mesa0 libglx-mesa0)
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
mesa_missing=()
for p in "${MESA_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status} ${Version}' "$p" 2>/dev/null | grep -q "install ok installed .*bpo12" ||
    mesa_missing+=("$p")
done
# Node.js and Python may come from elsewhere than Debian; take Debian's only
# when they are missing.
command -v npm >/dev/null || missing+=(nodejs npm)
python3 -m venv --help >/dev/null 2>&1 || missing+=(python3-venv)
# The Python extension compiles against the interpreter's headers.
python3 -c 'import os, sysconfig; exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
  missing+=(python3-dev)
if ((${#missing[@]} + ${#mesa_missing[@]})); then
  sources=/etc/apt/sources.list.d/kiln-backports.sources
  if ((${#mesa_missing[@]})) && ! grep -rqs "$MESA_BACKPORTS_RELEASE" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "setup: adding Debian's $MESA_BACKPORTS_RELEASE suite to apt's sources ($sources)"
    printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" \
      "Suites: $MESA_BACKPORTS_RELEASE" "Components: main" \
      "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" | $SUDO tee "$sources" >/dev/null
  fi
  echo "setup: installing Debian packages: ${missing[*]} ${mesa_missing[*]}"
  $SUDO apt-get update -qq
  if ((${#missing[@]})); then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if ((${#mesa_missing[@]})); then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      -t "$MESA_BACKPORTS_RELEASE" "${MESA_PACKAGES[@]}" >/dev/null
  fi
fi

# Dawn, from npm (version pinned in package.json, integrity in package-lock.json).
if [ ! -f node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so ]; then
  echo "setup: installing Dawn (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
fi

# wgpu-native and webgpu.h, from PyPI (pinned with its hash in requirements.txt).
if ! ls .venv/lib/python3*/site-packages/wgpu/resources/webgpu.h >/dev/null 2>&1; then
  echo "setup: installing wgpu-native (pip)"
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --require-hashes -r requirements.txt
fi

# The Python package's build and test dependencies (nanobind,
# scikit-build-core, numpy, pytest; pinned with their hashes in
# python/requirements.txt), downloaded into .whl/ and installed from there:
# the wheel test installs numpy into a clean venv from .whl/ without the
# network.
if ! .venv/bin/python -c "import nanobind, scikit_build_core, numpy, pytest" 2>/dev/null ||
  ! ls .whl/numpy-*.whl >/dev/null 2>&1; then
  echo "setup: installing the Python package's build and test dependencies (pip)"
  .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --require-hashes -d .whl -r python/requirements.txt
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-index --find-links .whl \
    --no-deps --require-hashes -r python/requirements.txt
fi

build() {  # build DIR "TARGET..." [cmake args...]   ("all" for everything)
  local dir=$1 targets=$2; shift 2
  # Configure a new folder, and afresh when the arguments it was configured
  # with (kept beside its cache) were others: a compiler is only chosen then.
  local stamp="$dir/kiln-setup-arguments"
  if [ ! -f "$dir/build.ninja" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$*" ]; then
    cmake --fresh -S . -B "$dir" -G Ninja "$@" >/dev/null
    printf '%s' "$*" >"$stamp"
  fi
  echo "setup: building $dir"
  # shellcheck disable=SC2086
  cmake --build "$dir" --target $targets -- -j"$(nproc)"
}

# Optimised, without debug info: the tests and benchmarks need speed, not
# symbols. With the Python extension (build/python: PYTHONPATH=build/python).
# Through ccache, with the compilers and flags the wheel's build takes
# (python/pyproject.toml; scripts/test.sh sets CC and CXX for it), so that
# the wheel test compiles almost nothing again.
build build all -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DKILN_PYTHON=ON \
  -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DCMAKE_C_COMPILER_LAUNCHER=ccache \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
# The address+undefined sanitizer build, with clang (it builds this tree in
# 60% of g++'s time), holds what the tests run (not the benchmarks) and the
# fuzzers. Line tables only (-g1): the sanitizers' reports need file and
# line, and full debug info would make the longest build a third slower.
# The tests' own sources are compiled at -O0 (kiln's libraries at -O1):
# they are half of the build and little of the time the tests take.
sanitized=()
if [ "${KILN_SANITIZE:-0}" = 1 ]; then
  sanitized+=(kiln kiln_support_test kiln_ir_test kiln_interp_test kiln_transform_test
    kiln_codegen_test kiln_hal_cts kiln_runtime_test kiln_differential_test kiln_check_test
    kiln_te_test kiln_te_schedule_test kiln_te_fuzz_test kiln_te_device_test kiln_ops_test
    kiln_ops_device_test kiln_ops_more_test kiln_ops_more_device_test kiln_ops_targets_test
    kiln_example_te_matmul kiln_example_ops_matmul)
fi
if [ "${KILN_FUZZ:-0}" = 1 ]; then sanitized+=(kiln_ir_parser_fuzzer); fi
if ((${#sanitized[@]})); then
  build build-asan "${sanitized[*]}" -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON \
    -DKILN_BUILD_FUZZERS=ON -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_CXX_FLAGS=-O1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DKILN_TEST_CXX_FLAGS=-O0
fi
