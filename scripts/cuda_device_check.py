"""Run the prepared CUDA device check (standard library only: ctypes on libcuda).

    python scripts/cuda_device_check.py [bundle_dir] [--reps 5] [--json out.json]

The bundle (`scripts/make_cuda_device_check.py`) holds PTX compiled by spirad for sm_80 and
sm_90, the recorded launches of each workload and a trace of an emulated program.

Workloads: for N = 1M and 16M this script allocates device memory, writes the inputs with
spirad's `init` kernel, and per workload: runs it, checks the status words (adstack overflow,
errors) and sampled results against float64 references, then times `--reps` runs with CUDA
events (launches only, fills excluded) and reports the median, the achieved bandwidth of the
global arrays (bytes_per_elem * N / time; adstack heap traffic not counted) and the device's peak
(2 * memory clock * bus width).

Trace: every device-runtime call of the emulated program replayed in order on one stream
(asynchronous uploads and launches; waits only where the program waited), with every read-back
compared to what the emulation read: the GPU sizer's kernels and result, a parallel range the
kernel reads from device memory, a segment of sizing-cache hits without any wait (timed with
events), and another library's memory used in place: a ctypes-made CUDA allocation handed over
as a DLPack capsule (the bundle's `dlpack.py`), written on a producer stream that the launch
waits for through an event, and read back on that stream after the launch signalled it. When
numpy imports, the trace runs a second time through spirad's own runtime (`CudaRuntime`, the
bundle's copy of `llvm_codegen/device_runtime`). Exit status 1 if any check fails.
"""
import ctypes
import json
import math
import os
import statistics
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BLOCK = 256
HEAP_BUDGET = 1 << 31
PEAK_BY_NAME = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.0e12}


class Cuda:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.ck(self.lib.cuInit(0), "cuInit")
        self.dev = ctypes.c_int()
        self.ck(self.lib.cuDeviceGet(ctypes.byref(self.dev), 0), "cuDeviceGet")
        self.ctx = ctypes.c_void_p()
        self.ck(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), self.dev), "ctx")
        self.ck(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        name = ctypes.create_string_buffer(256)
        self.lib.cuDeviceGetName(name, 256, self.dev)
        self.name = name.value.decode()
        self.sms = self.attr(16)
        self.max_threads = self.sms * self.attr(39)
        self.cc = self.attr(75) * 10 + self.attr(76)
        clock_khz, bus_bits = self.attr(36, 0), self.attr(37, 0)
        self.peak = 2.0 * clock_khz * 1e3 * bus_bits / 8 if clock_khz and bus_bits else 0.0
        if not self.peak:
            self.peak = next((v for k, v in PEAK_BY_NAME.items() if k in self.name), 0.0)

    def ck(self, st, what):
        if st != 0:
            s = ctypes.c_char_p()
            self.lib.cuGetErrorString(st, ctypes.byref(s))
            raise RuntimeError(f"{what}: CUDA error {st} {s.value.decode() if s.value else ''}")

    def attr(self, a, default=None):
        v = ctypes.c_int()
        st = self.lib.cuDeviceGetAttribute(ctypes.byref(v), a, self.dev)
        if st != 0:
            if default is not None:
                return default
            self.ck(st, f"attribute {a}")
        return v.value

    def alloc(self, n):
        p = ctypes.c_uint64()
        self.ck(self.lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(max(n, 8))), "cuMemAlloc")
        self.ck(self.lib.cuMemsetD8_v2(p, ctypes.c_ubyte(0), ctypes.c_size_t(max(n, 8))), "memset")
        return p.value

    def free(self, p):
        self.lib.cuMemFree_v2(ctypes.c_uint64(p))

    def upload(self, p, data: bytes):
        self.ck(self.lib.cuMemcpyHtoD_v2(ctypes.c_uint64(p), data, ctypes.c_size_t(len(data))), "HtoD")

    def download(self, p, n):
        buf = ctypes.create_string_buffer(n)
        self.ck(self.lib.cuMemcpyDtoH_v2(buf, ctypes.c_uint64(p), ctypes.c_size_t(n)), "DtoH")
        return buf.raw

    def fill32(self, p, bits, count):
        self.ck(self.lib.cuMemsetD32_v2(ctypes.c_uint64(p), ctypes.c_uint(bits),
                                        ctypes.c_size_t(count)), "memsetD32")

    def module(self, ptx: str, name: str = ""):
        m = ctypes.c_void_p()
        data = ptx.encode() + b"\0"
        self.ck(self.lib.cuModuleLoadData(ctypes.byref(m), data), "cuModuleLoadData")
        return m

    def function(self, m, sym):
        f = ctypes.c_void_p()
        self.ck(self.lib.cuModuleGetFunction(ctypes.byref(f), m, sym.encode()), f"function {sym}")
        return f

    def launch(self, f, bufs, args, begin, end, nthreads, block, stream=None):
        vals = (ctypes.c_uint64(bufs), ctypes.c_uint64(args), ctypes.c_int32(begin),
                ctypes.c_int32(end), ctypes.c_int32(nthreads), ctypes.c_int32(block))
        params = (ctypes.c_void_p * 6)(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in vals])
        grid = -(-nthreads // block)
        self.ck(self.lib.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream, params, None), "launch")

    def sync(self):
        self.ck(self.lib.cuCtxSynchronize(), "sync")

    # -- streams (the trace) -----------------------------------------------------------------
    def stream(self):
        s = ctypes.c_void_p()
        self.ck(self.lib.cuStreamCreate(ctypes.byref(s), 0), "cuStreamCreate")
        return s

    def upload_async(self, p, data: bytes, stream):
        # pageable source: the driver stages it before returning (`data` may go)
        self.ck(self.lib.cuMemcpyHtoDAsync_v2(ctypes.c_uint64(p), data, ctypes.c_size_t(len(data)),
                                              stream), "HtoD async")

    def memset_async(self, p, byte, n, stream):
        self.ck(self.lib.cuMemsetD8Async(ctypes.c_uint64(p), ctypes.c_ubyte(byte),
                                         ctypes.c_size_t(n), stream), "memset async")

    def stream_sync(self, stream):
        self.ck(self.lib.cuStreamSynchronize(stream), "cuStreamSynchronize")

    def order(self, first, then):
        """`then` waits for what `first` has queued (an event; no host wait)."""
        e = ctypes.c_void_p()
        self.ck(self.lib.cuEventCreate(ctypes.byref(e), 2), "event")
        self.ck(self.lib.cuEventRecord(e, first), "record")
        self.ck(self.lib.cuStreamWaitEvent(then, e, 0), "cuStreamWaitEvent")
        self.lib.cuEventDestroy_v2(e)

    def record_on(self, e, stream):
        self.ck(self.lib.cuEventRecord(e, stream), "record")

    def event(self):
        e = ctypes.c_void_p()
        self.ck(self.lib.cuEventCreate(ctypes.byref(e), 0), "event")
        return e

    def record(self, e):
        self.ck(self.lib.cuEventRecord(e, None), "record")

    def elapsed_ms(self, a, b):
        ms = ctypes.c_float()
        self.ck(self.lib.cuEventElapsedTime(ctypes.byref(ms), a, b), "elapsed")
        return ms.value


def f32_bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


class Replay:
    """The recorded launches of one bundle at one N."""

    def __init__(self, cu, bundle, d, n):
        self.cu, self.n = cu, n
        target = "sm_90" if cu.cc >= 90 else "sm_80"
        self.mods = {m: cu.module(open(os.path.join(d, f"{m}.{target}.ptx")).read(), m)
                     for m in bundle["modules"]}
        self.bufs = {}
        for name, spec in bundle["buffers"].items():
            count = n if isinstance(spec, str) else spec[1]
            self.bufs[name] = (cu.alloc(4 * count), count)
        self.temps = {}
        self.status = cu.alloc(32)
        self.heapf = self.heapi = None
        self.heap_bytes = (0, 0)
        self.prepared = {}

    def threads(self, rec):
        t = min(-(-self.n // BLOCK) * BLOCK, self.cu.max_threads)
        row = rec.get("stride_float", 0) + rec.get("stride_int", 0)
        if row and row * t > HEAP_BUDGET:
            t = max(BLOCK, (HEAP_BUDGET // row) // BLOCK * BLOCK)
        return t

    def prepare(self, rec):
        key = id(rec)
        if key in self.prepared:
            return self.prepared[key]
        cu = self.cu
        table = []
        for t in rec["table"]:
            if "buf" in t:
                table.append(self.bufs[t["buf"]][0])
            else:
                if t["temp"] not in self.temps:
                    self.temps[t["temp"]] = cu.alloc(t["nbytes"])
                table.append(self.temps[t["temp"]])
        nthreads = self.threads(rec) if rec["kind"] == "range" else 1
        if "meta" in rec:
            meta = cu.alloc(4 * len(rec["meta"]))
            cu.upload(meta, struct.pack(f"<{len(rec['meta'])}I", *rec["meta"]))
            nf, ni = rec["stride_float"] * nthreads, rec["stride_int"] * nthreads
            if nf > self.heap_bytes[0] or ni > self.heap_bytes[1]:
                for p in (self.heapf, self.heapi):
                    if p:
                        cu.free(p)
                self.heap_bytes = (max(nf, self.heap_bytes[0]), max(ni, self.heap_bytes[1]))
                self.heapf, self.heapi = cu.alloc(self.heap_bytes[0]), cu.alloc(self.heap_bytes[1])
                self.prepared = {}  # tables point at the old heaps
            table += [meta, self.heapf, self.heapi, self.status]
        else:
            table += [0, 0, 0, self.status]
        tab = cu.alloc(8 * len(table))
        cu.upload(tab, struct.pack(f"<{len(table)}Q", *table))
        args = bytearray(bytes.fromhex(rec["args"]))
        for off in rec["n_slots"]:
            struct.pack_into("<i", args, off, self.n)
        argp = cu.alloc(len(args))
        cu.upload(argp, bytes(args))
        end = self.n if rec["end"] == "N" else rec["end"]
        fn = cu.function(self.mods[rec["module"]], rec["symbol"])
        p = self.prepared[key] = (fn, tab, argp, rec["begin"], end, nthreads,
                                  BLOCK if rec["kind"] == "range" else 1)
        return p

    def run(self, launches):
        for rec in launches:
            self.prepare(rec)
        for rec in launches:  # prepared again if a heap grew while preparing
            fn, tab, argp, b, e, nt, blk = self.prepare(rec)
            self.cu.launch(fn, tab, argp, b, e, nt, blk)

    def pre(self, ops, steps):
        cu = self.cu
        cu.upload(self.bufs["nsteps"][0], struct.pack("<i", steps))
        for op, buf, v in ops:
            p, count = self.bufs[buf]
            cu.fill32(p, f32_bits(v), count)

    def status_words(self):
        w = struct.unpack("<8I", self.cu.download(self.status, 32))
        if w[0]:
            self.cu.upload(self.status, bytes(32))
        return w


def check(rp, case, samples):
    exp = samples["expected"][case["ref"] if case["ref"] in ("axpy", "math", "hist") else case["name"]]
    p, count = rp.bufs[case["check"]]
    raw = rp.cu.download(p, 4 * count)
    if case["ref"] == "hist":
        got = list(struct.unpack("<4i", raw[:16]))
        return got == exp["values"], f"{got} vs {exp['values']}"
    worst = 0.0
    for i, want in zip(samples["indices"], exp):
        got = struct.unpack_from("<f", raw, 4 * i)[0]
        err = abs(got - want) / (abs(want) + 1e-3)
        if not math.isfinite(got):
            err = float("inf")
        worst = max(worst, err)
    return worst < 2e-3, f"max rel err {worst:.2e} over {len(exp)} samples"


# -- the trace -------------------------------------------------------------------------------------

def _load_dlpack(d):
    """The bundle's `dlpack.py` (stdlib only), loaded by path."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("spirad_bundle_dlpack", os.path.join(d, "dlpack.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class StdlibTrace:
    """The trace's device calls on the script's own ctypes `Cuda` (or a stand-in)."""
    name = "ctypes on libcuda"

    def __init__(self, cu, ptx_of):
        self.cu, self.ptx_of = cu, ptx_of
        self.main, self.producer = cu.stream(), cu.stream()
        self.mods, self.fns = {}, {}

    def new_buffer(self, n):
        p = self.cu.alloc_raw(n) if hasattr(self.cu, "alloc_raw") else self.cu.alloc(n)
        self.cu.memset_async(p, 0, n, self.main)
        return p

    def foreign_alloc(self, n):
        return self.cu.alloc(n)

    def upload(self, p, data):
        self.cu.upload_async(p, data, self.main)

    def memset(self, p, byte, n):
        self.cu.memset_async(p, byte, n, self.main)

    def function(self, key, sym):
        if (key, sym) not in self.fns:
            if key not in self.mods:
                self.mods[key] = self.cu.module(self.ptx_of(key), key)
            self.fns[(key, sym)] = self.cu.function(self.mods[key], sym)
        return self.fns[(key, sym)]

    def launch(self, fn, bufs, args, b, e, nthreads, block):
        self.cu.launch(fn, bufs, args, b, e, nthreads, block, self.main)

    def sync(self):
        self.cu.stream_sync(self.main)

    def read(self, p, n):
        self.cu.stream_sync(self.main)
        return self.cu.download(p, n)

    def producer_upload(self, p, data):
        self.cu.upload_async(p, data, self.producer)

    def producer_read(self, p, n):
        self.cu.stream_sync(self.producer)
        return self.cu.download(p, n)

    def wait_producer(self):
        self.cu.order(self.producer, self.main)

    def signal_producer(self):
        self.cu.order(self.main, self.producer)

    def mark(self):
        e = self.cu.event()
        self.cu.record_on(e, self.main)
        return e

    def elapsed_ms(self, a, b):
        return self.cu.elapsed_ms(a, b)


class SpiradTrace(StdlibTrace):
    """The trace's device calls through spirad's own runtime (`CudaRuntime`, needs numpy); the
    producer stream, foreign memory and events stay on the script's `Cuda`."""
    name = "spirad's CudaRuntime"

    def __init__(self, cu, ptx_of, rt, syms):
        super().__init__(cu, ptx_of)
        import numpy as np
        self.np, self.rt, self.syms = np, rt, syms
        self.bufs = []
        self.main = ctypes.c_void_p(self.rt.stream)

    @classmethod
    def make(cls, cu, ptx_of, d, syms):
        """Over the bundle's copy of spirad's device runtime (needs numpy: ImportError)."""
        sys.path.insert(0, os.path.join(d, "runtime"))
        import numpy  # noqa: F401
        from llvm_codegen.device_runtime.cuda_runtime import CudaRuntime
        return cls(cu, ptx_of, CudaRuntime(), syms)

    def new_buffer(self, n):
        buf = self.rt.alloc(n)
        self.bufs.append(buf)
        return buf.ptr

    def upload(self, p, data):
        self.rt.upload(p, self.np.frombuffer(data, self.np.uint8))

    def memset(self, p, byte, n):
        self.rt.memset(p, byte, n)

    def function(self, key, sym):
        if (key, sym) not in self.fns:
            if key not in self.mods:
                self.mods[key] = self.rt.load(self.ptx_of(key).encode() + b"\0", self.syms[key])
            self.fns[(key, sym)] = self.mods[key].function(sym)
        return self.fns[(key, sym)]

    def launch(self, fn, bufs, args, b, e, nthreads, block):
        self.rt.launch(fn, bufs, args, b, e, nthreads, block)

    def sync(self):
        self.rt.synchronize()

    def read(self, p, n):
        return bytes(self.rt.download(p, n))

    def wait_producer(self):
        self.rt.wait_for(self.producer.value)

    def signal_producer(self):
        self.rt.signal(self.producer.value)


def _relocated(data: bytes, relocs, addr) -> bytes:
    out = bytearray(data)
    for off, k, o in relocs:
        struct.pack_into("<Q", out, off, addr[k] + o)
    return bytes(out)


def _same(got: bytes, want: bytes, dtype):
    if dtype is None:
        if got == want:
            return True, "exact"
        bad = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b) if len(got) == len(want) else -1
        return False, f"bytes differ (first at {bad}, {len(got)} vs {len(want)} bytes)"
    n = len(want) // 4
    g, w = struct.unpack(f"<{n}f", got), struct.unpack(f"<{n}f", want)
    worst = max((abs(a - b) / (abs(b) + 1e-3) if math.isfinite(a) else float("inf")
                 for a, b in zip(g, w)), default=0.0)
    return worst < 2e-3, f"max rel err {worst:.1e}"


def replay_trace(dev, trace, dl):
    """Replay the trace's ops on `dev` (`StdlibTrace` / `SpiradTrace`); (ok, report lines)."""
    addr, foreign, lines, ok = {}, {}, [], True
    seg = None

    def at(loc):
        return addr[loc[0]] + loc[1]

    for op in trace["ops"]:
        kind = op["op"]
        if kind == "alloc":
            addr[op["id"]] = dev.new_buffer(op["n"])
        elif kind == "foreign_fill":  # another library's allocation, filled on its own stream
            data = bytes.fromhex(op["data"])
            p = dev.foreign_alloc(len(data))
            cap = dl.export(p, (len(data) // 4,), (dl.FLOAT, 32), (dl.CUDA, 0))
            imp = dl.consume(cap)  # what spirad does with a tensor's capsule
            good = imp.ptr == p and imp.device == (dl.CUDA, 0) and imp.shape == (len(data) // 4,)
            imp.release()
            ok &= good
            lines.append(f"dlpack capsule over a cuMemAlloc'd buffer: {'ok' if good else 'FAIL'}")
            foreign[op["name"]] = p
            dev.producer_upload(p, data)
        elif kind == "wrap":
            addr[op["id"]] = foreign[op["foreign"]]
        elif kind == "upload":
            dev.upload(at(op["dst"]), _relocated(bytes.fromhex(op["data"]), op["relocs"], addr))
        elif kind == "memset":
            dev.memset(at(op["dst"]), op["byte"], op["n"])
        elif kind == "launch":
            fn = dev.function(op["module"], op["symbol"])
            dev.launch(fn, at(op["bufs"]), at(op["args"]), op["begin"], op["end"],
                       op["nthreads"], op["block"])
        elif kind == "sync":
            dev.sync()
        elif kind == "download":
            got = dev.read(at(op["src"]), op["n"])
            want = _relocated(bytes.fromhex(op["expect"]), op["relocs"], addr)
            good, how = _same(got, want, op["dtype"])
            if not good:
                lines.append(f"read-back of {op['n']} bytes from buffer {op['src'][0]}: FAIL {how}")
            ok &= good
        elif kind == "wait":
            dev.wait_producer()
        elif kind == "signal":
            dev.signal_producer()
        elif kind == "foreign_check":
            want = bytes.fromhex(op["expect"])
            got = dev.producer_read(foreign[op["name"]], len(want))
            good, how = _same(got, want, op["dtype"])
            ok &= good
            lines.append(f"producer stream reads the kernel's result in place: "
                         f"{'ok' if good else 'FAIL'} ({how})")
        elif kind == "mark":
            if op["launches"]:
                seg = (dev.mark(), time.perf_counter(), op["launches"], op["name"])
            elif seg is not None:
                e1, host = dev.mark(), time.perf_counter() - seg[1]
                dev.sync()
                ms = dev.elapsed_ms(seg[0], e1)
                lines.append(f"{seg[3]}: {seg[2]} queued grad launches (sizing-cache hits, "
                             f"device bound) in {ms:.3f} ms device time, "
                             f"{seg[2] / max(ms, 1e-6) * 1e3:.0f} launches/s; replay enqueue "
                             f"{host * 1e3:.3f} ms")
                seg = None
    dev.sync()
    n_dl = sum(1 for o in trace["ops"] if o["op"] == "download")
    lines.insert(0, f"trace through {dev.name}: {len(trace['ops'])} runtime calls, "
                    f"{n_dl} read-backs compared: {'ok' if ok else 'FAIL'}")
    return ok, lines


def run_trace(cu, bundle, d, target, spirad_trace=None):
    """Replay the trace through the script's ctypes calls, then through spirad's runtime
    (`spirad_trace(cu, ptx_of, d, syms)`: default `SpiradTrace.make`)."""
    ptx_of = lambda key: open(os.path.join(d, f"{key}.{target}.ptx")).read()  # noqa: E731
    dl = _load_dlpack(d)
    ok_all, lines = True, []
    devs = [StdlibTrace(cu, ptx_of)]
    syms = {}
    for op in bundle["trace"]["ops"]:
        if op["op"] == "launch":
            syms.setdefault(op["module"], set()).add(op["symbol"])
    try:
        devs.append((spirad_trace or SpiradTrace.make)(cu, ptx_of, d, syms))
    except ImportError as e:
        lines.append(f"(spirad's CudaRuntime not run: {e})")
    except Exception as e:  # noqa: BLE001 - reported as a failed check
        lines.append(f"spirad's CudaRuntime failed to start: FAIL {type(e).__name__}: {e}")
        ok_all = False
    for dev in devs:
        try:
            ok, more = replay_trace(dev, bundle["trace"], dl)
        except Exception as e:  # noqa: BLE001 - a driver error is a failed check, not a crash
            ok, more = False, [f"trace through {dev.name}: FAIL {type(e).__name__}: {e}"]
        ok_all &= ok
        lines += more
    return ok_all, lines


def main(argv=None, make_cuda=None, spirad_trace=None):
    """`make_cuda`: what opens the device (tests pass a stand-in); default: libcuda.
    `spirad_trace`: what runs the trace through spirad's runtime (default `SpiradTrace.make`)."""
    args = sys.argv[1:] if argv is None else list(argv)
    d = args[0] if args and not args[0].startswith("--") else os.path.join(os.path.dirname(HERE), "device_check")
    reps = int(args[args.index("--reps") + 1]) if "--reps" in args else 5
    out = args[args.index("--json") + 1] if "--json" in args else None
    bundle = json.load(open(os.path.join(d, "bundle.json")))
    try:
        cu = (make_cuda or Cuda)()
    except (OSError, RuntimeError) as e:
        print(f"no usable CUDA device: {e}")
        return 2
    print(f"device: {cu.name}, sm_{cu.cc}, {cu.sms} SMs, grid up to {cu.max_threads} threads, "
          f"peak {cu.peak / 1e12:.2f} TB/s", flush=True)
    results, ok_all = [], True
    start, stop = cu.event(), cu.event()
    for n in bundle["sizes"]:
        rp = Replay(cu, bundle, d, n)
        rp.run(bundle["init"])
        cu.sync()
        samples = bundle["samples"][str(n)]
        for case in bundle["cases"]:
            rp.pre(case["pre"], case["steps"])
            rp.run(case["launches"])
            cu.sync()
            st = rp.status_words()
            ok, how = check(rp, case, samples)
            ok = ok and st[0] == 0
            times = []
            for _ in range(reps):
                rp.pre(case["pre"], case["steps"])
                cu.record(start)
                rp.run(case["launches"])
                cu.record(stop)
                cu.sync()
                times.append(cu.elapsed_ms(start, stop))
            ms = statistics.median(times)
            gbs = case["bytes_per_elem"] * n / (ms * 1e-3) / 1e9
            frac = gbs * 1e9 / cu.peak if cu.peak else 0.0
            ok_all &= ok
            line = (f"N={n:9d} {case['name']:10s} {'ok  ' if ok else 'FAIL'} {ms:9.3f} ms "
                    f"{gbs:8.1f} GB/s ({100 * frac:5.1f}% of peak)  check: {how}"
                    + (f" status {list(st)}" if st[0] else ""))
            print(line, flush=True)
            results.append({"n": n, "case": case["name"], "ok": ok, "ms": ms, "gbs": gbs,
                            "peak_fraction": frac, "check": how, "status": list(st)})
    trace_lines = []
    if "trace" in bundle:
        ok, trace_lines = run_trace(cu, bundle, d, "sm_90" if cu.cc >= 90 else "sm_80",
                                    spirad_trace)
        ok_all &= ok
        for line in trace_lines:
            print(line, flush=True)
    if out:
        with open(out, "w") as f:
            json.dump({"device": cu.name, "cc": cu.cc, "peak": cu.peak, "results": results,
                       "trace": trace_lines}, f)
    print("ALL OK" if ok_all else "SOME CHECKS FAILED")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
