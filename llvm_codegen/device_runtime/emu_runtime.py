"""The GPU lowering run on the CPU: what `SPIRAD_CUDA_EMULATE=1` / `SPIRAD_AMDGPU_EMULATE=1` use.

The program is compiled for `llvm_codegen.target.emulation(<gpu target>)`: the same grid-stride
kernel entry, thread id = adstack heap row, heap layout and atomics as on the device, with the
thread id an argument; the exported driver runs threads [tid0, tid1) in order. A launch of a
grid of `nthreads` threads is split into contiguous thread ranges, one per CPU worker, which
run concurrently (so atomics and heap rows are exercised as on a GPU).

The memory and stream model is the device's, strictly, so that an ordering bug is a wrong
result here and not only on a GPU:

* Device memory (`alloc`) is memory of its own that the host reaches only through `upload` /
  `download`; `DeviceBuffer.host` is None, exactly as for `cuMemAlloc` memory. Managed memory
  (`alloc_managed`) has a host view.
* The stream is a queue: `launch`, `upload` (its data staged at the call, like the driver's
  staging of pageable memory), `memset` are recorded and run, in order, only when the host
  waits (`synchronize`, `download`). A host read that forgot to wait sees the old bytes; a
  launch that read data the host had not yet uploaded computes with the old data.
* Memory released while work is queued stays allocated until that work has run.
* Another stream (DLPack / `__cuda_array_interface__` consumers and producers) is host code here:
  `signal` runs the queue so the consumer sees our results; `wait_for` has nothing to wait for.
  Both are recorded in `stream_events` for the tests.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import DeviceBuffer
from ..cpu_runtime import _Target

DRIVER_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                             ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)
_names = itertools.count()
_streams = itertools.count(1)


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
        self.stream = 0x5D000000 + next(_streams)  # a handle no real stream has (not 0, 1, 2)
        self.waits = 0
        self.stream_events: list = []   # ("wait", stream) / ("signal", stream), in call order
        self._queue: list = []
        self._queue_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._released: list = []       # (memory, bytes) unreachable since the queue last ran
        self.released_bytes = 0         # its bytes (own buffers): the backend syncs past a limit

    # -- memory -----------------------------------------------------------------------------------
    def _buffer(self, nbytes: int, managed: bool) -> DeviceBuffer:
        mem = np.zeros(max(int(nbytes), 8), np.uint8)
        buf = DeviceBuffer(mem.ctypes.data, mem.nbytes, host=mem if managed else None)
        weakref.finalize(buf, self._release_later, mem)  # kept until queued work has run
        return buf

    def _release_later(self, mem: np.ndarray) -> None:
        self._released.append((mem, mem.nbytes))
        self.released_bytes += mem.nbytes

    def alloc(self, nbytes: int) -> DeviceBuffer:
        return self._buffer(nbytes, False)

    def alloc_managed(self, nbytes: int) -> DeviceBuffer:
        return self._buffer(nbytes, True)

    def wrap(self, ptr: int, nbytes: int, owner) -> DeviceBuffer:
        """Another library's memory (`owner` keeps it alive, then until queued work has run)."""
        buf = DeviceBuffer(ptr, nbytes, owner=owner)
        weakref.finalize(buf, self._released.append, (owner, 0))  # not ours: not counted
        return buf

    def upload(self, ptr: int, data) -> None:
        staged = np.array(data, dtype=np.uint8, copy=True).reshape(-1)  # the caller may reuse it
        if staged.nbytes:
            self._enqueue(_copy_in, ptr, staged)

    def download(self, ptr: int, nbytes: int) -> np.ndarray:
        self.synchronize()
        out = np.empty(int(nbytes), np.uint8)
        if nbytes:
            ctypes.memmove(out.ctypes.data, ptr, int(nbytes))
        return out

    def memset(self, ptr: int, byte: int, nbytes: int) -> None:
        if nbytes:
            self._enqueue(ctypes.memset, ptr, int(byte), int(nbytes))

    # -- code -------------------------------------------------------------------------------------
    def load(self, llvm_ir: str, symbols) -> EmuModule:
        t = _Target.get()
        symbols = tuple(symbols)
        with t.compile_lock:
            optimized = t.optimize(llvm_ir)
            builder = llvm_builder(optimized, symbols)
            tracker = builder.link(t.lljit, f"spirad_emu_{next(_names)}")
        return EmuModule(tracker, symbols)

    def launch(self, fn, bufs_addr, args_addr, begin, end, nthreads, block):
        self._enqueue(self._run_grid, fn, bufs_addr, args_addr, begin, end, nthreads)

    def _run_grid(self, fn, bufs_addr, args_addr, begin, end, nthreads):
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

    # -- the stream -------------------------------------------------------------------------------
    def _enqueue(self, fn, *args):
        with self._queue_lock:
            self._queue.append((fn, args))

    def _run_queue(self):
        with self._run_lock:
            freeable = len(self._released)
            while True:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                if not batch:
                    break
                for i, (fn, args) in enumerate(batch):
                    try:
                        fn(*args)
                    except BaseException:
                        with self._queue_lock:  # what did not run stays queued, in order
                            self._queue[:0] = batch[i + 1:]
                        raise
            self.released_bytes -= sum(n for _, n in self._released[:freeable])
            del self._released[:freeable]

    def synchronize(self):
        if self._queue:  # an idle stream is not waited for
            self.waits += 1
        self._run_queue()

    def wait_for(self, stream) -> None:
        self.stream_events.append(("wait", stream))

    def signal(self, stream) -> None:
        self.stream_events.append(("signal", stream))
        self._run_queue()

    def pending(self) -> int:
        """Operations queued and not yet run (tests)."""
        return len(self._queue)

    def close(self):
        self._run_queue()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def _copy_in(ptr: int, staged: np.ndarray):
    ctypes.memmove(ptr, staged.ctypes.data, staged.nbytes)


def llvm_builder(llvm_ir, symbols):
    b = _Target.get().builder("spirad_vm_lanes" in llvm_ir).add_ir(llvm_ir)  # libm (+ helpers)
    for s in symbols:
        b.export_symbol(s)
    return b
