"""kiln: a tensor compiler and runtime for WebGPU, from Python.

    import numpy as np, kiln
    x = kiln.tensor(np.random.rand(7, 33).astype(np.float32))
    y = kiln.ops.exp(kiln.ops.add(x, x))
    print(y.numpy())

Devices (`kiln.devices()`, `kiln.Device`, `kiln.default_device()`), tensors
(`kiln.tensor`, `kiln.empty`), the operator library (`kiln.ops`), elementwise
functions fused into one kernel (`kiln.fuse`), kernels
written as tensor expressions (`kiln.te`, `kiln.build`) or in kiln IR
(`kiln.compile`, `kiln.load_module`), profiling (`kiln.profile`) and errors
(`kiln.Error` and its subclasses). docs/python.md describes them.
"""

from __future__ import annotations

import os as _os

from . import _kiln
from ._kiln import (
    CompileError,
    DataLoss,
    DeadlineExceeded,
    Device,
    DeviceLost,
    Error,
    FailedPrecondition,
    InternalError,
    InvalidArgument,
    Kernel,
    Module,
    OutOfMemory,
    Program,
    Tensor,
    Unavailable,
    Unimplemented,
    build,
    build_kernels,
    compile,
    default_device,
    devices,
    load_module,
)

#: A device lacks a feature (shader-f16, timestamp-query, ...): kiln.Unavailable.
FeatureMissing = Unavailable


def _use_bundled_libraries() -> None:
    # A wheel carries Dawn and wgpu-native in kiln/lib; a build tree uses
    # the paths configured at build time. KILN_DAWN_LIBRARY and
    # KILN_WGPU_LIBRARY override either.
    lib = _os.path.join(_os.path.dirname(__file__), "lib")
    dawn = _os.path.join(lib, "libwebgpu_wrapper.so")
    wgpu = _os.path.join(lib, "libwgpu_native-release.so")
    _kiln._set_bundled_libraries(dawn if _os.path.exists(dawn) else "",
                                 wgpu if _os.path.exists(wgpu) else "")


_use_bundled_libraries()

from . import ops, te  # noqa: E402
from .ops import ArgumentTypeError  # noqa: E402
from ._operators import KernelNotFoundError  # noqa: E402
from ._operators import install as _install_operators  # noqa: E402

_install_operators()
from ._tensor import arange, empty, full, ones, ones_like, tensor, zeros, zeros_like  # noqa: E402
from ._profile import DispatchTime, Profile, profile  # noqa: E402
from ._fuse import fuse  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "ArgumentTypeError", "CompileError", "DataLoss", "DeadlineExceeded", "Device", "DeviceLost",
    "DispatchTime", "Error",
    "FailedPrecondition", "FeatureMissing", "InternalError", "InvalidArgument", "Kernel",
    "KernelNotFoundError",
    "Module", "OutOfMemory", "Profile", "Program", "Tensor", "Unavailable", "Unimplemented",
    "arange", "build", "build_kernels", "compile", "default_device", "devices", "empty", "full",
    "fuse", "ones", "ones_like", "zeros", "zeros_like",
    "load_module",
    "ops", "profile",
    "te", "tensor",
]
