"""Run the prepared CUDA device check (standard library only: ctypes on libcuda).

    python scripts/cuda_device_check.py [bundle_dir] [--reps 5] [--json out.json]

The bundle (`scripts/make_cuda_device_check.py`) holds PTX compiled by spirad for sm_80 and
sm_90 and the recorded launches of each workload. For N = 1M and 16M this script allocates device
memory, writes the inputs with spirad's `init` kernel, and per workload: runs it, checks the
status words (adstack overflow, errors) and sampled results against float64 references, then
times `--reps` runs with CUDA events (launches only, fills excluded) and reports the median, the
achieved bandwidth of the global arrays (bytes_per_elem * N / time; adstack heap traffic not
counted) and the device's peak (2 * memory clock * bus width). Exit status 1 if any check fails.
"""
import ctypes
import json
import math
import os
import statistics
import struct
import sys

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

    def launch(self, f, bufs, args, begin, end, nthreads, block):
        vals = (ctypes.c_uint64(bufs), ctypes.c_uint64(args), ctypes.c_int32(begin),
                ctypes.c_int32(end), ctypes.c_int32(nthreads), ctypes.c_int32(block))
        params = (ctypes.c_void_p * 6)(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in vals])
        grid = -(-nthreads // block)
        self.ck(self.lib.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, None, params, None), "launch")

    def sync(self):
        self.ck(self.lib.cuCtxSynchronize(), "sync")

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


def main(argv=None, make_cuda=None):
    """`make_cuda`: what opens the device (tests pass a stand-in); default: libcuda."""
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
    if out:
        with open(out, "w") as f:
            json.dump({"device": cu.name, "cc": cu.cc, "peak": cu.peak, "results": results}, f)
    print("ALL OK" if ok_all else "SOME CHECKS FAILED")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
