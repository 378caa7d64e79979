import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.parametrize("example", ["quickstart.py", "custom_kernel.py", "profiling.py",
                                     "te_tiled_matmul.py", "transformer_block.py"])
def test_example_runs(example, tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "examples" / "python" / example)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    if example != "profiling.py":
        assert "OK" in r.stdout
    else:
        assert "dispatches" in r.stdout or "nothing to profile" in r.stderr


def test_transformer_block_in_float16(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "examples" / "python" / "transformer_block.py"),
                        "--dtype", "float16", "--layers", "1"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if "has no shader-f16" in r.stderr:
        pytest.skip(r.stderr.strip())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "float16: max |kiln - numpy|" in r.stdout and "OK" in r.stdout
