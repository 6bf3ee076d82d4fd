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
    ops = b["trace"]["ops"]
    kinds = {o["op"] for o in ops}
    assert {"alloc", "upload", "launch", "download", "wait", "signal", "wrap",
            "foreign_fill", "foreign_check", "mark"} <= kinds
    launched = {o["module"].split("_", 1)[1] for o in ops if o["op"] == "launch"}
    assert {"sizer_eval", "sizer_reduce", "sizer_layout", "k", "k_grad"} <= launched
    hits = [i for i, o in enumerate(ops) if o["op"] == "mark"]
    assert not any(o["op"] in ("sync", "download") for o in ops[hits[0]:hits[1]])  # no waits
    assert (out / "dlpack.py").exists()
    assert (out / "runtime" / "llvm_codegen" / "device_runtime" / "cuda_runtime.py").exists()
    for m in b["modules"]:
        for t in b["targets"]:
            assert f".target {t}" in (out / f"{m}.{t}.ptx").read_text()
    grads = [lr for c in b["cases"] if c["name"].endswith("_grad") for lr in c["launches"]]
    assert any("meta" in lr for lr in grads)  # adstack layouts travel with the launches
    assert all(lr["n_slots"] for c in b["cases"] for lr in c["launches"])
    assert sorted(b["samples"]) == sorted(str(n) for n in b["sizes"]) == ["1048576", "16777216"]
    assert os.path.getsize(out / "bundle.json") < 1 << 20
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    assert total < 64 << 20
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
        self.modules, self.keep, self.ordered, self.streams = modules, [], [], 0

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

    def launch(self, f, bufs, args, begin, end, nthreads, block, stream=None):
        f(bufs, args, begin, end, nthreads, 0, nthreads)

    def sync(self):
        pass

    # streams: everything here runs at once, in call order
    def stream(self):
        import ctypes
        self.streams += 1
        return ctypes.c_void_p(0x5100 + self.streams)

    def upload_async(self, p, data, stream):
        self.upload(p, data)

    def memset_async(self, p, byte, n, stream):
        import ctypes
        ctypes.memset(p, byte, n)

    def stream_sync(self, stream):
        pass

    def order(self, first, then):
        self.ordered.append((first, then))

    def record_on(self, e, stream):
        self.record(e)

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
        rec, tr = make.main(["--out", str(tmp_path), "--sizes", "4096,12288"])
    modules = {p.name: p.module for p in progs if not p.name.startswith("sizer_")}
    modules.update({key: p.module for key, p in tr.programs.items()})
    run = _load_script("cuda_device_check")
    cu = [None]

    def make_cuda():
        cu[0] = EmulatedCuda(modules)
        return cu[0]
    def spirad_trace(cu, ptx_of, d, syms):
        """spirad's runtime adapter of the device script, over the emulated runtime (the same
        interface as CudaRuntime; its launches queue until a wait)."""
        from llvm_codegen.device_runtime.emu_runtime import EmuRuntime

        class EmuTrace(run.SpiradTrace):
            name = "spirad's runtime (emulated)"

            def function(self, key, sym):
                return modules[key].function(sym)
        t = EmuTrace(cu, ptx_of, EmuRuntime(), syms)
        trace_rts.append(t.rt)
        return t
    trace_rts = []
    rc = run.main([str(tmp_path), "--reps", "1"], make_cuda=make_cuda, spirad_trace=spirad_trace)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "ALL OK" in out and out.count(" ok  ") == 2 * 9
    # the trace: the GPU sizer's read-backs, the device-read range, the DLPack-made foreign
    # buffer ordered with its producer's stream, a timed segment of hits
    assert "trace through ctypes on libcuda:" in out and "read-backs compared: ok" in out
    assert "trace through spirad's runtime (emulated):" in out and out.count("compared: ok") == 2
    events = trace_rts[0].stream_events
    assert [e[0] for e in events] == ["wait", "wait", "signal", "signal"]
    assert "dlpack capsule over a cuMemAlloc'd buffer: ok" in out
    assert "producer stream reads the kernel's result in place: ok" in out
    assert "hits: 20 queued grad launches" in out
    kinds = [(a is b) for a, b in cu[0].ordered]
    assert len(cu[0].ordered) == 4 and not any(kinds)  # wait x2, signal x2 between two streams
    trace_rts[0].close()
