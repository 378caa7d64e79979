"""Tensors from numpy arrays and of a shape."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from . import _kiln

_SUPPORTED = {np.dtype(n) for n in
              ("float32", "float16", "int32", "uint32", "int8", "uint8", "bool")}


def _device(device: Optional[_kiln.Device]) -> _kiln.Device:
    return _kiln.default_device() if device is None else device


def tensor(data: Any, device: Optional[_kiln.Device] = None,
           dtype: Any = None) -> _kiln.Tensor:
    """A tensor holding a copy of `data` (a numpy array, or anything
    numpy.asarray takes) on `device` (the default device if None).

    dtypes: float32, float16, int32, uint32, int8, uint8 and bool, as numpy
    has them. A Python list or number of floats becomes float32 and of ints
    int32; a float64 or int64 *array* is an error (convert it first), so
    precision is never lost silently. Non-contiguous arrays are copied in
    row-major order. bool elements are stored as 32-bit 0/1 (the kernel
    ABI's layout), int8/uint8 packed four to a word.
    """
    if dtype is not None:
        array = np.asarray(data, dtype=dtype)
    elif isinstance(data, np.ndarray):
        array = data
    else:
        array = np.asarray(data)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        elif array.dtype == np.int64:
            if array.size and (array.min() < -2**31 or array.max() >= 2**31):
                raise _kiln.InvalidArgument("integers out of the int32 range")
            array = array.astype(np.int32)
    if array.dtype not in _SUPPORTED:
        raise _kiln.InvalidArgument(
            f"arrays of {array.dtype} are not supported; kiln's dtypes are float32, float16, "
            f"int32, uint32, int8, uint8 and bool (convert with .astype)")
    if not array.flags.c_contiguous:
        array = array.copy(order="C")
    return _kiln._tensor_from_array(array, _device(device))


def empty(shape: Sequence[int] | int, dtype: Any = "float32",
          device: Optional[_kiln.Device] = None) -> _kiln.Tensor:
    """A tensor of `shape` and `dtype` whose contents are unspecified (an
    output for a kernel to write)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    dims = []
    for i, d in enumerate(shape):
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"kiln.empty: shape entry {i} must be an int; got {d!r}")
        if not -2**63 <= d < 2**63:  # (kiln's own check names a negative one)
            raise _kiln.InvalidArgument(f"kiln.empty: shape entry {i} is {d}; kiln's sizes fit "
                                        f"in 64 bits")
        dims.append(int(d))
    short = ("f32", "f16", "i32", "u32", "i8", "u8")
    name = dtype if isinstance(dtype, str) and dtype in short else np.dtype(dtype).name
    return _kiln._empty(dims, name, _device(device))
