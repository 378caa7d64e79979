"""Tensor expressions: define what a kernel computes element by element,
schedule its loops, and build it with kiln.build.

    from kiln import te
    n = 1000
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]) * 2.0, name="B")
    s = te.create_schedule(B)
    bx, tx = s[B].split(s[B].axis[0], 64)
    s[B].bind(bx, "blockIdx.x")
    s[B].bind(tx, "threadIdx.x")
    print(s)                       # B.split(i, 64) ...
    kernel = kiln.build(s, [B], [A], "exp2x")

Expressions (te.Expr) take Python's operators; a Python number takes the
other operand's type. Reductions: te.sum / te.max / te.min / te.prod
(and te.device_max / te.device_min, which leave NaN to the device) over
te.reduce_axis axes (te.sum(A[i, k], k), or axis=k as in TVM), inside a
compute body. Intrinsics: te.exp, te.log,
te.sqrt, te.pow, te.fma, ...; te.maximum / te.minimum, te.select, te.cast.
"""

from __future__ import annotations

from ._kiln.te import *  # noqa: F401,F403
from ._kiln.te import (  # noqa: F401
    Expr,
    IterVar,
    Schedule,
    Stage,
    Tensor,
    compute,
    create_schedule,
    lower,
    lower_kernels,
    placeholder,
    reduce_axis,
    size_var,
)
