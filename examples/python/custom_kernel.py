"""A matmul written as a tensor expression, scheduled by hand, built into a
kernel and checked against numpy."""
import sys

import numpy as np

import kiln
from kiln import te

M, N, K = (int(v) for v in sys.argv[1:4]) if len(sys.argv) > 3 else (100, 77, 33)

A = te.placeholder((M, K), "float32", name="A")
B = te.placeholder((K, N), "float32", name="B")
k = te.reduce_axis(K, "k")
C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], [k]), name="C")

s = te.create_schedule(C)
i, j = s[C].axis
io, ii = s[C].split(i, 8)
jo, ji = s[C].split(j, 16)
s[C].reorder(io, jo, ii, ji)
s[C].bind(io, "blockIdx.y")
s[C].bind(jo, "blockIdx.x")
s[C].bind(ii, "threadIdx.y")
s[C].bind(ji, "threadIdx.x")
print("schedule:\n" + str(s))

kernel = kiln.build(s, [C], [A, B], "matmul")
print("kernel:", kernel, "workgroup", kernel.workgroup_size)

rng = np.random.default_rng(1)
a = rng.standard_normal((M, K)).astype(np.float32)
b = rng.standard_normal((K, N)).astype(np.float32)
c = kiln.empty((M, N), "float32")
kernel(kiln.tensor(a), kiln.tensor(b), c)
err = float(np.abs(c.numpy() - a @ b).max())
print(f"{M}x{N}x{K}: max |C - A @ B| = {err:.2e}")
assert err < 1e-3
print("custom kernel OK")
