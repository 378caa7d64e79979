#!/usr/bin/env bash
# kiln's main job on a fresh or set-up machine: set-up (scripts/setup.sh),
# then the devices kiln can use, real kernels through the HAL checked on the
# default device (a CPU WebGPU implementation where no GPU is present), and
# every example in examples/ compiled from kiln IR, run on the device and
# checked against the interpreter, and a matmul written as a tensor
# expression (examples/te) compiled, run and checked the same way, and a
# library operator called from C++ (examples/ops), checked on the host.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
kiln=build/tools/kiln/kiln

echo "== kiln info"
"$kiln" info
echo
echo "== kiln demo"
"$kiln" demo "$@"
echo
echo "== examples: kiln compile, then kiln run --check"
mkdir -p build/examples
failed=0
for kir in examples/*.kir; do
  kmod="build/examples/$(basename "${kir%.kir}").kmod"
  "$kiln" compile "$kir" -o "$kmod"
  # Each "// fn: NAME" header line is followed by its "// args: a=1 b=2" line.
  mapfile -t fns < <(sed -n 's|^// fn: *||p' "$kir")
  mapfile -t argl < <(sed -n 's|^// args: *||p' "$kir")
  for i in "${!fns[@]}"; do
    args=()
    for kv in ${argl[$i]:-}; do args+=(--arg "$kv"); done
    echo "-- $kir: ${fns[$i]} ${argl[$i]:-}"
    "$kiln" run "$kmod" --fn "${fns[$i]}" "${args[@]}" --check "$@" || failed=1
  done
done
echo
echo "== a matmul written as a tensor expression and scheduled by hand (examples/te)"
build/examples/te/kiln_example_te_matmul 100 77 33 || failed=1
echo
echo "== a library operator from C++: matmul + bias + gelu (examples/ops)"
build/examples/ops/kiln_example_ops_matmul 100 77 33 || failed=1
echo
echo "== the operator library at small shapes, each checked against its reference (kiln bench ops --small)"
"$kiln" bench ops --small "$@" || failed=1
echo
echo "== Python: numpy in, operators on the device, numpy out (examples/python/quickstart.py)"
PYTHONPATH=build/python .venv/bin/python examples/python/quickstart.py || failed=1
echo
echo "== Python: a transformer decoder block from the library's operators (examples/python/transformer_block.py)"
PYTHONPATH=build/python .venv/bin/python examples/python/transformer_block.py || failed=1
[ "$failed" = 0 ] && echo "all examples PASS" || { echo "some examples FAILED"; exit 1; }
