#!/usr/bin/env bash
# kiln's main job on a fresh or set-up machine: set-up (scripts/setup.sh),
# then the devices kiln can use, then real kernels run and checked on the
# default device (a CPU WebGPU implementation where no GPU is present).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
echo "== kiln info"
build/tools/kiln/kiln info
echo
echo "== kiln demo"
build/tools/kiln/kiln demo "$@"
