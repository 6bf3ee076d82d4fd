"""The GPU lowering run on the CPU: what `SPIRAD_CUDA_EMULATE=1` / `SPIRAD_AMDGPU_EMULATE=1` use.

The program is compiled for `llvm_codegen.target.emulation(<gpu target>)`: the same grid-stride
kernel entry, thread id = adstack heap row, heap layout and atomics as on the device, with the
thread id an argument; the exported driver runs threads [tid0, tid1) in order. A launch of a
grid of `nthreads` threads is split into contiguous thread ranges, one per CPU worker, which
run concurrently (so atomics and heap rows are exercised as on a GPU). Launches run at once;
`synchronize` has nothing to wait for. Memory is plain numpy memory.
"""
from __future__ import annotations

import ctypes
import itertools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..cpu_runtime import _Target

DRIVER_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                             ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)
_names = itertools.count()


class EmuModule:
    def __init__(self, tracker, symbols):
        self._tracker = tracker
        self._fns = {}
        for s in symbols:
            fn = DRIVER_FN(tracker[s])
            fn._spirad_module = self
            self._fns[s] = fn

    def function(self, symbol):
        return self._fns[symbol]


class EmuRuntime:
    """`max_threads` threads at most per launch, in blocks of `block` (small: the emulated grid
    is walked thread by thread)."""

    def __init__(self, max_threads: int = 256, block: int = 64, num_workers: int | None = None):
        self.max_threads, self.block = max_threads, block
        self.num_workers = max(1, num_workers or min(os.cpu_count() or 1, 4))
        self._pool = (ThreadPoolExecutor(self.num_workers - 1, thread_name_prefix="spirad-emu")
                      if self.num_workers > 1 else None)
        self.name = "emulated"

    def alloc(self, nbytes: int):
        return np.zeros(max(int(nbytes), 8), np.uint8)

    def load(self, llvm_ir: str, symbols) -> EmuModule:
        t = _Target.get()
        symbols = tuple(symbols)
        with t.compile_lock:
            optimized = t.optimize(llvm_ir)
            builder = llvm_builder(optimized, symbols)
            tracker = builder.link(t.lljit, f"spirad_emu_{next(_names)}")
        return EmuModule(tracker, symbols)

    def launch(self, fn, bufs_addr, args_addr, begin, end, nthreads, block):
        w = min(self.num_workers, nthreads) if self._pool is not None else 1
        if w <= 1 or end - begin < 2 * nthreads:  # short ranges: one worker
            fn(bufs_addr, args_addr, begin, end, nthreads, 0, nthreads)
            return
        step = -(-nthreads // w)
        futs = [self._pool.submit(fn, bufs_addr, args_addr, begin, end, nthreads, k * step,
                                  min((k + 1) * step, nthreads)) for k in range(1, w)]
        fn(bufs_addr, args_addr, begin, end, nthreads, 0, min(step, nthreads))
        for f in futs:
            f.result()

    def synchronize(self):
        pass

    def close(self):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def llvm_builder(llvm_ir, symbols):
    b = _Target.get().builder("spirad_vm_lanes" in llvm_ir).add_ir(llvm_ir)  # libm (+ helpers)
    for s in symbols:
        b.export_symbol(s)
    return b
