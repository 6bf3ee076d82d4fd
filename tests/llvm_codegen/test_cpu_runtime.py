"""CpuRuntime on hand-written LLVM IR: chunking, worker slots, isolation from the IR package."""
from __future__ import annotations

import ctypes
import subprocess
import sys

import numpy as np

from tests.llvm_codegen.harness import runtime
from tests.support.task_ir import range_task_ir
from llvm_codegen.cpu_runtime import PARALLEL_MIN

# out[i] = worker * 2**20 + i  (bufs[0] is an i32 array)
WORKER_IR = range_task_ir("mark", "  %out = load ptr, ptr %bufs\n  %tag = shl i32 %worker, 20", """\
  %v = add i32 %tag, %i
  %i64 = sext i32 %i to i64
  %p = getelementptr i32, ptr %out, i64 %i64
  store i32 %v, ptr %p
  br label %latch""", index="i32")


def _mark(n, parallel, begin=0):
    rt = runtime()
    fn = rt.load(WORKER_IR, ["mark"]).function("mark")
    out = np.full(n, -1, np.int32)
    bufs = (ctypes.c_void_p * 1)(out.ctypes.data)
    args = np.zeros(8, np.uint8)
    rt.run(fn, bufs, args, begin, n, parallel)
    return out, rt


def test_small_ranges_run_in_the_calling_thread():
    out, _ = _mark(1000, True)
    assert (out == np.arange(1000)).all()  # worker 0 everywhere


def test_large_ranges_split_over_the_workers():
    """Every iteration once, each on a worker slot of the pool (which slot runs which chunk
    is the pool's: `cpu_pool` takes chunks dynamically; `run_slots` keeps fixed ones)."""
    n = PARALLEL_MIN * 3 + 17
    out, rt = _mark(n, True, begin=5)
    assert (out[:5] == -1).all()
    idx = np.arange(n)
    workers = (out[5:] >> 20)
    assert ((out[5:] & 0xFFFFF) == idx[5:]).all()
    assert set(workers.tolist()) <= set(range(rt.num_workers))


def test_serial_launch_ignores_parallel_split():
    n = PARALLEL_MIN * 2
    out, _ = _mark(n, False)
    assert (out == np.arange(n)).all()


def test_runtime_does_not_import_the_ir():
    code = ("import sys; import llvm_codegen.cpu_runtime as r; r.CpuRuntime(); "
            "bad = [m for m in sys.modules if m.startswith('spirad')]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=_root())


def _root():
    import os
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_run_slots_gives_each_chunk_its_own_buffer_table():
    """`run_slots` splits any range over the workers, chunk w writing through table w; and
    `run_calls` runs every call (the privatised scatters' launches and merges)."""
    rt = runtime()
    fn = rt.load(WORKER_IR, ["mark"]).function("mark")
    n = 100  # far below PARALLEL_MIN: split all the same
    outs = [np.full(n, -1, np.int32) for _ in range(rt.num_workers)]
    tables = [(ctypes.c_void_p * 1)(o.ctypes.data) for o in outs]
    rt.run_slots(fn, tables, np.zeros(8, np.uint8), 0, n)
    step = -(-n // rt.num_workers)
    for w, o in enumerate(outs):
        mine = np.arange(n) // step == w
        assert (o[mine] == (w << 20) + np.arange(n)[mine]).all()
        assert (o[~mine] == -1).all()
    done = []
    rt.run_calls([lambda k=k: done.append(k) for k in range(5)])
    assert sorted(done) == list(range(5))
