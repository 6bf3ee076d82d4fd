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


def _load_script(name):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class EmulatedCuda:
    """The runner's device interface over host memory, launching the emulated programs compiled
    from the same kernels (by module name) instead of the PTX."""
    name, cc, sms, max_threads, peak = "emulated", 90, 1, 512, 1e12

    def __init__(self, modules):
        self.modules, self.keep = modules, []

    def alloc(self, n):
        import numpy as np
        a = np.zeros(max(n, 8), np.uint8)
        self.keep.append(a)
        return a.ctypes.data

    def free(self, p):
        pass

    def upload(self, p, data):
        import ctypes
        ctypes.memmove(p, data, len(data))

    def download(self, p, n):
        import ctypes
        return ctypes.string_at(p, n)

    def fill32(self, p, bits, count):
        import ctypes
        import numpy as np
        np.ctypeslib.as_array((ctypes.c_uint32 * count).from_address(p))[:] = bits

    def module(self, ptx, name):
        assert ".visible .entry" in ptx
        return self.modules[name]

    def function(self, m, sym):
        return m.function(sym)

    def launch(self, f, bufs, args, begin, end, nthreads, block):
        f(bufs, args, begin, end, nthreads, 0, nthreads)

    def sync(self):
        pass

    def event(self):
        return [0.0]

    def record(self, e):
        import time
        e[0] = time.perf_counter()

    def elapsed_ms(self, a, b):
        return (b[0] - a[0]) * 1e3


def test_runner_replays_the_bundle_and_its_checks_pass(tmp_path, monkeypatch, capsys):
    """The runner's replay (buffer tables, argument patching to N, heaps sized for its grid,
    fills, status words, sampled checks) on emulated programs at N = 4096 and 12288."""
    monkeypatch.setenv("SPIRAD_CUDA_EMULATE", "1")
    from tests.support.archs import arch_or_skip
    arch_or_skip("cuda")
    from tests.gpu_llvm.kernels import capture
    make = _load_script("make_cuda_device_check")
    with capture() as progs:
        make.main(["--out", str(tmp_path), "--sizes", "4096,12288"])
    modules = {p.name: p.module for p in progs}
    run = _load_script("cuda_device_check")
    rc = run.main([str(tmp_path), "--reps", "1"], make_cuda=lambda: EmulatedCuda(modules))
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "ALL OK" in out and out.count(" ok  ") == 2 * 9
