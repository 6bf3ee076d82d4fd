"""Quick measurements of the LLVM CPU backend (a script, not a test):

    python -m tests.llvm_codegen.measure_cpu     # from the repository root

1. compile time of a simple kernel (codegen + O3 + JIT), first call and warm;
2. per-launch overhead of a 1-iteration kernel through CpuRuntime.run;
3. 16M-element f32 axpy `y[i] = a*x[i] + y[i]` against numpy `y += a*x`.
"""
from __future__ import annotations

import ctypes
import time


import numpy as np

from tests.llvm_codegen import harness
from tests.llvm_codegen.kit import kernel, nd_arg, ndarray, range_task, scalar
from kernel_ir.dtypes import f32, i32
from kernel_ir.nodes import Node
from kernel_ir.ops import Op


def axpy_kernel(tag=""):
    X, Y = ndarray(1, f32, 1), ndarray(2, f32, 1)

    def body(b, i):
        y = b.binary(Op.ADD, b.binary(Op.MUL, b.arg(0, f32), b.global_load(X, [i])),
                     b.global_load(Y, [i]))
        b.global_store(Y, [i], y)

    end = Node(Op.NDARRAY_SHAPE, i32, (), (1, 0))
    return kernel("axpy" + tag, range_task(body, 0, end, "axpy"),
                  args=(scalar("a", f32), nd_arg("x", f32, 1), nd_arg("y", f32, 1)))


def best(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), float(np.median(ts))


def main():
    t0 = time.perf_counter()
    harness.runtime()  # process-wide LLVM init: target, TargetMachine, LLJIT, thread pool
    init = time.perf_counter() - t0
    t0 = time.perf_counter()
    loaded = harness.compile_and_load(axpy_kernel("0"))
    first = time.perf_counter() - t0
    warm = []
    for k in range(5):
        t0 = time.perf_counter()
        harness.compile_and_load(axpy_kernel(str(k + 1)))
        warm.append(time.perf_counter() - t0)
    print(f"compile: LLVM init {init * 1e3:.1f} ms, first kernel {first * 1e3:.1f} ms, next "
          f"kernels median {np.median(warm) * 1e3:.1f} ms (codegen + O3 + JIT)")

    abi, prog, mod = loaded
    rt = harness.runtime()
    fn = mod.function(prog.tasks[0].symbol)
    x, y = np.ones(1, np.float32), np.ones(1, np.float32)
    arrays = {("ndarray", 1, False): x, ("ndarray", 2, False): y}
    bufs = (ctypes.c_void_p * 2)(x.ctypes.data, y.ctypes.data)
    args = harness.build_args(axpy_kernel(), abi, arrays, [2.0, None, None])
    addr = args.ctypes.data
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        rt.run(fn, bufs, addr, 0, 1, True)
    per = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        fn(bufs, addr, 0, 1, 0)
    raw = (time.perf_counter() - t0) / n
    print(f"launch overhead (1 iteration): run() {per * 1e6:.2f} us, raw ctypes call "
          f"{raw * 1e6:.2f} us")

    N = 16 * 1024 * 1024
    x = np.random.rand(N).astype(np.float32)
    y = np.random.rand(N).astype(np.float32)
    y0 = y.copy()
    arrays = {("ndarray", 1, False): x, ("ndarray", 2, False): y}
    bufs = (ctypes.c_void_p * 2)(x.ctypes.data, y.ctypes.data)
    args = harness.build_args(axpy_kernel(), abi, arrays, [np.float32(1.5), None, None])
    a = np.float32(1.5)
    rt.run(fn, bufs, args, 0, N, True)
    np.testing.assert_array_equal(y, a * x + y0)
    t_ours, m_ours = best(lambda: rt.run(fn, bufs, args, 0, N, True), 20)
    t_one, _ = best(lambda: rt.run(fn, bufs, args, 0, N, False), 10)
    yn = y.copy()

    def np_axpy():
        yn.__iadd__(a * x)

    t_np, m_np = best(np_axpy, 20)
    print(f"axpy 16M f32: spirad {t_ours * 1e3:.2f} ms (median {m_ours * 1e3:.2f}, "
          f"{rt.num_workers} workers), one thread {t_one * 1e3:.2f} ms, numpy y += a*x "
          f"{t_np * 1e3:.2f} ms (median {m_np * 1e3:.2f}); ratio numpy/spirad "
          f"{t_np / t_ours:.2f}")


if __name__ == "__main__":
    main()
