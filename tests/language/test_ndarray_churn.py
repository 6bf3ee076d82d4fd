"""Creating and dropping ndarrays holds no device memory past what is alive (#24 item 8): each
sd.ndarray is one device allocation, freed when the ndarray is dropped, and the descriptor sets
that bound it leave the cache with it; the sets' pools are reset together once
`RESET_AFTER_SETS` sets were handed out, so the pools stay bounded however many ndarrays a
program creates (measured on lavapipe: 48,000 ndarrays created, launched on and dropped: resident
memory flat after the first few thousand). Metal through wgpu destroys a dropped ndarray's buffer at once
(`WgpuRuntime._release`, or its finalizer when dropped) together with the bind groups that bound
it.

Issue #42: a loop that never syncs used to keep every dropped ndarray (Vulkan: until the next
sync; wgpu: until its pass filled), and each descriptor set left its key under the long-lived
argument arena. The regression tests below count what the runtimes keep (buffers, sets, keys,
Python objects) — deterministic numbers, never times — so growth per round cannot come back
unseen; `benchmarks/bench_churn.py` measures bytes and time per round."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


@test_archs(archs=exactly("vulkan"))
def test_dropped_ndarrays_release_buffers_and_descriptor_sets(arch):
    from gfx_runtime.vulkan.descriptors import RESET_AFTER_SETS, SETS_PER_POOL
    from gfx_runtime.vulkan.queue import FRAMES

    @sd.kernel
    def ones(a: sd.types.ndarray()):
        for i in a:
            a[i] = 1.0

    rt = sd._state.backend().rt
    keep = sd.ndarray(sd.f32, 64)

    def churn(n):
        for _ in range(n):
            a = sd.ndarray(sd.f32, 1000)
            ones(a)
            assert a.to_numpy()[999] == 1.0
            del a
        ones(keep)
        sd.sync()
        gc.collect()
        return len(rt._buffers), len(rt._dsets.cache)

    warm = churn(5)  # the first launch and read create the runtime's own staging buffers
    buffers, sets = churn(300)
    assert buffers == warm[0]  # every dropped ndarray's buffer freed
    # the sets binding them gone: those left bind `keep` and one frame's argument arena each
    assert sets <= FRAMES
    assert len(rt._dsets.pools) <= RESET_AFTER_SETS // SETS_PER_POOL + 1
    ones(keep)
    assert np.all(keep.to_numpy() == 1.0)


@sd.kernel
def inc(a: sd.types.ndarray()):
    """The kernel each round launches on a fresh ndarray."""
    for i in a:
        a[i] += 1.0


def _churn(kernel, rounds, n=4096, check=None):
    for _ in range(rounds):
        a = sd.ndarray(sd.f32, n)
        kernel(a)
        del a
        if check is not None:
            check()


LIMIT = 1 << 20        # the byte limit each GPU runtime's churn test sets
NBYTES = 65536 * 4     # one churned array of 65536 f32


def _churn_past_limit(monkeypatch, module, limit_name, check, warm_up=20):
    """Sets `module.limit_name` (the runtime's bound on memory waiting to be freed) to LIMIT,
    then, never synced, churns arrays of NBYTES: `warm_up` rounds, then 200 that call `check`
    after each. Returns the backend's runtime, to read its counters."""
    monkeypatch.setattr(module, limit_name, LIMIT)
    _churn(inc, warm_up, n=65536)
    _churn(inc, 200, n=65536, check=check)
    return sd._state.backend().rt


@test_archs()
def test_ndarray_churn_keeps_no_python_objects(arch):
    """Rounds of create / launch / drop, never synced in between, leave no Python object
    behind: the objects alive after 300 more rounds are as many as after the warm-up (a leak of
    one object per round, a cache entry or a list item, would show 300)."""
    def live_objects():
        sd.sync()
        gc.collect()
        return len(gc.get_objects())

    _churn(inc, 50)
    before = live_objects()
    _churn(inc, 300)
    after = live_objects()
    assert after - before < 30, (before, after)


@test_archs(archs=exactly("vulkan"))
def test_vulkan_churn_without_sync_returns_buffers(arch, monkeypatch):
    """Never synced, dropped buffers are still destroyed once their work has finished (fence
    polls), and never more than MAX_DEFERRED_BYTES wait; every set freed with its buffer leaves
    no key under the arena it also binds."""
    from gfx_runtime.vulkan import runtime as vrt

    peak = []

    def check():
        rt = sd._state.backend().rt
        peak.append((rt._deferred_bytes, len(rt._buffers)))
    rt = _churn_past_limit(monkeypatch, vrt, "MAX_DEFERRED_BYTES", check)
    assert max(b for b, _ in peak) <= LIMIT + NBYTES
    assert max(n for _, n in peak) <= LIMIT // NBYTES + 16
    sd.sync()
    gc.collect()
    d = rt._dsets
    from gfx_runtime.vulkan.descriptors import _buffers_of
    keys = sum(len(k) for k in d.by_handle.values())
    assert len(d.cache) <= 4, len(d.cache)
    assert keys == sum(len(_buffers_of(key[1])) for key in d.cache)  # no stale key anywhere
    assert d.allocated == len(d.cache) and len(d.pools) == 1


@test_archs(archs=exactly("metal"))
def test_wgpu_churn_without_sync_returns_buffers(arch, monkeypatch):
    """wgpu: the open pass keeps the buffers it binds and wgpu frees a destroyed one once its
    work is done; past MAX_PENDING_BYTES allocated the work is submitted and waited for, so
    the buffers alive stay bounded without a sync, and a dropped buffer's bind groups leave the
    cache with it."""
    from gfx_runtime.wgpu import runtime as wrt
    from gfx_runtime.wgpu.buffer import Buffer

    alive = []

    def check():
        if len(alive) < 20:
            alive.append(sum(type(o) is Buffer and o.handle is not None and o.nbytes == NBYTES
                             for o in gc.get_objects()))
    rt = _churn_past_limit(monkeypatch, wrt, "MAX_PENDING_BYTES", check)
    assert max(alive) <= LIMIT // NBYTES + 2, alive
    assert rt._alloc_bytes <= LIMIT + NBYTES
    sd.sync()
    gc.collect()
    assert len(rt._bind_groups) <= 2 and len(rt._groups_of) <= 3, \
        (len(rt._bind_groups), len(rt._groups_of))


@test_archs(archs=exactly("cuda", "amdgpu"))
def test_llvm_gpu_churn_without_sync_returns_memory(arch, monkeypatch):
    """CUDA / AMDGPU (a device, or emulated): memory of dropped arrays is freed at the next
    wait; past RELEASED_LIMIT bytes waiting, an allocation waits first, so it stays bounded
    without a sync (before, up to a full staging arena of launches: ~80,000 rounds)."""
    from spirad.backends import llvm_gpu

    waiting = []
    _churn_past_limit(monkeypatch, llvm_gpu, "RELEASED_LIMIT",
                      lambda: waiting.append(sd._state.backend().rt.released_bytes), warm_up=0)
    assert max(waiting) <= LIMIT + 2 * NBYTES, max(waiting)
    keep = sd.ndarray(sd.f32, 8)
    inc(keep)
    assert keep.to_numpy().tolist() == [1.0] * 8
