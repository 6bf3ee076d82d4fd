"""examples/distributed_training.py: data-parallel torch.distributed (gloo, 2 processes on the
CPU) with spirad kernels on each rank trains to the same parameters as one process."""
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "distributed_training.py")


def _train(tmp_path, world):
    out = tmp_path / f"w{world}.npy"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, SCRIPT, "--world-size", str(world), "--steps", "25",
                        "--batch", "64", "--out", str(out)], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    first, last = (float(v) for v in r.stdout.split("loss ")[1].split(" in ")[0].split(" -> "))
    return np.load(out), first, last


def test_two_ranks_equal_one_process(tmp_path):
    w2, first2, last2 = _train(tmp_path, 2)
    w1, first1, last1 = _train(tmp_path, 1)
    assert last2 < 0.2 * first2               # it trains
    np.testing.assert_allclose(w2, w1, rtol=1e-10, atol=1e-12)
    assert abs(last2 - last1) < 1e-10
    assert not np.allclose(w1[:8], 0.1)       # the parameters moved from their start
