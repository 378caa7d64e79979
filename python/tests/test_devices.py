import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import kiln


def test_devices_lists_adapters_with_features_and_limits():
    found = kiln.devices()
    assert found, "no adapters"
    for d in found:
        assert d["impl"] in ("dawn", "wgpu")
        assert d["backend"]
        assert d["feature_level"] in ("core", "compatibility")
        assert isinstance(d["features"], list)
        assert d["limits"]["max_compute_invocations_per_workgroup"] >= 64
    assert {d["impl"] for d in found} == {"dawn", "wgpu"}


def test_device_properties(device):
    assert device.impl in ("dawn", "wgpu")
    assert device.limits["max_storage_buffers_per_shader_stage"] >= 4
    assert device.adapter
    assert "kiln.Device(" in repr(device)
    assert device.has_feature("shader-f16") in (True, False)
    with pytest.raises(kiln.InvalidArgument, match="feature"):
        device.has_feature("no-such-feature")


def test_bad_device_arguments():
    with pytest.raises(kiln.InvalidArgument, match="impl|implementation"):
        kiln.Device(impl="vulkan")
    with pytest.raises(kiln.InvalidArgument):
        kiln.Device(backend="teletype")
    with pytest.raises(kiln.InvalidArgument):
        kiln.Device(feature_level="ultra")
    # Wrong types name the argument; trusted is a bool (numpy's too) or None.
    with pytest.raises(TypeError, match=r"kiln.Device: impl must be a str \('dawn' or 'wgpu'\) "
                       "or None, not int"):
        kiln.Device(impl=3)
    with pytest.raises(TypeError, match="kiln.Device: backend must be a str"):
        kiln.Device(backend=b"vulkan")
    with pytest.raises(TypeError, match=r"kiln.Device: trusted must be a bool, not str \('yes'\)"):
        kiln.Device(trusted="yes")
    with pytest.raises(TypeError, match="kiln.Device: trusted must be a bool, not int"):
        kiln.Device(trusted=1)
    assert kiln.Device(trusted=np.bool_(False)).trusted is False


def test_a_device_no_one_holds_is_freed_with_its_operator_cache(device):
    # Operators cache their programs on the device, and each program holds
    # the device: a cycle the garbage collector frees.
    fresh = kiln.Device(impl=device.impl, backend=device.backend)
    x = kiln.tensor(np.arange(6, dtype=np.float32), fresh)
    y = kiln.ops.exp(x + x)
    assert len(fresh._cache) >= 2
    gone = weakref.ref(fresh)
    # A tensor keeps its device alive, and with it the cache.
    del fresh, x
    gc.collect()
    assert gone() is not None
    np.testing.assert_allclose((y * 1.0).numpy(), np.exp(2 * np.arange(6, dtype=np.float32)),
                               rtol=1e-6)
    assert len(gone()._cache) >= 3
    # A program taken out of the cache keeps the device alive too.
    program = next(iter(gone()._cache.values()))
    del y
    gc.collect()
    assert gone() is not None
    zeros = kiln.tensor(np.zeros(6, np.float32), gone())
    assert program.run([zeros] * len(program.inputs))
    del zeros
    del program
    gc.collect()
    assert gone() is None


def test_the_default_device_keeps_its_operator_cache():
    x = kiln.tensor(np.arange(3, dtype=np.float32))
    (x * x).numpy()
    cached = len(kiln.default_device()._cache)
    assert cached >= 1
    del x
    gc.collect()
    assert len(kiln.default_device()._cache) == cached


def _run(code, **env):
    full = dict(os.environ)
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                          timeout=120)


def test_default_device_follows_the_environment():
    code = "import kiln; d = kiln.default_device(); print(d.impl, d.backend, d.trusted)"
    r = _run(code, KILN_IMPL="wgpu", KILN_BACKEND="vulkan", KILN_TRUSTED="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["wgpu", "vulkan", "True"]
    r = _run(code, KILN_IMPL="dawn", KILN_BACKEND="opengl", KILN_TRUSTED="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["dawn", "opengl", "False"]


def test_a_wrong_library_variable_is_an_error_not_a_crash(tmp_path):
    code = ("import kiln\ntry:\n    kiln.Device(impl='dawn')\nexcept kiln.InvalidArgument as e:\n"
            "    print('refused:', e)\n")
    r = _run(code, KILN_DAWN_LIBRARY=str(tmp_path / "missing.so"))
    assert r.returncode == 0, r.stderr
    assert "refused:" in r.stdout and "KILN_DAWN_LIBRARY" in r.stdout
