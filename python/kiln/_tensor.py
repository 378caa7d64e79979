"""Tensors from numpy arrays and of a shape."""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import _kiln

_SUPPORTED = {np.dtype(n) for n in
              ("float32", "float16", "int32", "uint32", "int8", "uint8", "bool")}


def _device(device: Optional[_kiln.Device], what: str) -> _kiln.Device:
    if device is None:
        return _kiln.default_device()
    if not isinstance(device, _kiln.Device):
        from .ops import ArgumentTypeError
        raise ArgumentTypeError(
            f"{what}: device must be a kiln.Device or None (the default device); got "
            f"{type(device).__name__} {device!r} (kiln.Device(impl=..., backend=...) makes one)")
    return device


def _all_ints(data: Any) -> bool:
    """Whether Python data holds only ints (and bools), no floats."""
    return all(isinstance(v, (int, np.integer)) for v in np.asarray(data, dtype=object).ravel())


def _from_python(data: Any) -> np.ndarray:
    """numpy's array of Python data (lists, numbers), its floats as float32
    and its ints as int32, each int exactly and each float within float32's
    range, else an error."""
    try:
        array = np.asarray(data)
    except ValueError as e:  # numpy 2's error for ragged lists
        if isinstance(e, _kiln.Error):  # kiln's own (a traced value's, say)
            raise
        raise _kiln.InvalidArgument(
            f"kiln.tensor: the data is not an array of numbers of one shape (ragged lists?): "
            f"{e}") from None
    if array.dtype == np.float64:
        finite = np.isfinite(array)
        largest = np.abs(np.where(finite, array, 0)).max() if array.size else 0.0
        # Ints only, made float64 by one beyond 64 bits.
        if largest >= 2.0**63 and _all_ints(data):
            raise _kiln.InvalidArgument(
                "kiln.tensor: integers out of the int32 range (numpy made them float64)")
        with np.errstate(over="ignore"):
            narrow = array.astype(np.float32)
        if (finite & np.isinf(narrow)).any():
            raise _kiln.InvalidArgument(
                f"kiln.tensor: {float(largest)!r} is beyond float32's range (largest "
                f"{float(np.finfo(np.float32).max)!r}); give a float32 array to have it as "
                f"inf")
        return narrow
    if array.dtype in (np.int64, np.uint64):
        if array.size and (array.min() < -2**31 or array.max() >= 2**31):
            raise _kiln.InvalidArgument("kiln.tensor: integers out of the int32 range")
        return array.astype(np.int32)
    if array.dtype == object:
        # Numbers numpy keeps as objects: ints beyond 64 bits, alone or among floats.
        values = array.ravel()
        real = (int, float, np.integer, np.floating)
        if values.size and all(isinstance(v, real) and not isinstance(v, (bool, np.bool_))
                               for v in values):
            if all(isinstance(v, (int, np.integer)) for v in values):
                raise _kiln.InvalidArgument("kiln.tensor: integers out of the int32 range")
            try:
                return _from_python(np.asarray(data, dtype=np.float64))
            except OverflowError:
                raise _kiln.InvalidArgument(
                    "kiln.tensor: an integer beyond float32's range among the floats") from None
    if array.dtype == object and array.ndim == 0:
        from .ops import ArgumentTypeError
        raise ArgumentTypeError(
            f"kiln.tensor: data must be a numpy array, a number or (nested) lists of numbers; "
            f"got {type(data).__name__}")
    if array.dtype == object:
        numbers = (bool, int, float, np.number, np.bool_)
        others = [v for v in array.ravel() if not isinstance(v, numbers)]
        if others:
            other = others[0]
            from .ops import ArgumentTypeError
            raise ArgumentTypeError(
                f"kiln.tensor: the data holds a {type(other).__name__}, not only numbers")
        raise _kiln.InvalidArgument(
            "kiln.tensor: the data is not an array of numbers of one kind (numpy made an "
            "array of objects: integers beyond 64 bits, or ragged lists)")
    return array


# kiln's short dtype names, which every dtype argument takes beside numpy's
# (numpy's own "i8", "u8" and "f16" are other dtypes).
SHORT_DTYPES = {"f32": "float32", "f16": "float16", "i32": "int32", "u32": "uint32",
                "i8": "int8", "u8": "uint8"}


def _as_dtype(data: Any, dtype: Any) -> np.ndarray:
    """`data` converted to the dtype asked for, each value exactly or, for a
    float dtype, rounded to it: a value the dtype cannot hold (beyond its
    range, a fraction or NaN for an integer dtype) is an error, as it is
    without a dtype."""
    from .ops import ArgumentTypeError
    try:
        target = np.dtype(SHORT_DTYPES.get(dtype, dtype) if isinstance(dtype, str) else dtype)
    except TypeError:
        raise ArgumentTypeError(f"kiln.tensor: {dtype!r} is not a dtype") from None
    target = target.newbyteorder("=")  # (">f4" asks for float32; the copy is native)
    if target not in _SUPPORTED:
        raise _kiln.InvalidArgument(
            f"kiln.tensor: dtype {target} is not supported; kiln's dtypes are float32, float16, "
            f"int32, uint32, int8, uint8 and bool")
    if isinstance(data, np.ndarray):
        source = data
    else:
        try:
            source = np.asarray(data)
        except ValueError:
            source = _from_python(data)  # (raises kiln's error for ragged data)
        if source.dtype == object and target.kind == "f" and source.ndim and all(
                isinstance(v, (int, float, np.integer, np.floating)) for v in source.ravel()):
            try:  # ints beyond 64 bits, which a float dtype may hold
                source = np.asarray(data, dtype=np.float64)
            except (TypeError, ValueError, OverflowError):
                pass
        if source.dtype == object:
            _from_python(data)  # raises kiln's error for non-numbers
    if source.dtype.kind not in "biuf":
        raise _kiln.InvalidArgument(
            f"kiln.tensor: the data's dtype {source.dtype} is not a number type; it cannot "
            f"become {target}")
    if target.kind == "b" or source.dtype == target:
        return source.astype(target)
    values = source.ravel()
    if target.kind in "iu":
        info = np.iinfo(target)
        # (Compared in float64: in float32, 2^31 - 1 rounds to 2^31.)
        if source.dtype.kind == "f":
            values = values.astype(np.float64)
            bad = ~np.isfinite(values) | (values != np.trunc(values))
            if bad.any():
                raise _kiln.InvalidArgument(
                    f"kiln.tensor: {values[bad][0].item()!r} is not "
                    f"{'a' if target.kind == 'u' else 'an'} {target} value (convert with "
                    f"numpy's astype to truncate)")
        if values.size and (values.min() < info.min or values.max() > info.max):
            wrong = values[(values < info.min) | (values > info.max)][0].item()
            raise _kiln.InvalidArgument(
                f"kiln.tensor: {wrong!r} is beyond {target}'s range ({info.min} to {info.max})")
        return source.astype(target)
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = source.astype(target)
    beyond = np.isfinite(source) & np.isinf(narrow) if source.dtype.kind == "f" else \
        np.isinf(narrow)
    if beyond.any():
        raise _kiln.InvalidArgument(
            f"kiln.tensor: {source[beyond].ravel()[0].item()!r} is beyond {target}'s range (largest "
            f"{float(np.finfo(target).max)!r}); give a {target} array to have it as inf")
    return narrow


def tensor(data: Any, device: Optional[_kiln.Device] = None,
           dtype: Any = None) -> _kiln.Tensor:
    """A tensor holding a copy of `data` (a numpy array, or anything
    numpy.asarray takes) on `device` (the default device if None).

    dtypes: float32, float16, int32, uint32, int8, uint8 and bool, as numpy
    has them. A Python list or number of floats becomes float32 (a finite
    one beyond float32's range is an error) and of ints int32 (one beyond
    int32's range is an error); a float64 or int64 *array* is an error
    (convert it first), so precision is never lost silently. With `dtype`,
    the data becomes that dtype by the same rules: floats rounded to a float
    dtype, and a value beyond the dtype's range, or a fraction or NaN for an
    integer dtype, an error. Non-contiguous arrays are copied in
    row-major order, and big-endian ones in the machine's byte order. bool elements are stored as 32-bit 0/1 (the kernel
    ABI's layout), int8/uint8 packed four to a word.
    """
    device = _device(device, "kiln.tensor")
    if isinstance(data, np.ma.MaskedArray):
        raise _kiln.InvalidArgument(
            "kiln.tensor: the data is a masked array, whose mask a tensor cannot keep; pass "
            "data.filled(value) (or data.data for the values under the mask too)")
    if dtype is not None:
        array = _as_dtype(data, dtype)
    elif isinstance(data, np.ndarray):
        array = data
    else:
        array = _from_python(data)
    if not array.dtype.isnative:  # big-endian data: the copy is in the device's order
        array = array.astype(array.dtype.newbyteorder("="))
    if array.dtype not in _SUPPORTED:
        raise _kiln.InvalidArgument(
            f"arrays of {array.dtype} are not supported; kiln's dtypes are float32, float16, "
            f"int32, uint32, int8, uint8 and bool (convert with .astype)")
    if not array.flags.c_contiguous:
        array = array.copy(order="C")
    return _kiln._tensor_from_array(array, device)


def empty(shape: Sequence[int] | int, dtype: Any = "float32",
          device: Optional[_kiln.Device] = None) -> _kiln.Tensor:
    """A tensor of `shape` and `dtype` (float32 where None) whose contents
    are unspecified (an output for a kernel to write)."""
    return _new(shape, dtype, device, "kiln.empty")


def _new(shape: Sequence[int] | int, dtype: Any, device: Optional[_kiln.Device],
         what: str) -> _kiln.Tensor:
    """empty's tensor, its errors naming `what`."""
    device = _device(device, what)
    dims, name = _shape_and_dtype(shape, dtype, what)
    try:
        return _kiln._empty(dims, name, device)
    except _kiln.InvalidArgument as e:
        raise type(e)(f"{what}: {e}") from None


def _shape_and_dtype(shape: Any, dtype: Any, what: str) -> Tuple[List[int], str]:
    """A shape argument (an int or a sequence of ints) as a list, and a
    dtype argument (None: float32) as numpy's name; errors name `what`."""
    from .ops import ArgumentTypeError, _integer
    if _integer(shape) is not None:
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise ArgumentTypeError(
            f"{what}: the shape is an int or a tuple or list of ints; got "
            f"{type(shape).__name__} {shape!r}")
    dims = []
    for i, d in enumerate(shape):
        if (d := _integer(d)) is None:
            raise ArgumentTypeError(f"{what}: shape entry {i} must be an int; got {shape[i]!r}")
        if not -2**63 <= d < 2**63:  # (kiln's own check names a negative one)
            raise _kiln.InvalidArgument(f"{what}: shape entry {i} is {d}; kiln's sizes fit "
                                        f"in 64 bits")
        dims.append(int(d))
    if dtype is None:
        name = "float32"  # (numpy's None is float64, which kiln has not)
    elif isinstance(dtype, str) and dtype in SHORT_DTYPES:
        name = SHORT_DTYPES[dtype]
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            raise ArgumentTypeError(f"{what}: {dtype!r} is not a dtype") from None
    return dims, name


def _check_fits(dims: Sequence[int], name: str, device: _kiln.Device, what: str) -> None:
    """The device's buffer limit, checked before the host array is made (a
    bool takes a 32-bit word, as the kernel ABI stores it; int8 and uint8 a
    byte); and the dtype is one of kiln's."""
    if np.dtype(name) not in _SUPPORTED:
        raise _kiln.InvalidArgument(f"{what}: dtype {name} is not one of kiln's ("
                                    f"{', '.join(sorted(d.name for d in _SUPPORTED))})")
    size = 4 if name == "bool" else np.dtype(name).itemsize
    most = device.limits["max_buffer_size"]
    if math.prod(dims) * size > most:
        raise _kiln.InvalidArgument(
            f"{what}: shape {list(dims)} of {name} takes {math.prod(dims) * size} bytes, more "
            f"than the device's maxBufferSize of {most} bytes")


def full(shape: Sequence[int] | int, fill_value: Any, dtype: Any = None,
         device: Optional[_kiln.Device] = None) -> _kiln.Tensor:
    """A tensor of `shape` holding `fill_value`, as numpy's full: `dtype`
    None takes the value's (a bool bool, an int int32, a float float32); a
    value the dtype cannot hold is refused, naming it."""
    from .ops import _integer_value, _is_number, _float, ArgumentTypeError
    if not _is_number(fill_value):
        raise ArgumentTypeError(f"kiln.full: fill_value must be a number; got "
                                f"{type(fill_value).__name__}")
    if dtype is None:
        dtype = ("bool" if isinstance(fill_value, (bool, np.bool_)) else
                 "int32" if isinstance(fill_value, (int, np.integer)) else "float32")
    device = _device(device, "kiln.full")
    dims, name = _shape_and_dtype(shape, dtype, "kiln.full")
    if any(d < 0 for d in dims):
        raise _kiln.InvalidArgument(f"kiln.full: shape {dims} has a negative dimension")
    _check_fits(dims, name, device, "kiln.full")
    if name == "bool":
        value: Any = bool(fill_value)
    elif name in ("float32", "float16"):
        value = _float(fill_value, "kiln.full: fill_value")
    else:
        value = _integer_value(fill_value, name, "kiln.full: fill_value")
    with np.errstate(over="ignore"):  # (a float beyond float16's range is its infinity)
        return tensor(np.full(dims, value, name), device)


def zeros(shape: Sequence[int] | int, dtype: Any = "float32",
          device: Optional[_kiln.Device] = None) -> _kiln.Tensor:
    """A tensor of `shape` holding zeros (float32 by default), as numpy's."""
    return full(shape, 0, "float32" if dtype is None else dtype, device)


def ones(shape: Sequence[int] | int, dtype: Any = "float32",
         device: Optional[_kiln.Device] = None) -> _kiln.Tensor:
    """A tensor of `shape` holding ones (float32 by default), as numpy's."""
    return full(shape, 1, "float32" if dtype is None else dtype, device)


def _like(t: Any, what: str) -> _kiln.Tensor:
    if not isinstance(t, _kiln.Tensor):
        from .ops import ArgumentTypeError
        raise ArgumentTypeError(f"{what}: t must be a kiln.Tensor; got {type(t).__name__}")
    return t


def zeros_like(t: _kiln.Tensor, dtype: Any = None) -> _kiln.Tensor:
    """Zeros of t's shape, dtype (or `dtype`) and device."""
    t = _like(t, "kiln.zeros_like")
    return full(tuple(t.shape), 0, t.dtype if dtype is None else dtype, t.device)


def ones_like(t: _kiln.Tensor, dtype: Any = None) -> _kiln.Tensor:
    """Ones of t's shape, dtype (or `dtype`) and device."""
    t = _like(t, "kiln.ones_like")
    return full(tuple(t.shape), 1, t.dtype if dtype is None else dtype, t.device)


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None,
           device: Optional[_kiln.Device] = None) -> _kiln.Tensor:
    """Evenly spaced values in [start, stop), as numpy's arange: int32 where
    every argument is an int (float32 otherwise), or `dtype`."""
    from .ops import _is_number, ArgumentTypeError
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if v is not None and (not _is_number(v) or isinstance(v, (bool, np.bool_))):
            raise ArgumentTypeError(f"kiln.arange: {name} must be a number; got {v!r}")
    if step == 0:
        raise _kiln.InvalidArgument("kiln.arange: step is 0")
    if stop is None:
        start, stop = 0, start
    integers = all(isinstance(v, (int, np.integer)) for v in (start, stop, step))
    if integers:
        start, stop, step = int(start), int(stop), int(step)
        n = max(0, -((start - stop) // step))  # numpy's ceil((stop - start) / step)
    else:
        start, stop, step = float(start), float(stop), float(step)
        if not all(math.isfinite(v) for v in (start, stop, step)):
            raise _kiln.InvalidArgument(
                f"kiln.arange: start, stop and step must be finite; got {start}, {stop}, {step}")
        length = (stop - start) / step
        if not math.isfinite(length):
            raise _kiln.InvalidArgument(
                f"kiln.arange: start {start}, stop {stop} and step {step} give more values than "
                f"any device holds")
        n = max(0, math.ceil(length))
    device = _device(device, "kiln.arange")
    _, name = _shape_and_dtype((), "int32" if dtype is None and integers else
                               "float32" if dtype is None else dtype, "kiln.arange")
    dims = [n]
    if np.dtype(name).kind in "iub" and not integers:
        raise _kiln.InvalidArgument(
            f"kiln.arange: dtype {name} takes int start, stop and step; got {start}, {stop}, "
            f"{step} (numpy's result there depends on how it rounds as it goes)")
    if name == "bool" and n > 2:  # (as numpy's)
        raise _kiln.InvalidArgument(f"kiln.arange: dtype bool holds at most 2 values; got {n}")
    # The length and the values' range before any host array is made.
    _check_fits(dims, name, device, "kiln.arange")
    last = start + (n - 1) * step if n else start
    if np.dtype(name).kind in "iu":
        info = np.iinfo(name)
        if n and not (info.min <= min(start, last) and max(start, last) <= info.max):
            raise _kiln.InvalidArgument(
                f"kiln.arange: the values run from {start} to {last}, outside {name}'s range "
                f"[{info.min}, {info.max}]")
    values = np.arange(start, stop, step) if n else np.zeros(0)
    return tensor(values[:n], device, dtype=name)
