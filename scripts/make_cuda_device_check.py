"""Prepare the CUDA device check: kernels compiled here to PTX, with what to launch and what to
expect, in a small bundle that `scripts/cuda_device_check.py` (stdlib only) runs on a machine
with an NVIDIA GPU and no llvmlite.

    python scripts/make_cuda_device_check.py [--out device_check]

How: the kernels use ndarrays (their extents are launch arguments), so the PTX does not depend
on N. They run once here on the emulated CUDA backend (SPIRAD_CUDA_EMULATE=1) at a small N with
the launches recorded: per task the PTX symbol, its range, its buffer table (ndarrays, their
grads, the adstack metadata words and heaps, the status words) and the argument bytes with the
ndarray-extent slots marked. The device script replays them at N = 1M and 16M with its own grid
and heap sizes. Expected values are float64 numpy references (forward: the kernel's math,
gradient: its derivative by forward-mode dual numbers) at sampled indices.

Workloads (as `benchmarks/bench_autodiff.py`): axpy (pure bandwidth), math (every f32 math
function, libdevice), hist (int atomics), a (v = v*0.95 + 0.01, 256 steps), b16 / b256 (four
loop-carried values through sin/cos), forward and grad.
"""
import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ["SPIRAD_CUDA_EMULATE"] = "1"

import spirad as sd  # noqa: E402
from spirad.backends import llvm_gpu  # noqa: E402

N_REC = 4096
ND = sd.types.ndarray()


def lin(n):
    """The inputs: what the `init` kernel writes, computed in float32 like the device."""
    i = np.arange(n, dtype=np.float32)
    return (np.float32(0.1) + np.float32(0.8) * (i / np.float32(n - 1))).astype(np.float32)


def ref_a(x, steps):
    v, d = x.astype(np.float64), np.ones_like(x, np.float64)
    for _ in range(steps):
        v, d = v * 0.95 + 0.01, d * 0.95
    return v, d


def ref_b(x, steps):
    x = x.astype(np.float64)
    a, b, c, d = x, x * 0.5, x * 0.25, x * 0.125
    da, db, dc, dd = np.ones_like(x), np.full_like(x, 0.5), np.full_like(x, 0.25), np.full_like(x, 0.125)
    for _ in range(steps):
        a2, b2 = np.sin(b) * 0.9 + 0.1 * a, np.cos(c) * 0.9 + 0.1 * b
        c2, d2 = np.sin(d) * 0.9 + 0.1 * c, np.cos(a) * 0.9 + 0.1 * d
        da2, db2 = np.cos(b) * 0.9 * db + 0.1 * da, -np.sin(c) * 0.9 * dc + 0.1 * db
        dc2, dd2 = np.cos(d) * 0.9 * dd + 0.1 * dc, -np.sin(a) * 0.9 * da + 0.1 * dd
        a, b, c, d, da, db, dc, dd = a2, b2, c2, d2, da2, db2, dc2, dd2
    return a + b + c + d, da + db + dc + dd


def ref_math(v):
    v = v.astype(np.float64)
    return (np.sin(v) + np.cos(v) + np.tan(v * 0.5) + np.tanh(v) + np.arcsin(v * 0.5)
            + np.arccos(v * 0.5) + np.arctan2(v, 1.5) + np.exp(v) + np.log(v + 1.5)
            + np.sqrt(v + 1.0) + 1 / np.sqrt(v + 1.0) + np.power(v + 1.0, 1.7))


@sd.kernel
def init(x: ND):
    for i in x:
        x[i] = 0.1 + 0.8 * (sd.cast(i, sd.f32) / sd.cast(x.shape[0] - 1, sd.f32))


@sd.kernel
def axpy(x: ND, y: ND):
    for i in x:
        y[i] = 2.0 * x[i] + y[i]


@sd.kernel
def math(x: ND, y: ND):
    for i in x:
        v = x[i]
        y[i] = (sd.sin(v) + sd.cos(v) + sd.tan(v * 0.5) + sd.tanh(v) + sd.asin(v * 0.5)
                + sd.acos(v * 0.5) + sd.atan2(v, 1.5) + sd.exp(v) + sd.log(v + 1.5)
                + sd.sqrt(v + 1.0) + sd.rsqrt(v + 1.0) + sd.pow(v + 1.0, 1.7))


@sd.kernel
def hist(x: ND, h: ND):
    for i in x:
        h[i % 4] += 1


def make_ab(nsteps):
    @sd.kernel
    def ka(x: ND, y: ND):
        for i in x:
            v = x[i]
            for s in range(nsteps[None]):
                v = v * 0.95 + 0.01
            y[i] = v

    @sd.kernel
    def kb(x: ND, y: ND):
        for i in x:
            a = x[i]
            b = a * 0.5
            c = a * 0.25
            d = a * 0.125
            for s in range(nsteps[None]):
                a2 = sd.sin(b) * 0.9 + 0.1 * a
                b2 = sd.cos(c) * 0.9 + 0.1 * b
                c2 = sd.sin(d) * 0.9 + 0.1 * c
                d2 = sd.cos(a) * 0.9 + 0.1 * d
                a = a2
                b = b2
                c = c2
                d = d2
            y[i] = a + b + c + d
    return ka, kb


class Recorder:
    """Records LlvmGpuBackend launches in the bundle's terms."""

    def __init__(self, buffers):
        self.buffers = buffers  # id(storage) -> buffer name
        self.modules = {}       # module name -> {target: ptx}
        self.launches = None

    def launch(self, be, program, storages, argbuf, ranges, adstack):
        mod = program.name
        if mod not in self.modules:
            self.modules[mod] = {t: c.image.decode().rstrip("\0") for t, c in program.device_code.items()}
        table = []
        for k, st in enumerate(storages):
            if st is None:
                table.append({"temp": f"{mod}:{k}", "nbytes": int(program.temps[k].nbytes)})
            else:
                table.append(self.buffers[id(st)])
        for ti, (kind, rng) in enumerate(zip(program.kinds, ranges)):
            b, e = rng
            rec = {"module": mod, "symbol": _symbols(program)[ti], "kind": kind,
                   "begin": b, "end": "N" if e == N_REC else e, "table": table,
                   "args": argbuf.hex(), "n_slots": _n_slots(program, argbuf)}
            if program.stacks[ti]:
                layout = adstack.sized[ti].layout
                rec["meta"] = [int(w) for w in layout.metadata()]
                rec["stride_float"], rec["stride_int"] = layout.stride_float, layout.stride_int
            self.launches.append(rec)


def _symbols(program):
    return program.device_code["sm_90"].symbols


def _n_slots(program, argbuf):
    """Byte offsets in the argument buffer that hold the recorded N (ndarray extents)."""
    return [off for off in range(0, len(argbuf) - 3, 4)
            if int.from_bytes(argbuf[off:off + 4], "little") == N_REC]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "device_check"))
    ap.add_argument("--sizes", default="1048576,16777216", help="N values the check runs at")
    a = ap.parse_args(argv)
    sd.init(arch=sd.cuda)
    nsteps = sd.field(sd.i32, shape=())
    ka, kb = make_ab(nsteps)
    x = sd.ndarray(sd.f32, (N_REC,), needs_grad=True)
    y = sd.ndarray(sd.f32, (N_REC,), needs_grad=True)
    h = sd.ndarray(sd.i32, (4,))
    buffers = {id(x._storage()): {"buf": "x"}, id(x.grad._storage()): {"buf": "x.grad"},
               id(y._storage()): {"buf": "y"}, id(y.grad._storage()): {"buf": "y.grad"},
               id(h._storage()): {"buf": "h"}, id(nsteps._storage()): {"buf": "nsteps"}}
    rec = Recorder(buffers)
    orig = llvm_gpu.LlvmGpuBackend.launch

    def launch(self, program, storages, argbuf, ranges, adstack=None):
        rec.launch(self, program, storages, argbuf, ranges, adstack)
        return orig(self, program, storages, argbuf, ranges, adstack)
    llvm_gpu.LlvmGpuBackend.launch = launch

    def record(fn):
        rec.launches = []
        fn()
        sd.sync()
        return rec.launches

    cases = []
    init_launches = record(lambda: init(x))
    assert np.allclose(x.to_numpy(), lin(N_REC), rtol=1e-6)
    cases.append({"name": "axpy", "steps": 0, "pre": [["fill_f32", "y", 1.0]],
                  "launches": record(lambda: axpy(x, y)), "check": "y", "ref": "axpy",
                  "bytes_per_elem": 12})
    cases.append({"name": "math", "steps": 0, "pre": [], "launches": record(lambda: math(x, y)),
                  "check": "y", "ref": "math", "bytes_per_elem": 8})
    cases.append({"name": "hist", "steps": 0, "pre": [["fill_f32", "h", 0.0]],
                  "launches": record(lambda: hist(x, h)), "check": "h", "ref": "hist",
                  "bytes_per_elem": 4})
    for name, k, steps in (("a", ka, 256), ("b16", kb, 16), ("b256", kb, 256)):
        nsteps[None] = steps
        fwd = record(lambda: k(x, y))
        y.grad.fill(1.0)
        x.grad.fill(0.0)
        grad = record(lambda: k.grad(x, y))
        ref = ref_a if name == "a" else ref_b
        v, d = ref(lin(N_REC), steps)
        np.testing.assert_allclose(y.to_numpy(), v, rtol=2e-4, atol=1e-5)  # the recording is right
        np.testing.assert_allclose(x.grad.to_numpy(), d, rtol=2e-3, atol=1e-5)
        cases.append({"name": f"{name}_fwd", "steps": steps, "pre": [], "launches": fwd,
                      "check": "y", "ref": name, "bytes_per_elem": 8})
        cases.append({"name": f"{name}_grad", "steps": steps,
                      "pre": [["fill_f32", "y.grad", 1.0], ["fill_f32", "x.grad", 0.0]],
                      "launches": grad, "check": "x.grad", "ref": name, "bytes_per_elem": 12})
    llvm_gpu.LlvmGpuBackend.launch = orig

    sizes = tuple(int(v) for v in a.sizes.split(","))
    samples = {}
    for n in sizes:
        idx = sorted(set(np.linspace(0, n - 1, 257).astype(np.int64).tolist()))
        xs = lin(n)[idx]
        exp = {"axpy": (2.0 * xs.astype(np.float64) + 1.0).tolist(), "math": ref_math(xs).tolist()}
        for name, ref, steps in (("a", ref_a, 256), ("b16", ref_b, 16), ("b256", ref_b, 256)):
            v, d = ref(xs, steps)
            exp[f"{name}_fwd"], exp[f"{name}_grad"] = v.tolist(), d.tolist()
        exp["hist"] = {"indices": [0, 1, 2, 3],
                       "values": np.bincount(np.arange(n) % 4, minlength=4).tolist()}
        samples[str(n)] = {"indices": idx, "expected": exp}
    os.makedirs(a.out, exist_ok=True)
    for mod, ptx in rec.modules.items():
        for t, text in ptx.items():
            with open(os.path.join(a.out, f"{mod}.{t}.ptx"), "w") as f:
                f.write(text)
    bundle = {"n_rec": N_REC, "sizes": list(sizes), "modules": sorted(rec.modules),
              "targets": ["sm_80", "sm_90"], "init": init_launches, "cases": cases,
              "samples": samples,
              "buffers": {"x": "f32", "y": "f32", "x.grad": "f32", "y.grad": "f32",
                          "h": ["i32", 4], "nsteps": ["i32", 1]}}
    with open(os.path.join(a.out, "bundle.json"), "w") as f:
        json.dump(bundle, f)
    total = sum(os.path.getsize(os.path.join(a.out, p)) for p in os.listdir(a.out))
    print(f"wrote {a.out}: {len(rec.modules)} modules, {len(cases)} cases, {total} bytes")


if __name__ == "__main__":
    main()
