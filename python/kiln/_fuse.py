"""kiln.fuse: an elementwise function of tensors as one kernel.

    @kiln.fuse
    def silu_plus(x, b):
        return x * kiln.ops.sigmoid(x) + b

    y = silu_plus(x, b)  # one kernel: x read once, no intermediate tensors

The function is traced once per combination of its arguments' shapes and
dtypes: its arguments are `Traced` values (with `shape` and `dtype`, no
elements), and Python's operators and kiln.ops' elementwise operators on
them (unary, binary, comparisons, fma, clamp/clip, where, cast, astype)
record an expression instead of running a kernel. The expression becomes
one ops::ElementwiseFused kernel, built the first time and cached on the
device (or several run in order, where it reads more tensors than a kernel
can bind or nests deeper than kiln compiles: ops::ElementwiseFusedKernels
plans them). Numbers inside the function are
constants of the other operand's dtype (exactly, for int32; a float number
in arithmetic or clip with an int32 or bool value computes in float32);
the operators mean what they mean on kiln.Tensor (`/` of int32 divides in
float32, or float16 beside a float16 value, `~ & | ^` of bools are
logical, comparisons give bools).

The arguments are the kernel's inputs: tensors or numpy arrays, all on one
device. Numbers the function reads (its constants, or variables it closes
over) are baked into the trace: a later call with the same shapes and
dtypes reuses it, so a number that changes must be passed as a tensor. Anything else an elementwise function cannot be (a reduction, a
tensor that is not an argument, Python control flow on values) is an error
while tracing.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _kiln
from ._kiln import Tensor

_NUMBERS = (bool, int, float, np.bool_, np.integer, np.floating)
_KERNEL_DTYPES = ("float32", "float16", "int32", "uint32")


class _Trace:
    """The expression a traced function builds: nodes as the C++ binding
    takes them, (kind, input, value, dtype, op, args)."""

    def __init__(self, device: _kiln.Device) -> None:
        self.device = device
        self.nodes: List[Tuple[Any, ...]] = []
        self.open = True

    def add(self, node: Tuple[Any, ...], shape: Tuple[int, ...], dtype: Any,
            is_bool: bool = False) -> "Traced":
        self.nodes.append(node)
        return Traced(self, len(self.nodes) - 1, shape, np.dtype(dtype), is_bool)


class Traced:
    """A value inside a function traced by kiln.fuse: its shape and dtype
    are known, its elements are not. Use it with Python's operators and
    kiln.ops' elementwise operators."""

    __slots__ = ("_trace", "_node", "_dtype", "_bool", "shape")
    # numpy arrays defer to it (an array would be an error, named).
    __array_priority__ = 1000

    def __init__(self, trace: _Trace, node: int, shape: Tuple[int, ...], dtype: np.dtype,
                 is_bool: bool) -> None:
        self._trace = trace
        self._node = node
        self._dtype = dtype  # the kernel's dtype: a bool is int32 0 or 1
        self._bool = is_bool
        self.shape = tuple(shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.bool_) if self._bool else self._dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"Traced(shape={self.shape}, dtype={self.dtype})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d traced value")
        return self.shape[0]

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        # numpy would make an array of one object of it.
        raise _kiln.InvalidArgument(
            "a value traced by kiln.fuse has no elements to make a numpy array of (inside the "
            "fused function it stands for every element: call kiln.ops' functions on it, such "
            "as kiln.ops.exp for np.exp; after the call, use its result)")

    def __bool__(self) -> bool:
        raise _kiln.InvalidArgument(
            "kiln.fuse: a traced value has no truth value while tracing (Python's if, and, "
            "or, not on it); use kiln.ops.where")

    def astype(self, dtype: Any, copy: bool = True) -> "Traced":
        """As kiln.Tensor.astype (copy makes no difference to a traced value)."""
        from . import ops
        ops._flag(copy, "astype: copy")
        return ops._cast(self, dtype, "astype")

    def clip(self, min: Any = None, max: Any = None,  # noqa: A002
             out: Any = None) -> "Traced":
        """As kiln.Tensor.clip (the same method): either bound may be None
        (not both); np.clip(t, lo, hi) calls it."""
        from ._operators import _clip
        return _clip(self, min, max, out)


def _method(name: str, reflected: bool = False) -> Callable[..., Any]:
    def method(self: Traced, other: Any, *modulo: Any) -> Any:
        if modulo:  # pow(x, e, m): only __pow__ is called with three
            raise TypeError("pow() with a modulus is not supported for kiln tensors; use "
                            "kiln.ops.floor_mod(t ** e, m)")
        from . import ops
        fn = getattr(ops, name)
        return fn(other, self) if reflected else fn(self, other)
    return method


def _true_divide(a: Any, b: Any) -> Any:
    from . import ops
    # As unfused: integers become float16 beside a float16 value, else float32.
    half = any(isinstance(x, Traced) and x._dtype == np.float16 for x in (a, b))

    def as_float(x: Any) -> Any:
        if isinstance(x, Traced) and x._dtype in (np.int32, np.uint32):
            return ops.cast(x, "float16" if half else "float32")
        if isinstance(x, (bool, int, np.bool_, np.integer)) and not isinstance(x, np.timedelta64):
            return ops._float(x, "div")
        return x
    return ops.div(as_float(a), as_float(b))


for _name, _op in {"add": "add", "sub": "sub", "mul": "mul", "floordiv": "floor_div",
                   "mod": "floor_mod", "pow": "pow", "lshift": "shift_left",
                   "rshift": "shift_right", "and": "bitwise_and", "or": "bitwise_or",
                   "xor": "bitwise_xor"}.items():
    setattr(Traced, f"__{_name}__", _method(_op))
    setattr(Traced, f"__r{_name}__", _method(_op, reflected=True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Traced, f"__{_name}__", _method(_name))
def _positive(x: "Traced") -> "Traced":
    """+x, as unfused: refused for a bool value, as numpy's positive is."""
    if x._bool:
        raise TypeError("unary + is not defined for a bool tensor (numpy's positive has no "
                        "bool loop)")
    return x


Traced.__truediv__ = lambda self, other: _true_divide(self, other)  # type: ignore[attr-defined]
Traced.__rtruediv__ = lambda self, other: _true_divide(other, self)  # type: ignore[attr-defined]
Traced.__neg__ = lambda self: apply("neg", [self])  # type: ignore[attr-defined]
Traced.__pos__ = lambda self: _positive(self)  # type: ignore[attr-defined]
Traced.__abs__ = lambda self: apply("abs", [self])  # type: ignore[attr-defined]
Traced.__invert__ = lambda self: apply("bitwise_not", [self])  # type: ignore[attr-defined]
Traced.__hash__ = object.__hash__  # type: ignore[assignment]


def _not_elementwise(what: str) -> Callable[..., Any]:
    def method(self: Traced, *args: Any, **kwargs: Any) -> Any:
        raise _kiln.InvalidArgument(
            f"kiln.fuse: {what} of a traced value is not elementwise; a fused function holds "
            f"elementwise operators only (call it outside, on the fused function's result)")
    return method


for _name in ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "reshape", "transpose",
              "flatten"):
    setattr(Traced, _name, _not_elementwise(_name))
Traced.__getitem__ = _not_elementwise("indexing")  # type: ignore[attr-defined]
Traced.__matmul__ = _not_elementwise("@")  # type: ignore[attr-defined]
Traced.__rmatmul__ = _not_elementwise("@")  # type: ignore[attr-defined]
Traced.T = property(_not_elementwise("T"))  # type: ignore[attr-defined]


def traced(*operands: Any) -> bool:
    """Whether any operand is a traced value (the elementwise operators of
    kiln.ops then record instead of running)."""
    return any(isinstance(x, Traced) for x in operands)


def _constant(trace: _Trace, value: Any, dtype: np.dtype, op: str) -> int:
    from .ops import _float, _is_integer_value
    v = value.item() if isinstance(value, np.generic) else value
    v = int(v) if isinstance(v, bool) else v
    if dtype not in (np.int32, np.uint32):
        v = _float(v, op)
    else:
        if not _is_integer_value(v, dtype):
            raise _kiln.InvalidArgument(
                f"{op}: the number {v!r} is not {'an' if dtype == np.int32 else 'a'} "
                f"{dtype.name} value (the other operand is {dtype.name}; cast it to float32 first)")
        v = int(v)
    trace.nodes.append(("constant", 0, float(v), dtype.name, "", []))
    return len(trace.nodes) - 1


def _check_takes(trace: _Trace, op: str, dtype: np.dtype, arity: int) -> None:
    """The error kiln.ops gives where `op` does not take `dtype`."""
    if not _kiln.ops.elementwise_takes(op, dtype.name):
        _kiln.ops.elementwise(trace.device, op, [((1,), dtype.name)] * arity)


def apply(op: str, operands: Sequence[Any], cast_to: Optional[str] = None) -> Traced:
    """Records `op` on the operands (traced values and numbers)."""
    trace = next(x._trace for x in operands if isinstance(x, Traced))
    if not trace.open:
        raise _kiln.InvalidArgument(
            f"{op}: a traced value was used after its kiln.fuse call returned")
    for x in operands:
        if isinstance(x, Traced):
            if x._trace is not trace:
                raise _kiln.InvalidArgument(f"{op}: the operands come from different traces")
        elif not isinstance(x, _NUMBERS) or isinstance(x, np.timedelta64):
            from .ops import ArgumentTypeError  # (a TypeError too, as unfused)
            raise ArgumentTypeError(
                f"kiln.fuse: {op} of a {type(x).__name__}: inside a fused function the "
                f"operands are its arguments, values computed from them, and numbers (pass "
                f"tensors as arguments)")
    def is_bool(x: Any) -> bool:  # a bool value, or a bool number
        return x._bool if isinstance(x, Traced) else isinstance(x, (bool, np.bool_))
    every_bool = all(is_bool(x) for x in operands)
    if op == "bitwise_not" and every_bool:  # numpy's ~ of bools is logical
        return apply("eq", [operands[0], 0])
    from . import ops
    if len(operands) == 2 and cast_to is None:
        # An int32 or bool value with a float number computes in float32, as unfused.
        values = [x for x in operands if isinstance(x, Traced)]
        numbers = [x for x in operands if not isinstance(x, Traced)]
        if len(values) == 1 and numbers and ops.promotes_to_float(op, values[0]._dtype,
                                                                  numbers[0]):
            return apply(op, [apply_cast(x, "float32") if isinstance(x, Traced) else x
                              for x in operands])
    # The dtype numbers take: the operands that share one (a where's last two).
    shared = operands[1:] if op == "where" else operands
    if cast_to is None and any(isinstance(x, Traced) and x._dtype == np.uint32 for x in shared):
        # A bool beside a uint32 value runs as uint32 (numpy's result dtype), as unfused.
        first = 1 if op == "where" else 0
        operands = list(operands[:first]) + [
            apply_cast(x, "uint32") if isinstance(x, Traced) and x._bool else x
            for x in operands[first:]]
        shared = operands[first:]
    like = next((x._dtype for x in shared if isinstance(x, Traced)), None)
    if like is None:  # where(cond, 1, 2.5): numbers alone
        floats = any(isinstance(x, (float, np.floating)) for x in shared)
        like = np.dtype(np.float32 if floats else np.int32)
    args = []
    for k, x in enumerate(operands):
        if isinstance(x, Traced):
            args.append(x._node)
        elif op == "where" and k == 0:  # a condition number: its truth, as unfused
            args.append(_constant(trace, int(bool(x)), np.dtype(np.int32), op))
        else:
            args.append(_constant(trace, x, like, op))
    shapes = [x.shape for x in operands if isinstance(x, Traced)]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise _kiln.InvalidArgument(
            f"{op}: shapes {', '.join(map(str, shapes))} do not broadcast") from None
    from . import ops
    if cast_to is not None:
        return trace.add(("op", 0, 0.0, cast_to, "cast", args), shape, cast_to)
    def name(x: Traced) -> str:  # bool values are int32 here; say bool, as unfused
        return "bool" if x._bool else x._dtype.name
    if op == "where":
        a, b = operands[1:]
        if isinstance(a, Traced) and isinstance(b, Traced) and a._dtype != b._dtype:
            raise _kiln.InvalidArgument(
                f"where: dtype mismatch: a is {name(a)} but b is {name(b)} (cast one first"
                f"{'; bool operands run as int32' if a._bool or b._bool else ''})")
        # bool where both are bools (values or numbers), as numpy's
        return trace.add(("op", 0, 0.0, None, op, args), shape, like,
                         all(is_bool(x) for x in operands[1:]))
    for x in shared:
        if isinstance(x, Traced) and x._dtype != like:
            first = next(y for y in shared if isinstance(y, Traced))
            raise _kiln.InvalidArgument(
                f"{op}: dtype mismatch: {name(first)} and {name(x)} (cast one first"
                f"{'; bool operands run as int32' if first._bool or x._bool else ''})")
    _check_takes(trace, op, like, len(operands))
    if op in ops.COMPARE_OPS or op in ops.PREDICATE_OPS:
        return trace.add(("op", 0, 0.0, None, op, args), shape, np.int32, True)
    logical = every_bool and op in ("bitwise_and", "bitwise_or", "bitwise_xor")
    return trace.add(("op", 0, 0.0, None, op, args), shape, like, logical)


def apply_cast(x: Any, dtype: str, what: str = "cast") -> Traced:
    if dtype == "bool":  # numpy's astype(bool): non-zero
        return apply("ne", [x, 0])
    if dtype not in _KERNEL_DTYPES:
        raise _kiln.InvalidArgument(
            f"{what}: dtype {dtype} is not one a fused kernel computes in "
            f"({', '.join(_KERNEL_DTYPES)}, bool)"
            f"{' (cast the fused result)' * (dtype in ('uint32', 'int8', 'uint8'))}")
    return apply("cast", [x], cast_to=dtype)


def _prune(nodes: List[Tuple[Any, ...]], out: int) -> Tuple[List[Tuple[Any, ...]], List[int]]:
    """The nodes the output reads, renumbered with the output last, and the
    arguments they read (the kernel's inputs, renumbered in order)."""
    reached = {out}
    for j in range(out, -1, -1):
        if j in reached:
            reached.update(nodes[j][5])
    order = sorted(reached)
    index = {j: k for k, j in enumerate(order)}
    used = sorted({nodes[j][1] for j in order if nodes[j][0] == "input"})
    argument = {a: k for k, a in enumerate(used)}
    pruned = []
    for j in order:
        kind, inp, value, dtype, op, args = nodes[j]
        if kind == "input":
            inp = argument[inp]
        pruned.append((kind, inp, value, dtype, op, [index[a] for a in args]))
    return pruned, used


class _Plan:
    """How a traced expression runs: its pruned nodes (the output last) as
    the C++ binding takes them, the arguments they read, and the result's
    shape, dtype and whether it is bool."""

    def __init__(self, nodes: List[Tuple[Any, ...]], used: List[int], out: Traced) -> None:
        from .ops import _key_number
        self.spec = [(kind, inp, value, dtype, op, list(args))
                     for kind, inp, value, dtype, op, args in nodes]
        self.key = tuple((kind, inp, _key_number(value), dtype, op, tuple(args))
                         for kind, inp, value, dtype, op, args in nodes)
        self.used = tuple(used)
        self.shape, self.dtype, self.is_bool = out.shape, out._dtype, out._bool


def fuse(fn: Callable[..., Any]) -> Callable[..., Tensor]:
    """`fn`, an elementwise function of tensors, as one kernel per
    combination of argument shapes and dtypes (see the module's text).
    Returns a function of tensors or numpy arrays that returns a tensor."""
    if not callable(fn):
        from .ops import ArgumentTypeError
        raise ArgumentTypeError(
            f"kiln.fuse takes a function of tensors; got {type(fn).__name__} {fn!r}")
    traces: Dict[Tuple[Any, ...], _Plan] = {}

    @functools.wraps(fn)
    def fused(*args: Any, **kwargs: Any) -> Any:
        from . import ops
        if kwargs:
            raise _kiln.InvalidArgument(
                f"{getattr(fn, '__name__', 'kiln.fuse')}: pass the tensors positionally (got "
                f"keyword argument {next(iter(kwargs))!r})")
        if any(isinstance(a, Traced) for a in args):
            # Called inside another fused function: its operators join that
            # trace (one kernel for both).
            return fn(*args)
        device = next((a.device for a in args if isinstance(a, Tensor)), None)
        tensors = []
        for k, a in enumerate(args):
            if not isinstance(a, (Tensor, np.ndarray)):
                raise _kiln.InvalidArgument(
                    f"{getattr(fn, '__name__', 'kiln.fuse')}: argument {k} is a "
                    f"{type(a).__name__}; a fused function's arguments are tensors or numpy "
                    f"arrays (numbers can be written inside it)")
            t = ops._as_tensor(a, device)
            if device is not None and t.device is not device:
                raise _kiln.InvalidArgument(
                    f"{getattr(fn, '__name__', 'kiln.fuse')}: argument {k} is on another device")
            device = t.device
            if np.dtype(t.dtype).name not in _KERNEL_DTYPES + ("bool",):
                raise _kiln.InvalidArgument(
                    f"{getattr(fn, '__name__', 'kiln.fuse')}: argument {k} is {t.dtype}; "
                    f"fused kernels take float32, float16, int32, uint32 and bool (cast int8 "
                    f"and uint8 to int32 first)")
            tensors.append(t)
        if not tensors:
            raise _kiln.InvalidArgument("kiln.fuse: the function takes at least one tensor")
        key = tuple((tuple(t.shape), np.dtype(t.dtype).name) for t in tensors)
        entry = traces.get(key)
        if entry is None:
            trace = _Trace(device)
            inputs = []
            for k, t in enumerate(tensors):
                is_bool = t.dtype == np.bool_
                inputs.append(trace.add(("input", k, 0.0, None, "", []), tuple(t.shape),
                                        np.int32 if is_bool else t.dtype, is_bool))
            try:
                out = fn(*inputs)
            finally:
                trace.open = False
            if not isinstance(out, Traced) or out._trace is not trace:
                raise _kiln.InvalidArgument(
                    f"{getattr(fn, '__name__', 'kiln.fuse')}: a fused function returns one "
                    f"value computed from its arguments; got {type(out).__name__}")
            nodes, used = _prune(trace.nodes, out._node)
            entry = _Plan(nodes, used, out)
            traces[key] = entry
        plan = entry
        used, shape = plan.used, plan.shape
        if any(not tensors[k].size for k in used):
            y = ops._from_host(np.zeros(shape, plan.dtype), ops._operand(tensors[used[0]], device))
        else:
            # 0-d arguments run as shape (1,); the result takes the traced
            # shape. One program: one kernel, or several in order.
            ins, _ = ops._kernel_operands([ops._operand(tensors[k], device) for k in used],
                                  getattr(fn, "__name__", "kiln.fuse"))
            y = ops.run(("fused", plan.key) + tuple(t._sig for t in ins),
                        lambda d: _kiln.ops.elementwise_fused(d, [t._type for t in ins],
                                                              plan.spec),
                        *ins)
        y = ops._shaped(y, tuple(shape))
        return ops._view(y, y.shape, np.bool_) if plan.is_bool else y
    return fused
