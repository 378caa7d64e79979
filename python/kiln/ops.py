"""The operator library on tensors.

Each operator builds its kernels for the input shapes and dtypes on the
inputs' device the first time (kiln.ops in C++: a tensor-expression
definition with a default schedule, compiled to WGSL and loaded), caches
them on the device keyed by (operator, shapes, dtypes, attributes), and
queues them; the result is a new tensor. Operands that are numpy arrays are
copied to the other operand's device first.

Unary (x -> y, same shape): neg abs exp exp2 log log2 sqrt rsqrt sin cos
tanh sigmoid erf floor ceil round trunc relu gelu.
Binary with numpy broadcasting (a, b -> c): add sub mul div max min pow; a
Python number as either operand becomes a constant in the kernel.
Reductions over the last axis of a 2-D tensor: sum mean max min prod
(reduce(op, x, keepdims)). softmax over the last axis of a 2-D float32
tensor. elementwise_chain(x, steps): several elementwise steps fused into
one kernel. dtypes: float32, and float16 where the device has shader-f16.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Tuple, Union

import numpy as np

from . import _kiln
from ._kiln import Program, Tensor

Number = Union[int, float]


def _as_tensor(x: Any, device: Optional[_kiln.Device]) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        from ._tensor import tensor
        return tensor(x, device)
    raise _kiln.InvalidArgument(
        f"an operand must be a kiln.Tensor or numpy array; got {type(x).__name__}")




def run(key: tuple, build: Callable[[_kiln.Device], Program], *inputs: Tensor) -> Any:
    """Runs the program cached under `key` on the first input's device,
    building it with build(device) the first time. Returns the one output,
    or the list of outputs. This is the path of every operator."""
    device = inputs[0].device
    cache = device._cache
    program = cache.get(key)
    if program is None:
        program = build(device)
        cache[key] = program
    out = program.run(list(inputs))
    return out[0] if len(out) == 1 else out


def elementwise(op: str, *operands: Any) -> Tensor:
    """The elementwise operator `op` on one or two operands (binary ops
    broadcast like numpy; a number operand becomes a kernel constant)."""
    if len(operands) == 2 and isinstance(operands[1], (int, float)) and \
            not isinstance(operands[0], (int, float)):
        return elementwise_chain(operands[0], [(op, operands[1])])
    if len(operands) == 2 and isinstance(operands[0], (int, float)) and \
            not isinstance(operands[1], (int, float)):
        return elementwise_chain(operands[1], [(op, operands[0], True)])
    if not operands:
        raise _kiln.InvalidArgument(f"{op} takes operands")
    device = next((x.device for x in operands if isinstance(x, Tensor)), None)
    ts = [_as_tensor(x, device) for x in operands]
    key = ("elementwise", op) + tuple(t._sig for t in ts)
    return run(key, lambda d: _kiln.ops.elementwise(d, op, [t._type for t in ts]), *ts)


def elementwise_chain(x: Any, steps: Sequence[Any]) -> Tensor:
    """Applies `steps` in order to a running value starting from x, as one
    kernel. Each step is an op name (a unary op), or (op, operand) with a
    tensor or number operand (v = v op operand), or (op, operand, True)
    (v = operand op v)."""
    x = _as_tensor(x, None)
    spec = []
    tensors = [x]
    key: list = ["chain", x._sig]
    for step in steps:
        if isinstance(step, str):
            spec.append((step, None, None, False))
            key.append(step)
            continue
        if not isinstance(step, (tuple, list)) or len(step) not in (2, 3):
            raise _kiln.InvalidArgument(
                f"a chain step is an op name, (op, operand) or (op, operand, operand_first); "
                f"got {step!r}")
        op, operand = step[0], step[1]
        first = bool(step[2]) if len(step) == 3 else False
        if isinstance(operand, (int, float)) and not isinstance(operand, bool):
            spec.append((op, None, float(operand), first))
            key.append((op, float(operand), first))
        else:
            t = _as_tensor(operand, x.device)
            tensors.append(t)
            spec.append((op, t._type, None, first))
            key.append((op, t._sig, first))
    return run(tuple(key), lambda d: _kiln.ops.elementwise_chain(d, x._type, spec), *tensors)


def reduce(op: str, x: Any, keepdims: bool = False) -> Tensor:
    """A reduction (sum mean max min prod) over the last axis of a 2-D
    tensor: [rows, cols] -> [rows] ([rows, 1] with keepdims)."""
    x = _as_tensor(x, None)
    key = ("reduce", op, bool(keepdims), x._sig)
    return run(key, lambda d: _kiln.ops.reduce(d, op, x._type, bool(keepdims)), x)


def softmax(x: Any) -> Tensor:
    """Softmax over the last axis of a 2-D float32 tensor (numerically
    stable: three kernels)."""
    x = _as_tensor(x, None)
    return run(("softmax", x._sig), lambda d: _kiln.ops.softmax(d, x._type), x)


def _unary(name: str) -> Callable[[Any], Tensor]:
    def op(x: Any) -> Tensor:
        x = _as_tensor(x, None)
        key = ("elementwise", name, x._sig)
        return run(key, lambda d: _kiln.ops.elementwise(d, name, [x._type]), x)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name}(x)."
    return op


def _binary(name: str) -> Callable[[Any, Any], Tensor]:
    def op(a: Any, b: Any) -> Tensor:
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            key = ("elementwise", name, a._sig, b._sig)
            return run(key, lambda d: _kiln.ops.elementwise(d, name, [a._type, b._type]), a, b)
        return elementwise(name, a, b)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name}(a, b), broadcasting like numpy."
    return op


def _reduction(name: str) -> Callable[..., Tensor]:
    def op(x: Any, keepdims: bool = False) -> Tensor:
        return reduce(name, x, keepdims)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"{name} over the last axis of a 2-D tensor."
    return op


UNARY_OPS: Tuple[str, ...] = tuple(_kiln.ops.unary_names())
BINARY_OPS: Tuple[str, ...] = tuple(_kiln.ops.binary_names())
REDUCE_OPS: Tuple[str, ...] = tuple(_kiln.ops.reduce_names())

neg = _unary("neg")
abs = _unary("abs")  # noqa: A001
exp = _unary("exp")
exp2 = _unary("exp2")
log = _unary("log")
log2 = _unary("log2")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sin = _unary("sin")
cos = _unary("cos")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")  # noqa: A001
trunc = _unary("trunc")
relu = _unary("relu")
gelu = _unary("gelu")

add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div")
max = _binary("max")  # noqa: A001  (elementwise; the row reduction is reduce("max", x))
min = _binary("min")  # noqa: A001
pow = _binary("pow")  # noqa: A001

sum = _reduction("sum")  # noqa: A001
mean = _reduction("mean")
prod = _reduction("prod")
amax = _reduction("max")
amin = _reduction("min")

_missing = (set(UNARY_OPS) | set(BINARY_OPS)) - set(globals())
assert not _missing, f"operators without a Python function: {_missing}"
