import gc

import numpy as np
import pytest

import kiln


def test_profile_times_each_dispatch(device, rng, capsys):
    if not device.has_feature("timestamp-query"):
        with pytest.raises(kiln.Unavailable, match="timestamp-query"):
            with kiln.profile(device):
                pass
        pytest.skip(f"{device.impl}/{device.backend} has no timestamp-query "
                    "(checked: kiln.profile raises kiln.Unavailable)")
    x = kiln.tensor(rng.standard_normal((33, 100)).astype(np.float32), device)
    kiln.ops.exp(x)  # queued before the profile: not timed
    with kiln.profile(device) as p:
        y = kiln.ops.softmax(x)
        z = kiln.ops.add(y, x)
    names = [t.name for t in p.timings]
    assert names == ["softmax", "elementwise_add"]  # softmax is one kernel
    assert all(t.gpu_ms >= 0 for t in p.timings) and p.total_ms > 0
    assert all(isinstance(t, kiln.DispatchTime) for t in p.timings)
    out = capsys.readouterr().out
    assert "elementwise_add" in out and "total" in out
    assert np.isfinite(z.numpy()).all()
    with kiln.profile(device, print=False) as q:
        pass
    assert q.timings == [] and capsys.readouterr().out == ""


def test_profiles_do_not_nest(device):
    if not device.has_feature("timestamp-query"):
        pytest.skip(f"{device.impl}/{device.backend} has no timestamp-query")
    with kiln.profile(device, print=False):
        with pytest.raises(kiln.FailedPrecondition, match="already open"):
            with kiln.profile(device, print=False):
                pass


def test_a_profile_entered_and_dropped_ends(device):
    # A bare __enter__() whose profile is then dropped: collected, it ends,
    # and the device can be profiled again.
    if not device.has_feature("timestamp-query"):
        pytest.skip(f"{device.impl}/{device.backend} has no timestamp-query")
    kiln.profile(device, print=False).__enter__()
    gc.collect()
    with kiln.profile(device, print=False) as p:
        kiln.tensor(np.ones(4, np.float32), device) + 1
    assert len(p.timings) == 1


def test_a_profile_exited_without_being_entered_is_refused(device):
    if not device.has_feature("timestamp-query"):
        pytest.skip(f"{device.impl}/{device.backend} has no timestamp-query")
    stray = "profile: __exit__ of a profile that is not open"
    with pytest.raises(kiln.FailedPrecondition, match=stray):
        kiln.profile(device, print=False).__exit__(None, None, None)
    # Nor does it end another profile open on the device, nor one twice.
    with kiln.profile(device, print=False) as p:
        kiln.tensor(np.ones(4, np.float32), device) + 1
        with pytest.raises(kiln.FailedPrecondition, match=stray):
            kiln.profile(device, print=False).__exit__(None, None, None)
    assert len(p.timings) == 1
    with pytest.raises(kiln.FailedPrecondition, match=stray):
        p.__exit__(None, None, None)
    assert len(p.timings) == 1


def test_profile_arguments_are_checked(device):
    for bad in ("no", 1, None):
        with pytest.raises(kiln.ArgumentTypeError, match="profile: print must be a bool"):
            kiln.profile(device, print=bad)
    with pytest.raises(kiln.ArgumentTypeError, match="profile: device must be a kiln.Device"):
        kiln.profile("dawn")


def test_timings_carry_the_kernels_own_name(device):
    # `loop` is a WGSL keyword: the entry point is renamed, the timing is not.
    if not device.has_feature("timestamp-query"):
        pytest.skip(f"{device.impl}/{device.backend} has no timestamp-query")
    m = kiln.compile("module {\nfn loop(A: buffer<f32>[4]) {\n  for tx in threadIdx.x(0, 4) {\n"
                     "    A[tx] = 1.0\n  }\n}\n}\n", device)
    a = kiln.empty((4,), "float32", device)
    with kiln.profile(device, print=False) as p:
        m["loop"](a)
    assert [t.name for t in p.timings] == ["loop"]
    np.testing.assert_array_equal(a.numpy(), np.ones(4, np.float32))
