"""A register-tiled matmul scheduled entirely with tensor-expression
primitives, built into a kernel and checked against numpy.

    python te_tiled_matmul.py [N] [--kir FILE]

N (default 256) must be a multiple of 128. The schedule: a 128 x 128 tile
of C per workgroup of 16 x 16 threads, 8 x 8 of it per thread as 2 x 2
groups of 4 x 4 elements 64 apart (so a warp's vector reads of the shared
tiles are contiguous; TE stores these strided registers compactly),
accumulated in registers (cache_write into local memory, computed at the thread, its
loops unrolled); A transposed into shared memory by its own stage (AT, read
from A four elements along k at a time) and B copied into shared memory
(cache_read), both at each step of 16 along k by all the threads, one
step ahead (copy_ahead: the next step's tiles copied after this step's
math); each
thread's column of AT and row of B for one k-step copied into registers as
4-lane vectors (cache_read into local, vectorized); C stored from the
registers four elements at a time (vectorized). With --kir the lowered
kernel is written as a kiln IR module, for `kiln compile` and `kiln bench
kernel` (BENCHMARKS.md has its H200 figures at N = 4096).
"""
import sys

import numpy as np

import kiln
from kiln import te

args = [a for a in sys.argv[1:] if not a.startswith("--")]
kir = sys.argv[sys.argv.index("--kir") + 1] if "--kir" in sys.argv else None
if kir in args:
    args.remove(kir)
N = int(args[0]) if args else 256
TILE, PER, K_TILE = 128, 8, 16
if N % TILE:
    sys.exit(f"N must be a multiple of {TILE}, got {N}")

A = te.placeholder((N, N), "float32", name="A")
B = te.placeholder((N, N), "float32", name="B")
k = te.reduce_axis(N, "k")
AT = te.compute((N, N), lambda kk, m: A[m, kk], name="AT")
C = te.compute((N, N), lambda i, j: te.sum(AT[k, i] * B[k, j], k), name="C")

s = te.create_schedule(C)
s[AT].set_scope("shared")
Bs = s.cache_read(B, "shared", [C])
Cl = s.cache_write(C, "local")
Al = s.cache_read(AT, "local", [Cl])
Bl = s.cache_read(Bs, "local", [Cl])

c = s[C]
xo, yo, xi, yi = c.tile(c.axis[0], c.axis[1], TILE, TILE)
# x = group * 64 + thread * 4 + lane, for rows and columns alike.
xq, tii = c.split(xi, 4)
tr, tio = c.split(xq, TILE // PER)
yq, tji = c.split(yi, 4)
tc, tjo = c.split(yq, TILE // PER)
c.reorder(tio, tjo, tr, tii, tc, tji)
c.bind(xo, "blockIdx.y")
c.bind(yo, "blockIdx.x")
c.bind(tio, "threadIdx.y")
c.bind(tjo, "threadIdx.x")
c.unroll(tr)
c.unroll(tii)
c.unroll(tc)
c.vectorize(tji)  # C stored as 4-lane vectors

acc = s[Cl]
acc.compute_at(c, tjo)
ko, ki = acc.split(acc.reduce_axis[0], K_TILE)
acc.reorder(ko, ki, acc.axis[0], acc.axis[1])
acc.unroll(ki)
acc.unroll(acc.axis[0])
acc.unroll(acc.axis[1])

side = TILE // PER
for shared in (AT, Bs):
    st = s[shared]
    st.compute_at(acc, ko)
    if shared is AT:
        st.reorder(st.axis[1], st.axis[0])  # m outer, k inner: A read along k
        fused = st.fuse(st.axis[1], st.axis[0])
    else:
        fused = st.fuse(st.axis[0], st.axis[1])
    fused, lanes = st.split(fused, 4)
    _, inner = st.split(fused, side * side)
    ty, tx = st.split(inner, side)
    st.bind(ty, "threadIdx.y")
    st.bind(tx, "threadIdx.x")
    st.vectorize(lanes)
    st.copy_ahead()  # the next step's tile copied after this step's math
for fragment in (Al, Bl):
    st = s[fragment]
    st.compute_at(acc, ki)
    outer, lanes = st.split(st.axis[1], 4)
    st.unroll(st.axis[0])
    st.unroll(outer)
    st.vectorize(lanes)
print("schedule:\n" + str(s))

if kir:
    with open(kir, "w") as f:
        f.write("module {\n" + str(te.lower(s, [C], [A, B], "te_tiled_matmul")) + "\n}\n")
    print("wrote", kir)

kernel = kiln.build(s, [C], [A, B], "te_tiled_matmul")
rng = np.random.default_rng(1)
a = rng.uniform(-1, 1, (N, N)).astype(np.float32)
b = rng.uniform(-1, 1, (N, N)).astype(np.float32)
out = kiln.tensor(np.full((N, N), np.nan, np.float32))
kernel(kiln.tensor(a), kiln.tensor(b), out)
want = a.astype(np.float64) @ b
err = float(np.abs(out.numpy() - want).max())
print(f"{N}x{N}x{N}: max |C - A @ B| = {err:.2e}")
assert err < 1e-4 * N, err
print("tiled matmul OK")
