"""The native pool of split CPU launches (`llvm_codegen.cpu_pool`): the calling thread takes
chunks as the workers do, so a worker that comes late (or never) costs a launch only its share;
a split launch gives the serial launch's values bit for bit."""
from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

from llvm_codegen import cpu_pool
from tests.llvm_codegen.harness import runtime
from tests.support.task_ir import chain_task_ir

pytestmark = pytest.mark.skipif(not cpu_pool.supported(), reason="native pool: Linux futexes")

# out[i] = a chain of `k` float ops from i (k = args[0]); slots[i] = the worker slot
CHAIN_IR = chain_task_ir("chain", "float", "0x3FEFFFFFE0000000", "0x3FB99999A0000000",
                         accumulate=True, slots=True)


def _chain(rt):
    return rt.load(CHAIN_IR, ["chain"]).function("chain")


def _launch(rt, fn, n, k, parallel, pool=None, cancel=None):
    out = np.zeros(n, np.float32)
    slots = np.full(n, -1, np.int32)
    bufs = (ctypes.c_void_p * 2)(out.ctypes.data, slots.ctypes.data)
    args = np.array([k], np.int64)
    if pool is not None:
        ran = pool.run(fn, bufs, args.ctypes.data, 0, n, cancel)
    else:
        ran = rt.run(fn, bufs, args, 0, n, parallel, 2)
    return out, slots, ran


def test_split_launches_give_the_serial_values_bit_for_bit():
    """Many split launches of a float task (each iteration once: `out[i] +=` would show a
    second run) give the serial launch's bits; the iterations run on the pool's slots."""
    rt = runtime()
    if rt.num_workers < 2:
        pytest.skip("one worker: nothing is split")
    fn = _chain(rt)
    seen = set()
    for n, k in ((256, 2000), (16, 20000), (5, 10), (1000, 50), (257, 3000)):
        ref, _, ran = _launch(rt, fn, n, k, False)
        assert ran == n
        for _ in range(40):
            out, slots, ran = _launch(rt, fn, n, k, True)
            assert out.tobytes() == ref.tobytes()
            assert ((slots >= 0) & (slots < rt.num_workers)).all()
            assert 0 <= ran <= n
            seen.update(slots.tolist())
    assert seen == set(range(rt.num_workers))  # the workers did take chunks


def test_a_worker_that_never_comes_costs_only_its_share():
    """A pool whose workers never run (no thread started: a worker that gets no core) still
    completes every launch on the calling thread, every iteration on slot 0."""
    rt = runtime()
    fn = _chain(rt)
    pool = cpu_pool.Pool(4, rt._target.pool_symbols(), start=False)
    ref, _, _ = _launch(rt, fn, 300, 100, False)
    for _ in range(3):
        out, slots, ran = _launch(rt, fn, 300, 100, True, pool=pool)
        assert ran == 300 and (slots == 0).all()
        assert out.tobytes() == ref.tobytes()
    pool.close()


def test_a_cancelled_launch_stops_taking_chunks():
    """With `cancel` set the caller stops after its first chunk and closes the launch: no
    chunk is taken after `run` returns (the slots stay unwritten)."""
    rt = runtime()
    fn = _chain(rt)
    pool = cpu_pool.Pool(2, rt._target.pool_symbols(), start=False)
    cancel = threading.Event()
    cancel.set()
    out, slots, ran = _launch(rt, fn, 1000, 10, True, pool=pool, cancel=cancel)
    assert ran == 0 and (slots == -1).all()
    cancel.clear()
    out, slots, ran = _launch(rt, fn, 1000, 10, True, pool=pool, cancel=cancel)
    assert ran == 1000 and (slots == 0).all()
    pool.close()


def test_the_pool_shuts_down():
    rt = runtime()
    fn = _chain(rt)
    pool = cpu_pool.Pool(3, rt._target.pool_symbols())
    ref, _, _ = _launch(rt, fn, 64, 1000, False)
    out, _, _ = _launch(rt, fn, 64, 1000, True, pool=pool)
    assert out.tobytes() == ref.tobytes()
    pool.close()
    assert not any(t.is_alive() for t in pool._threads)


def test_a_pool_dropped_without_close_shuts_down():
    """The workers hold the shared block and the pool's finalizer shuts them down: a pool
    collected without `close` leaves no thread reading freed memory."""
    import gc
    rt = runtime()
    pool = cpu_pool.Pool(3, rt._target.pool_symbols())
    threads = list(pool._threads)
    del pool
    gc.collect()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)


def test_a_pool_closed_before_its_threads_start_shuts_down():
    """A worker that starts after the pool was shut (or a launch ran) sees the change: its
    first state is the block's initial one, not what it reads when it starts."""
    rt = runtime()
    addrs = rt._target.pool_symbols()
    for _ in range(20):
        cpu_pool.Pool(3, addrs).close()
