"""The operator library on tensors.

Each operator builds its kernels for the input shapes and dtypes on the
inputs' device the first time (kiln.ops in C++: a tensor-expression
definition or IR template with a default schedule, compiled to WGSL and
loaded), caches them on the device keyed by (operator, shapes, dtypes,
attributes), and queues them; the result is a new tensor. Operands that are
numpy arrays are copied to the other operand's device first.

Unary (x -> y, same shape): neg abs exp exp2 log log2 sqrt rsqrt sin cos
tanh sigmoid erf floor ceil round trunc relu gelu bitwise_not popcount.
Binary with numpy broadcasting (a, b -> c): add sub mul div floor_div
floor_mod max min pow bitwise_and bitwise_or bitwise_xor shift_left
shift_right (maximum, minimum, floor_divide, mod are aliases of max, min,
floor_div, floor_mod); a Python number as either operand becomes a
constant in the kernel. Comparisons eq ne lt le gt ge (bool results;
equal, not_equal, less, less_equal, greater, greater_equal as in numpy).
Ternary: fma(a, b, c) = a * b + c, clamp(x, lo, hi) (numpy's clip; also
clip). elementwise_chain(x, steps): unary, binary, ternary, where and cast
steps fused into one kernel (kiln.fuse fuses any elementwise function).
The float math takes float32 and float16; neg abs relu sign square, add sub
mul div floor_div floor_mod max min pow, the comparisons and clamp also
int32 and uint32 (kiln's integer arithmetic: it wraps, div truncates toward
zero, x / 0 = x, floor_div(x, 0) = x, floor_mod(x, 0) = 0, pow with a
negative exponent truncates 1 / x ** -e, so 0 ** -1 = 0 where numpy raises);
the bit operations take int32 and uint32 only (shift amounts modulo 32,
shift_right arithmetic on int32, logical on uint32). A bool tensor is an
int32 0 or 1 there.
Reductions over any axes, numpy style: sum mean prod amax amin (x, axis=None,
keepdims=False), also max and min called with one tensor; argmax argmin;
reduce(op, x, keepdims) over the last axis of a 2-D tensor.
softmax log_softmax (x, axis=-1); layer_norm rms_norm over the last axis.
matmul (batched, broadcasting, with a fused bias, activation and residual);
matmul_int8 (int8 operands, b transposed, exact int32 results).
Data movement: permute transpose reshape concat slice gather pad where cast
(and Tensor.astype, Tensor[...] with ints and slices).
dtypes: float32, and float16 where the device has shader-f16; the integer
elementwise ops above, the reductions but mean, argmax, argmin, data
movement, where and cast also take int32 and uint32;
matmul_int8 takes int8.
Empty tensors (a dimension of 0) work as in numpy wherever numpy gives a
result: the result depends on the shapes alone (an empty tensor, a
reduction's identity, a matmul's epilogue over zeros when K is 0), so no
kernel is built; a max, min or arg-reduction over nothing is an error.
conv2d and pooling take a batch of 0 images (an empty result, every other
argument checked); other empty dimensions there are errors.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import math
import operator
import re
import warnings
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _fuse, _kiln
from ._kiln import Program, Tensor
from ._tensor import SHORT_DTYPES


class ArgumentTypeError(_kiln.InvalidArgument, TypeError):
    """An argument of the wrong type (an axis that is not an int, an operand
    that is not a tensor): both a kiln.InvalidArgument and Python's
    TypeError."""

Number = Union[int, float]


def _as_tensor(x: Any, device: Optional[_kiln.Device]) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        from ._tensor import tensor
        try:
            return tensor(x, device)
        except _kiln.InvalidArgument as e:  # (the operator named it: _naming_operands)
            e._kiln_operand = x
            raise
    if isinstance(x, _fuse.Traced):
        raise _kiln.InvalidArgument(
            "kiln.fuse: a traced value reached an operator that is not elementwise (a "
            "reduction, matmul, data movement); a fused function holds elementwise "
            "operators only")
    raise _operand_error(x)


def _operand_error(x: Any) -> ArgumentTypeError:
    """The error for an operand that is not a tensor. It carries the
    operand: the public operator it reached names the argument it came in
    (_naming_operands)."""
    e = ArgumentTypeError(
        f"an operand must be a kiln.Tensor or a numpy array; got {type(x).__name__}")
    e._kiln_operand = x
    return e


def _where_passed(fn: Callable[..., Any], args: tuple, kwargs: dict, x: Any) -> Optional[str]:
    """The argument of the call fn(*args, **kwargs) that is (or holds, in a
    list or tuple) the object x: "b", "tensors[1]"; None where none is."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    for name, value in bound.arguments.items():
        if value is x:
            return name
        if isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                if v is x:
                    return f"{name}[{i}]"
    return None


def _naming_operands(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn, its operand-type errors naming fn and the argument (the
    outermost operator that was passed the operand names it)."""
    @functools.wraps(fn)
    def named(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _kiln.InvalidArgument as e:
            if not hasattr(e, "_kiln_operand"):
                raise
            x = e._kiln_operand
            where = _where_passed(fn, args, kwargs, x)
            if where is None:
                raise
            if isinstance(e, ArgumentTypeError):
                named_error = ArgumentTypeError(
                    f"{fn.__name__}: {where} must be a kiln.Tensor or a numpy array; got "
                    f"{type(x).__name__}")
            else:  # an array kiln cannot hold (its dtype), named where it was passed
                reason = getattr(e, "_kiln_reason", str(e))
                named_error = type(e)(f"{fn.__name__}: {where}: {reason}")
                named_error._kiln_reason = reason
            named_error._kiln_operand = x
            raise named_error from None
    return named




def _same_device(what: str, inputs: Sequence[Tensor]) -> _kiln.Device:
    """The inputs' one device, or the error naming the operator (empty
    tensors included: a call is refused as the same call with elements)."""
    device = inputs[0].device
    for t in inputs[1:]:
        if t.device is not device:
            raise _kiln.InvalidArgument(
                f"{what}: its tensors are on different devices ({device} and {t.device}); "
                f"copy one over with kiln.tensor(t.numpy(), device)")
    return device


def run(key: tuple, build: Callable[[_kiln.Device], Program], *inputs: Tensor,
        name: Optional[str] = None) -> Any:
    """Runs the program cached under `key` on the first input's device,
    building it with build(device) the first time. Returns the one output,
    or the list of outputs. This is the path of every operator; its errors
    name `name` (the function called), by default key[0]."""
    name = key[0] if name is None else name
    device = _same_device(name, inputs)
    cache = device._cache
    program = cache.get(key)
    if program is None:
        try:
            program = build(device)
        except _kiln.Error as e:
            # Every refusal names the operator (some come from a layer below
            # it: an input's dtype no kernel binds).
            text = str(e)
            if not re.match(r"[\w.]+: ", text):
                raise type(e)(f"{name}: {text}") from None
            raise
        cache[key] = program
    out = program.run(list(inputs))
    return out[0] if len(out) == 1 else out


def _probe(ty: Any) -> Any:
    """A tensor type (shape, dtype) with every extent of 0 as 1: what the
    operator builds a kernel for when its tensors have elements."""
    return None if ty is None else ([builtins.max(int(s), 1) for s in ty[0]], ty[1])


def _empty_result(what: str, inputs: Sequence[Tensor],
                  host: Callable[..., np.ndarray],
                  check: Optional[Callable[[_kiln.Device, List[Any]], Any]] = None,
                  any_rank: bool = False) -> Optional[Tensor]:
    """Where an input has no elements (a dimension of 0), the result depends
    on the shapes alone: numpy computes it from zero-filled arrays of the
    inputs' shapes and dtypes (an empty tensor, or a reduction's identity),
    and no kernel runs. None where every input has elements. numpy's errors
    (a reduction of nothing without an identity, incompatible shapes) become
    kiln.InvalidArgument naming the operator. `check(device, types)`, where
    given, builds (and does not run) the operator's kernel for the inputs'
    types with every 0 extent as 1, so that an empty call refuses every
    argument the same call with elements would (dtypes, ranks, attributes);
    `any_rank` where the operator takes inputs of any rank (as views)."""
    if all(t.size for t in inputs):
        return None
    _same_device(what, inputs)
    _check_kernel_types(what, inputs, any_rank)
    shapes = ", ".join(str(tuple(t.shape)) for t in inputs)
    refused: Optional[_kiln.InvalidArgument] = None
    if check is not None:
        # First, so that what the kernel refuses (an attribute, a dtype) is
        # said as it would say it; but a message naming a shape with 0 taken
        # as 1 would misquote the call, so that one waits for numpy's reason.
        probes = [_probe(t._type) for t in inputs]
        try:
            check(inputs[0].device, probes)
        except _kiln.InvalidArgument as e:
            if not any(list(t.shape) != p[0] and str(list(p[0])) in str(e)
                       for t, p in zip(inputs, probes)):
                raise
            refused = e
    # Zero-stride views: no host memory for the inputs that do have elements.
    arrays = [np.broadcast_to(np.zeros((), t.dtype), t.shape) for t in inputs]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a mean of nothing is NaN
            out = np.asarray(host(*arrays))
    except (ValueError, IndexError) as e:
        raise _kiln.InvalidArgument(f"{what}: inputs of shapes {shapes}: {e}") from None
    if refused is not None:
        raise _kiln.InvalidArgument(
            f"{what}: inputs of shapes {shapes}, refused as with every 0 extent 1: {refused}"
        ) from None
    from ._tensor import tensor
    # (A copy, not ascontiguousarray, which makes a 0-d result 1-d.)
    return tensor(np.array(out, order="C"), inputs[0].device)


_KERNEL_DTYPES = ("float32", "float16", "int32", "uint32")


def _check_kernel_types(what: str, inputs: Sequence[Tensor], any_rank: bool = False) -> None:
    """What the kernels refuse of any tensor, checked where no kernel is
    built (empty tensors): a dtype other than float32, float16, int32 and
    uint32 (bools reach the kernels as int32), float16 on a device without
    shader-f16, a rank above 4 (unless `any_rank`: the operator runs on
    views of lower rank), or more than 2^30 elements with every 0 extent
    as 1."""
    for t in inputs:
        name = np.dtype(t.dtype).name
        if name not in _KERNEL_DTYPES:
            raise _kiln.InvalidArgument(
                f"{what}: an input has dtype {name}; supported dtypes are float32, float16, "
                f"int32 and uint32")
        if name == "float16" and not t.device.has_feature("shader-f16"):
            raise _kiln.Unavailable(f"{what}: an input is float16, but the device has no "
                                    f"shader-f16")
        if t.ndim > 4 and not any_rank:
            raise _kiln.InvalidArgument(
                f"{what}: an input has shape {tuple(t.shape)} of rank {t.ndim}; ranks 1 to 4 are "
                f"supported")
        if math.prod(builtins.max(int(d), 1) for d in t.shape) > 2**30:
            raise _kiln.InvalidArgument(
                f"{what}: an input has shape {tuple(t.shape)}; a kernel's tensor holds at most "
                f"2^30 elements")


def _empty_batch(x: Tensor, build: Callable[[_kiln.Device, Any], Program]) -> Tensor:
    """A convolution's or pooling's result for a batch of 0 images (x's first
    dimension): the program for one image checks every other argument (and
    is built, not run), and its output's shape with a batch of 0 is the
    result's, with no elements."""
    shape, dtype = x._type
    if 0 in shape[1:]:
        build(x.device, x._type)  # raises, naming the empty dimension
    program = build(x.device, ([1] + list(shape[1:]), dtype))
    _, out_shape, out_dtype = program.outputs[0]
    from ._tensor import tensor
    return tensor(np.zeros([0] + list(out_shape[1:]), np.dtype(out_dtype)), x.device)


def _broadcast_zeros(*arrays: np.ndarray) -> np.ndarray:
    return np.zeros(np.broadcast_shapes(*[a.shape for a in arrays]), arrays[0].dtype)


_NUMBERS = (int, float, np.integer, np.floating, np.bool_)


def _is_number(x: Any) -> bool:
    """A Python or numpy scalar (bool included; numpy's timedelta64, an
    integer subclass, is not a number here)."""
    return isinstance(x, _NUMBERS) and not isinstance(x, np.timedelta64)


def _number(x: Any) -> Union[int, float]:
    """A Python or numpy scalar as a Python int or float (bools as 0 or 1);
    an int past float64's range is an error (every dtype's range ends before
    it)."""
    v = x.item() if isinstance(x, np.generic) else x
    v = int(v) if isinstance(v, bool) else v
    if isinstance(v, int) and builtins.abs(v) > 2**63:
        try:
            float(v)
        except OverflowError:
            bits = builtins.abs(v).bit_length()
            raise _kiln.InvalidArgument(
                f"{'a negative' if v < 0 else 'an'} integer of {bits} bits (magnitude "
                f"2**{bits - 1} or more) is past every dtype's range (float64's largest is "
                f"about 1.8e308)") from None
    return v


def _float(x: Any, what: str) -> float:
    """A number as a Python float, naming `what` where it is past float64's
    range."""
    try:
        return float(_number(x))
    except _kiln.InvalidArgument as e:
        raise _kiln.InvalidArgument(f"{what}: {e}") from None


def _key_number(v: float) -> Tuple[Any, ...]:
    """A number as part of a kernel cache key: -0.0 and 0.0 are different
    kernels (== says they are equal), every NaN is the same one (== says no
    NaN equals itself)."""
    return ("nan",) if v != v else (v, math.copysign(1.0, v))


def _number_as_tensor(v: Any, like: Tensor, op: str, given: Any = None) -> Tensor:
    """The number v as a one-element tensor of like's dtype: rounded to a
    float dtype (as numpy's comparisons of float32 arrays with Python floats
    do), exactly for int32 and uint32 (or an error naming `given`'s dtype,
    the operand as the caller gave it, where like is its int32 form)."""
    from ._tensor import tensor
    try:
        v = _number(v)
    except _kiln.InvalidArgument as e:
        raise _kiln.InvalidArgument(f"{op}: {e}") from None
    if like.dtype in (np.int32, np.uint32, np.bool_):
        _check_integer_number(v, like if given is None else given, op)
        return tensor(np.array([int(v)], like.dtype), like.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tensor(np.array([v], like.dtype), like.device)


def _is_integer_value(v: Union[int, float], dtype: Any = np.int32) -> bool:
    """Whether the number v (an int or float, as _number gives) is exactly
    a value of the integer `dtype` (int32 by default)."""
    info = np.iinfo(dtype)
    return not (isinstance(v, float) and not (math.isfinite(v) and v.is_integer())) and \
        info.min <= v <= info.max


def _check_integer_number(v: Any, like: Any, op: str) -> None:
    """The error for a number v used with the int32 (or bool) or uint32
    tensor or array `like` where v is not a value of its kernel dtype."""
    try:
        v = _number(v)
    except _kiln.InvalidArgument as e:
        raise _kiln.InvalidArgument(f"{op}: {e}") from None
    dtype = np.dtype(np.uint32 if like.dtype == np.uint32 else np.int32)
    if not _is_integer_value(v, dtype):
        raise _kiln.InvalidArgument(
            f"{op}: the number {v!r} is not {'an' if dtype == np.int32 else 'a'} {dtype.name} "
            f"value (the tensor operand is {like.dtype}; cast it to float32 to use other numbers)")


def _check_takes(op: str, ts: Sequence[Tensor]) -> None:
    """The dtype error of `op` for the tensors, where it takes none of
    theirs (as the kernel would raise; for empty tensors, which build none)."""
    for t in ts:
        name = np.dtype(t.dtype).name
        if name in _KERNEL_DTYPES and not _kiln.ops.elementwise_takes(op, name):
            _kiln.ops.elementwise(t.device, op, [((1,), name)] * _arity(op))


def _operand(x: Any, device: Optional[_kiln.Device], unsigned: bool = False) -> Tensor:
    """x as a tensor; a bool tensor as its int32 0 or 1 (uint32 where
    `unsigned`: beside a uint32 operand, numpy's result dtype)."""
    t = _as_tensor(x, device)
    return _view(t, t.shape, np.uint32 if unsigned else np.int32) if t.dtype == np.bool_ else t


def _beside_uint32(operands: Sequence[Any]) -> bool:
    """Whether an operand is a uint32 tensor or array (bools beside it run
    as uint32)."""
    return any(getattr(x, "dtype", None) == np.uint32 for x in operands)


_COMPARE_OPS = frozenset(_kiln.ops.compare_names())
_TERNARY_OPS = frozenset(_kiln.ops.ternary_names())
# The ops whose result is a bool tensor: comparisons and unary predicates.
_BOOL_OPS = _COMPARE_OPS | frozenset(_kiln.ops.predicate_names())


# Every elementwise op's number of operands, in the library's order.
_ARITY = {**{op: 1 for op in _kiln.ops.unary_names()},
          **{op: 2 for op in _kiln.ops.binary_names() + _kiln.ops.compare_names()},
          **{op: 3 for op in _kiln.ops.ternary_names()}}


def _arity(op: str) -> int:
    return _ARITY.get(op, 2)


def elementwise(op: str, *operands: Any) -> Tensor:
    """The elementwise operator `op` on one, two or three operands (they
    broadcast like numpy; a number operand of a binary op becomes a kernel
    constant, of a comparison or ternary op a one-element tensor of the
    other operands' dtype). A comparison returns a bool tensor."""
    arity = _ARITY.get(op) if isinstance(op, str) else None
    if arity is None:
        raise _kiln.InvalidArgument(f"unknown elementwise op {op!r}; known: {', '.join(_ARITY)}")
    if len(operands) != arity:
        raise _kiln.InvalidArgument(
            f"{op} takes {arity} input{'' if arity == 1 else 's'}, not {len(operands)}")
    if _fuse.traced(*operands):
        return _fuse.apply(op, operands)
    if any(not _is_number(x) and np.dtype(getattr(x, "dtype", np.float32)) in _BYTE_DTYPES
           for x in operands):
        return _byte_elementwise(op, operands)
    if op in _COMPARE_OPS or op in _TERNARY_OPS:
        device = _device_of(*operands)
        like = next((x for x in operands if not _is_number(x)), None)
        if like is None:
            raise _kiln.InvalidArgument(f"{op}: at least one operand must be a tensor")
        # Errors name the dtypes as given (a bool reaches the kernel as int32).
        given = like if isinstance(like, (Tensor, np.ndarray)) else None
        named = [x.dtype if isinstance(x, (Tensor, np.ndarray)) else None for x in operands]
        unsigned = _beside_uint32(operands)
        like = _operand(like, device, unsigned)
        ts = [_number_as_tensor(x, like, op, given) if _is_number(x)
              else _operand(x, like.device, unsigned) for x in operands]
        if op in _COMPARE_OPS and len({t.dtype for t in ts}) > 1 and None not in named:
            # Named as given, as the other operators' mismatches are.
            names = ", ".join(f"{'ABC'[i]} is {np.dtype(d).name}" for i, d in enumerate(named))
            how = ("bool operands run as int32; cast them to the other operands' dtype"
                   if np.bool_ in named else "cast one to the other's dtype")
            raise _kiln.InvalidArgument(f"{op}: dtype mismatch: {names} ({how})")
        out = _elementwise_tensors(op, ts)
        # A number's one-element tensor does not shape the result (0-d
        # operands give a 0-d result, as numpy's scalars do).
        out = _shaped(out, tuple(np.broadcast_shapes(
            *[tuple(t.shape) for x, t in zip(operands, ts) if not _is_number(x)])))
        return _view(out, out.shape, np.bool_) if op in _COMPARE_OPS else out
    if len(operands) == 2 and _is_number(operands[1]) and not _is_number(operands[0]):
        return _with_number(op, operands[0], operands[1], False)
    if len(operands) == 2 and _is_number(operands[0]) and not _is_number(operands[1]):
        return _with_number(op, operands[1], operands[0], True)
    device = next((x.device for x in operands if isinstance(x, Tensor)), None)
    try:
        unsigned = _beside_uint32(operands)
        out = _elementwise_tensors(op, [_operand(x, device, unsigned) for x in operands])
    except _kiln.InvalidArgument as e:
        given = [np.dtype(x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype)
                 for x in operands]
        if "dtype mismatch" in str(e) and np.bool_ in given:
            # Bools run as int32: name the dtypes as the caller gave them.
            names = ", ".join(f"{'ABC'[i]} is {d.name}" for i, d in enumerate(given))
            raise _kiln.InvalidArgument(
                f"{op}: dtype mismatch: {names} (bool operands run as int32; cast them to the "
                f"other operands' dtype)") from None
        raise
    return _view(out, out.shape, np.bool_) if op in _BOOL_OPS else out


def _byte_elementwise(op: str, operands: Sequence[Any]) -> Tensor:
    """`op` where an operand is an int8 or uint8 tensor or array: its values
    unpacked to int32 (one kernel), the op computed there and, for a result
    of that dtype, packed back (its low 8 bits: wrapping, as numpy's
    arithmetic). With numpy's result dtypes: beside numbers and bools of
    the byte dtype; beside int32 the result is int32, uint8 beside uint32
    gives uint32, beside a float tensor that float (the bytes converted);
    int8 beside uint8 or uint32 (numpy's int16 or int64) is a mismatch. A
    float number in arithmetic computes in float32, as with int32."""
    device = _device_of(*operands)
    ts = [None if _is_number(x) else _as_tensor(x, device) for x in operands]
    dtypes = [np.dtype(t.dtype) for t in ts if t is not None]
    byte = next(d for d in dtypes if d in _BYTE_DTYPES)
    others = {d for d in dtypes if d != byte and d != np.bool_}
    names = ", ".join(f"{'ABC'[i]} is {np.dtype(t.dtype).name if t is not None else 'a number'}"
                      for i, t in enumerate(ts))
    wide = next(iter(others)) if len(others) == 1 else None
    if others and not (wide in (np.int32, np.float32, np.float16) or
                       (wide == np.uint32 and byte == np.uint8)):
        raise _kiln.InvalidArgument(
            f"{op}: dtype mismatch: {names} (numpy's result dtype for them is none kiln has; "
            f"cast one to the other's dtype)")
    if not _kiln.ops.elementwise_takes(op, "int32") and wide not in (np.float32, np.float16):
        raise _kiln.InvalidArgument(
            f"{op}: an input is {byte.name}, but {op} takes float32 or float16 tensors (cast it "
            f"first)")
    numbers = [x for x in operands if _is_number(x)]
    if wide is None and any(isinstance(v, (float, np.floating)) for v in numbers) and \
            promotes_to_float(op, np.int32, next(v for v in numbers
                                                 if isinstance(v, (float, np.floating)))):
        wide = np.dtype(np.float32)
    if wide in (np.float32, np.float16):  # the bytes converted to that float
        args = [x if t is None else cast(t, wide.name) if np.dtype(t.dtype) in _BYTE_DTYPES
                else t for x, t in zip(operands, ts)]
        return elementwise(op, *args)
    args = []
    for x, t in zip(operands, ts):
        if t is None:  # a number: a value of the byte dtype, or of the wider one
            args.append(_integer_value(x, wide or byte, op) if wide != np.int32 else x)
        elif np.dtype(t.dtype) in _BYTE_DTYPES:
            v = _unpacked(t, op)
            args.append(_view(v, v.shape, np.uint32) if wide == np.uint32 else v)
        else:
            args.append(t)
    if op == "popcount":  # the byte's own bits
        args[0] = bitwise_and(args[0], 255)
    out = elementwise(op, *args)
    return out if op in _BOOL_OPS or wide is not None else _packed(out, byte)


def promotes_to_float(op: str, dtype: Any, v: Any) -> bool:
    """Whether binary arithmetic `op` of an int32, uint32 (or bool) operand
    and the number v computes in float32: v is a float (torch's rule; kiln
    has no float64 to take numpy's). Comparisons take v as a value of the
    operand's dtype."""
    return (np.dtype(dtype) in (np.int32, np.uint32, np.bool_)
            and isinstance(v, (float, np.floating))
            and _ARITY.get(op) == 2 and op not in _COMPARE_OPS
            and _kiln.ops.elementwise_takes(op, "float32"))


def _with_number(op: str, x: Any, v: Any, first: bool) -> Tensor:
    """x op v (v op x where `first`) for a binary op and a number v: one
    chain step, v a constant in the kernel. Its errors are the operator's,
    as with two tensors, rather than the chain's."""
    t = _operand(x, None)
    if promotes_to_float(op, t.dtype, v):
        t = cast(t, "float32")
    try:
        return elementwise_chain(t, [(op, v, True) if first else (op, v)])
    except (_kiln.InvalidArgument, _kiln.Unavailable) as e:
        _check_kernel_types(op, [t])
        # The op's own refusal of x's dtype (or of float16 on a device without it).
        _kiln.ops.elementwise(t.device, op, [((1,), np.dtype(t.dtype).name)] * 2)
        if t.dtype in (np.int32, np.uint32):
            _check_integer_number(v, x, op)  # (x: a tensor or array, bool, int32 or uint32)
        text = str(e)
        if text.startswith("elementwise_chain: "):  # (a tensor the device cannot bind)
            raise type(e)(f"{op}: {text[len('elementwise_chain: '):]}") from None
        raise


def _merged_axes(shapes: Sequence[Sequence[int]],
                 out: Sequence[int]) -> Optional[List[Tuple[int, ...]]]:
    """The operands' shapes with the axes of the broadcast shape `out` that
    are 1 dropped and adjacent axes that every operand broadcasts alike
    (each has the result's extent on both, or 1 on both) merged: views of
    the same elements in the same order that broadcast to `out`'s elements.
    None where that leaves more than 4 axes."""
    r = len(out)
    aligned = [(1,) * (r - len(s)) + tuple(s) for s in shapes]
    groups: List[Tuple[Tuple[bool, ...], List[int]]] = []
    for k in range(r):
        if out[k] == 1:
            continue
        pattern = tuple(a[k] != out[k] for a in aligned)  # broadcast along axis k
        if groups and groups[-1][0] == pattern:
            groups[-1][1][:] = [g * a[k] for g, a in zip(groups[-1][1], aligned)]
        else:
            groups.append((pattern, [a[k] for a in aligned]))
    if len(groups) > 4:
        return None
    return [tuple(g[1][i] for g in groups) or (1,) for i in range(len(shapes))]


def _kernel_operands(ts: Sequence[Tensor],
                     what: str) -> Tuple[List[Tensor], Optional[Tuple[int, ...]]]:
    """Kernels take ranks 1 to 4: a 0-d operand of an elementwise operator
    runs as shape (1,), and operands of a higher rank as views with the
    axes merged that broadcast alike (_merged_axes); the result then takes
    numpy's broadcast shape (returned; None where every operand is kept).
    Where merging leaves more than 4 axes, an error naming `what`."""
    if all(1 <= t.ndim <= 4 for t in ts):
        return list(ts), None
    try:
        shape = tuple(np.broadcast_shapes(*[tuple(t.shape) for t in ts]))
    except ValueError:
        if all(t.ndim <= 4 for t in ts):
            return list(ts), None  # the operator's own error follows
        raise _kiln.InvalidArgument(
            f"{what}: shapes {' and '.join(str(list(t.shape)) for t in ts)} do not broadcast "
            f"(dimensions aligned on the right must be equal or 1)") from None
    if all(t.ndim <= 4 for t in ts):
        return [t if t.ndim else _view(t, (1,)) for t in ts], shape
    merged = _merged_axes([t.shape for t in ts], shape)
    if merged is None:
        raise _kiln.InvalidArgument(
            f"{what}: inputs of shapes {', '.join(str(tuple(t.shape)) for t in ts)}: kernels "
            f"take ranks 1 to 4, and with axes of the result that are 1 dropped and adjacent "
            f"axes that every input broadcasts alike merged, more than 4 remain (reshape the "
            f"inputs so that fewer axes alternate between broadcast and not)")
    return [_view(t, m) for t, m in zip(ts, merged)], shape


def _elementwise_tensors(op: str, ts: List[Tensor]) -> Tensor:
    ts, shape = _kernel_operands(ts, op)
    out = _elementwise_nd(op, ts)
    return out if shape is None else _shaped(out, shape)


def _elementwise_nd(op: str, ts: List[Tensor]) -> Tensor:
    if any(not t.size for t in ts):
        _check_takes(op, ts)
    def check(d: _kiln.Device, types: List[Any]) -> Any:
        return _kiln.ops.elementwise(d, op, types)
    if op in _BOOL_OPS:
        empty = _empty_result(op, ts, lambda *v: np.zeros(np.broadcast_shapes(
            *[a.shape for a in v]), np.int32), check)
        if empty is not None:
            return empty
    empty = _empty_result(op, ts, _broadcast_zeros, check)
    if empty is not None:
        return empty
    key = ("elementwise", op) + tuple(t._sig for t in ts)
    return run(key, lambda d: _kiln.ops.elementwise(d, op, [t._type for t in ts]), *ts, name=op)


def _dtype_name(dtype: Any, what: str) -> str:
    """A dtype given as numpy's dtype, its name, or kiln's short name
    (f32 f16 i32 u32 i8 u8), as numpy's name; an error naming `what`
    otherwise."""
    if dtype is None:  # numpy reads None as float64
        raise ArgumentTypeError(f"{what}: dtype None is not a dtype")
    try:
        if isinstance(dtype, str) and dtype in SHORT_DTYPES:
            return SHORT_DTYPES[dtype]
        return np.dtype(dtype).name
    except TypeError as e:
        # A string that names no dtype is a bad value; anything else a bad type.
        raise (_kiln.InvalidArgument if isinstance(dtype, str) else ArgumentTypeError)(
            f"{what}: dtype {dtype!r} is not a dtype") from e


_CHAIN_TWO_OPERANDS = frozenset(_TERNARY_OPS | {"where"})


@contextlib.contextmanager
def _chain_errors():
    """The chain kernel's errors ("chain: ...") as elementwise_chain's."""
    try:
        yield
    except _kiln.Error as e:
        text = str(e)
        if text.startswith("chain: "):
            raise type(e)(f"elementwise_chain: {text[len('chain: '):]}") from None
        raise


def elementwise_chain(x: Any, steps: Sequence[Any]) -> Tensor:
    """Applies `steps` in order to a running value v starting from x, as one
    kernel. Each step is one of:

    - an op name (or the 1-tuple (op,)): a unary op, v = op(v);
    - (op, operand) or (op, operand, True): a binary op or a comparison,
      v = v op operand (operand op v with True); after a comparison v is
      int32 0 or 1;
    - (op, a, b) for fma (v * a + b), clamp (v clipped to [a, b]) or where
      (a where v is non-zero, else b; v becomes a's and b's dtype: a
      tensor's, else, where both are numbers, x's);
    - ("cast", dtype): v converted to float32, float16 or int32.

    Operands are tensors (broadcast with v) or numbers. A chain ending in a
    comparison gives a bool tensor."""
    # (A numpy x goes to the device of the steps' tensors.)
    listed = steps if isinstance(steps, (list, tuple)) else ()
    operands = [o for st in listed if isinstance(st, (list, tuple)) for o in st[1:]]
    if _fuse.traced(x, *operands):
        return _traced_chain(x, listed)
    x = _operand(x, _device_of(x, *operands))
    if x.dtype in _BYTE_DTYPES:
        raise _kiln.InvalidArgument(
            f"elementwise_chain: x is {np.dtype(x.dtype).name}; chains run on float32, float16, "
            f"int32, uint32 and bool (cast int8 and uint8 to int32 first)")
    if isinstance(steps, (str, bytes)):
        raise _kiln.InvalidArgument(
            f"elementwise_chain: steps must be a list of steps; got the string {steps!r} (one "
            f"step is [{steps!r}])")
    if not hasattr(steps, "__iter__"):
        raise ArgumentTypeError(
            f"elementwise_chain: steps must be a list of steps; got {steps!r}")
    steps = list(steps)  # a generator is read once
    # 0-d tensors run as shape (1,), and tensors of a higher rank than 4 as
    # views with merged axes (_kernel_operands); the result takes the broadcast
    # shape.
    tensors: List[Tensor] = [x]
    for step in steps:
        if isinstance(step, (tuple, list)) and step and step[0] != "cast":
            tensors += [_operand(o, x.device, x.dtype == np.uint32) for o in step[1:]
                        if isinstance(o, (Tensor, np.ndarray))]
    views, shape = _kernel_operands(tensors, "elementwise_chain")
    if shape is None:
        return _chain_nd(x, steps)
    lifted = iter(views[1:])
    lifted_steps = [type(step)([step[0]] + [next(lifted) if isinstance(o, (Tensor, np.ndarray))
                                            else o for o in step[1:]])
                    if isinstance(step, (tuple, list)) and step and step[0] != "cast" else step
                    for step in steps]
    return _shaped(_chain_nd(views[0], lifted_steps), shape)


def _traced_chain(x: Any, steps: Sequence[Any]) -> Any:
    """elementwise_chain inside kiln.fuse: each step recorded as its operator."""
    v = x
    for k, step in enumerate(steps, 1):
        step = (step,) if isinstance(step, str) else step
        if not isinstance(step, (tuple, list)) or not step or not isinstance(step[0], str):
            raise _kiln.InvalidArgument(
                f"elementwise_chain: step {k}: a step is an op name, (op, operand), (op, operand, "
                f"operand_first), (op, a, b) or ('cast', dtype); got {step!r}")
        op, rest = step[0], list(step[1:])
        if op not in _ARITY and op not in ("where", "cast"):
            raise _kiln.InvalidArgument(
                f"elementwise_chain: step {k}: unknown elementwise op {op!r}")
        if op == "cast" and len(rest) == 1:
            v = _fuse.apply_cast(v, _dtype_name(rest[0], "elementwise_chain: cast"),
                                 "elementwise_chain: cast")
        elif op in _CHAIN_TWO_OPERANDS or (len(rest) == 2 and rest[1] is not True):
            v = _fuse.apply(op, [v] + rest)
        elif len(rest) == 2:  # (op, operand, True): the operand first
            v = _fuse.apply(op, [rest[0], v])
        else:
            v = _fuse.apply(op, [v] + rest)
    return v


def _chain_nd(x: Tensor, steps: Sequence[Any]) -> Tensor:
    x = _operand(x, None)
    spec = []
    tensors = [x]
    key: list = ["chain", x._sig]

    def operand(o: Any, k: int, step: Sequence[Any]) -> tuple:
        """(tensor type, constant) of an operand of step k, noting a tensor."""
        # Tagged: a tensor's signature and a constant must never compare
        # equal (a shape-[1] f32 tensor's is (0, 1), like the constant 0.0).
        if _is_number(o):
            v = _float(o, f"{step[0]}")
            key.append(("constant",) + _key_number(v))
            return None, v
        if not isinstance(o, (Tensor, np.ndarray)):
            raise ArgumentTypeError(
                f"elementwise_chain: step {k} ({step[0]}): an operand must be a kiln.Tensor, a "
                f"numpy array or a number; got {type(o).__name__}")
        t = _operand(o, x.device, x.dtype == np.uint32)  # (bools beside uint32 as uint32)
        tensors.append(t)
        key.append(("tensor",) + tuple(t._sig))
        return t._type, None

    for k, step in enumerate(steps, 1):
        if isinstance(step, str):
            spec.append((step, None, None, False, None, None, None))
            key.append(step)
            continue
        if not isinstance(step, (tuple, list)) or not step or not isinstance(step[0], str):
            raise _kiln.InvalidArgument(
                f"elementwise_chain: step {k}: a step is an op name, (op, operand), (op, operand, "
                f"operand_first), (op, a, b) or ('cast', dtype); got {step!r}")
        op = step[0]
        if _ARITY.get(op) == 1 and op != "cast":
            if len(step) != 1:
                raise _kiln.InvalidArgument(
                    f"elementwise_chain: step {k} ({op}): {op} takes no operand (the step is "
                    f"{op!r} or ({op!r},)); got {step!r}")
            spec.append((op, None, None, False, None, None, None))
            key.append(op)
            continue
        key.append(op)
        if op == "cast":
            if len(step) != 2:
                raise _kiln.InvalidArgument(
                    f"elementwise_chain: step {k} (cast): the step is ('cast', dtype); got {step!r}")
            name = _dtype_name(step[1], "elementwise_chain: cast")
            spec.append((op, None, None, False, None, None, name))
            key.append(name)
        elif op in _CHAIN_TWO_OPERANDS:
            if len(step) != 3:
                raise _kiln.InvalidArgument(
                    f"elementwise_chain: step {k} ({op}): the step is ({op!r}, a, b); got {step!r}")
            (t1, c1), (t2, c2) = operand(step[1], k, step), operand(step[2], k, step)
            spec.append((op, t1, c1, False, t2, c2, None))
        else:
            if len(step) not in (2, 3):
                raise _kiln.InvalidArgument(
                    f"elementwise_chain: step {k} ({op}): the step is ({op!r}, operand) or "
                    f"({op!r}, operand, operand_first); got {step!r}")
            first = _flag(step[2], f"elementwise_chain: step {k} ({op}): operand_first") \
                if len(step) == 3 else False
            t1, c1 = operand(step[1], k, step)
            spec.append((op, t1, c1, first, None, None, None))
            key.append(first)
    compares = bool(spec) and spec[-1][0] in _BOOL_OPS
    if any(not t.size for t in tensors):
        # No kernel runs: the one for the same steps with elements is built
        # (every step checked), then the result's shape and dtype are given;
        # shapes first, which the kernel would see with each 0 as 1.
        try:
            np.broadcast_shapes(*[t.shape for t in tensors])
        except ValueError as e:
            shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
            raise _kiln.InvalidArgument(
                f"elementwise_chain: inputs of shapes {shapes}: {e}") from None
        with _chain_errors():
            _kiln.ops.elementwise_chain(x.device, _probe(x._type), [
                (op, _probe(t1), c1, first, _probe(t2), c2, name)
                for op, t1, c1, first, t2, c2, name in spec])
        running = np.dtype(x.dtype).name
        operands = iter(tensors[1:])
        for step in spec:
            if step[0] == "cast":
                running = step[6]
                continue
            given = [next(operands) for t in (step[1], step[4]) if t is not None]
            if step[0] == "where":
                # Its operands' dtype: a tensor's, else (numbers) the input's.
                running = np.dtype((given[0] if given else x).dtype).name
                continue
            if not _kiln.ops.elementwise_takes(step[0], running):
                _kiln.ops.elementwise(x.device, step[0], [((1,), running)] * _arity(step[0]))
            if step[0] in _BOOL_OPS:  # the running value is int32 from here
                running = "int32"
        dtype = np.int32 if compares else np.dtype(running)
        empty = _empty_result("elementwise_chain", tensors, lambda *v: np.zeros(
            np.broadcast_shapes(*[a.shape for a in v]), dtype))
        return _view(empty, empty.shape, np.bool_) if compares else empty
    with _chain_errors():
        out = run(tuple(key), lambda d: _kiln.ops.elementwise_chain(d, x._type, spec), *tensors)
    # A comparison last gives 0 or 1: a bool tensor, as numpy's.
    return _view(out, out.shape, np.bool_) if compares else out


def reduce(op: str, x: Any, keepdims: bool = False) -> Tensor:
    """A reduction (sum mean max min prod) over the last axis of a 2-D
    tensor: [rows, cols] -> [rows] ([rows, 1] with keepdims). (ops::Reduce;
    for any axes and ranks use sum, mean, prod, amax, amin.)"""
    _check_reduce_op(op, "reduce")
    keepdims = _flag(keepdims, f"reduce {op}: keepdims")
    x = _as_tensor(x, None)
    key = ("reduce", op, keepdims, x._sig)
    return run(key, lambda d: _kiln.ops.reduce(d, op, x._type, keepdims), x)




# ---------------------------------------------------------------------------
# Argument checks shared by the operators below. kiln's C++ builders check
# everything again; these name the Python argument and normalise negative
# axes so that equal calls share a cache entry.

_I64_MAX = 2**63 - 1
_I64_MIN = -2**63


def _clamp64(v: int) -> int:
    return builtins.max(_I64_MIN, builtins.min(v, _I64_MAX))


def _flag(v: Any, what: str) -> bool:
    """A flag: a bool (numpy's too), never another value taken as true or
    false."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise ArgumentTypeError(f"{what} must be a bool; got {v!r}")


def _check_reduce_op(op: Any, fn: str) -> None:
    if not isinstance(op, str) or op not in ("sum", "mean", "max", "min", "prod"):
        raise _kiln.InvalidArgument(
            f"{fn}: unknown reduce op {op!r}; the ops are sum, mean, max, min and prod")


def _integer(v: Any) -> Optional[int]:
    """v as an int where numpy takes it as one (an int, a numpy integer, a 0-d
    integer array or tensor, anything else with __index__ but no axes; never
    a bool or a timedelta), else None."""
    if isinstance(v, (bool, np.bool_, np.timedelta64)):
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if getattr(v, "ndim", 0) != 0 or not hasattr(type(v), "__index__"):
        return None
    try:
        i = operator.index(v)
    except TypeError:  # (a 0-d array or tensor of another dtype)
        return None
    return i if isinstance(i, int) and not isinstance(i, bool) else None


def _listed(v: Any) -> Any:
    """A 1-D numpy array of integers as a list of its ints (numpy takes one
    wherever it takes a list of axes, sizes or bounds); anything else as
    it is."""
    if isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind in "iu":
        return [int(e) for e in v]
    return v


def _shown_dtype(dtype: Any) -> str:
    """numpy's name of a dtype, or str() of what numpy does not read as one."""
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)


def _int(v: Any, what: str) -> int:
    if (i := _integer(v)) is not None:
        return i
    raise ArgumentTypeError(f"{what} must be an int; got {type(v).__name__}")


def _size(v: Any, what: str) -> int:
    """An int that is a size, count or offset: a 64-bit one (the kernels
    check their own, smaller limits)."""
    v = _int(v, what)
    if not _I64_MIN <= v <= _I64_MAX:
        raise _kiln.InvalidArgument(f"{what} is {v}; kiln's sizes and offsets fit in 64 bits")
    return v


def _axis(a: Any, ndim: int, what: str) -> int:
    a = _int(a, what)
    if not -ndim <= a < ndim:
        raise _kiln.InvalidArgument(
            f"{what} is {a}; for a tensor of rank {ndim} it must be in [{-ndim}, {ndim})")
    return a + ndim if a < 0 else a


def _axes(axis: Any, ndim: int, fn: str) -> List[int]:
    axis = _listed(axis)
    if axis is None:
        return list(range(ndim))
    if ndim == 0 and _integer(axis) in (0, -1):  # numpy's reductions of a 0-d array take these
        return []
    if isinstance(axis, (tuple, list)):
        axes = [_axis(a, ndim, f"{fn}: axis entry {i}") for i, a in enumerate(axis)]
    else:
        axes = [_axis(axis, ndim, f"{fn}: axis")]
    if len(set(axes)) != len(axes):
        raise _kiln.InvalidArgument(f"{fn}: axis {tuple(axis)} lists an axis twice")
    return sorted(axes)


def _ints(v: Any, n: int, what: str) -> List[int]:
    """An int for every axis, or a sequence of n ints."""
    v = _listed(v)
    if _integer(v) is not None:
        return [_size(v, what)] * n
    if not isinstance(v, (tuple, list)) or len(v) != n:
        raise ArgumentTypeError(f"{what} must be an int or {n} ints (one per axis); got {v!r}")
    return [_size(e, f"{what} entry {i}") for i, e in enumerate(v)]


def _view(t: Tensor, shape: Sequence[int], dtype: Any = None) -> Tensor:
    """t's buffer with another shape of as many elements (no copy)."""
    name = np.dtype(t.dtype if dtype is None else dtype).name
    return _kiln._view(t, [int(d) for d in shape], name)


def _shaped(y: Tensor, shape: Tuple[int, ...]) -> Tensor:
    return y if tuple(y.shape) == shape else _view(y, shape)


def _device_of(*operands: Any) -> Optional[_kiln.Device]:
    return next((x.device for x in operands if isinstance(x, Tensor)), None)


# ---------------------------------------------------------------------------
# Reductions over axes, arg-reductions, softmax, norms


def reduce_axes(op: str, x: Any, axis: Union[None, int, Sequence[int]] = None,
                keepdims: bool = False) -> Tensor:
    """A reduction (sum mean max min prod) over `axis` (None: every axis; an
    int or a tuple of ints, negative ones counting from the end), as numpy
    reduces: the reduced axes dropped, or kept as 1 with keepdims; reducing
    every axis without keepdims gives a 0-d tensor. One kernel
    (ops::ReduceAxes); float16 accumulates in float32; max and min
    propagate NaN. int32 (and bool, as int32 0 or 1: sum counts) reduces in
    int32, sums and products wrapping; max and min of bools are bools, as
    numpy's; mean takes floats."""
    return _reduce_axes("reduce_axes", op, x, axis, keepdims)


def _reduce_axes(fn: str, op: str, x: Any, axis: Any, keepdims: Any) -> Tensor:
    """reduce_axes, its refusals naming `fn`, the function called."""
    _check_reduce_op(op, fn)
    bools = getattr(x, "dtype", None) == np.bool_  # (which reach the kernels as int32)
    x = _operand(x, None)
    if x.dtype in _BYTE_DTYPES:  # its values in int32; max and min back in its dtype
        if op == "mean":
            raise _kiln.InvalidArgument(
                f"{fn}: input X of reduce mean is {np.dtype(x.dtype).name}; mean takes f32 or f16 "
                f"(cast it first)")
        y = _reduce_axes(fn, op, _unpacked(x, fn), axis, keepdims)
        return _packed(y, x.dtype) if op in ("max", "min") else y
    if op == "mean" and (bools or x.dtype in (np.int32, np.uint32)):
        what = "bool" if bools else "i32" if x.dtype == np.int32 else "u32"
        raise _kiln.InvalidArgument(
            f"{fn}: input X of reduce mean is {what}; mean takes f32 or f16 (cast it first)")
    keepdims = _flag(keepdims, f"reduce {op}: keepdims")
    axes = _axes(axis, x.ndim, f"reduce {op}")
    if not axes:
        # axis=() or a 0-d x: nothing reduced, as numpy: each element is its
        # own reduction (a copy; bools as int32, which sums count in).
        same = _view(reshape(_view(x, [x.size]), [x.size]), x.shape) if x.size else \
            _view(x, x.shape)
        return _bools(same) if bools and op in ("max", "min") else same
    host = {"sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min}
    if op in host:
        empty = _empty_result(f"reduce {op}", [x], lambda a: host[op](
            a, axis=tuple(axes), keepdims=keepdims).astype(a.dtype), any_rank=True)
        if empty is not None:
            return _bools(empty) if bools and op in ("max", "min") else empty
    if x.ndim > 4 and axes:
        # Kernels take ranks 1 to 4: adjacent reduced axes merge, as do
        # adjacent kept ones (axes of 1 dropped).
        groups: List[List[Any]] = []
        for d, n in enumerate(x.shape):
            if n != 1 and groups and groups[-1][0] == (d in axes):
                groups[-1][1] *= n
            elif n != 1:
                groups.append([d in axes, n])
        if not any(r for r, _ in groups):
            groups.append([True, 1])
        want = [1 if d in axes else n for d, n in enumerate(x.shape) if keepdims or d not in axes]
        if len(groups) <= 4:
            view = _view(x, [n for _, n in groups], np.bool_ if bools else None)
            y = _reduce_axes(fn, op, view, [k for k, (r, _) in enumerate(groups) if r], False)
        else:  # reduced and kept axes alternate: the last reduced axis first, then the rest
            last = builtins.max(axes)
            # (float16 sums accumulate in float32 and round once, as in one pass)
            wide = x.dtype == np.float16 and op not in ("max", "min")
            first = cast(x, "float32") if wide else _view(x, x.shape, np.bool_ if bools else None)
            y = _reduce_axes(fn, op, first, [last], True)
            y = _reduce_axes(fn, op, y, [a for a in axes if a != last], True)
            y = cast(y, "float16") if wide else y
        return _view(y, want)
    key = ("reduce_axes", op, tuple(axes), keepdims, x._sig)
    y = run(key, lambda d: _kiln.ops.reduce_axes(d, op, x._type, axes, keepdims), x, name=fn)
    want = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keepdims or d not in axes)
    y = _shaped(y, want)
    return _bools(y) if bools and op in ("max", "min") else y


def _arg_reduce(op: str, x: Any, axis: Optional[int], keepdims: bool) -> Tensor:
    x = _operand(x, None)
    if x.dtype in _BYTE_DTYPES:  # (its values, in int32)
        x = _unpacked(x, op)
    keepdims = _flag(keepdims, f"{op}: keepdims")
    if axis is None or (x.ndim == 0 and _integer(axis) in (0, -1)):
        # over the flattened tensor, as numpy (whose 0-d arrays take axis 0 and -1)
        y = _arg_reduce(op, _view(x, (x.size,)), 0, False)
        return _view(y, (1,) * x.ndim) if keepdims else y
    a = _axis(axis, x.ndim, f"{op}: axis")
    host = np.argmax if op == "argmax" else np.argmin
    empty = _empty_result(op, [x], lambda v: host(v, axis=a, keepdims=keepdims).astype(np.int32),
                          any_rank=True)
    if empty is not None:
        return empty
    if x.ndim > 4:  # (kernels take ranks 1 to 4: the axes before and after merge)
        y = _arg_reduce(op, _view(x, (math.prod(x.shape[:a]), x.shape[a],
                                      math.prod(x.shape[a + 1:]))), 1, False)
        return _view(y, [1 if d == a else n for d, n in enumerate(x.shape)
                         if keepdims or d != a])
    key = ("arg_reduce", op, a, keepdims, x._sig)
    y = run(key, lambda d: _kiln.ops.arg_reduce(d, op, x._type, a, keepdims), x, name=op)
    want = tuple(1 if d == a else n for d, n in enumerate(x.shape) if keepdims or d != a)
    return _shaped(y, want)


def argmax(x: Any, axis: Optional[int] = -1, keepdims: bool = False) -> Tensor:
    """The int32 index of the largest element along `axis` (None: of the
    flattened tensor): the first on ties; a NaN counts as larger than every
    number, so the first NaN's index where there is one (numpy's rule)."""
    return _arg_reduce("argmax", x, axis, keepdims)


def argmin(x: Any, axis: Optional[int] = -1, keepdims: bool = False) -> Tensor:
    """The int32 index of the smallest element along `axis` (None: of the
    flattened tensor): the first on ties; the first NaN's index where there
    is one (numpy's rule)."""
    return _arg_reduce("argmin", x, axis, keepdims)


def _along_axis(x: Tensor, a: int, fn: Callable[[Tensor, int], Tensor]) -> Tensor:
    """fn(x, a) for an operator along one axis of x, of rank above 4 (the
    kernels' limit): on x viewed as [before, axis, after], viewed back."""
    view = _view(x, (math.prod(x.shape[:a]), x.shape[a], math.prod(x.shape[a + 1:])))
    return _view(fn(view, 1), x.shape)


def softmax(x: Any, axis: int = -1) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `axis`, numerically stable, in
    one kernel (ops::SoftmaxAxis). A row holding +inf or NaN, or only -inf,
    gives NaN, as in IEEE arithmetic."""
    x = _as_tensor(x, None)
    a = _axis(axis, x.ndim, "softmax: axis")
    if x.ndim > 4:
        return _along_axis(x, a, softmax)
    empty = _empty_result("softmax", [x], lambda v: v,
                          lambda d, ty: _kiln.ops.softmax_axis(d, ty[0], a))
    if empty is not None:
        return empty
    return run(("softmax_axis", a, x._sig), lambda d: _kiln.ops.softmax_axis(d, x._type, a), x,
               name="softmax")


def log_softmax(x: Any, axis: int = -1) -> Tensor:
    """x - max - log(sum(exp(x - max))) along `axis`, in one kernel."""
    x = _as_tensor(x, None)
    a = _axis(axis, x.ndim, "log_softmax: axis")
    if x.ndim > 4:
        return _along_axis(x, a, log_softmax)
    empty = _empty_result("log_softmax", [x], lambda v: v,
                          lambda d, ty: _kiln.ops.log_softmax(d, ty[0], a))
    if empty is not None:
        return empty
    return run(("log_softmax", a, x._sig), lambda d: _kiln.ops.log_softmax(d, x._type, a), x)


def _eps(eps: Any, fn: str) -> float:
    if not isinstance(eps, (int, float, np.floating, np.integer)) or isinstance(eps, bool):
        raise ArgumentTypeError(f"{fn}: eps must be a number; got {type(eps).__name__}")
    return _float(eps, f"{fn}: eps")


def _per_feature(params: Sequence[Any], x: Tensor, fn: str,
                 names: Sequence[str]) -> Tuple[List[Tensor], int]:
    """The norm's per-feature parameters on x's device, and the number k of
    x's trailing axes they normalise over: the first parameter's rank, as
    PyTorch's normalized_shape (a 1-D one: the last axis). Every parameter
    must have the shape of x's last k axes."""
    if x.ndim == 0:
        raise _kiln.InvalidArgument(f"{fn}: x is 0-d; it normalises over its last axis, which "
                                    f"a 0-d tensor does not have")
    ts = [_as_tensor(t, x.device) for t in params]
    k = ts[0].ndim
    if not 1 <= k <= x.ndim:
        raise _kiln.InvalidArgument(
            f"{fn}: {names[0]} has shape {tuple(ts[0].shape)}; it must be the shape of x's "
            f"last axis or axes (x has shape {tuple(x.shape)})")
    want = tuple(x.shape[-k:])
    axes = "x's last axis" if k == 1 else f"x's last {k} axes"
    for t, what in zip(ts, names):
        if tuple(t.shape) != want:
            raise _kiln.InvalidArgument(
                f"{fn}: {what} has shape {tuple(t.shape)}; it must be {want}, {axes}")
    return ts, k


def _over_trailing_axes(x: Tensor, params: Sequence[Tensor], k: int,
                        norm: Callable[..., Tensor]) -> Optional[Tensor]:
    """A norm over x's last k > 1 axes, or over the last axis of an x of
    rank above 4 (the kernels' limit), as the norm over the last axis of x
    viewed as [rows, features] (no copy), its result viewed back; None for
    k == 1 and rank 1 to 4 (the caller's own path)."""
    if k == 1 and x.ndim <= 4:
        return None
    features = math.prod(x.shape[-k:])
    flat = (math.prod(x.shape[:-k]), features)
    y = norm(_view(x, flat), *[_view(t, (features,)) for t in params])
    return _view(y, tuple(x.shape))


def layer_norm(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis (the
    biased variance, as numpy's var), in one kernel. gamma and beta have x's
    dtype and the shape of its last axis, or of its last k axes to normalise
    over those together (PyTorch's normalized_shape)."""
    x = _as_tensor(x, _device_of(x, gamma, beta))
    (g, b), k = _per_feature([gamma, beta], x, "layer_norm", ["gamma", "beta"])
    e = _eps(eps, "layer_norm")
    over = _over_trailing_axes(x, [g, b], k, lambda v, gv, bv: layer_norm(v, gv, bv, e))
    if over is not None:
        return over
    empty = _empty_result("layer_norm", [x, g, b], lambda v, *_: v,
                          lambda d, ty: _kiln.ops.layer_norm(d, ty[0], e))
    if empty is not None:
        return empty
    key = ("layer_norm", _key_number(e), x._sig, g._sig, b._sig)
    return run(key, lambda d: _kiln.ops.layer_norm(d, x._type, e), x, g, b)


def rms_norm(x: Any, gamma: Any, eps: float = 1e-6) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * gamma over the last axis, in one kernel;
    gamma has the shape of x's last axis, or of its last k axes to
    normalise over those together."""
    x = _as_tensor(x, _device_of(x, gamma))
    (g,), k = _per_feature([gamma], x, "rms_norm", ["gamma"])
    e = _eps(eps, "rms_norm")
    over = _over_trailing_axes(x, [g], k, lambda v, gv: rms_norm(v, gv, e))
    if over is not None:
        return over
    empty = _empty_result("rms_norm", [x, g], lambda v, _: v,
                          lambda d, ty: _kiln.ops.rms_norm(d, ty[0], e))
    if empty is not None:
        return empty
    return run(("rms_norm", _key_number(e), x._sig, g._sig),
               lambda d: _kiln.ops.rms_norm(d, x._type, e), x, g)


# ---------------------------------------------------------------------------
# Matrix multiplication


def matmul(a: Any, b: Any, *, transpose_a: bool = False, transpose_b: bool = False,
           bias: Any = None, activation: Optional[str] = None, residual: Any = None,
           accumulate: str = "float32") -> Tensor:
    """activation(a @ b + bias) + residual, as numpy's matmul: a is
    [..., M, K] ([..., K, M] with transpose_a), b [..., K, N] ([..., N, K]
    with transpose_b), rank 1 to 4, their batch axes broadcast; a 1-D a or
    b is a row or column vector whose axis is dropped from the result.
    bias is [N]; activation a unary op name (relu, gelu, tanh, ...);
    residual has the result's shape. One kernel with the default tiling
    (ops::DefaultMatmulSchedule); float32 or float16, accumulating in
    float32, or for float16 inputs with accumulate="float16" in float16
    (packed half-precision FMAs: faster where the device has them, with
    float16 rounding at every step of the sum; the epilogue still computes
    in float32)."""
    transpose_a = _flag(transpose_a, "matmul: transpose_a")
    transpose_b = _flag(transpose_b, "matmul: transpose_b")
    device = _device_of(a, b)
    a = _as_tensor(a, device)
    b = _as_tensor(b, a.device)
    drop = []
    if a.ndim == 1 or b.ndim == 1:
        if transpose_a or transpose_b:
            raise _kiln.InvalidArgument("matmul: transpose_a/transpose_b need operands of rank "
                                        "2 or more")
        if a.ndim and b.ndim and a.shape[-1] != b.shape[0 if b.ndim == 1 else -2]:
            # Said of the shapes as given, not of the 1-D operand's matrix view.
            raise _kiln.InvalidArgument(
                f"matmul: A is {list(a.shape)} and B is {list(b.shape)}: the contraction "
                f"dimension differs ({a.shape[-1]} against {b.shape[0 if b.ndim == 1 else -2]})")
        if a.ndim == 1:
            a = _view(a, (1, a.shape[0]))
            drop.append(-2)
        if b.ndim == 1:
            b = _view(b, (b.shape[0], 1))
            drop.append(-1)
        if residual is not None:
            raise _kiln.InvalidArgument("matmul: a residual needs operands of rank 2 or more")
    if accumulate not in ("float32", "float16"):
        raise (_kiln.InvalidArgument if isinstance(accumulate, str) else ArgumentTypeError)(
            f"matmul: accumulate must be 'float32' or 'float16'; got {accumulate!r}")
    if activation is not None and not isinstance(activation, str):
        raise ArgumentTypeError(
            f"matmul: activation must be a unary op name or None; got {activation!r}")
    act = activation or ""
    bias_t = residual_t = None
    if bias is not None:
        bias_t = _as_tensor(bias, a.device)
    if residual is not None:
        residual_t = _as_tensor(residual, a.device)
    if builtins.max(a.ndim, b.ndim) > 4:
        # Kernels take ranks 1 to 4: batch axes that both operands broadcast
        # alike merge (axes of 1 dropped), leaving at most two.
        try:
            batch = tuple(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
        except ValueError:
            raise _kiln.InvalidArgument(
                f"matmul: the batch axes of A {list(a.shape)} and B {list(b.shape)} do not "
                f"broadcast") from None
        out = batch + (a.shape[-1] if transpose_a else a.shape[-2],
                       b.shape[-2] if transpose_b else b.shape[-1])
        if residual_t is not None and tuple(residual_t.shape) != out:
            raise _kiln.InvalidArgument(
                f"matmul: residual has shape {list(residual_t.shape)}; it must have the "
                f"result's shape {list(out)}")
        merged = _merged_axes([a.shape[:-2], b.shape[:-2], batch], batch)
        if merged is None or len(merged[0]) > 2:
            raise _kiln.InvalidArgument(
                f"matmul: A {list(a.shape)} and B {list(b.shape)}: kernels take ranks 1 to 4, "
                f"and with batch axes of 1 dropped and adjacent ones both broadcast alike "
                f"merged, more than 2 batch axes remain")
        y = matmul(_view(a, merged[0] + tuple(a.shape[-2:])),
                   _view(b, merged[1] + tuple(b.shape[-2:])),
                   transpose_a=transpose_a, transpose_b=transpose_b, bias=bias_t,
                   activation=activation, accumulate=accumulate,
                   residual=None if residual_t is None else
                   _view(residual_t, merged[2] + tuple(residual_t.shape[-2:])))
        y = _view(y, batch + tuple(y.shape[-2:]))
    elif not a.size or not b.size:
        y = _empty_matmul(a, b, bool(transpose_a), bool(transpose_b), bias_t, act, residual_t,
                          accumulate)
    else:
        y = _matmul(a, b, bool(transpose_a), bool(transpose_b), bias_t, act, residual_t,
                    accumulate)
    if drop:
        shape = list(y.shape)
        for d in sorted(drop):
            del shape[d]
        y = _view(y, shape)
    return y


def _empty_matmul(a: Tensor, b: Tensor, transpose_a: bool, transpose_b: bool,
                  bias_t: Optional[Tensor], act: str, residual_t: Optional[Tensor],
                  accumulate: str) -> Tensor:
    """A matmul with an operand of no elements: an empty result, or where
    only K is 0, a @ b is zeros and the epilogue runs on them."""
    def product(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.matmul(np.swapaxes(x, -1, -2) if transpose_a else x,
                         np.swapaxes(y, -1, -2) if transpose_b else y)
    def check(d: _kiln.Device, types: List[Any]) -> Any:
        return _kiln.ops.matmul(d, types[0], types[1], transpose_a, transpose_b,
                                _probe(bias_t._type if bias_t is not None else None), act,
                                _probe(residual_t._type if residual_t is not None else None),
                                accumulate)
    _same_device("matmul", [t for t in (a, b, bias_t, residual_t) if t is not None])
    zeros = _empty_result("matmul", [a, b], product, check)
    assert zeros is not None
    if not zeros.size:
        return zeros
    y = zeros
    if bias_t is not None:
        y = add(y, bias_t)
    if act:
        y = elementwise(act, y)
    if residual_t is not None:
        y = add(y, residual_t)
    return y


def _matmul(a: Tensor, b: Tensor, transpose_a: bool, transpose_b: bool,
            bias_t: Optional[Tensor], act: str, residual_t: Optional[Tensor],
            accumulate: str = "float32") -> Tensor:
    inputs = [a, b] + [t for t in (bias_t, residual_t) if t is not None]
    key = ("matmul", a._sig, b._sig, bool(transpose_a), bool(transpose_b),
           bias_t._sig if bias_t is not None else None, act,
           residual_t._sig if residual_t is not None else None, accumulate)
    y = run(key, lambda d: _kiln.ops.matmul(
        d, a._type, b._type, bool(transpose_a), bool(transpose_b),
        bias_t._type if bias_t is not None else None, act,
        residual_t._type if residual_t is not None else None, accumulate), *inputs)
    return y


def matmul_int8(a: Any, b: Any) -> Tensor:
    """The int8 matmul: a @ b.T with exact int32 sums (ops::MatmulInt8,
    dot4I8Packed). a is int8 [..., M, K]; b is int8 [..., N, K], the right
    operand transposed as weights are stored; rank 2 to 4, batch axes
    broadcasting. K must be a multiple of 4 (pad both with zeros along K
    otherwise); sums are exact for K < 131072. The result is int32
    [..., M, N]; with an operand of no elements it is empty, or zeros where
    K is 0, as matmul's (no kernel runs)."""
    device = _device_of(a, b)
    a = _as_tensor(a, device)
    b = _as_tensor(b, a.device)
    for name, t in (("a", a), ("b", b)):
        # Named with the operands' shapes (the kernel sees K/4 int8x4 words).
        if not 2 <= t.ndim <= 4:
            raise _kiln.InvalidArgument(
                f"matmul_int8: {name} has shape {list(t.shape)}; it needs rank 2 to 4")
        words = math.prod(builtins.max(int(d), 1) for d in t.shape[:-1]) * \
            builtins.max(int(t.shape[-1]) // 4, 1)
        if words > 2**30:
            raise _kiln.InvalidArgument(
                f"matmul_int8: {name} has shape {list(t.shape)}; a kernel's operand holds at "
                f"most 2^30 words of four int8")
    if not a.size or not b.size:
        _same_device("matmul_int8", [a, b])  # (as the call with elements)
        return _empty_matmul_int8(a, b)
    return run(("matmul_int8", a._sig, b._sig),
               lambda d: _kiln.ops.matmul_int8(d, a._type, b._type), a, b)


def _empty_matmul_int8(a: Tensor, b: Tensor) -> Tensor:
    """matmul_int8 with an operand of no elements: an empty result, or where
    only K is 0, zeros (sums of nothing), as matmul gives. What the call
    with elements refuses is refused: the operands' dtypes, K and batch axes
    here, with their shapes, then the kernel for them with every 0 extent
    as 1 (K as 4) is built, not run."""
    for name, t in (("a", a), ("b", b)):
        dtype = np.dtype(t.dtype).name
        if dtype != "int8":
            raise _kiln.InvalidArgument(
                f"matmul_int8: {name} is {dtype}{list(t.shape)}; it must be int8")
        if t.shape[-1] % 4:
            raise _kiln.InvalidArgument(
                f"matmul_int8: K = {t.shape[-1]} (the last axis of {name} {list(t.shape)}) is "
                f"not a multiple of 4; pad both operands with zeros along K")
    if a.shape[-1] != b.shape[-1]:
        raise _kiln.InvalidArgument(
            f"matmul_int8: a is {list(a.shape)} and b {list(b.shape)}: the contraction "
            f"dimension K differs ({a.shape[-1]} against {b.shape[-1]})")
    try:
        batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except ValueError:
        raise _kiln.InvalidArgument(
            f"matmul_int8: batch dimensions: shapes {list(a.shape[:-2])} and "
            f"{list(b.shape[:-2])} do not broadcast (a is {list(a.shape)}, b "
            f"{list(b.shape)})") from None

    def probe(t: Tensor) -> Any:
        shape = [builtins.max(int(d), 1) for d in t.shape]
        shape[-1] = builtins.max(int(t.shape[-1]), 4)
        return shape, "int8"
    _kiln.ops.matmul_int8(a.device, probe(a), probe(b))
    return _from_host(np.zeros(tuple(batch) + (a.shape[-2], b.shape[-2]), np.int32), a)


# ---------------------------------------------------------------------------
# Data movement, where and cast (float32, float16 with shader-f16, int32)


_WORD_DTYPES = (np.dtype(np.bool_), np.dtype(np.uint32))


def _words(*ts: Tensor) -> Optional[List[Tensor]]:
    """Where every tensor is bool, or every one uint32 (32-bit words the
    data movement kernels take as int32: a bool is its 0 or 1), each as
    int32 words; else None. _like(result, ts[0]) gives the result back its
    dtype."""
    dtype = np.dtype(ts[0].dtype)
    if dtype not in _WORD_DTYPES or any(t.dtype != dtype for t in ts):
        return None
    return [_view(t, t.shape, np.int32) for t in ts]


def _like(t: Tensor, proto: Tensor) -> Tensor:
    """t (int32 words) as proto's dtype."""
    return _view(t, t.shape, proto.dtype)


_BYTE_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8))


def _unpacked(t: Tensor, what: str) -> Tensor:
    """An int8 or uint8 tensor's values as an int32 tensor of its shape (one
    kernel reading its bytes as the int32 words they are packed in); errors
    name `what`."""
    if not t.size:
        return _from_host(np.zeros(t.shape, np.int32), t)
    most = t.device.limits["max_storage_buffer_binding_size"]
    if 4 * t.size > most:
        raise _kiln.InvalidArgument(
            f"{what}: {'an' if t.dtype == np.int8 else 'a'} {np.dtype(t.dtype).name} tensor "
            f"moves as its values in int32 (4 bytes "
            f"each), and {t.size} of them are more than the device binds of one buffer "
            f"({most} bytes, maxStorageBufferBindingSize); split it (on the host) into parts of "
            f"at most {most // 4} elements")
    words = _view(t, ((t.size + 3) // 4,), np.int32)
    y = run(("unpack_bytes", t._sig), lambda d: _kiln.ops.unpack_bytes(d, t._type), words)
    return _view(y, t.shape)


def _packed(t: Tensor, dtype: Any) -> Tensor:
    """An int32 tensor as one of the 8-bit `dtype` (each value's low 8 bits,
    wrapping as numpy's astype; one kernel packing them four to a word)."""
    if not t.size:
        return _from_host(np.zeros(t.shape, dtype), t)
    flat = _view(t, (t.size,))
    y = run(("pack_bytes", flat._sig), lambda d: _kiln.ops.pack_bytes(d, [t.size]), flat)
    return _view(y, t.shape, dtype)


def _movable(what: str, *ts: Tensor) -> Optional[Tuple[List[Tensor], Callable[[Tensor], Tensor]]]:
    """Where every tensor is bool, or every one uint32, int8 or uint8 (dtypes
    the data movement kernels do not take), each as int32 (a view of a bool's
    0 or 1 or a uint32's bits; an 8-bit tensor's values, unpacked), and the
    function that gives a result back their dtype (a view, or a pack); else
    None."""
    if (ints := _words(*ts)) is not None:
        return ints, lambda y: _like(y, ts[0])
    dtype = np.dtype(ts[0].dtype)
    if dtype in _BYTE_DTYPES and all(t.dtype == dtype for t in ts):
        return [_unpacked(t, what) for t in ts], lambda y: _packed(y, dtype)
    return None


def _integer_value(v: Any, dtype: Any, what: str) -> int:
    """The number v, an integer in the range of the integer `dtype` (int8,
    uint8, uint32) a tensor of it needs; else an error naming `what`."""
    info = np.iinfo(dtype)
    if not _is_number(v):
        raise ArgumentTypeError(f"{what}: must be a number; got {type(v).__name__}")
    try:
        n = _number(v)
    except _kiln.InvalidArgument as e:
        raise _kiln.InvalidArgument(f"{what}: {e}") from None
    if not _is_integer_value(n, dtype):
        raise _kiln.InvalidArgument(
            f"{what}: {v!r} is not {'an' if info.dtype.name.startswith('int') else 'a'} "
            f"{info.dtype.name} value (an integer in [{info.min}, "
            f"{info.max}]), which the {info.dtype.name} tensor needs")
    return int(n)


def _bools(t: Tensor) -> Tensor:
    return _view(t, t.shape, np.bool_)


def _uint32_word(v: Any, what: str) -> int:
    """The number v, an integer in uint32's range, as the int32 with its
    bits (how a uint32 tensor's kernel moves it); else an error naming
    `what`."""
    n = _integer_value(v, np.uint32, what)
    return n - 2**32 if n >= 2**31 else n


def permute(x: Any, axes: Sequence[int]) -> Tensor:
    """numpy's transpose with explicit axes: output axis d is x's axis
    axes[d] (negative ones counting from the end). A copy."""
    x = _as_tensor(x, None)
    if (m := _movable("permute", x)) is not None:
        return m[1](permute(m[0][0], axes))
    axes = _listed(axes)
    if not isinstance(axes, (tuple, list)) or len(axes) != x.ndim:
        raise _kiln.InvalidArgument(
            f"permute: axes must list each of x's {x.ndim} axes once; got {axes!r}")
    perm = [_axis(v, x.ndim, f"permute: axes entry {i}") for i, v in enumerate(axes)]
    if x.ndim == 0:  # numpy's transpose of a 0-d array: itself (a copy, as shape (1,))
        return _view(permute(_view(x, (1,)), [0]), ())
    if x.ndim > 4 and len(set(perm)) != len(perm):
        raise _kiln.InvalidArgument(
            f"permute: axes must list each of x's {x.ndim} axes once; got {axes!r}")
    if x.ndim > 4:
        # Kernels take ranks 1 to 4: axes of 1 dropped, and input axes that
        # stay adjacent and in order in the output merged.
        wide = [a for a in range(x.ndim) if x.shape[a] != 1]  # (in input order)
        runs: List[List[int]] = []
        for a in (a for a in perm if x.shape[a] != 1):
            if runs and wide.index(a) == wide.index(runs[-1][-1]) + 1:
                runs[-1].append(a)
            else:
                runs.append([a])
        if len(runs) <= 4:
            order = sorted(range(len(runs)), key=lambda k: runs[k][0])
            view = _view(x, [math.prod(x.shape[a] for a in runs[k]) for k in order] or [1])
            y = permute(view, [order.index(k) for k in range(len(runs))] or [0])
            return _view(y, [x.shape[a] for a in perm])
        # In passes that each move one axis into place after those placed
        # (each at most 4 runs: the placed, the moved, the rest on either side).
        y, at = x, list(range(x.ndim))
        for i, a in enumerate(perm):
            j = at.index(a)
            if j != i:
                step = list(range(i)) + [j] + [k for k in range(i, x.ndim) if k != j]
                y, at = permute(y, step), [at[k] for k in step]
        return y
    empty = _empty_result("permute", [x], lambda v: np.transpose(v, perm),
                          lambda d, types: _kiln.ops.permute(d, types[0], perm))
    if empty is not None:
        return empty
    return run(("permute", tuple(perm), x._sig),
               lambda d: _kiln.ops.permute(d, x._type, perm), x)


def transpose(x: Any, axes: Optional[Sequence[int]] = None) -> Tensor:
    """permute(x, axes); axes None reverses the axes, as numpy."""
    x = _as_tensor(x, None)
    return permute(x, list(range(x.ndim))[::-1] if axes is None else axes)


def reshape(x: Any, shape: Union[int, Sequence[int]]) -> Tensor:
    """A copy of x with `shape` (as many elements; one entry may be -1)."""
    x = _as_tensor(x, None)
    if (m := _movable("reshape", x)) is not None:
        return m[1](reshape(m[0][0], shape))
    shape = [shape] if _integer(shape) is not None else _listed(shape)
    if not isinstance(shape, (tuple, list)):
        raise ArgumentTypeError(f"reshape: shape must be an int or ints; got {shape!r}")
    s = [_size(v, f"reshape: shape entry {i}") for i, v in enumerate(shape)]
    if len(s) > 4 and builtins.all(v >= -1 for v in s):
        # (kernels give ranks 1 to 4; the elements are in order: a 1-D copy
        # viewed with the shape, which numpy's rules complete)
        known = math.prod(v for v in s if v != -1)
        full = [x.size // known if v == -1 and known else v for v in s]
        if s.count(-1) > 1 or math.prod(full) != x.size or -1 in full:
            raise _kiln.InvalidArgument(
                f"reshape: cannot reshape a tensor of {x.size} elements into shape {tuple(s)}")
        return _view(reshape(x, [x.size]), full)
    if x.ndim > 4:  # (kernels take ranks 1 to 4; the elements are in order)
        x = _view(x, (x.size,))
    if not x.ndim or not s:  # 0-d in or out: the one element as shape (1,)
        if x.size != 1 or builtins.any(v not in (1, -1) for v in s) or s.count(-1) > 1:
            raise _kiln.InvalidArgument(
                f"reshape: cannot reshape a tensor of {x.size} elements into shape {tuple(s)}")
        return _view(reshape(_view(x, (1,)), [1]), [1] * len(s))
    empty = _empty_result("reshape", [x], lambda v: np.reshape(v, s))
    if empty is not None:
        return empty
    return run(("reshape", tuple(s), x._sig), lambda d: _kiln.ops.reshape(d, x._type, s), x)


def stack(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    """The tensors (one shape and dtype) joined along a new axis `axis`, as
    numpy's stack."""
    if not isinstance(tensors, (tuple, list)) or not tensors:
        raise _kiln.InvalidArgument("stack: tensors must be a non-empty list of tensors")
    device = _device_of(*tensors)
    ts = [_as_tensor(t, device) for t in tensors]
    for k, t in enumerate(ts[1:], 1):
        if tuple(t.shape) != tuple(ts[0].shape):
            raise _kiln.InvalidArgument(
                f"stack: tensors[{k}] has shape {tuple(t.shape)} and tensors[0] "
                f"{tuple(ts[0].shape)}; stack takes tensors of one shape")
    a = _axis(axis, ts[0].ndim + 1, "stack: axis")
    return concat([_view(t, t.shape[:a] + (1,) + t.shape[a:]) for t in ts], a)


def expand_dims(x: Any, axis: Union[int, Sequence[int]]) -> Tensor:
    """x with axes of extent 1 inserted at `axis` (an int or a tuple, of the
    result's axes), as numpy's expand_dims; a copy."""
    x = _as_tensor(x, None)
    axis = _listed(axis)
    listed = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    rank = x.ndim + len(listed)
    new = [_axis(a, rank, f"expand_dims: axis entry {i}") for i, a in enumerate(listed)]
    if len(set(new)) != len(new):
        raise _kiln.InvalidArgument(f"expand_dims: axis {axis!r} repeats an axis")
    dims = iter(x.shape)
    return reshape(x, [1 if d in new else next(dims) for d in range(rank)])


def squeeze(x: Any, axis: Union[None, int, Sequence[int]] = None) -> Tensor:
    """x without its axes of extent 1 (those of `axis`, each of extent 1,
    where given), as numpy's squeeze; a copy."""
    x = _as_tensor(x, None)
    axes = [d for d, n in enumerate(x.shape) if n == 1] if axis is None else \
        _axes(axis, x.ndim, "squeeze")
    for d in axes:
        if x.shape[d] != 1:
            raise _kiln.InvalidArgument(
                f"squeeze: axis {d} has extent {x.shape[d]}; only axes of extent 1 are removed")
    return reshape(x, [n for d, n in enumerate(x.shape) if d not in axes])


def var(x: Any, axis: Union[None, int, Sequence[int]] = None, keepdims: bool = False,
        ddof: int = 0) -> Tensor:
    """The variance over `axis`, as numpy's var: the mean of squared
    deviations from the mean, divided by N - ddof (float16 computed in
    float32; integers and bools in float32, where numpy takes float64);
    where N - ddof <= 0 a division by 0, inf or NaN, as numpy's."""
    x = _as_tensor(x, None)
    if x.dtype not in (np.float32, np.float16):  # (numpy's float64 of integers: float32)
        x = cast(x, "float32")
    keepdims = _flag(keepdims, "var: keepdims")
    ddof = _int(ddof, "var: ddof")
    axes = _axes(axis, x.ndim, "var")
    kept = [d for d in range(x.ndim) if d not in axes]
    if x.ndim > 4 and axes and kept:
        # Kernels take ranks 1 to 4: the reduced axes moved last and seen as
        # one, the kept ones as another.
        rows = math.prod(x.shape[d] for d in kept)
        flat = reshape(permute(x, kept + axes), [rows, math.prod(x.shape[d] for d in axes)])
        y = var(flat, 1, ddof=ddof)
        return reshape(y, [1 if d in axes else x.shape[d] for d in range(x.ndim)] if keepdims
                       else [x.shape[d] for d in kept])
    wide = cast(x, "float32") if x.dtype == np.float16 else x
    d = sub(wide, mean(wide, tuple(axes), keepdims=True))
    n = math.prod(x.shape[a] for a in axes)
    s = sum(mul(d, d), tuple(axes), keepdims=keepdims)
    y = div(s, float(builtins.max(n - ddof, 0)))  # (by 0: inf or NaN, as numpy's)
    return cast(y, "float16") if x.dtype == np.float16 else y


def std(x: Any, axis: Union[None, int, Sequence[int]] = None, keepdims: bool = False,
        ddof: int = 0) -> Tensor:
    """The standard deviation over `axis`, sqrt(var), as numpy's std."""
    v = var(x, axis, keepdims=keepdims, ddof=ddof)
    return sqrt(v)


def concat(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    """The tensors (one dtype and rank, equal but along `axis`) joined along
    `axis`, as numpy's concatenate."""
    if not isinstance(tensors, (tuple, list)) or not tensors:
        raise _kiln.InvalidArgument("concat: tensors must be a non-empty list of tensors")
    device = _device_of(*tensors)
    ts = [_as_tensor(t, device) for t in tensors]
    _same_device("concat", ts)
    if (m := _movable("concat", *ts)) is not None:
        return m[1](concat(m[0], axis))
    if len({np.dtype(t.dtype).name for t in ts}) > 1:
        raise _kiln.InvalidArgument(
            "concat: the tensors have dtypes " + ", ".join(np.dtype(t.dtype).name for t in ts) +
            "; they must have one (cast first)")
    a = _axis(axis, ts[0].ndim, "concat: axis")
    if ts[0].ndim > 4:
        # Kernels take ranks 1 to 4: the axes before and after `axis` merge.
        for t in ts:
            if t.ndim != ts[0].ndim:
                raise _kiln.InvalidArgument(
                    f"concat: shapes {tuple(ts[0].shape)} and {tuple(t.shape)} differ in rank")
            for d in range(t.ndim):
                if d != a and t.shape[d] != ts[0].shape[d]:
                    raise _kiln.InvalidArgument(
                        f"concat: shapes {tuple(ts[0].shape)} and {tuple(t.shape)} differ in "
                        f"axis {d}, which is not the concatenation axis {a}")
        before, after = math.prod(ts[0].shape[:a]), math.prod(ts[0].shape[a + 1:])
        y = concat([_view(t, (before, t.shape[a], after)) for t in ts], 1)
        return _view(y, list(ts[0].shape[:a]) + [y.shape[1]] + list(ts[0].shape[a + 1:]))
    if any(not t.size for t in ts):
        # numpy's concatenate of the shapes; the result holds the inputs that
        # have elements.
        if any(t.ndim != ts[0].ndim or t.dtype != ts[0].dtype for t in ts):
            raise _kiln.InvalidArgument("concat: the tensors must have one rank and dtype")
        _check_kernel_types("concat", ts)
        for t in ts:
            for d in range(t.ndim):
                if d != a and t.shape[d] != ts[0].shape[d]:
                    raise _kiln.InvalidArgument(
                        f"concat: shapes {tuple(ts[0].shape)} and {tuple(t.shape)} differ in "
                        f"axis {d}, which is not the concatenation axis {a}")
        shape = list(ts[0].shape)
        shape[a] = builtins.sum(t.shape[a] for t in ts)
        if 0 in shape:
            return _from_host(np.zeros(shape, ts[0].dtype), ts[0])
        ts = [t for t in ts if t.size]
    if len(ts) == 1:
        _check_kernel_types("concat", ts)  # errors name concat, not the copy
        return reshape(ts[0], ts[0].shape)
    # A kernel binds each input and the output: more inputs than the device
    # binds at once (Dawn: 9) are joined in groups, then the groups joined.
    if len(ts) >= 8 and len(ts) >= (most := ts[0].device.limits[
            "max_storage_buffers_per_shader_stage"]):
        for t in ts[1:]:
            if t.ndim != ts[0].ndim or t.dtype != ts[0].dtype or builtins.any(
                    t.shape[d] != ts[0].shape[d] for d in range(t.ndim) if d != a):
                raise _kiln.InvalidArgument(
                    f"concat: {np.dtype(ts[0].dtype).name}{list(ts[0].shape)} and "
                    f"{np.dtype(t.dtype).name}{list(t.shape)} differ in dtype, rank or an axis "
                    f"other than the concatenation axis {a}")
        step = most - 1
        return concat([concat(ts[i:i + step], a) for i in range(0, len(ts), step)], a)
    key = ("concat", a) + tuple(t._sig for t in ts)
    return run(key, lambda d: _kiln.ops.concat(d, [t._type for t in ts], a), *ts)


def slice(x: Any, starts: Sequence[Optional[int]],  # noqa: A001
          stops: Optional[Sequence[Optional[int]]] = None,
          steps: Optional[Sequence[Optional[int]]] = None) -> Tensor:
    """x[starts[0]:stops[0]:steps[0], starts[1]:...]: Python's slicing on
    each axis (None for an open end or step 1; fewer entries than axes
    leave the rest whole; negative steps reverse). Every output dimension
    may be 0 (an empty tensor, as numpy gives). A copy."""
    x = _as_tensor(x, None)
    if (m := _movable("slice", x)) is not None:
        return m[1](slice(m[0][0], starts, stops, steps))
    n = x.ndim

    def entries(v: Any, what: str) -> List[Any]:
        v = [] if v is None else _listed(v)
        if not isinstance(v, (tuple, list)) or len(v) > n:
            raise _kiln.InvalidArgument(
                f"slice: {what} must be a list of at most {n} entries (one per axis); got {v!r}")
        return list(v) + [None] * (n - len(v))

    st, sp, se = entries(starts, "starts"), entries(stops, "stops"), entries(steps, "steps")
    if n == 0:  # a 0-d tensor has no axis to slice: a copy, as x[()]
        return reshape(x, ())
    b, e, s = [], [], []
    for d in range(n):
        step = 1 if se[d] is None else _int(se[d], f"slice: steps entry {d}")
        if step == 0:
            raise _kiln.InvalidArgument(f"slice: steps entry {d} is 0")
        # Python's meaning is kept by clamping to int64 (ends beyond the
        # axis clamp anyway; a step beyond 2^62 takes one element as any
        # step longer than the axis does).
        b.append((_I64_MIN if step > 0 else _I64_MAX) if st[d] is None
                 else _clamp64(_int(st[d], f"slice: starts entry {d}")))
        e.append((_I64_MAX if step > 0 else _I64_MIN) if sp[d] is None
                 else _clamp64(_int(sp[d], f"slice: stops entry {d}")))
        s.append(builtins.max(-2**62, builtins.min(step, 2**62)))
    ranges = [range(*builtins.slice(b[d], e[d], s[d]).indices(x.shape[d])) for d in range(n)]
    shape = [len(r) for r in ranges]
    if n > 4 and 0 not in shape:
        # (an axis taking one element takes it with step 1: a step of 2^62
        # would overflow once the axes merge)
        return _view(_slice_merged(x, [(x.shape[d], r.start, r.step if len(r) > 1 else 1, len(r))
                                       for d, r in enumerate(ranges)]), shape)
    if 0 in shape:
        _check_kernel_types("slice", [x] if n <= 4 else [_view(x, (x.size,))])
        return _from_host(np.zeros(shape, x.dtype), x)
    key = ("slice", tuple(b), tuple(e), tuple(s), x._sig)
    return run(key, lambda d: _kiln.ops.slice(d, x._type, b, e, s), x)


def _slice_merged(x: Tensor, axes: List[Tuple[int, int, int, int]]) -> Tensor:
    """x (of any rank) sliced by (extent, start, step, count) per axis, every
    index in range, through kernels of rank 1 to 4: an axis merges into the
    one before it where it is taken whole and in order (and the one before
    with step 1), where it takes one element, or where the one before takes
    one; what still has more than 4 axes is sliced in passes, the first
    three axes with the rest whole, then the rest. The result has the
    merged shape (the caller views it)."""
    merged = [axes[0]]
    for d, start, step, count in axes[1:]:
        md, mstart, mstep, mcount = merged[-1]
        if count == d and step == 1 and mstep == 1:
            merged[-1] = (md * d, mstart * d, 1, mcount * d)
        elif count == 1:
            merged[-1] = (md * d, mstart * d + start, mstep * d, mcount)
        elif mcount == 1:
            merged[-1] = (md * d, mstart * d + start, step, count)
        else:
            merged.append((d, start, step, count))
    if len(merged) > 4:
        head, rest = merged[:3], merged[3:]
        whole = math.prod(m[0] for m in rest)
        y = _slice_merged(_view(x, [m[0] for m in head] + [whole]), head + [(whole, 0, 1, whole)])
        taken = math.prod(m[3] for m in head)
        return _slice_merged(_view(y, [taken] + [m[0] for m in rest]),
                             [(taken, 0, 1, taken)] + rest)
    view = _view(x, [m[0] for m in merged])
    starts = [m[1] for m in merged]
    steps = [m[2] for m in merged]
    # The end one step past the last index (none where that is before 0).
    stops = [m[1] + m[2] * m[3] if m[1] + m[2] * m[3] >= 0 else _I64_MIN for m in merged]
    key = ("slice", tuple(starts), tuple(stops), tuple(steps), view._sig)
    return run(key, lambda d: _kiln.ops.slice(d, view._type, starts, stops, steps), view)


def _getitem(x: Tensor, key: Any) -> Tensor:
    """x[key] for ints, slices and one Ellipsis (a copy; an int drops its
    axis)."""
    key = key if isinstance(key, tuple) else (key,)
    if any(k is None for k in key):
        raise TypeError("kiln.Tensor indices are ints, slices and '...'; None "
                        "(np.newaxis) adds no axis here: reshape instead")
    if not x.ndim and all(k is Ellipsis for k in key) and len(key) <= 1:
        return reshape(x, ())  # t[()] and t[...] of a 0-d tensor: a copy
    ellipses = builtins.sum(1 for k in key if k is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n = x.ndim
    if len(key) - ellipses > n:
        raise IndexError(f"too many indices for a tensor of rank {n}: {len(key)}")
    if ellipses:
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (builtins.slice(None),) * (n - len(key) + 1) + key[i + 1:]
    key = key + (builtins.slice(None),) * (n - len(key))
    starts, stops, steps, keep = [], [], [], []
    for d, k in enumerate(key):
        if isinstance(k, builtins.slice):
            starts.append(k.start)
            stops.append(k.stop)
            steps.append(k.step)
            keep.append(x.shape[d])
        elif (i := _integer(k)) is not None:  # (numpy's rule: an int, or a 0-d integer array or tensor)
            if not -x.shape[d] <= i < x.shape[d]:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {x.shape[d]}")
            i = i + x.shape[d] if i < 0 else i
            starts.append(i)
            stops.append(i + 1)
            steps.append(1)
            keep.append(None)
        else:
            of = f" of dtype {_shown_dtype(k.dtype)}" if hasattr(k, "dtype") else ""
            raise TypeError(f"kiln.Tensor indices are ints, slices and '...'; got "
                            f"{type(k).__name__}{of}")
    y = slice(x, starts, stops, steps)
    if None in keep:
        y = _view(y, [s for s, k in zip(y.shape, keep) if k is not None])
    return y


def gather(table: Any, indices: Any) -> Tensor:
    """Embedding lookup: out[..., :] = table[indices[...], :] for a 2-D table
    [V, D] (any dtype) and integer indices of any rank (converted to
    int32). An index outside [0, V) is
    clamped into it (never read out of bounds; not reported)."""
    t = _as_tensor(table, _device_of(table, indices))
    if (m := _movable("gather", t)) is not None:
        return m[1](gather(m[0][0], indices))
    if not isinstance(indices, Tensor):
        try:
            idx = np.asarray(indices)
        except ValueError as e:  # a ragged list
            raise _kiln.InvalidArgument(
                f"gather: indices must be a rectangular array of integers (each row of one "
                f"length): {e}") from None
        if idx.size == 0 and idx.dtype.kind == "f" and not isinstance(indices, np.ndarray):
            idx = idx.astype(np.int32)  # (numpy reads [] as float64: no index, no dtype)
        if idx.dtype.kind not in "iu":
            raise _kiln.InvalidArgument(f"gather: indices must be integers; got {idx.dtype}")
        if idx.size and (idx.min() < -2**31 or idx.max() >= 2**31):
            raise _kiln.InvalidArgument("gather: indices out of the int32 range")
        from ._tensor import tensor
        indices = tensor(idx.astype(np.int32), t.device)
    if isinstance(indices, Tensor) and indices.dtype in _BYTE_DTYPES:  # (as numpy's int8 arrays)
        indices = _unpacked(indices, "gather")
    if isinstance(indices, Tensor) and indices.dtype == np.uint32:
        # As int32 (past 2^31 - 1 an index out of range either way: clamped).
        small = minimum(indices, 2**31 - 1) if indices.size else indices  # noqa: F821 (below)
        indices = _view(small, small.shape, np.int32)
    if isinstance(indices, Tensor) and indices.ndim == 0 and indices.dtype == np.int32:
        # One index: numpy's table[i], a row (kernels take ranks 1 to 3).
        row = gather(t, _view(indices, (1,)))
        return _view(row, row.shape[1:])
    if isinstance(indices, Tensor) and indices.ndim > 3 and indices.dtype == np.int32:
        # (kernels take ranks 1 to 3: the indices in order, as one axis)
        rows = gather(t, _view(indices, (indices.size,)))
        return _view(rows, tuple(indices.shape) + tuple(rows.shape[1:]))
    empty = _empty_result("gather", [t, indices], lambda tv, iv: tv[iv.astype(np.intp)],
                          lambda d, ty: _kiln.ops.gather(d, ty[0], ty[1]))
    if empty is not None:
        return empty
    key = ("gather", t._sig, indices._sig)
    return run(key, lambda d: _kiln.ops.gather(d, t._type, indices._type), t, indices)


def pad(x: Any, before: Union[int, Sequence[int]], after: Union[int, Sequence[int]],
        value: float = 0) -> Tensor:
    """x with before[d] and after[d] (>= 0; an int for every axis) elements
    of `value` on each side of axis d (numpy's pad in constant mode)."""
    x = _as_tensor(x, None)
    if x.dtype == np.bool_ and isinstance(value, (bool, np.bool_, int, np.integer)) and \
            value in (0, 1):
        return _bools(pad(_view(x, x.shape, np.int32), before, after, int(value)))
    if x.dtype == np.uint32:
        word = _uint32_word(value, "pad: value")
        return _like(pad(_view(x, x.shape, np.int32), before, after, word), x)
    if x.dtype in _BYTE_DTYPES:
        v = _integer_value(value, x.dtype, "pad: value")
        return _packed(pad(_unpacked(x, "pad"), before, after, v), x.dtype)
    if x.dtype == np.bool_:
        raise _kiln.InvalidArgument(f"pad: a bool tensor pads with False or True; got {value!r}")
    b = _ints(before, x.ndim, "pad: before")
    a = _ints(after, x.ndim, "pad: after")
    if isinstance(value, (bool, np.bool_)):  # numpy pads with True as 1
        value = int(value)
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(f"pad: value must be a number; got {type(value).__name__}")
    v = _float(value, "pad: value")
    for d, (nb, na) in enumerate(zip(b, a)):
        if nb < 0 or na < 0:
            raise _kiln.InvalidArgument(f"pad: axis {d} is padded by {nb} and {na}; padding must "
                                        f"be at least 0")
    if x.ndim == 0:  # numpy's pad of a 0-d array: no axis padded (a copy, as shape (1,))
        return _view(pad(_view(x, (1,)), 0, 0, v), ())
    if x.ndim > 4:
        # Kernels take ranks 1 to 4: an axis padded on neither side merges
        # into the one before it (whose padding then spans its whole rows).
        axes = [[x.shape[0], b[0], a[0]]]
        for n, nb, na in zip(x.shape[1:], b[1:], a[1:]):
            if nb == na == 0:
                axes[-1] = [axes[-1][0] * n, axes[-1][1] * n, axes[-1][2] * n]
            else:
                axes.append([n, nb, na])
        if len(axes) <= 4:
            y = pad(_view(x, [m[0] for m in axes]), [m[1] for m in axes], [m[2] for m in axes], v)
            return _view(y, [n + nb + na for n, nb, na in zip(x.shape, b, a)])
        # In two passes: the last three axes, then the others.
        keep = [0] * (x.ndim - 3)
        y = pad(x, keep + b[-3:], keep + a[-3:], v)
        return pad(y, b[:-3] + [0] * 3, a[:-3] + [0] * 3, v)
    empty = _empty_result("pad", [x], lambda xv: np.pad(xv, list(zip(b, a)), constant_values=v),
                          lambda d, ty: _kiln.ops.pad(d, ty[0], b, a, v))
    if empty is not None:
        return empty
    key = ("pad", tuple(b), tuple(a), _key_number(v), x._sig)
    return run(key, lambda d: _kiln.ops.pad(d, x._type, b, a, v), x)


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """a where cond is true (non-zero; a float NaN counts as true), else b,
    broadcasting all three like numpy. cond is of any dtype (non-zero is
    true); a or b may be a Python number (taking the other's dtype; both
    numbers: bool where both are bools, float32 where either is a float,
    else int32)."""
    if _fuse.traced(cond, a, b):
        return _fuse.apply("where", [cond, a, b])
    device = _device_of(cond, a, b)
    numbers = (int, float, np.integer, np.floating, np.bool_)
    if isinstance(cond, numbers):  # one condition for every element
        cond = np.array(bool(cond))

    def beside(v: Any, t: Tensor) -> Tuple[Any, Tensor]:
        """A number v and the other operand t: v as a tensor of t's dtype (a
        bool beside bools; else, beside bools, both as int32)."""
        given = t
        if t.dtype == np.bool_:
            if isinstance(v, (bool, np.bool_)):
                from ._tensor import tensor
                return tensor(np.array([bool(v)]), t.device), t
            t = _view(t, t.shape, np.int32)
        if t.dtype in (np.uint32, np.int8, np.uint8):  # (numpy's: the int fits, or fails)
            from ._tensor import tensor
            return tensor(np.array([_integer_value(v, t.dtype, "where")], t.dtype), t.device), t
        return _number_as_tensor(v, t, "where", given), t
    # A number takes the other operand's dtype: exactly for int32 (or an
    # error), rounded for floats; its one-element tensor does not shape the
    # result.
    shaping = [x for x in (cond, a, b) if not isinstance(x, numbers)]
    if isinstance(a, numbers) and isinstance(b, numbers):
        # Numbers alone: bools give bools, a float float32, else int32 (the
        # condition shapes the result).
        from ._tensor import tensor
        if all(isinstance(v, (bool, np.bool_)) for v in (a, b)):
            a = tensor(np.array([bool(a)]), device)
        elif any(isinstance(v, (float, np.floating)) for v in (a, b)):
            a = _number_as_tensor(a, tensor(np.zeros(1, np.float32), device), "where")
        else:
            for v in (a, b):
                if not _is_integer_value(_number(v)):
                    raise _kiln.InvalidArgument(
                        f"where: the number {v!r} is not an int32 value (a and b are numbers, "
                        f"which give int32 where neither is a float)")
            a = _number_as_tensor(a, tensor(np.zeros(1, np.int32), device), "where")
    if isinstance(a, numbers):
        a, b = beside(a, _as_tensor(b, device))
    elif isinstance(b, numbers):
        b, a = beside(b, _as_tensor(a, device))
    a = _as_tensor(a, device)
    b = _as_tensor(b, a.device)
    if (m := _movable("where", a, b)) is not None:
        out = m[1](where(cond, *m[0]))
        try:  # (a number's one-element tensor does not shape the result)
            return _shaped(out, tuple(np.broadcast_shapes(*[np.shape(x) for x in shaping])))
        except ValueError:
            return out
    for t in (a, b):
        if t.dtype in (np.uint32, np.int8, np.uint8) and a.dtype != b.dtype:
            one = f"{'an' if t.dtype == np.int8 else 'a'} {np.dtype(t.dtype).name}"
            raise _kiln.InvalidArgument(
                f"where: a is {np.dtype(a.dtype).name} and b {np.dtype(b.dtype).name}; {one} "
                f"goes with {one} (cast the other with astype)")
    # A bool beside an int32 moves as its int32 0 or 1 (numpy's int result).
    if {a.dtype, b.dtype} == {np.dtype(np.bool_), np.dtype(np.int32)}:
        a, b = (_view(t, t.shape, np.int32) if t.dtype == np.bool_ else t for t in (a, b))
    elif np.bool_ in (a.dtype, b.dtype) and a.dtype != b.dtype:
        raise _kiln.InvalidArgument(
            f"where: a is {np.dtype(a.dtype).name} and b {np.dtype(b.dtype).name}; a bool goes "
            f"with a bool or an int32 (cast the other with astype)")
    c = _as_tensor(cond, a.device)
    if c.dtype in _BYTE_DTYPES:
        c = _unpacked(c, "where")
    if c.dtype in (np.float32, np.float16) and c.dtype != a.dtype:
        c = ne(c, 0)  # (a float condition of another dtype than a's: non-zero, NaN true)
    if c.dtype in _WORD_DTYPES:  # (a bool is 32-bit 0 or 1; a uint32 is non-zero as an int32)
        c = _view(c, c.shape, np.int32)
    if any(not 1 <= np.ndim(x) <= 4 for x in shaping):
        lifted, merged = _kernel_operands([c, a, b], "where")
        if merged is not None:  # (else the kernel's error follows)
            shape = np.broadcast_shapes(*[np.shape(x) for x in shaping])
            return _shaped(where(*lifted), tuple(shape))
    empty = _empty_result("where", [c, a, b],
                          lambda cv, av, bv: np.zeros(np.broadcast_shapes(cv.shape, av.shape,
                                                                          bv.shape), av.dtype),
                          lambda d, ty: _kiln.ops.where(d, *ty))
    if empty is not None:
        return empty
    key = ("where", c._sig, a._sig, b._sig)
    return run(key, lambda d: _kiln.ops.where(d, c._type, a._type, b._type), c, a, b)


_CAST_DTYPES = ("float32", "float16", "int32", "uint32", "int8", "uint8", "bool")


def cast(x: Any, dtype: Any) -> Tensor:
    """x converted to `dtype` (float32, float16, int32, uint32, int8, uint8,
    bool): float to int32 or uint32 truncates toward zero and saturates, NaN
    gives 0; int32 and uint32 keep their bits; to int8 or uint8 goes through
    int32 and keeps the low 8 bits (wrapping, as numpy's astype of
    integers); bool is x != 0 (NaN is true), and a bool x converts as 0 or
    1."""
    return _cast(x, dtype, "cast")


def _cast(x: Any, dtype: Any, what: str) -> Tensor:
    """cast(x, dtype), its errors naming `what` (cast, astype)."""
    name = _dtype_name(dtype, what)
    if _fuse.traced(x):
        return _fuse.apply_cast(x, name, what)
    if name not in _CAST_DTYPES:
        raise _kiln.InvalidArgument(
            f"{what}: dtype {name} is not one kiln casts to; the dtypes are "
            f"{', '.join(_CAST_DTYPES[:-1])} and {_CAST_DTYPES[-1]}")
    x = _as_tensor(x, None)
    if x.dtype in _BYTE_DTYPES:  # its values as int32, then as any dtype
        return _cast(_unpacked(x, what), name, what) if name != x.dtype.name else \
            _packed(_unpacked(x, what), x.dtype)
    if name in ("int8", "uint8"):  # as int32 (truncated, saturated), its low 8 bits
        wide = _view(x, x.shape, np.int32) if x.dtype in _WORD_DTYPES else x
        return _packed(wide if wide.dtype == np.int32 else _cast(wide, "int32", what), name)
    if name == "bool":  # x != 0 (a uint32 is non-zero as an int32)
        return ne(_view(x, x.shape, np.int32) if x.dtype == np.uint32 else x, 0)
    if x.dtype == np.bool_:
        x = _view(x, x.shape, np.int32)
    if not 1 <= x.ndim <= 4:  # kernels take ranks 1 to 4: the elements as one axis
        return _view(cast(_view(x, (x.size,)), name), x.shape)
    words = _view(x, x.shape, np.int32) if x.dtype == np.uint32 else x  # (checked as such)
    empty = _empty_result("cast", [words], lambda v: v.astype(name),
                          lambda d, ty: _kiln.ops.cast(d, ty[0], name))
    if empty is not None:
        return empty
    return run(("cast", name, x._sig), lambda d: _kiln.ops.cast(d, x._type, name), x)


def _from_host(array: np.ndarray, like: Tensor) -> Tensor:
    from ._tensor import tensor
    return tensor(array, like.device)


def _unary(name: str) -> Callable[[Any], Tensor]:
    def op(x: Any) -> Tensor:
        if _fuse.traced(x):
            return _fuse.apply(name, [x])
        x = _operand(x, None)
        if x.dtype in _BYTE_DTYPES:
            return _byte_elementwise(name, [x])
        if not 1 <= x.ndim <= 4:  # (as a view of rank 1 to 4)
            return _elementwise_tensors(name, [x])
        if not x.size:
            _check_kernel_types(name, [x])
            _check_takes(name, [x])
            return _from_host(np.zeros(x.shape, x.dtype), x)
        key = ("elementwise", name, x._sig)
        return run(key, lambda d: _kiln.ops.elementwise(d, name, [x._type]), x, name=name)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name}(x)."
    return op


def _binary(name: str) -> Callable[[Any, Any], Tensor]:
    def op(a: Any, b: Any) -> Tensor:
        if _fuse.traced(a, b):
            return _fuse.apply(name, [a, b])
        if isinstance(a, Tensor) and isinstance(b, Tensor) and a.size and b.size and \
                1 <= a.ndim <= 4 and 1 <= b.ndim <= 4 and \
                not {a.dtype, b.dtype} & {np.dtype(np.bool_), *_BYTE_DTYPES}:
            key = ("elementwise", name, a._sig, b._sig)
            return run(key, lambda d: _kiln.ops.elementwise(d, name, [a._type, b._type]), a, b,
                       name=name)
        return elementwise(name, a, b)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name}(a, b), broadcasting like numpy."
    return op


def _reduction(name: str, op_name: str) -> Callable[..., Tensor]:
    def op(x: Any, axis: Union[None, int, Sequence[int]] = None,
           keepdims: bool = False) -> Tensor:
        return _reduce_axes(name, op_name, x, axis, keepdims)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"{op_name} over `axis` (None: every axis; an int or a tuple of ints, "
                  f"negative ones counting from the end), as numpy's {name}. keepdims keeps "
                  f"the reduced axes as 1." + (" NaN propagates." if op_name in ("max", "min")
                                               else ""))
    return op


def _minmax(name: str) -> Callable[..., Tensor]:
    binary = _binary(name)

    def op(a: Any, b: Any = None, *, axis: Union[None, int, Sequence[int]] = None,
           keepdims: bool = False) -> Tensor:
        keep = _flag(keepdims, f"{name}: keepdims")
        if b is None:
            return _reduce_axes(name, name, a, axis, keep)
        if axis is not None or keep:
            raise _kiln.InvalidArgument(
                f"{name}(a, b) is elementwise and takes no axis or keepdims; for a reduction "
                f"call {name}(x, axis=...) or a{name}(x, axis)")
        return binary(a, b)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"{name}(a, b): elementwise {name}, broadcasting like numpy "
                  f"(numpy's {name}imum). {name}(x, axis=None, keepdims=False): the "
                  f"reduction over axes (numpy's {name}; also a{name}), which propagates NaN.")
    return op


UNARY_OPS: Tuple[str, ...] = tuple(_kiln.ops.unary_names())
PREDICATE_OPS: Tuple[str, ...] = tuple(_kiln.ops.predicate_names())
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
max = _minmax("max")  # noqa: A001  (elementwise with two operands, else a reduction)
min = _minmax("min")  # noqa: A001


def _alias(make: Callable[[str], Callable[..., Tensor]], op: str, name: str) -> Callable[..., Tensor]:
    """make(op) under numpy's name for it."""
    f = make(op)
    f.__name__ = f.__qualname__ = name
    return f


maximum = _alias(_binary, "max", "maximum")
minimum = _alias(_binary, "min", "minimum")
pow = _binary("pow")  # noqa: A001
floor_div = _binary("floor_div")
floor_mod = _binary("floor_mod")
floor_divide = _alias(_binary, "floor_div", "floor_divide")
mod = _alias(_binary, "floor_mod", "mod")
def _bool_like(x: Any) -> bool:
    return isinstance(x, (bool, np.bool_)) or (
        isinstance(x, (Tensor, np.ndarray)) and x.dtype == np.bool_)


def _logical_not(name: str) -> Callable[[Any], Tensor]:
    unary = _unary("bitwise_not")

    def op(x: Any) -> Tensor:
        if _fuse.traced(x):
            return _fuse.apply("bitwise_not", [x])
        return eq(x, 0) if _bool_like(x) else unary(x)  # noqa: F821 (defined below)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name}(x): bitwise on int32, logical on bool tensors (numpy's)."
    return op


def _logical(name: str) -> Callable[[Any, Any], Tensor]:
    binary = _binary(name)

    def op(a: Any, b: Any) -> Tensor:
        if _fuse.traced(a, b):
            return _fuse.apply(name, [a, b])
        out = binary(a, b)
        return _view(out, out.shape, np.bool_) if _bool_like(a) and _bool_like(b) else out
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"Elementwise {name}(a, b), broadcasting like numpy: on int32, and on bool "
                  f"operands a bool result (numpy's logical meaning).")
    return op


bitwise_not = _logical_not("bitwise_not")
invert = _logical_not("invert")
popcount = _unary("popcount")
sign = _unary("sign")
sign.__doc__ = "Elementwise sign(x), numpy's: -1, 0 or 1 (-0.0 gives 0.0), NaN for NaN."
square = _unary("square")
square.__doc__ = "Elementwise x * x (int32 wraps)."
reciprocal = _unary("reciprocal")
reciprocal.__doc__ = "Elementwise 1 / x (float32 or float16)."


bitwise_and = _logical("bitwise_and")
bitwise_or = _logical("bitwise_or")
bitwise_xor = _logical("bitwise_xor")
shift_left = _binary("shift_left")
shift_right = _binary("shift_right")
left_shift = _alias(_binary, "shift_left", "left_shift")
right_shift = _alias(_binary, "shift_right", "right_shift")


def _nary(name: str, doc: str) -> Callable[..., Tensor]:
    def op(*operands: Any) -> Tensor:
        return elementwise(name, *operands)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


COMPARE_OPS: Tuple[str, ...] = tuple(_kiln.ops.compare_names())
TERNARY_OPS: Tuple[str, ...] = tuple(_kiln.ops.ternary_names())
for _name, _alias in (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"),
                      ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal")):
    globals()[_name] = _nary(_name, f"a {_name} b elementwise, broadcasting like numpy "
                                    f"(numpy's {_alias}): a bool tensor. NaN compares as "
                                    f"IEEE says (unequal to everything).")
    globals()[_alias] = _nary(_name, globals()[_name].__doc__)
    globals()[_alias].__name__ = globals()[_alias].__qualname__ = _alias


def logical_not(x: Any) -> Tensor:
    """numpy's logical_not: a bool tensor, True where x is 0 (NaN counts as
    true, so gives False)."""
    return eq(x, 0)  # noqa: F821 (defined above)


def _logical_of_truths(name: str, combine: str) -> Callable[[Any, Any], Tensor]:
    def truth(x: Any) -> Any:  # a number's as a Python bool (NaN is true)
        return builtins.bool(x != 0) if _is_number(x) else ne(x, 0)  # noqa: F821 (above)

    def truths(a: Any, b: Any) -> Tensor:
        if _is_number(a) and _is_number(b):
            raise _kiln.InvalidArgument(f"{name}: at least one operand must be a tensor")
        return globals()[combine](truth(a), truth(b))
    truths.__name__ = truths.__qualname__ = name  # how kiln.fuse's errors name it
    fused = _fuse.fuse(truths)

    def op(a: Any, b: Any) -> Tensor:
        for v in (a, b):
            if not (_is_number(v) or isinstance(v, (Tensor, np.ndarray)) or _fuse.traced(v)):
                raise _operand_error(v)
        # Tensors and arrays: one kernel for each signature; a number
        # operand (fused functions take no numbers) or a trace: the steps.
        try:
            if _fuse.traced(a, b) or _is_number(a) or _is_number(b):
                return truths(a, b)
            # (int8 and uint8 as their values, which kernels take)
            a, b = (_unpacked(_as_tensor(v, _device_of(a, b)), name)
                    if np.dtype(v.dtype) in _BYTE_DTYPES else v for v in (a, b))
            return fused(a, b)
        except (_kiln.InvalidArgument, _kiln.Unavailable) as e:
            if str(e).startswith(name):
                raise
            raise type(e)(f"{name}: {e}") from None
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"numpy's {name}(a, b), broadcasting like numpy: a bool tensor of the "
                  f"operands' truth values (non-zero; NaN is true) combined.")
    return op


logical_and = _logical_of_truths("logical_and", "bitwise_and")
logical_or = _logical_of_truths("logical_or", "bitwise_or")
logical_xor = _logical_of_truths("logical_xor", "bitwise_xor")
for _name in _kiln.ops.predicate_names():
    globals()[_name] = _nary(_name, f"Elementwise {_name}(x) of a float32 or float16 tensor: a "
                                    f"bool tensor, as numpy's (decided from the bits, whatever "
                                    f"the driver's arithmetic).")
fma = _nary("fma", "fma(a, b, c) = a * b + c elementwise (float32 or float16), broadcasting "
                   "like numpy; the device may round once or twice.")
clamp = _nary("clamp", "clamp(x, lo, hi) = min(max(x, lo), hi) elementwise, broadcasting like "
                       "numpy (numpy's clip); NaN in any operand gives NaN.")


def clip(x: Any, lo: Any, hi: Any) -> Tensor:
    """clamp(x, lo, hi), as numpy's clip; a float bound with an int32, uint32
    or bool x computes in float32, as arithmetic with a float number does."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and np.dtype(dtype) in (np.int32, np.uint32, np.int8, np.uint8,
                                                 np.bool_) and any(
            isinstance(b, (float, np.floating)) for b in (lo, hi)):
        x = cast(x, "float32")
    try:
        return clamp(x, lo, hi)
    except _kiln.Error as e:  # (named as called)
        text = str(e)
        if text.startswith("clamp: "):
            raise type(e)("clip: " + text[len("clamp: "):]) from None
        raise

sum = _reduction("sum", "sum")  # noqa: A001
mean = _reduction("mean", "mean")
prod = _reduction("prod", "prod")
amax = _reduction("amax", "max")
amin = _reduction("amin", "min")
ARG_REDUCE_OPS: Tuple[str, ...] = tuple(_kiln.ops.arg_reduce_names())

_missing = (set(UNARY_OPS) | set(BINARY_OPS) | set(COMPARE_OPS) | set(TERNARY_OPS)) - \
    set(globals())
assert not _missing, f"operators without a Python function: {_missing}"


def _pair(value: Any, name: str, what: str) -> Tuple[int, int]:
    value = _listed(value)
    if _integer(value) is not None:
        v = _size(value, f"{what}: {name}")
        return (v, v)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
            _integer(v) is not None for v in value):
        return (_size(value[0], f"{what}: {name} entry 0"), _size(value[1], f"{what}: {name} entry 1"))
    raise ArgumentTypeError(f"{what}: {name} must be an int or a pair of ints; got {value!r}")


def conv2d(x: Any, w: Any, *, layout: str = "NHWC", stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1, bias: Any = None,
           activation: Optional[str] = None) -> Tensor:
    """2-D convolution: layout "NHWC" (w is [KH, KW, C/groups, F]) or "NCHW"
    (w is [F, C/groups, KH, KW]); stride, padding (zeros on both sides) and
    dilation as an int or (h, w); groups dividing C and F (groups == C is
    depthwise); bias [F]; activation a unary op name applied after the bias.
    An implicit GEMM on the matmul kernel where each group has at least 16
    filters and 16 reduction terms, else one thread per output element."""
    _layout(layout, "conv2d")
    if activation is not None and not isinstance(activation, str):
        raise ArgumentTypeError(
            f"conv2d: activation must be a unary op name or None; got {activation!r}")
    groups = _size(groups, "conv2d: groups")
    st = _pair(stride, "stride", "conv2d")
    pad = _pair(padding, "padding", "conv2d")
    dil = _pair(dilation, "dilation", "conv2d")
    device = _device_of(x, w)
    x = _as_tensor(x, device)
    w = _as_tensor(w, x.device)
    inputs = [x, w]
    bias_t = None
    if bias is not None:
        bias_t = _as_tensor(bias, x.device)
        inputs.append(bias_t)
    act = activation or ""

    def build(d: _kiln.Device, x_type: Any) -> Program:
        return _kiln.ops.conv2d(d, x_type, w._type, layout == "NHWC", st, pad, dil, int(groups),
                                bias_t._type if bias_t is not None else None, act)

    if x.ndim == 4 and x.shape[0] == 0:
        _same_device("conv2d", inputs)  # (as the call with elements)
        return _empty_batch(x, build)
    key = ("conv2d", x._sig, w._sig, layout, st, pad, dil, int(groups),
           bias_t._sig if bias_t is not None else None, act)
    return run(key, lambda d: build(d, x._type), *inputs)


def _layout(layout: Any, what: str) -> None:
    if layout not in ("NHWC", "NCHW"):
        raise (_kiln.InvalidArgument if isinstance(layout, str) else ArgumentTypeError)(
            f"{what}: layout must be 'NHWC' or 'NCHW'; got {layout!r}")


def _pool(op: str, x: Any, kernel: Any, stride: Any, padding: Any, layout: str) -> Tensor:
    what = f"{op}_pool2d"
    _layout(layout, what)
    ks = _pair(kernel, "kernel", what)
    if builtins.min(ks) < 1:
        raise _kiln.InvalidArgument(f"{what}: the kernel must be at least 1; got {kernel!r}")
    st = ks if stride is None else _pair(stride, "stride", what)
    pad = _pair(padding, "padding", what)
    if builtins.min(st) < 1:  # (kiln's C++ takes 0 for "the window": not a stride)
        raise _kiln.InvalidArgument(f"{what}: the stride must be at least 1; got {stride!r}")
    x = _as_tensor(x, None)

    def build(d: _kiln.Device, x_type: Any) -> Program:
        return _kiln.ops.pool2d(d, op, x_type, layout == "NHWC", ks, st, pad)

    if x.ndim == 4 and x.shape[0] == 0:
        return _empty_batch(x, build)
    key = (what, x._sig, layout, ks, st, pad)
    return run(key, lambda d: build(d, x._type), x)


def max_pool2d(x: Any, kernel: Any = 2, stride: Any = None, padding: Any = 0,
               layout: str = "NHWC") -> Tensor:
    """Max over windows (stride defaults to the window; padding at most half
    the window and never counted)."""
    return _pool("max", x, kernel, stride, padding, layout)


def avg_pool2d(x: Any, kernel: Any = 2, stride: Any = None, padding: Any = 0,
               layout: str = "NHWC") -> Tensor:
    """Mean over windows, dividing by the number of input elements in each
    window (padding not counted)."""
    return _pool("avg", x, kernel, stride, padding, layout)


def _attention_scale(scale: Any, fn: str) -> Optional[float]:
    """An attention's scale: None (the default) or a real number."""
    if scale is None:
        return None
    if isinstance(scale, (bool, np.bool_)) or \
            not isinstance(scale, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(f"{fn}: scale must be a number; got {scale!r}")
    return _float(scale, f"{fn}: scale")


def attention(q: Any, k: Any, v: Any, *, causal: bool = False, mask: Any = None,
              scale: Optional[float] = None) -> Tensor:
    """softmax(q @ k^T * scale + mask) @ v in one fused kernel: q [..., Sq, D],
    k and v [..., Sk, D] (rank 2 to 4, D a multiple of 4 up to 128); mask
    [Sq, Sk] added to the scores; causal: query i sees keys j <= i only; scale defaults to 1/sqrt(D). A query
    that sees no key gives NaN."""
    causal = _flag(causal, "attention: causal")
    device = _device_of(q, k, v, mask)
    q = _as_tensor(q, device)
    k = _as_tensor(k, q.device)
    v = _as_tensor(v, q.device)
    inputs = [q, k, v]
    batch = tuple(q.shape[:-2])
    if q.ndim > 4 and all(tuple(t.shape[:-2]) == batch for t in (k, v)):
        # (kernels take ranks 2 to 4: the batch axes, the same in all three, as one)
        n = math.prod(batch)
        try:
            y = attention(*[_view(t, (n,) + tuple(t.shape[-2:])) for t in (q, k, v)],
                          causal=causal, mask=mask, scale=scale)
        except _kiln.InvalidArgument as e:  # (said of the views: name the shapes given)
            raise type(e)(f"{e} (q, k and v of shapes {tuple(q.shape)}, {tuple(k.shape)} and "
                          f"{tuple(v.shape)}, their batch axes seen as one)") from None
        return _view(y, batch + tuple(y.shape[-2:]))
    if builtins.max(q.ndim, k.ndim, v.ndim) > 4 and builtins.min(q.ndim, k.ndim, v.ndim) >= 2:
        raise _kiln.InvalidArgument(
            f"attention: q, k and v have shapes {tuple(q.shape)}, {tuple(k.shape)} and "
            f"{tuple(v.shape)}; above rank 4 their batch axes (all but the last two) must be "
            f"the same")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not 2 <= t.ndim <= 4:
            raise _kiln.InvalidArgument(
                f"attention: {name} has shape {tuple(t.shape)} of rank {t.ndim}; q, k and v take "
                f"ranks 2 to 4 ([..., S, D])")
    mask_t = None
    if mask is not None:
        mask_t = _as_tensor(mask, q.device)
        inputs.append(mask_t)
    sc = _attention_scale(scale, "attention")
    key = ("attention", q._sig, k._sig, v._sig, causal,
           mask_t._sig if mask_t is not None else None, None if sc is None else _key_number(sc))
    return run(key, lambda d: _kiln.ops.attention(
        d, q._type, k._type, v._type, causal,
        mask_t._type if mask_t is not None else None, sc), *inputs)


def packed_attention(qkv: Any, heads: int, *, causal: bool = False, mask: Any = None,
                     scale: Optional[float] = None) -> Tensor:
    """Self-attention over the heads of one packed q/k/v projection, in one
    kernel with no copies: qkv [..., S, 3 * heads * D], each row its query's
    heads side by side, then its key's, then its value's (as
    ``reshape(..., S, 3, heads, D)`` reads them), gives [..., S, heads * D],
    the heads side by side. The same as ``attention`` of the heads split
    apart, merged back: q, k and v are
    ``permute(reshape(qkv, (..., S, 3, heads, D)), (..., 3, heads, S, D))``.
    D a multiple of 4 up to 128; mask [S, S]; causal and scale as
    ``attention``'s."""
    causal = _flag(causal, "packed_attention: causal")
    heads = _size(heads, "packed_attention: heads")
    device = _device_of(qkv, mask)
    qkv = _as_tensor(qkv, device)
    if qkv.ndim > 4:
        # (kernels take ranks 2 to 4: the batch axes as one)
        batch = tuple(qkv.shape[:-2])
        try:
            y = packed_attention(_view(qkv, (math.prod(batch),) + tuple(qkv.shape[-2:])), heads,
                                 causal=causal, mask=mask, scale=scale)
        except _kiln.InvalidArgument as e:  # (said of the view: name the shape given)
            raise type(e)(f"{e} (qkv of shape {tuple(qkv.shape)}, its batch axes seen as "
                          f"one)") from None
        return _view(y, batch + tuple(y.shape[-2:]))
    if qkv.ndim < 2:
        raise _kiln.InvalidArgument(
            f"packed_attention: qkv has shape {tuple(qkv.shape)}; it must be "
            f"[..., S, 3 * heads * D]")
    inputs = [qkv]
    mask_t = None
    if mask is not None:
        mask_t = _as_tensor(mask, qkv.device)
        inputs.append(mask_t)
    sc = _attention_scale(scale, "packed_attention")
    key = ("packed_attention", qkv._sig, heads, causal,
           mask_t._sig if mask_t is not None else None, None if sc is None else _key_number(sc))
    return run(key, lambda d: _kiln.ops.packed_attention(
        d, qkv._type, heads, causal, mask_t._type if mask_t is not None else None, sc), *inputs)


# Every public operator names the argument of a wrong-typed operand.
for _name, _fn in list(globals().items()):
    if not _name.startswith("_") and inspect.isfunction(_fn) and _fn.__module__ == __name__:
        globals()[_name] = _naming_operands(_fn)
del _name, _fn
