"""Launch-time distributions of a split CPU launch against the serial call (the pool's cost).

A hand-written task (`work` dependent float ops per iteration, out[i] = the chain's value) over
`n` iterations, launched N times serially (one call on this thread) and split over the runtime's
workers (`CpuRuntime.run`), alternating; prints min / p10 / median / p90 / mean in us. With
`--spinner`, a `nice -n 19` Python busy loop runs beside it (the second core as a user's machine
has it). Used for docs/performance.md "The second core" (gpar3).

    python benchmarks/bench_pool_split.py --n 256 16 --us 1000 100 --launches 300 [--spinner]
"""
from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from llvm_codegen.cpu_runtime import CpuRuntime  # noqa: E402
from tests.support.task_ir import chain_task_ir  # noqa: E402

TASK_IR = chain_task_ir("work", "double", "0x3FEFFFFFFFFFFFFF", "0x3FE0000000000000")


MODES = ("serial", "static", "dynamic")  # one call; fixed chunks (executor); native pool


def stats(ts) -> str:
    a = np.sort(np.asarray(ts)) * 1e6
    q = lambda f: a[min(len(a) - 1, int(f * len(a)))]  # noqa: E731
    return (f"min {a[0]:8.1f}  p10 {q(.1):8.1f}  med {q(.5):8.1f}  p90 {q(.9):8.1f}  "
            f"mean {a.mean():8.1f}")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[256, 16])
    ap.add_argument("--us", type=float, nargs="+", default=[1000, 100],
                    help="serial launch time to aim at (us), per n")
    ap.add_argument("--launches", type=int, default=300)
    ap.add_argument("--spinner", action="store_true")
    a = ap.parse_args(argv)
    rt = CpuRuntime()
    fn = rt.load(TASK_IR, ["work"]).function("work")
    spin = subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while 1: pass"]) \
        if a.spinner else None
    try:
        print(f"workers {rt.num_workers}, load {open('/proc/loadavg').read().split()[:3]}, "
              f"spinner {'on' if spin else 'off'}")
        for n in a.n:
            for us in a.us:
                out = np.zeros(n, np.float64)
                bufs = (ctypes.c_void_p * 1)(out.ctypes.data)
                args = np.zeros(8, np.int64)
                args[0] = 1000
                t = time.perf_counter()
                fn(bufs, args.ctypes.data, 0, n, 0)
                per = (time.perf_counter() - t) / (1000 * n)
                args[0] = max(1, int(us * 1e-6 / n / per))
                addr = args.ctypes.data
                ref = None
                times = {m: [] for m in MODES}
                order = list(MODES)
                for i in range(a.launches):
                    order = order[1:] + order[:1]  # alternating
                    for mode in order:
                        out[:] = 0
                        rt.dynamic = mode == "dynamic"
                        t = time.perf_counter()
                        rt.run(fn, bufs, addr, 0, n, mode != "serial", 2)
                        times[mode].append(time.perf_counter() - t)
                        if ref is None:
                            ref = out.copy()
                        assert (out == ref).all()
                med = np.median(times["serial"])
                for m in MODES:
                    print(f"n {n:4d} ~{us:6.0f} us  {m:8s} {stats(times[m])}  "
                          f"(median / serial {np.median(times[m]) / med:.2f})")
        print(f"load {open('/proc/loadavg').read().split()[:3]}")
    finally:
        if spin is not None:
            spin.kill()
            spin.wait()
        rt.close()


if __name__ == "__main__":
    main()
