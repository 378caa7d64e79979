import gc
import os
import signal
import subprocess
import sys
import time
import weakref

import numpy as np
import pytest

import kiln
from conftest import REPO

VECTOR_ADD = REPO / "examples" / "vector_add.kir"


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


# A kernel whose threads add 2 until they reach `stop`: an odd stop never
# ends. It runs in a child process, whose exit ends the loop on a CPU device.
SPIN = (REPO / "tests" / "kernels" / "spin.kir").read_text()

_SPIN_SETUP = """
import signal, sys, time, kiln
# A process started in the background inherits SIGINT ignored: Ctrl-C's
# handler, as an interactive Python has it.
signal.signal(signal.SIGINT, signal.default_int_handler)
impl, backend = sys.argv[1].split(":")
d = kiln.Device(impl=impl, backend=backend, timeout=float(sys.argv[2]))
k = kiln.compile(%r, d)["spin"]
x = kiln.empty(4, "int32", d)
k(x, 4, 1000)
print("ends:", x.numpy().tolist(), flush=True)
""" % SPIN
_SPINNING = _SPIN_SETUP + """
k(x, 4, 1001)
print("waiting", flush=True)
"""

_SPEC_PARAMS = [s.strip() for s in
                os.environ.get("KILN_PYTHON_TEST_DEVICES",
                               "dawn:vulkan,dawn:opengl,wgpu:vulkan").split(",") if s.strip()]


def _skip_if_the_submit_runs_the_work(spec):
    if spec.endswith(":opengl"):
        pytest.skip("the OpenGL backends run the work inside the submit, before any wait "
                    "begins: a timeout cannot bound it there (python.md)")


def _interrupt_when_waiting(code, spec, *args):
    """Runs `code` (which prints "waiting" before a wait that does not end),
    sends it SIGINT a second later; returns (stdout, stderr)."""
    p = subprocess.Popen([sys.executable, "-c", code, spec, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out = []
        while True:
            line = p.stdout.readline()
            assert line, "".join(out) + p.stderr.read()
            out.append(line)
            if line == "waiting\n":
                break
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=60)
    finally:
        p.kill()
    return "".join(out) + rest, err


@pytest.mark.parametrize("spec", _SPEC_PARAMS)
def test_a_wait_past_the_devices_timeout_is_an_error(spec):
    _skip_if_the_submit_runs_the_work(spec)
    code = _SPINNING + """
t = time.monotonic()
for what, wait in [("read", x.numpy), ("synchronize", d.synchronize)]:
    try:
        wait()
        print(what, "returned")
    except kiln.DeadlineExceeded as e:
        print(what, isinstance(e, TimeoutError), round(time.monotonic() - t, 1), e)
    t = time.monotonic()
try:
    kiln.empty(4, "float32", d)
    print("new work returned")
except kiln.DeadlineExceeded as e:
    print("new work", e)
other = kiln.Device(impl=impl, backend=backend)
y = kiln.empty(4, "int32", other)
kiln.compile(%r, other)["spin"](y, 4, 6)
print("other device:", y.numpy().tolist())
""" % SPIN
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code, spec, "0.5"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "ends: [1000, 1000, 1000, 1000]"
    read = lines[2].split(" ", 3)
    assert read[:2] == ["read", "True"], lines
    assert 0.4 <= float(read[2]) < 10, lines
    assert read[3].startswith("reading a tensor (.numpy()): the device had not finished after "
                              "0.5 s (the device's timeout); a loop that never ends?"), lines
    assert lines[3].startswith("synchronize True "), lines
    # New work on the device waits for what is still running first.
    assert lines[4].startswith("new work a call on a device still running work an earlier wait "
                               "gave up on: the device had not finished after 0.5 s"), lines
    assert lines[5] == "other device: [6, 6, 6, 6]"
    # The process ended without waiting for the loop.
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("spec", _SPEC_PARAMS)
def test_ctrl_c_interrupts_a_wait(spec):
    _skip_if_the_submit_runs_the_work(spec)
    code = _SPINNING + "x.numpy()\nprint('returned')\n"
    out, err = _interrupt_when_waiting(code, spec, "0")
    assert out.startswith("ends: [1000, 1000, 1000, 1000]\n")
    assert "returned" not in out
    assert err.rstrip().endswith("KeyboardInterrupt"), err


@pytest.mark.parametrize("spec", _SPEC_PARAMS)
def test_ctrl_c_while_a_device_is_freed(spec):
    _skip_if_the_submit_runs_the_work(spec)
    # Freeing a device waits for its work; Ctrl-C ends that wait, and is
    # raised after.
    code = _SPINNING + """
import gc
del k, x, d
gc.collect()
print("freed")
"""
    out, err = _interrupt_when_waiting(code, spec, "0")
    assert err.rstrip().endswith("KeyboardInterrupt"), out + err


@pytest.mark.parametrize("spec", _SPEC_PARAMS)
def test_an_interrupted_profile_leaves_nothing_in_the_next(spec):
    _skip_if_the_submit_runs_the_work(spec)
    # The end of a profile waits for a kernel of a few seconds, interrupted:
    # the next profile has only its own dispatches.
    code = _SPIN_SETUP + """
a = kiln.empty(4, "float32", d)
try:
    with kiln.profile(d, print=False):
        kiln.ops.add(a, a)
        k(x, 4, 2 * 10**9)
        print("waiting", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
with kiln.profile(d, print=False) as p:
    kiln.ops.add(a, a)
print([name for name, _ in p.timings])
"""
    out, err = _interrupt_when_waiting(code, spec, "0")
    assert out.splitlines()[-2:] == ["interrupted", "['elementwise_add']"], out + err


def test_device_timeouts():
    d = kiln.Device(timeout=2.5)
    assert d.timeout == 2.5
    d.timeout = 0
    assert d.timeout is None
    d.timeout = np.float32(0.25)
    assert d.timeout == 0.25
    d.timeout = None
    assert d.timeout is None
    d.timeout = 3
    assert d.timeout == 3.0
    for bad in [-1, float("nan"), float("inf"), 1e7, 2**1100, -2**1100, 1e-10, 5e-324]:
        with pytest.raises(kiln.InvalidArgument, match=r"kiln.Device: timeout must be a number "
                           r"of seconds from 0 \(no limit\) to 1000000, and not below 1e-9 "
                           r"\(a nanosecond\) unless 0, got "):
            kiln.Device(timeout=bad)
        with pytest.raises(kiln.InvalidArgument, match="kiln.Device.timeout: timeout must be"):
            d.timeout = bad
    for bad in ["1", True, [1]]:
        with pytest.raises(TypeError, match="kiln.Device: timeout must be a number of seconds or "
                           "None, not "):
            kiln.Device(timeout=bad)
    assert d.timeout == 3.0
    code = "import kiln; print(kiln.default_device().timeout, kiln.Device().timeout)"
    r = _run(code, KILN_TIMEOUT="1.5")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1.5", "1.5"]
    r = _run(code, KILN_TIMEOUT="0")
    assert r.stdout.split() == ["None", "None"], r.stderr
    for bad in ["soon", "-2", "1s", "1e-12"]:
        r = _run(code, KILN_TIMEOUT=bad)
        assert r.returncode != 0
        assert "kiln.InvalidArgument: KILN_TIMEOUT must be a number of seconds" in r.stderr, \
            r.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_forked_child_cannot_use_its_parents_device():
    code = """
import os, sys, numpy as np, kiln
x = kiln.tensor(np.arange(5, dtype=np.float32))
k = kiln.compile(open(sys.argv[1]).read())["vector_add"]
y = kiln.ops.add(x, x)
k(x, x, kiln.empty(5, "float32"), 5)  # recorded, not yet submitted
pid = os.fork()
if pid == 0:
    for call in [y.numpy, lambda: kiln.ops.add(x, x), lambda: kiln.tensor(np.ones(3, np.float32)),
                 kiln.Device, kiln.devices, kiln.default_device, lambda: k(x, x, y, 5)]:
        try:
            call()
            print("child: no error")
        except kiln.FailedPrecondition as e:
            print("child:", e)
    print("child device:", x.device.impl, x.shape)
    del x, y
    sys.exit(3)
_, status = os.waitpid(pid, 0)
print("parent:", os.waitstatus_to_exitcode(status), y.numpy().tolist())
"""
    r = subprocess.run([sys.executable, "-c", code, str(VECTOR_ADD)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 9, r.stdout + r.stderr
    for line in lines[:2]:
        assert "was made by a parent of this process (before a fork())" in line, line
    for line, what in zip(lines[2:6], ["kiln.default_device()", "kiln.Device", "kiln.devices()",
                                       "kiln.default_device()"]):
        assert line.startswith(f"child: {what}: this process was fork()ed from one that had "
                               "already used a WebGPU implementation"), line
        assert "'spawn' or 'forkserver'" in line
    assert "was made by a parent of this process (before a fork())" in lines[6], lines[6]
    assert lines[7].startswith("child device: ")
    # The child's own exit status, though the implementation's exit handlers
    # could not run in it.
    assert lines[8] == "parent: 3 [0.0, 2.0, 4.0, 6.0, 8.0]"
