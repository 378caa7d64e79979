"""kiln from Python: numpy in, operators on the GPU, numpy out."""
import math

import numpy as np

import kiln

print("device:", kiln.default_device())
rng = np.random.default_rng(0)
a = rng.standard_normal((4, 1000)).astype(np.float32)
b = np.linspace(-1, 1, 1000, dtype=np.float32)

x = kiln.tensor(a)                      # copied to the default device
y = kiln.ops.gelu(kiln.ops.add(x, b))   # a broadcasting add, then gelu: queued, not waited for
p = kiln.ops.softmax(y)                 # softmax over the last axis
out = p.numpy()                         # waits for the work and copies the result back

erf = np.vectorize(math.erf)
ref_y = (a + b) / 2 * (1 + erf((a + b) / math.sqrt(2)))
ref = np.exp(ref_y - ref_y.max(1, keepdims=True))
ref /= ref.sum(1, keepdims=True)
print("max |kiln - numpy|:", float(np.abs(out - ref).max()))
assert np.allclose(out, ref, rtol=1e-4, atol=1e-6)

w = rng.standard_normal((1000, 64)).astype(np.float32) / 32
h = kiln.ops.matmul(x, w, bias=np.ones(64, np.float32), activation="relu")  # one fused kernel
top = kiln.ops.argmax(h, axis=-1)       # int32 index of each row's largest value
ref_h = np.maximum(a @ w + 1, 0)
assert np.allclose(h.numpy(), ref_h, rtol=1e-4, atol=1e-4)
print("matmul + bias + relu, argmax:", top.numpy(), "numpy:", ref_h.argmax(-1))
print("quickstart OK")
