"""The prepared CUDA device check: the bundle is made (its recorded launches reproduce the
float64 references on the emulated backend, asserted while it is made) and is self-contained;
the stdlib runner reads it and, without a driver, says so."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bundle_is_complete_and_runner_needs_a_driver(tmp_path, monkeypatch):
    monkeypatch.setenv("SPIRAD_CUDA_EMULATE", "1")
    from tests.support.archs import arch_or_skip
    arch_or_skip("cuda")
    out = tmp_path / "bundle"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_cuda_device_check.py"),
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    b = json.loads((out / "bundle.json").read_text())
    names = [c["name"] for c in b["cases"]]
    assert {"axpy", "math", "a_grad", "b256_grad"} <= set(names)
    for m in b["modules"]:
        for t in b["targets"]:
            assert f".target {t}" in (out / f"{m}.{t}.ptx").read_text()
    grads = [lr for c in b["cases"] if c["name"].endswith("_grad") for lr in c["launches"]]
    assert any("meta" in lr for lr in grads)  # adstack layouts travel with the launches
    assert all(lr["n_slots"] for c in b["cases"] for lr in c["launches"])
    assert sorted(b["samples"]) == sorted(str(n) for n in b["sizes"]) == ["1048576", "16777216"]
    assert os.path.getsize(out / "bundle.json") < 1 << 20
    try:
        import ctypes
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("a CUDA driver is present: run the check itself")
    except OSError:
        pass
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "cuda_device_check.py"),
                        str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no usable CUDA device" in r.stdout
