"""Per-dispatch GPU times from timestamp queries."""

from __future__ import annotations

import weakref
from typing import List, NamedTuple, Optional

import numpy as np

from . import _kiln


def _end_quietly(device: _kiln.Device) -> None:
    try:
        device._end_profile()
    except _kiln.Error:
        pass


class DispatchTime(NamedTuple):
    """One dispatch: its kernel's entry point and GPU time in milliseconds."""
    name: str
    gpu_ms: float


class Profile:
    """Times every dispatch queued on a device inside a `with` block, with
    the device's timestamp queries:

        with kiln.profile() as p:
            y = kiln.ops.softmax(x)
        p.timings          # [DispatchTime('softmax', 0.12), ...]

    The table is printed at the end of the block unless print=False. A device
    without the timestamp-query feature raises kiln.Unavailable on entry.
    Work queued before the block is finished first and not timed."""

    def __init__(self, device: Optional[_kiln.Device] = None, print: bool = True) -> None:
        from .ops import ArgumentTypeError
        if device is not None and not isinstance(device, _kiln.Device):
            raise ArgumentTypeError(
                f"profile: device must be a kiln.Device; got {type(device).__name__}")
        if not isinstance(print, (bool, np.bool_)):
            raise ArgumentTypeError(f"profile: print must be a bool; got {print!r}")
        self.device = device if device is not None else _kiln.default_device()
        self.timings: List[DispatchTime] = []
        self._print = print
        self._open = False  # entered and not yet exited

    def __enter__(self) -> "Profile":
        self.device._begin_profile()
        self._open = True
        # A profile entered and then dropped without its exit (a bare
        # __enter__() call) ends when it is collected, so that the device
        # can be profiled again.
        self._abandoned = weakref.finalize(self, _end_quietly, self.device)
        return self

    def __exit__(self, *exc: object) -> None:
        # Only the profile that was entered ends the device's profiling
        # (another one open on the device is not this one's to end).
        if not self._open:
            raise _kiln.FailedPrecondition(
                "profile: __exit__ of a profile that is not open (never entered, or exited "
                "already)")
        self._open = False
        self._abandoned.detach()
        raw = self.device._end_profile()
        self.timings = [DispatchTime(name, ns / 1e6) for name, ns in raw]
        if self._print and exc[0] is None:
            print(self.table())

    @property
    def total_ms(self) -> float:
        return sum(t.gpu_ms for t in self.timings)

    def table(self) -> str:
        """The timings as a table: one row per dispatch, then the total."""
        width = max([len("kernel")] + [len(t.name) for t in self.timings])
        lines = [f"{'#':>4}  {'kernel':<{width}}  {'GPU ms':>10}"]
        for i, t in enumerate(self.timings):
            lines.append(f"{i:>4}  {t.name:<{width}}  {t.gpu_ms:>10.4f}")
        lines.append(f"{'':>4}  {'total':<{width}}  {self.total_ms:>10.4f}")
        return "\n".join(lines)


def profile(device: Optional[_kiln.Device] = None, print: bool = True) -> Profile:
    """A context manager timing each dispatch on `device` (default: the
    default device); see Profile."""
    return Profile(device, print)
