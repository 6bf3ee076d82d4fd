"""CUDA / AMDGPU semantics the emulation models strictly (docs/gpu.md "Memory, streams and
launches"): device memory the host reaches only through queued copies, one stream whose work
runs in order, launches (data-dependent ranges and GPU-sized adstacks included) that never wait
for the host, host reads that wait, and the overflow error path, which must not sync again.

The emulated stream is a queue that runs only when the host waits (`EmuRuntime`), so a launch
or a copy issued in the wrong order is a wrong result here; `rt.waits` counts the waits."""
import numpy as np
import pytest

import spirad as sd
import spirad.runtime.state as st
from spirad.runtime import sizing_cache
from spirad.backends import llvm_gpu
from tests.autodiff.gradutil import central_diff
from tests.support.device_programs import bound_kernels
from tests.support.grad_programs import overflowing, overflowing_grad


def _rt():
    return st.backend().rt


def test_fields_are_device_memory_reached_through_copies(gpu_arch):
    sd.init(arch=gpu_arch)
    x = sd.field(sd.f32, shape=6)
    be = st.backend()
    assert not be.host_views and x._storage().host is None
    x.from_numpy(np.arange(6, dtype=np.float32))   # queued upload
    x[2] = 20.0                                    # queued element upload
    assert _rt().pending() >= 2 and _rt().waits == 0
    with pytest.raises(ValueError, match="read-only"):
        x._view()[0] = 1.0  # a host view of device memory is a copy: writing it is a bug
    np.testing.assert_array_equal(x.to_numpy(), [0, 1, 20, 3, 4, 5])
    assert x[2] == 20.0 and x.to_numpy().flags.writeable


def test_managed_memory_on_request(gpu_arch):
    sd.init(arch=gpu_arch, managed_memory=True)
    x = sd.field(sd.f32, shape=4)
    assert st.backend().host_views and x._storage().host is not None
    x.from_numpy(np.ones(4, np.float32))

    @sd.kernel
    def double():
        for i in x:
            x[i] *= 2.0

    double()
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 2.0))


def test_data_dependent_parallel_bound_launches_without_a_host_read(gpu_arch):
    sd.init(arch=gpu_arch)             # not debug: the kernel reads its own bound
    n, x, set_n, count_up = bound_kernels()
    count_up()                         # compiled and run once
    sd.sync()
    x.fill(0)
    rt = _rt()
    w0 = rt.waits
    total = np.zeros(1000, np.int32)
    for v in (10, 500, 0, 999):
        set_n(v)                       # written by a kernel ...
        count_up()
        total[:v + 1] += 1
    n.from_numpy(np.array(3, np.int32))  # ... and by a queued upload
    count_up()
    total[:4] += 1
    assert rt.waits == w0, "a launch waited for the device"
    assert rt.pending() > 0
    np.testing.assert_array_equal(x.to_numpy(), total)
    prog = count_up.compile(()).program
    assert prog.device_range == (False, True)


def test_host_path_waits_for_every_data_dependent_bound(gpu_arch, monkeypatch):
    monkeypatch.setenv(llvm_gpu.HOST_PATH_ENV, "1")
    sd.init(arch=gpu_arch)
    assert st.backend().gpu_sizer is None
    n, x, set_n, count_up = bound_kernels()
    rt = _rt()
    w0 = rt.waits
    for v in (10, 20):
        set_n(v)
        count_up()
    assert rt.waits - w0 == 2          # the old path: one wait per bound read
    want = np.zeros(1000, np.int32)
    want[:11] += 1
    want[:21] += 1
    np.testing.assert_array_equal(x.to_numpy(), want)


def _grad_kernel():
    n = sd.field(sd.i32, shape=())
    m = sd.field(sd.i32, shape=16)
    x = sd.field(sd.f64, shape=16, needs_grad=True)
    y = sd.field(sd.f64, shape=16, needs_grad=True)

    @sd.kernel
    def k():
        for i in range(n[None]):       # a device-read parallel bound
            v = x[i]
            for j in range(m[i]):      # stacks sized from a field: the GPU sizer
                v = sd.sin(v) * 0.9 + 0.1
            y[i] = v

    def ref(xs, nv, ms):
        out = np.zeros_like(xs)
        for i in range(nv):
            v = xs[i]
            for _ in range(ms[i]):
                v = np.sin(v) * 0.9 + 0.1
            out[i] = v
        return out

    return n, m, x, y, k, ref


def test_gpu_sized_grad_with_device_bound_hits_without_waiting(gpu_arch):
    sd.init(arch=gpu_arch, default_fp=sd.f64)
    n, m, x, y, k, ref = _grad_kernel()
    xs = np.linspace(0.1, 0.9, 16)
    ms = (np.arange(16) % 5 + 1).astype(np.int32)
    x.from_numpy(xs)
    m.from_numpy(ms)
    n[None] = 13
    k()
    y.grad.fill(1.0)
    sizing_cache.stats.reset()
    k.grad()                           # a miss: the GPU sizer (one read-back)
    assert sizing_cache.stats.gpu_dispatches == 1 and sizing_cache.stats.host_evaluations == 0
    sd.sync()
    rt = _rt()
    w0 = rt.waits
    for _ in range(3):                 # (the store y[i] = v consumes y.grad: set it again)
        y.grad.fill(1.0)
        k.grad()                       # hits: the sizes' inputs unchanged, nothing waits
    assert rt.waits == w0 and sizing_cache.stats.cache_hits == 3
    want = 4 * central_diff(lambda v: ref(v, 13, ms), xs, np.ones(16))
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-6, atol=1e-9)
    m[2] = 9                           # a longer loop: a miss, sized again on the device
    x.grad.fill(0)
    y.grad.fill(1.0)
    k.grad()
    ms[2] = 9
    want = central_diff(lambda v: ref(v, 13, ms), xs, np.ones(16))
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-6, atol=1e-9)
    assert sizing_cache.stats.gpu_dispatches == 2


def test_heaps_replaced_while_launches_are_queued(gpu_arch):
    """A larger launch grows the heaps while smaller ones still wait in the queue (stacks sized
    from a scalar argument: on the host, no wait): the old heaps stay allocated until the queue
    has run, and every gradient is right."""
    sd.init(arch=gpu_arch, default_fp=sd.f64)
    x = sd.field(sd.f64, shape=16, needs_grad=True)
    y = sd.field(sd.f64, shape=16, needs_grad=True)

    xs = np.linspace(0.1, 0.9, 16)
    x.from_numpy(xs)
    overflowing(x, y, 1)
    y.grad.fill(1.0)
    overflowing.grad(x, y, 1)
    sd.sync()
    be = st.backend()
    rt = _rt()
    w0, heap0 = rt.waits, be.heap_bytes()
    want = overflowing_grad(xs, 1)
    for trips in (4, 30, 200):         # each launch needs longer stacks
        y.grad.fill(1.0)
        overflowing.grad(x, y, trips)
        want += overflowing_grad(xs, trips)
    assert rt.waits == w0 and be.heap_bytes()[0] > heap0[0]
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-6, atol=1e-9)


def test_overflow_with_size_read_from_a_field(gpu_arch):
    """Capacity forced below the need, the need read from a field: the overflow error (it
    used to end in RecursionError: the message's size read the field, which synced, which
    raised the error again)."""
    sd.init(arch=gpu_arch, default_fp=sd.f64, ad_stack_size=4)
    n, m, x, y, k, ref = _grad_kernel()
    x.from_numpy(np.linspace(0.1, 0.9, 16))
    m.from_numpy(np.full(16, 9, np.int32))
    n[None] = 16
    k()
    y.grad.fill(1.0)
    k.grad()
    with pytest.raises(sd.SpiradAdStackOverflow, match=r"holds 4 entries; this launch needs 11"):
        sd.sync()
    k.grad()
    m[0] = 9                           # written after the launch, before the sync: the size
    with pytest.raises(sd.SpiradAdStackOverflow) as e:  # the launch needed is unknown now
        sd.sync()
    assert "holds 4 entries" in str(e.value) and "needs" not in str(e.value)
    sd.sync()                          # reported once; the backend keeps working
    m.fill(1)
    k.grad()
    sd.sync()
