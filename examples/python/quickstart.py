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

# Python's operators run the same operators: (x - mean) / 2 as two kernels,
# a comparison as a bool tensor, and its sum as a count.
z = (x - kiln.ops.mean(x, axis=1, keepdims=True)) / 2
np.testing.assert_allclose(z.numpy(), (a - a.mean(1, keepdims=True)) / 2, rtol=1e-5, atol=1e-6)
positive = kiln.ops.sum(x > 0, axis=1)
assert (positive.numpy() == (a > 0).sum(1)).all()
print("positive values per row:", positive.numpy())


# kiln.fuse: an elementwise function of tensors as one kernel (traced once
# per shape; x is read once, and no intermediate tensor is made).
@kiln.fuse
def silu_clip(x, b):
    return (x * kiln.ops.sigmoid(x) + b).clip(-1.0, 1.0)


s = silu_clip(x, b)
np.testing.assert_allclose(s.numpy(), np.clip(a / (1 + np.exp(-a)) + b, -1, 1), rtol=1e-5,
                           atol=1e-6)
print("fused silu + bias, clipped:", s.shape)
print("quickstart OK")
