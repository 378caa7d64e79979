"""The wheel: built with pip from python/, installed into a fresh venv with
no network (numpy from the set-up's wheel cache .whl/), and used from
outside the source tree with the WebGPU libraries it carries."""
import os
import subprocess
import sys
import zipfile

import pytest

from conftest import REPO

SCRIPT = r"""
import os, sys
import numpy as np
import kiln
here = os.path.dirname(kiln.__file__)
assert here.startswith(sys.prefix), (here, sys.prefix)
found = kiln.devices()
assert {d["impl"] for d in found} == {"dawn", "wgpu"}, found
for d in found:
    assert d["library"].startswith(os.path.join(here, "lib")), d["library"]
for impl in ("dawn", "wgpu"):
    dev = kiln.Device(impl=impl, backend="vulkan")
    a = np.linspace(-3, 3, 1000, dtype=np.float32).reshape(10, 100)
    y = kiln.ops.softmax(kiln.ops.exp(kiln.tensor(a, dev))).numpy()
    e = np.exp(np.exp(a) - np.exp(a).max(1, keepdims=True))
    assert np.allclose(y, e / e.sum(1, keepdims=True), rtol=1e-4, atol=1e-7), impl
    print(impl, "OK")
"""


@pytest.mark.skipif(os.environ.get("KILN_TEST_WHEEL") != "1",
                    reason="builds the wheel: set KILN_TEST_WHEEL=1 (scripts/test.sh does)")
def test_wheel_in_a_clean_venv(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "KILN_DAWN_LIBRARY", "KILN_WGPU_LIBRARY", "KILN_IMPL",
                        "KILN_BACKEND", "VIRTUAL_ENV")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no machine-wide indexes or links
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation",
                    "--no-deps", "-w", str(wheels), str(REPO / "python")], check=True, env=env)
    (wheel,) = wheels.glob("kiln-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for want in ("kiln/lib/libwebgpu_wrapper.so", "kiln/lib/libwgpu_native-release.so",
                 "kiln/_kiln/__init__.pyi", "kiln/_kiln/te.pyi", "kiln/py.typed", "kiln/__init__.py", "kiln/ops.py"):
        assert want in names, f"{want} missing from {wheel.name}"
    assert any(n.startswith("kiln/_kiln.") and n.endswith(".so") for n in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--find-links",
                    str(REPO / ".whl"), str(wheel), "numpy"], check=True, env=env)
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    r = subprocess.run([py, "-c", SCRIPT], cwd=run_dir, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["dawn", "OK", "wgpu", "OK"]
