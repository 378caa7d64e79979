"""Python's operators on kiln.Tensor, as numpy's on arrays.

`a + b`, `a - b`, `a * b`, `a / b`, `a // b`, `a % b`, `a ** b`, `a @ b`,
`-a`, `+a`, `abs(a)`, `~a`, `a & b`, `a | b`, `a ^ b`, `a << b`, `a >> b`
and the comparisons `< <= > >= == !=` run the kiln.ops operator on the
tensor's device; the other operand may be a tensor, a numpy array or a
Python or numpy number, on either side (numpy arrays defer to the tensor:
`np_array + tensor` is a kiln.Tensor). Comparisons give bool tensors.

Methods as numpy's: `t.sum() mean() prod() max() min()` (axis=None,
keepdims=False), `t.argmax() argmin()` (axis=None), `t.reshape(*shape)`,
`t.transpose(*axes)`, `t.T`, `t.flatten()`, `t.clip(lo, hi)`; each runs the
kiln.ops operator (a copy where numpy would give a view).

Where numpy's meaning differs from the op's: `/` of int32 tensors divides
in float32 (numpy's true division; kiln.ops.div truncates), and `~`, `&`,
`|`, `^` of bool tensors are logical (bool results). `bool(t)` is the value
of a one-element tensor and an error for more elements, as in numpy.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

import numpy as np

from . import ops
from ._kiln import Tensor

_OPERANDS = (Tensor, np.ndarray, int, float, np.integer, np.floating, np.bool_)
# Numbers no tensor holds. Left to Python (NotImplemented), numpy's scalars
# would take the tensor through __array__ and answer with a host array.
_REFUSED = (complex, np.complexfloating, np.timedelta64, np.datetime64)


def _refuse_number(other: Any) -> None:
    if isinstance(other, _REFUSED):
        raise TypeError(f"a kiln.Tensor takes no {type(other).__name__} operand (kiln's tensors "
                        f"hold no complex numbers, dates or durations)")


def _binary(fn: Callable[[Any, Any], Tensor], reflected: bool = False) -> Callable[[Any, Any], Any]:
    def method(self: Tensor, other: Any) -> Any:
        _refuse_number(other)
        if not isinstance(other, _OPERANDS):
            return NotImplemented
        return fn(other, self) if reflected else fn(self, other)
    return method


def _equality(fn: Callable[[Any, Any], Tensor], symbol: str) -> Callable[[Any, Any], Any]:
    # Python would answer an unsupported == or != by identity (t == None is
    # False), which reads as an elementwise answer and is not one.
    def method(self: Tensor, other: Any) -> Any:
        if not isinstance(other, _OPERANDS) or isinstance(other, _REFUSED):
            raise TypeError(f"{symbol}: cannot compare a kiln.Tensor with "
                            f"{type(other).__name__} (a tensor, a numpy array or a number)")
        return fn(self, other)
    return method


# The integer and bool dtypes kiln's tensors hold.
_HELD_INTEGERS = tuple(np.dtype(d) for d in (np.int32, np.uint32, np.int8, np.uint8, np.bool_))


def _true_divide(a: Any, b: Any) -> Tensor:
    # Integer operands become the other operand's float dtype (float16 beside
    # a float16 tensor, as torch's), else float32.
    half = any(isinstance(x, Tensor) and x.dtype == np.float16 for x in (a, b))
    target = "float16" if half else "float32"

    def as_float(x: Any) -> Any:
        if isinstance(x, Tensor) and x.dtype in _HELD_INTEGERS:
            return ops.cast(ops._operand(x, None), target)
        if isinstance(x, np.ndarray) and x.dtype in _HELD_INTEGERS:  # (others refused as such)
            return x.astype(target)
        if isinstance(x, (int, np.integer, np.bool_)) and not isinstance(x, np.timedelta64):
            return ops._float(x, "div")
        return x
    return ops.div(as_float(a), as_float(b))


def _truth(self: Tensor) -> bool:
    if self.size != 1:
        raise ValueError(f"the truth value of a tensor of {self.size} elements is ambiguous; "
                         f"use kiln.ops.amax / amin over a comparison")
    return bool(np.asarray(self).reshape(-1)[0])


def _scalar(kind: type) -> Callable[[Tensor], Any]:
    """float(t), int(t): the value of a one-element tensor, as numpy's."""
    def method(self: Tensor) -> Any:
        if self.size != 1:
            raise TypeError(f"only a tensor of one element converts to {kind.__name__}; "
                            f"this one has {self.size}")
        return kind(np.asarray(self).reshape(-1)[0])
    return method


def _positive(self: Tensor) -> Tensor:
    """+t: a copy, as numpy's +a is (and, as numpy's, not of a bool tensor)."""
    if self.dtype == np.bool_:
        raise TypeError("unary + is not defined for a bool tensor (numpy's positive has no "
                        "bool loop)")
    if self.dtype in (np.uint32, np.int8, np.uint8):  # (no arithmetic; data movement copies)
        return ops.reshape(self, self.shape)
    return ops.cast(self, self.dtype)


def _copy(self: Tensor, memo: Any = None) -> Tensor:
    """copy.copy(t) and copy.deepcopy(t): a new tensor of the same values
    (kernels write tensors, so a copy is a copy)."""
    if self.size and self.ndim:
        return ops.reshape(self, self.shape)
    from ._tensor import tensor
    return tensor(self.numpy(), self.device)


def _index(self: Tensor) -> int:
    """operator.index(t): a 0-d integer tensor as an int (numpy's rule), so an
    argmax's result indexes a list."""
    if self.ndim != 0 or np.dtype(self.dtype).kind not in "iu":
        raise TypeError(f"only a 0-d integer tensor converts to an index; this one is "
                        f"{np.dtype(self.dtype).name}{list(self.shape)}")
    return int(np.asarray(self)[()])


def _format(self: Tensor, spec: str) -> str:
    """format(t, spec): a 0-d tensor formats as its value (numpy's rule);
    any other tensor takes only the empty spec."""
    if self.ndim == 0:
        return format(np.asarray(self)[()], spec)
    if spec:
        raise TypeError(f"format spec {spec!r} given for a tensor of shape {tuple(self.shape)}; "
                        f"only a 0-d tensor takes one")
    return str(self)


def _pow(reflected: bool) -> Callable[..., Any]:
    method = _binary(ops.pow, reflected)

    def pow_method(self: Tensor, other: Any, modulo: Any = None) -> Any:
        if modulo is not None:
            raise TypeError("pow() with a modulus is not supported for kiln tensors; use "
                            "kiln.ops.floor_mod(t ** e, m)")
        return method(self, other)
    return pow_method


def _refuse(what: str, unsupported: Dict[str, Any]) -> None:
    """numpy keywords kiln's methods do not take (initial=, where=, ...)."""
    if unsupported:
        raise TypeError(f"{what}() got an unexpected keyword argument "
                        f"'{next(iter(unsupported))}' (kiln's tensors take fewer of numpy's "
                        f"keywords: docs/python.md lists them)")


def _no_out(what: str, out: Any) -> None:
    if out is not None:
        raise TypeError(f"{what}: kiln tensors take no out= (the result is a new tensor)")


def _reduction(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    # numpy's np.sum(t) and friends call t.sum(axis=..., dtype=None, out=None).
    def method(self: Tensor, axis: Any = None, dtype: Any = None, out: Any = None,
               keepdims: bool = False, **unsupported: Any) -> Tensor:
        method_name = f"Tensor.{ {'amax': 'max', 'amin': 'min'}.get(fn.__name__, fn.__name__)}"
        _no_out(method_name, out)
        _refuse(method_name, unsupported)
        what = f"{fn.__name__}(dtype=...)"
        if dtype is not None and fn.__name__ == "mean":
            name = ops._dtype_name(dtype, what)
            if name not in ("float32", "float16"):
                raise ops._kiln.InvalidArgument(
                    f"{method_name}: dtype {name}: a mean is taken in float32 or float16")
        if dtype is not None and fn.__name__ in ("sum", "prod", "mean"):
            # numpy's rule: each element becomes `dtype` before it is summed.
            x = ops._cast(self, dtype, what)
            y = fn(x, axis=axis, keepdims=keepdims)
            # bools add as logical or and multiply as logical and: the count
            # (or product) of 0s and 1s, nonzero; int8 and uint8 sum in
            # int32, and wrap to their dtype as numpy's.
            return ops._cast(y, x.dtype.name, what) if x.dtype in (np.bool_, np.int8, np.uint8) \
                else y
        if fn.__name__ in ("amax", "amin"):  # (its errors named max / min, as called)
            return ops._reduce_axes(fn.__name__[1:], fn.__name__[1:], self, axis, keepdims)
        y = fn(self, axis=axis, keepdims=keepdims)
        return y if dtype is None else ops._cast(y, dtype, what)
    if fn.__name__ in ("amax", "amin"):
        # numpy's t.max(axis=None, out=None, keepdims=False): no dtype.
        def extremum(self: Tensor, axis: Any = None, out: Any = None, keepdims: bool = False,
                     **unsupported: Any) -> Tensor:
            _refuse(f"Tensor.{fn.__name__[1:]}", unsupported)  # (dtype= among them)
            return method(self, axis, None, out, keepdims)
        extremum.__doc__ = fn.__doc__
        return extremum
    method.__doc__ = fn.__doc__
    return method


def _clip(self: Tensor, min: Any = None, max: Any = None, out: Any = None,  # noqa: A002
          **unsupported: Any) -> Tensor:
    """numpy's t.clip(min, max): either bound may be None (not both).
    np.clip(t, lo, hi) calls it."""
    _no_out("Tensor.clip", out)
    _refuse("Tensor.clip", unsupported)
    if min is None and max is None:
        raise ValueError("clip: give min or max (or both)")
    try:  # (a float bound with integers computes in float32 in all three)
        if max is None:
            return ops.maximum(self, min)
        if min is None:
            return ops.minimum(self, max)
        return ops.clip(self, min, max)
    except (ops._kiln.InvalidArgument, ops._kiln.Unavailable) as e:  # (named as called)
        text = str(e)
        for inner in ("max: ", "min: ", "clamp: "):
            if text.startswith(inner):
                raise type(e)("clip: " + text[len(inner):]) from None
        raise


def _arg_reduction(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    # np.argmax(t) calls t.argmax(axis=None, out=None[, keepdims=...]).
    def method(self: Tensor, axis: Any = None, out: Any = None, *, keepdims: bool = False,
               **unsupported: Any) -> Tensor:
        _no_out(f"Tensor.{fn.__name__}", out)
        _refuse(f"Tensor.{fn.__name__}", unsupported)
        return fn(self, axis, keepdims)
    method.__doc__ = fn.__doc__
    return method


def _flatten(self: Tensor, order: str = "C") -> Tensor:
    if order != "C":
        raise ops.ArgumentTypeError(f"Tensor.flatten: kiln tensors are row-major: order='C' "
                                    f"only; got {order!r}")
    return ops.reshape(self, [self.size])


def _astype(self: Tensor, dtype: Any, copy: bool = True, **unsupported: Any) -> Tensor:
    """kiln.ops.cast(self, dtype): a copy converted to float32, float16,
    int32, uint32, int8, uint8 or bool (with copy=False, self where it has
    the dtype already, as numpy)."""
    _refuse("Tensor.astype", unsupported)
    if ops._dtype_name(dtype, "astype") == np.dtype(self.dtype).name:
        return _copy(self) if ops._flag(copy, "astype: copy") else self  # (any dtype)
    return ops._cast(self, dtype, "astype")


def _contains(self: Tensor, value: Any) -> bool:
    """`value in t`: numpy's (t == value).any() (False for a value no element
    can equal: None, or a fraction beside integers)."""
    if value is None:
        return False
    if ops._is_number(value) and self.dtype in (np.int32, np.bool_):
        if not ops._is_integer_value(ops._number(value)):
            return False
    if ops._is_number(value) and self.dtype in (np.uint32, np.int8, np.uint8) and self.size:
        try:
            v = ops._integer_value(value, self.dtype, "in")
        except ops._kiln.InvalidArgument:  # (no element can equal it)
            return False
        if self.dtype == np.uint32:  # (compared as the int32 with its bits)
            return bool((ops._view(self, self.shape, np.int32) == ops._uint32_word(v, "in")).max())
        return bool((ops._unpacked(self, "in") == v).max())
    return bool((self == value).max()) if self.size else False


def _reshape(self: Tensor, *shape: Any, order: str = "C", **unsupported: Any) -> Tensor:
    _refuse("Tensor.reshape", unsupported)
    if order != "C":
        raise ops.ArgumentTypeError(f"Tensor.reshape: kiln tensors are row-major: order='C' "
                                    f"only; got {order!r}")
    return ops.reshape(self, _shape_args(shape))


def _transpose(self: Tensor, *axes: Any, **kw: Any) -> Tensor:
    if "axes" in kw:
        if axes:
            raise TypeError("Tensor.transpose: the axes given twice")
        axes = (kw.pop("axes"),)
    _refuse("Tensor.transpose", kw)
    # (`is None`, not ==: an axis may be a tensor or an array, whose == is elementwise.)
    whole = not axes or (len(axes) == 1 and axes[0] is None)
    return ops.transpose(self, None if whole else _shape_args(axes))


def _shape_args(args: tuple) -> Any:
    """numpy's t.reshape(2, 3) or t.reshape((2, 3)) (or an array of ints)."""
    if len(args) == 1:
        one = ops._listed(args[0])
        if isinstance(one, (tuple, list)):
            return list(one)
    return list(args)


def _any_all(name: str) -> Callable[..., Tensor]:
    def method(self: Tensor, axis: Any = None, out: Any = None, keepdims: bool = False,
               **unsupported: Any) -> Tensor:
        _no_out(f"Tensor.{name}", out)
        _refuse(f"Tensor.{name}", unsupported)
        if not self.size:  # (numpy's answer over nothing: False for any, True for all)
            from ._tensor import tensor
            return tensor(np.array(getattr(np.zeros(self.shape, bool), name)(
                axis=axis, keepdims=ops._flag(keepdims, f"Tensor.{name}: keepdims"))),
                self.device)
        truth = ops.ne(self, 0)
        return (ops.amax if name == "any" else ops.amin)(truth, axis=axis, keepdims=keepdims)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"numpy's t.{name}(axis=None, keepdims=False): whether "
                      f"{name} of the elements along `axis` are non-zero (NaN is), a bool tensor.")
    return method


def _spread(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """numpy's t.var() and t.std() (np.var(t) calls them): `dtype` (a float
    dtype) converts first; out= other than None is refused."""
    def method(self: Tensor, axis: Any = None, dtype: Any = None, out: Any = None,
               ddof: int = 0, keepdims: bool = False, **unsupported: Any) -> Tensor:
        what = f"Tensor.{fn.__name__}"
        _no_out(what, out)
        _refuse(what, unsupported)
        name = None if dtype is None else ops._dtype_name(dtype, f"{what}: dtype")
        if name is not None and name not in ("float32", "float16"):
            # (numpy computes an integer dtype's var in that dtype; kiln's
            # variance is a float)
            raise ops._kiln.InvalidArgument(
                f"{what}: dtype must be float32 or float16; got {name}")
        x = self if dtype is None else ops._cast(self, dtype, f"{fn.__name__}(dtype=...)")
        return fn(x, axis, keepdims=keepdims, ddof=ddof)
    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _item(self: Tensor, *args: Any) -> Any:
    """numpy's t.item(): a one-element tensor's value as a Python number."""
    if args:
        raise TypeError("Tensor.item() takes no index (kiln's tensors index as t[i])")
    if self.size != 1:
        raise ValueError(f"can only convert a tensor of one element to a Python scalar; this "
                         f"one has {self.size}")
    return np.asarray(self).reshape(-1)[0].item()


def _iter(self: Tensor) -> Any:
    """numpy's iteration: the tensor's rows along axis 0 (each a copy)."""
    if not self.ndim:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))


# numpy's ufuncs that are kiln operators with numpy's meaning: called with a
# tensor among the operands (np.exp(t), arr + t), they run on the device.
_UFUNCS: Dict[Any, Callable[..., Tensor]] = {
    np.add: ops.add, np.subtract: ops.sub, np.multiply: ops.mul, np.divide: _true_divide,
    np.floor_divide: ops.floor_div, np.remainder: ops.floor_mod, np.power: ops.pow,
    np.maximum: ops.max, np.minimum: ops.min, np.matmul: ops.matmul,
    np.bitwise_and: ops.bitwise_and, np.bitwise_or: ops.bitwise_or,
    np.bitwise_xor: ops.bitwise_xor, np.left_shift: ops.shift_left,
    np.right_shift: ops.shift_right, np.invert: ops.invert,
    np.equal: ops.eq, np.not_equal: ops.ne, np.less: ops.lt, np.less_equal: ops.le,
    np.greater: ops.gt, np.greater_equal: ops.ge,
    np.logical_and: ops.logical_and, np.logical_or: ops.logical_or,
    np.logical_xor: ops.logical_xor, np.logical_not: ops.logical_not,
    np.negative: ops.neg, np.absolute: ops.abs, np.sign: ops.sign, np.square: ops.square,
    np.exp: ops.exp, np.exp2: ops.exp2, np.log: ops.log, np.log2: ops.log2, np.sqrt: ops.sqrt,
    np.sin: ops.sin, np.cos: ops.cos, np.tanh: ops.tanh, np.floor: ops.floor, np.ceil: ops.ceil,
    np.rint: ops.round, np.trunc: ops.trunc, np.isnan: ops.isnan, np.isinf: ops.isinf,
    np.isfinite: ops.isfinite,
}


# numpy's float math of integer and bool arrays computes in a float dtype
# (float32 here, where numpy takes float64 or float16); its floor, ceil and
# trunc of integers are the integers.
_FLOAT_UFUNCS = frozenset({np.exp, np.exp2, np.log, np.log2, np.sqrt, np.sin, np.cos, np.tanh,
                           np.rint, np.isnan, np.isinf, np.isfinite})
_ROUNDING_UFUNCS = frozenset({np.floor, np.ceil, np.trunc})


def _array_ufunc(self: Tensor, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """numpy's ufunc protocol: a ufunc that is a kiln operator (_UFUNCS),
    called plainly, runs on the tensors' device and gives a tensor; any
    other (np.arctan(t), np.add.reduce(t), keywords such as dtype= or
    where=) computes on the host from copies and gives a numpy array, as
    before the protocol. out= a tensor is refused: kernels write new
    tensors."""
    for x in inputs:
        if not isinstance(x, (Tensor, np.ndarray)) and hasattr(x, "__array_ufunc__"):
            return NotImplemented  # (another array type's protocol decides: NEP 13)
        _refuse_number(x)
    if method == "at" and isinstance(inputs[0], Tensor):
        raise TypeError(f"numpy's {ufunc.__name__}.at on a kiln.Tensor: it works in place, and "
                        f"kiln's operators write new tensors")
    outs = kwargs.get("out") or ()
    if any(isinstance(o, Tensor) for o in (outs if isinstance(outs, tuple) else (outs,))):
        raise TypeError(f"numpy's {ufunc.__name__} with out= a kiln.Tensor: kiln's operators "
                        f"write new tensors (write t = np.{ufunc.__name__}(...))")
    fn = _UFUNCS.get(ufunc)
    if method == "__call__" and fn is not None and not kwargs and \
            all(isinstance(x, _OPERANDS) for x in inputs):  # (lists and such: on the host)
        x = inputs[0]
        if isinstance(x, Tensor) and x.dtype in _HELD_INTEGERS:
            if ufunc in _ROUNDING_UFUNCS:
                return ops.cast(x, np.dtype(x.dtype).name)  # (a copy)
            if ufunc in _FLOAT_UFUNCS:
                return fn(ops.cast(x, "float32"))
        return fn(*inputs)
    arrays = [np.asarray(x) if isinstance(x, Tensor) else x for x in inputs]
    return getattr(ufunc, method)(*arrays, **kwargs)


class KernelNotFoundError(ops._kiln.InvalidArgument, KeyError):
    """module[name] for a name the module has no kernel of: a
    kiln.InvalidArgument and, as for a mapping, a KeyError."""
    __str__ = BaseException.__str__  # (the message as written, not quoted)


def _module_getitem(get: Callable[..., Any]) -> Callable[..., Any]:
    def getitem(self: Any, name: Any) -> Any:
        if isinstance(name, str) and name not in self:
            try:
                return get(self, name)  # (its message names the module's kernels)
            except ops._kiln.InvalidArgument as e:
                raise KernelNotFoundError(str(e)) from None
        return get(self, name)
    getitem.__doc__ = get.__doc__
    return getitem


def install() -> None:
    pairs = {
        "add": ops.add, "sub": ops.sub, "mul": ops.mul, "truediv": _true_divide,
        "floordiv": ops.floor_div, "mod": ops.floor_mod, "pow": ops.pow,
        "matmul": ops.matmul,
        "lshift": ops.shift_left, "rshift": ops.shift_right,
    }
    for name, fn in pairs.items():
        setattr(Tensor, f"__{name}__", _binary(fn))
        setattr(Tensor, f"__r{name}__", _binary(fn, reflected=True))
    for name, fn in {"and": ops.bitwise_and, "or": ops.bitwise_or,
                     "xor": ops.bitwise_xor}.items():
        setattr(Tensor, f"__{name}__", _binary(fn))
        setattr(Tensor, f"__r{name}__", _binary(fn, reflected=True))
    # Python reflects comparisons itself: 2 < t calls t.__gt__(2).
    for name, fn in {"lt": ops.lt, "le": ops.le, "gt": ops.gt, "ge": ops.ge}.items():
        setattr(Tensor, f"__{name}__", _binary(fn))
    Tensor.__eq__ = _equality(ops.eq, "==")
    Tensor.__ne__ = _equality(ops.ne, "!=")
    Tensor.__neg__ = lambda self: ops.neg(self)
    Tensor.__pos__ = _positive
    Tensor.__abs__ = lambda self: ops.abs(self)
    Tensor.__invert__ = lambda self: ops.invert(self)
    Tensor.__bool__ = _truth
    Tensor.__iter__ = _iter
    Tensor.__float__ = _scalar(float)
    Tensor.__int__ = _scalar(int)
    Tensor.__index__ = _index
    Tensor.__format__ = _format
    Tensor.__pow__ = _pow(False)
    Tensor.__rpow__ = _pow(True)
    for name, fn in {"sum": ops.sum, "mean": ops.mean, "prod": ops.prod, "max": ops.amax,
                     "min": ops.amin}.items():
        setattr(Tensor, name, _reduction(fn))
    Tensor.argmax = _arg_reduction(ops.argmax)
    Tensor.argmin = _arg_reduction(ops.argmin)
    Tensor.reshape = _reshape
    Tensor.transpose = _transpose
    Tensor.T = property(lambda self: ops.transpose(self))
    Tensor.flatten = _flatten
    Tensor.clip = _clip
    Tensor.astype = _astype
    Tensor.__copy__ = _copy
    ops._kiln.Module.__getitem__ = _module_getitem(ops._kiln.Module.__getitem__)
    Tensor.copy = lambda self: _copy(self)
    Tensor.squeeze = lambda self, axis=None: ops.squeeze(self, axis)
    Tensor.var = _spread(ops.var)
    Tensor.std = _spread(ops.std)
    Tensor.any = _any_all("any")
    Tensor.all = _any_all("all")
    Tensor.item = _item
    Tensor.tolist = lambda self: np.asarray(self).tolist()
    Tensor.__contains__ = _contains
    Tensor.__deepcopy__ = _copy
    # A tensor keeps its identity hash (as torch's): == is elementwise.
    Tensor.__hash__ = object.__hash__
    # numpy's binary operators defer to the tensor's reflected ones; its
    # ufuncs that are kiln operators run on the device.
    Tensor.__array_priority__ = 1000
    Tensor.__array_ufunc__ = _array_ufunc

