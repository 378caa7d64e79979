"""GPU time of each dispatch, from timestamp queries."""
import numpy as np

import kiln

device = kiln.default_device()
if not device.has_feature("timestamp-query"):
    raise SystemExit(f"{device} has no timestamp-query: nothing to profile")

x = kiln.tensor(np.random.default_rng(2).standard_normal((256, 1024)).astype(np.float32))
kiln.ops.softmax(x).numpy()  # compile and warm up outside the profile

with kiln.profile() as p:    # prints a table at the end of the block
    y = kiln.ops.softmax(x)
    z = kiln.ops.elementwise_chain(y, [("mul", 2.0), "tanh", ("add", x)])
    s = kiln.ops.sum(z)
print(f"{len(p.timings)} dispatches, {p.total_ms:.3f} ms of GPU time")
