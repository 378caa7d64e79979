"""Times whole forward passes of the transformer decoder block of
examples/python/transformer_block.py through the Python package: the wall
time of each pass (from the upload of its input to the download of its
output) and of its phases (the upload, the operators' calls, the wait for
the device, the download), the WebGPU buffers each made and the kept buffers it reused, and
the GPU time of one more pass (the sum of its dispatches' timestamps, where
the device has timestamp queries), by kernel and for one block's dispatches
in order. PyTorch's eager forward of the same
block runs beside it where PyTorch and a CUDA GPU are present.

    python bench/forward_pass.py [--batch 8] [--seq 1024] [--width 768] [--heads 12]
                                 [--layers 12] [--passes 5] [--dtype float32|float16]
                                 [--heads-by-copies]

--heads-by-copies splits and merges the attention's heads with copies
(permute, slices) around kiln.ops.attention, where the block otherwise
reads them in place (kiln.ops.packed_attention).

KILN_IMPL, KILN_BACKEND, KILN_TRUSTED and KILN_BUFFER_POOL_MB choose the
device and its pool as for every kiln program.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "python"))
import kiln  # noqa: E402
from transformer_block import block, weights  # noqa: E402


def torch_forward_ms(x0, layers, heads, dtype, passes):
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    tdtype = torch.float32 if dtype == np.float32 else torch.float16
    on = [{k: torch.tensor(v, dtype=tdtype, device="cuda") for k, v in p.items()} for p in layers]
    d = x0.shape[-1]

    def forward(x):
        import torch.nn.functional as F
        b, s, _ = x.shape
        for p in on:
            h = F.layer_norm(x, (d,), p["g1"], p["b1"])
            q, k, v = (h @ p["w_qkv"] + p["b_qkv"]).view(b, s, 3, heads, -1).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + a.permute(0, 2, 1, 3).reshape(b, s, d) @ p["w_o"] + p["b_o"]
            h = F.layer_norm(x, (d,), p["g2"], p["b2"])
            m = F.gelu(h @ p["w_fc"] + p["b_fc"])
            x = x + m @ p["w_proj"] + p["b_proj"]
        return x
    times = []
    with torch.no_grad():
        for i in range(passes + 1):
            torch.cuda.synchronize()
            start = time.perf_counter()
            forward(torch.tensor(x0, dtype=tdtype, device="cuda")).cpu()
            if i:
                times.append((time.perf_counter() - start) * 1e3)
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in [("batch", 8), ("seq", 1024), ("width", 768), ("heads", 12),
                          ("layers", 12), ("passes", 5)]:
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--dtype", choices=["float32", "float16"], default="float32")
    p.add_argument("--heads-by-copies", action="store_true",
                   help="the attention's heads split and merged by copies")
    args = p.parse_args()
    if min(args.batch, args.seq, args.width, args.heads, args.layers, args.passes) < 1:
        p.error("every size must be at least 1")
    if args.width % args.heads or (args.width // args.heads) % 4 or args.width // args.heads > 128:
        p.error("--width / --heads (the head size) must be a multiple of 4 up to 128")
    dtype = np.dtype(args.dtype)
    rng = np.random.default_rng(0)
    layers = [{k: v.astype(dtype) for k, v in weights(rng, args.width).items()}
              for _ in range(args.layers)]
    x0 = rng.standard_normal((args.batch, args.seq, args.width)).astype(dtype)
    device = kiln.default_device()
    print("device:", device, "(heads by copies)" if args.heads_by_copies else "")
    if dtype == np.float16 and not device.has_feature("shader-f16"):
        raise SystemExit(f"{device} has no shader-f16: run with --dtype float32")
    on = [{k: kiln.tensor(v, device) for k, v in p.items()} for p in layers]

    def forward():
        """The pass's phases, ms: the input's upload, the blocks' calls
        (recording their kernels), the wait for the device, the download."""
        marks = [time.perf_counter()]
        x = kiln.tensor(x0, device)
        marks.append(time.perf_counter())
        for w in on:
            x = block(x, w, args.heads, packed=not args.heads_by_copies)
        marks.append(time.perf_counter())
        device.synchronize()
        marks.append(time.perf_counter())
        x.numpy()
        marks.append(time.perf_counter())
        return [(b - a) * 1e3 for a, b in zip(marks, marks[1:])]
    forward()  # compiles every kernel
    times = []
    for i in range(args.passes):
        before = device.memory_stats()
        phases = forward()
        times.append(sum(phases))
        after = device.memory_stats()
        print(f"pass {i}: {times[-1]:.2f} ms (upload {phases[0]:.2f}, calls {phases[1]:.2f}, "
              f"wait {phases[2]:.2f}, download {phases[3]:.2f}), buffers made "
              f"{after['buffers_created'] - before['buffers_created']}, kept buffers reused "
              f"{after['queue_ordered_reuses'] - before['queue_ordered_reuses']}")
    stats = device.memory_stats()
    print(f"kiln {args.dtype}: mean {statistics.mean(times):.2f} ms (min {min(times):.2f}) over "
          f"{args.passes} passes; peak allocated {stats['peak_allocated_bytes'] / 2**30:.2f} GiB, "
          f"pool capacity {stats['pool_capacity_bytes'] / 2**30:.2f} GiB")
    if device.has_feature("timestamp-query"):
        with kiln.profile(device, print=False) as prof:
            forward()
        print(f"kiln GPU time of one pass: {prof.total_ms:.2f} ms "
              f"({len(prof.timings)} dispatches)")
        by_kernel: dict = {}
        for t in prof.timings:
            ms, n = by_kernel.get(t.name, (0.0, 0))
            by_kernel[t.name] = (ms + t.gpu_ms, n + 1)
        for name, (ms, n) in sorted(by_kernel.items(), key=lambda kv: -kv[1][0]):
            print(f"  {name}: {ms:.2f} ms in {n} dispatches")
        # (Every block repeats the first's dispatches, in the same order.)
        per_block = len(prof.timings) // args.layers
        print("  one block, in order: " + ", ".join(
            f"{t.name} {t.gpu_ms:.3f}" for t in prof.timings[:per_block]))
    del on
    device.empty_cache()  # kiln's memory back before PyTorch's run
    torch_times = torch_forward_ms(x0, layers, args.heads, dtype, args.passes)
    if torch_times:
        print(f"PyTorch eager {args.dtype}: mean {statistics.mean(torch_times):.2f} ms "
              f"(min {min(torch_times):.2f})")


if __name__ == "__main__":
    main()
