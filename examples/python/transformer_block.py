"""A decoder block of a GPT-style transformer from kiln's operators, no loops
written: layer norm, the query/key/value projection, causal fused attention
over the heads, the output projection with its residual, and the MLP with
gelu; checked against numpy in float64.

    python transformer_block.py [--batch 2] [--seq 128] [--width 256] [--heads 4] [--layers 2]
                                [--dtype float32|float16]

In float16 (where the device has shader-f16) the tensors are f16; the
matmuls accumulate, and the norms, softmax and gelu compute, in f32.
"""
import argparse
import math
import time

import numpy as np

import kiln
import kiln.ops as K


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--width", type=int, default=256, help="model width, heads x head size")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2, help="blocks, each with its own weights")
    p.add_argument("--dtype", choices=["float32", "float16"], default="float32")
    args = p.parse_args()
    if min(args.batch, args.seq, args.width, args.heads, args.layers) < 1:
        p.error("every size must be at least 1")
    if args.width % args.heads or (args.width // args.heads) % 4 or args.width // args.heads > 128:
        p.error("--width / --heads (the head size) must be a multiple of 4 up to 128")
    return args


def weights(rng: np.random.Generator, d: int) -> dict:
    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / math.sqrt(shape[0])).astype(np.float32)

    def v(n: int, mean: float = 0.0) -> np.ndarray:
        return (mean + 0.1 * rng.standard_normal(n)).astype(np.float32)
    return dict(g1=v(d, 1), b1=v(d), w_qkv=w(d, 3 * d), b_qkv=v(3 * d), w_o=w(d, d), b_o=v(d),
                g2=v(d, 1), b2=v(d), w_fc=w(d, 4 * d), b_fc=v(4 * d), w_proj=w(4 * d, d),
                b_proj=v(d))


def block(x: kiln.Tensor, p: dict, heads: int, packed: bool = True) -> kiln.Tensor:
    """One block on the device: x is [batch, seq, width]. The attention reads
    the heads where the q/k/v projection wrote them (packed_attention);
    packed=False splits and merges the heads with copies instead."""
    b, s, d = x.shape
    h = K.layer_norm(x, p["g1"], p["b1"])
    qkv = K.matmul(h, p["w_qkv"], bias=p["b_qkv"])                   # [b, s, 3d]
    if packed:
        a = K.packed_attention(qkv, heads, causal=True)              # [b, s, d]
    else:
        qkv = K.permute(K.reshape(qkv, (b, s, 3, heads, d // heads)), (2, 0, 3, 1, 4))
        a = K.attention(qkv[0], qkv[1], qkv[2], causal=True)         # [b, heads, s, d/heads]
        a = K.reshape(K.permute(a, (0, 2, 1, 3)), (b, s, d))
    x = K.matmul(a, p["w_o"], bias=p["b_o"], residual=x)             # bias and residual fused
    h = K.layer_norm(x, p["g2"], p["b2"])
    m = K.matmul(h, p["w_fc"], bias=p["b_fc"], activation="gelu")
    return K.matmul(m, p["w_proj"], bias=p["b_proj"], residual=x)


def block_reference(x: np.ndarray, p: dict, heads: int) -> np.ndarray:
    """The same block in numpy, float64."""
    q = {k: v.astype(np.float64) for k, v in p.items()}
    b, s, d = x.shape

    def norm(x: np.ndarray, g: np.ndarray, beta: np.ndarray) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + beta

    erf = np.vectorize(math.erf)
    qkv = (norm(x, q["g1"], q["b1"]) @ q["w_qkv"] + q["b_qkv"]).reshape(b, s, 3, heads, -1)
    qh, kh, vh = qkv.transpose(2, 0, 3, 1, 4)
    scores = qh @ kh.swapaxes(-1, -2) / math.sqrt(d // heads)
    scores = np.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    a = (probs @ vh).transpose(0, 2, 1, 3).reshape(b, s, d)
    x = x + a @ q["w_o"] + q["b_o"]
    f = norm(x, q["g2"], q["b2"]) @ q["w_fc"] + q["b_fc"]
    return x + (f / 2 * (1 + erf(f / math.sqrt(2)))) @ q["w_proj"] + q["b_proj"]


def main() -> None:
    args = parse()
    rng = np.random.default_rng(0)
    layers = [weights(rng, args.width) for _ in range(args.layers)]
    x0 = rng.standard_normal((args.batch, args.seq, args.width)).astype(np.float32)
    device = kiln.default_device()
    print("device:", device)
    dtype = np.dtype(args.dtype)
    if dtype == np.float16 and not device.has_feature("shader-f16"):
        raise SystemExit(f"{device} has no shader-f16: run with --dtype float32")

    # The weights go to the device once; numpy arrays passed to an operator
    # would be copied on every call.
    on_device = [{k: kiln.tensor(v.astype(dtype), device) for k, v in p.items()} for p in layers]
    x = kiln.tensor(x0.astype(dtype), device)
    for p in on_device:
        x = block(x, p, args.heads)
    out = x.numpy()

    # The reference starts from the same (rounded) inputs and weights.
    ref = x0.astype(dtype).astype(np.float64)
    for p in layers:
        ref = block_reference(ref, {k: v.astype(dtype) for k, v in p.items()}, args.heads)
    err = float(np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max())
    print(f"{args.layers} blocks, batch {args.batch}, seq {args.seq}, width {args.width}, "
          f"{args.heads} heads, {args.dtype}: max |kiln - numpy| / max |numpy| = {err:.2e}")
    assert np.isfinite(out).all() and err < (1e-4 if dtype == np.float32 else 1e-2), err

    # Queued work: time a few forward passes end to end (the first call of
    # each operator and shape compiled its kernel above).
    runs = 3
    start = time.perf_counter()
    for _ in range(runs):
        x = kiln.tensor(x0.astype(dtype), device)
        for p in on_device:
            x = block(x, p, args.heads)
        x.numpy()
    seconds = (time.perf_counter() - start) / runs
    tokens = args.batch * args.seq
    print(f"forward pass: {seconds * 1e3:.1f} ms, {tokens / seconds:.0f} tokens/s")
    print("transformer block OK")


if __name__ == "__main__":
    main()
