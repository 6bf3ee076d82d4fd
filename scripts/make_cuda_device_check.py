"""Prepare the CUDA device check: kernels compiled here to PTX, with what to launch and what to
expect, in a small bundle that `scripts/cuda_device_check.py` (stdlib only) runs on a machine
with an NVIDIA GPU and no llvmlite.

    python scripts/make_cuda_device_check.py [--out device_check]

Two parts:

1. Workloads (scaled). The kernels use ndarrays (their extents are launch arguments in the
   shape-agnostic programs compiled here), so the PTX does not depend on N. They run once here on the emulated CUDA backend
   (SPIRAD_CUDA_EMULATE=1; compiled inside `shape_policy.shape_agnostic()`, so no program is
   specialised on that N's shapes) at a small N with the launches recorded: per task the PTX symbol, its
   range, its buffer table (ndarrays, their grads, the adstack metadata words and heaps, the
   status words) and the argument bytes with the ndarray-extent slots marked. The device script
   replays them at N = 1M and 16M with its own grid and heap sizes. Expected values are float64
   numpy references (forward: the kernel's math, gradient: its derivative by forward-mode dual
   numbers) at sampled indices. Workloads (as `benchmarks/bench_autodiff.py`): axpy (pure
   bandwidth), math (every f32 math function, libdevice), hist (int atomics), a (v = v*0.95 +
   0.01, 256 steps), b16 / b256 (four loop-carried values through sin/cos), forward and grad.

2. A trace (exact). A short program runs here with every call of the device runtime recorded
   in order (`Trace`): allocations, asynchronous uploads (pointers inside them, such as launch
   buffer tables, marked for relocation), launches, waits, read-backs with the bytes the
   emulation read. It covers what the GPU path added: the GPU sizer (its kernels and read-back),
   a parallel range read from a field on the device, launches queued without waiting (a timed
   segment of sizing-cache hits), and another library's CUDA memory used in place with stream
   ordering (`__cuda_array_interface__` with a producer stream; on the device that memory is a
   ctypes-made allocation passed through a DLPack capsule). The device script replays it on one
   stream and compares every read-back (integers and tables exactly, floats within 2e-3).

The bundle also holds `dlpack.py` (`llvm_codegen/device_runtime/dlpack.py`, stdlib only) and the
device runtime sources, which the device script uses when numpy is there, to run the trace
through spirad's own `CudaRuntime` too.
"""
import argparse
import bisect
import json
import os
import shutil
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ["SPIRAD_CUDA_EMULATE"] = "1"

import spirad as sd  # noqa: E402
from llvm_codegen.device_runtime import emu_runtime  # noqa: E402
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
        if program.name.startswith("sizer_"):
            return  # the GPU sizer's own kernels: exercised by the trace
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


class Trace:
    """Every device-runtime call of the emulated backend, in order, in the bundle's terms.

    Memory is named by allocation number; a pointer is [allocation, offset]. 8-byte words of
    uploaded (and read-back) data that point into a live allocation are listed as relocations,
    so the device script can write its own addresses there (launch buffer tables hold them)."""

    def __init__(self):
        self.ops = []
        self.ranges = []       # sorted (start, end, allocation) of live allocations
        self.next_id = 0
        self.modules = {}      # module key -> {target: ptx}
        self.fns = {}          # id(emulated function) -> (module key, symbol)
        self.keep = []         # programs whose functions are named in `fns`
        self.programs = {}     # module key -> the program compiled for it
        self.floats = {}       # allocation -> numpy dtype name of float data (approximate checks)
        self.foreign = {}      # allocation -> name of another library's memory
        self.streams = {}      # stream value -> name
        self._orig = {}

    # -- memory --------------------------------------------------------------------------------
    def _add(self, buf, op, **kw):
        k = self.next_id
        self.next_id += 1
        bisect.insort(self.ranges, (buf.ptr, buf.ptr + buf.nbytes, k))
        self.ops.append({"op": op, "id": k, "n": buf.nbytes, **kw})
        return k

    def loc(self, ptr):
        """[allocation, offset] of a device address (the newest allocation holding it)."""
        best = None
        for start, end, k in self.ranges:
            if start > ptr:
                break
            if ptr < end and (best is None or k > best[0]):
                best = (k, ptr - start)
        return None if best is None else list(best)

    def relocs(self, data: bytes):
        out = []
        for off in range(0, len(data) - 7, 8):
            v = int.from_bytes(data[off:off + 8], "little")
            if v > 1 << 32:
                where = self.loc(v)
                if where is not None:
                    out.append([off] + where)
        return out

    def id_of(self, storage):
        return self.loc(storage.ptr)[0]

    # -- hooks ---------------------------------------------------------------------------------
    def install(self):
        rt_cls, be_cls = emu_runtime.EmuRuntime, llvm_gpu.LlvmGpuBackend
        tr = self
        o = self._orig = {"alloc": rt_cls.alloc, "wrap": rt_cls.wrap, "upload": rt_cls.upload,
                          "download": rt_cls.download, "memset": rt_cls.memset,
                          "launch": rt_cls.launch, "synchronize": rt_cls.synchronize,
                          "wait_for": rt_cls.wait_for, "signal": rt_cls.signal,
                          "compile": be_cls.compile}

        def alloc(rt, nbytes):
            buf = o["alloc"](rt, nbytes)
            tr._add(buf, "alloc")
            return buf

        def wrap(rt, ptr, nbytes, owner):
            buf = o["wrap"](rt, ptr, nbytes, owner)
            tr._add(buf, "wrap", foreign=tr.foreign.get(ptr, "foreign"))
            return buf

        def upload(rt, ptr, data):
            raw = bytes(np.ascontiguousarray(data).reshape(-1).view(np.uint8))
            tr.ops.append({"op": "upload", "dst": tr.loc(ptr), "data": raw.hex(),
                           "relocs": tr.relocs(raw)})
            return o["upload"](rt, ptr, data)

        def download(rt, ptr, nbytes):
            out = o["download"](rt, ptr, nbytes)
            where = tr.loc(ptr)
            raw = bytes(out)
            tr.ops.append({"op": "download", "src": where, "n": int(nbytes), "expect": raw.hex(),
                           "relocs": tr.relocs(raw), "dtype": tr.floats.get(where[0])})
            return out

        def memset(rt, ptr, byte, nbytes):
            tr.ops.append({"op": "memset", "dst": tr.loc(ptr), "byte": int(byte),
                           "n": int(nbytes)})
            return o["memset"](rt, ptr, byte, nbytes)

        def launch(rt, fn, bufs, args, begin, end, nthreads, block):
            key, sym = tr.fns[id(fn)]
            tr.ops.append({"op": "launch", "module": key, "symbol": sym, "bufs": tr.loc(bufs),
                           "args": tr.loc(args), "begin": int(begin), "end": int(end),
                           "nthreads": int(nthreads), "block": int(block)})
            return o["launch"](rt, fn, bufs, args, begin, end, nthreads, block)

        def synchronize(rt):
            if rt._queue:
                tr.ops.append({"op": "sync"})
            return o["synchronize"](rt)

        def wait_for(rt, stream):
            tr.ops.append({"op": "wait", "stream": tr.streams.get(stream, str(stream))})
            return o["wait_for"](rt, stream)

        def signal(rt, stream):
            if stream != rt.stream:
                tr.ops.append({"op": "signal", "stream": tr.streams.get(stream, str(stream))})
            return o["signal"](rt, stream)

        def compile(be, tl, abi):
            prog = o["compile"](be, tl, abi)
            key = f"t{len(tr.modules)}_{prog.name}"
            tr.modules[key] = {t: c.image.decode().rstrip("\0") for t, c in prog.device_code.items()}
            syms = prog.device_code["sm_90"].symbols
            for fn, sym in zip(prog.fns, syms):
                tr.fns[id(fn)] = (key, sym)
            tr.keep.append(prog)
            tr.programs[key] = prog
            return prog

        for name, f in (("alloc", alloc), ("wrap", wrap), ("upload", upload),
                        ("download", download), ("memset", memset), ("launch", launch),
                        ("synchronize", synchronize), ("wait_for", wait_for),
                        ("signal", signal)):
            setattr(rt_cls, name, f)
        be_cls.compile = compile

    def uninstall(self):
        for name, f in self._orig.items():
            setattr(llvm_gpu.LlvmGpuBackend if name == "compile" else emu_runtime.EmuRuntime,
                    name, f)

    def mark(self, name, launches=0):
        self.ops.append({"op": "mark", "name": name, "launches": launches})


class CudaArray:
    """Another library's CUDA array (here: host memory, which the emulated device addresses),
    `__cuda_array_interface__` v3 with a producer stream."""

    def __init__(self, arr, stream):
        self.arr, self.stream = arr, stream

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.arr.shape, "typestr": self.arr.dtype.str, "version": 3,
                "data": (self.arr.ctypes.data, False), "strides": None, "stream": self.stream}


N_TRACE = 200
PRODUCER = 0x7E57


def trace_program(tr: Trace):
    """The traced program: GPU sizer, a device-read range, a hit segment without waits, a miss,
    and a producer's CUDA array used in place (all asserted against numpy here)."""
    sd.sync()
    tr.install()
    try:
        sd.init(arch=sd.cuda)            # its heaps and arena are traced too
        n = sd.field(sd.i32, shape=())
        m = sd.field(sd.i32, shape=N_TRACE)
        x = sd.field(sd.f32, shape=N_TRACE, needs_grad=True)
        y = sd.field(sd.f32, shape=N_TRACE, needs_grad=True)

        @sd.kernel
        def dd(nv: sd.i32):
            n[None] = nv                    # the range below reads what this task wrote

        @sd.kernel
        def k():
            for i in range(n[None]):        # a device-read parallel bound
                v = x[i]
                for j in range(m[i]):       # stacks sized from a field: the GPU sizer
                    v = sd.sin(v) * 0.9 + 0.1
                y[i] = v

        @sd.kernel
        def scale(a: sd.f32, src: ND, dst: ND):
            for i in src:
                dst[i] = a * src[i] + dst[i]

        for f in (x, y, x.grad, y.grad):
            tr.floats[tr.id_of(f._storage())] = "f32"
        xs = lin(N_TRACE)
        ms = (np.arange(N_TRACE) % 6 + 1).astype(np.int32)
        x.from_numpy(xs)
        m.from_numpy(ms)
        nv = N_TRACE - 7
        dd(nv)
        k()
        y.grad.fill(1.0)
        k.grad()                            # a miss: the GPU sizer runs (its read-back)
        sd.sync()
        rt = sd.runtime.state.backend().rt
        w0 = rt.waits
        hits = 20
        tr.mark("hits", hits)
        for _ in range(hits):               # hits: queued, nothing waits
            y.grad.fill(1.0)
            k.grad()
        tr.mark("end")
        assert rt.waits == w0, "a hit waited for the device"
        xg = x.grad.to_numpy()
        m[3] = 9                            # a miss again: sized on the device
        ms[3] = 9
        x.grad.fill(0.0)
        y.grad.fill(1.0)
        k.grad()
        xg2 = x.grad.to_numpy()

        def ref(v0, mm):
            v, d = v0.astype(np.float64), np.ones_like(v0, np.float64)
            out = np.zeros_like(d)
            for i in range(nv):
                vi, di = v[i], 1.0
                for _ in range(mm[i]):
                    vi, di = np.sin(vi) * 0.9 + 0.1, di * np.cos(vi) * 0.9
                out[i] = di
            return out
        ms0 = (np.arange(N_TRACE) % 6 + 1).astype(np.int32)
        np.testing.assert_allclose(xg, (hits + 1) * ref(xs, ms0), rtol=2e-4, atol=1e-5)
        np.testing.assert_allclose(xg2, ref(xs, ms), rtol=2e-4, atol=1e-5)

        src = np.arange(N_TRACE, dtype=np.float32)
        dst = np.ones(N_TRACE, np.float32)
        tr.streams[PRODUCER] = "producer"
        tr.foreign[src.ctypes.data], tr.foreign[dst.ctypes.data] = "src", "dst"
        a_src, a_dst = CudaArray(src, PRODUCER), CudaArray(dst, PRODUCER)
        tr.ops.append({"op": "foreign_fill", "name": "src", "data": src.tobytes().hex()})
        tr.ops.append({"op": "foreign_fill", "name": "dst", "data": dst.tobytes().hex()})
        scale(3.0, a_src, a_dst)            # waits for the producer's stream, signals it after
        sd.sync()
        tr.ops.append({"op": "foreign_check", "name": "dst", "dtype": "f32",
                       "expect": dst.tobytes().hex()})
        np.testing.assert_allclose(dst, 3.0 * np.arange(N_TRACE) + 1.0)
    finally:
        tr.uninstall()
    return {"ops": tr.ops, "modules": sorted(tr.modules)}


def main(argv=None):
    """Make the bundle. The device replays its programs at other N: they are compiled
    shape-agnostic (never specialised on the extents of the small run here)."""
    from spirad.runtime.shape_policy import shape_agnostic
    with shape_agnostic():
        return _main(argv)


def _main(argv=None):
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

    tr = Trace()
    trace = trace_program(tr)

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
    for mods in (rec.modules, tr.modules):
        for mod, ptx in mods.items():
            for t, text in ptx.items():
                with open(os.path.join(a.out, f"{mod}.{t}.ptx"), "w") as f:
                    f.write(text)
    rt_dir = os.path.join(a.out, "runtime", "llvm_codegen", "device_runtime")
    os.makedirs(rt_dir, exist_ok=True)
    src_dir = os.path.join(ROOT, "llvm_codegen", "device_runtime")
    for name in ("__init__.py", "driver_base.py", "cuda_runtime.py", "dlpack.py"):
        shutil.copy(os.path.join(src_dir, name), os.path.join(rt_dir, name))
    with open(os.path.join(a.out, "runtime", "llvm_codegen", "__init__.py"), "w") as f:
        f.write('"""The device runtime sources spirad ran the trace with (copied)."""\n')
    shutil.copy(os.path.join(src_dir, "dlpack.py"), os.path.join(a.out, "dlpack.py"))
    bundle = {"n_rec": N_REC, "sizes": list(sizes), "modules": sorted(rec.modules),
              "targets": ["sm_80", "sm_90"], "init": init_launches, "cases": cases,
              "samples": samples, "trace": trace,
              "buffers": {"x": "f32", "y": "f32", "x.grad": "f32", "y.grad": "f32",
                          "h": ["i32", 4], "nsteps": ["i32", 1]}}
    with open(os.path.join(a.out, "bundle.json"), "w") as f:
        json.dump(bundle, f)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(a.out) for f in fs)
    print(f"wrote {a.out}: {len(rec.modules)} + {len(tr.modules)} modules, {len(cases)} cases, "
          f"a trace of {len(trace['ops'])} runtime calls, {total} bytes")
    return rec, tr


if __name__ == "__main__":
    main()
