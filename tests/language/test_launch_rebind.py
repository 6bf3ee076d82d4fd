"""Launches whose scalar arguments change (DiffTaichi's `step(t)`): the last plan is rebound to
the new values (`launch.rebind`: argument bytes and ranges only) instead of checking the
signature again. Results, ranges that depend on the scalars, adstack sizes that do, and the
argument errors are the same as with a fresh plan. On the SPIR-V backends each launch's argument
bytes go to an arena of the batch being recorded, bound at a dynamic offset
(`gfx_runtime.vulkan.arguments`, the wgpu runtime's arena): thousands of launches with new
scalars and no sync in between, of several kernels, each see their own (from several threads:
test_threads.py)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs

N, STEPS = 16, 300


@test_archs()
def test_time_steps_with_changing_scalars(arch):
    x = sd.field(sd.f32, shape=(STEPS + 1, N))

    @sd.kernel
    def step(t: sd.i32, s: sd.f32):
        for i in range(N):
            x[t + 1, i] = x[t, i] * s + t

    x.from_numpy(np.zeros((STEPS + 1, N), np.float32))
    ref = np.zeros((STEPS + 1, N), np.float64)
    for t in range(STEPS):
        s = 0.5 if t % 2 else 1.0
        step(t, s)
        ref[t + 1] = ref[t] * s + t
    np.testing.assert_allclose(x.to_numpy(), ref, rtol=1e-6)


@test_archs()
def test_range_from_a_changing_scalar(arch):
    y = sd.field(sd.i32, shape=N)

    @sd.kernel
    def fill(m: sd.i32, v: sd.i32):
        for i in range(m):
            y[i] = v

    for m, v in ((N, 1), (5, 2), (9, 3), (0, 4), (2, 5)):  # 0: nothing written
        fill(m, v)
    np.testing.assert_array_equal(y.to_numpy(), [5, 5] + [3] * 7 + [1] * (N - 9))


def _filler():
    """A field of N i32 and a kernel that fills it with its one scalar argument."""
    y = sd.field(sd.i32, shape=N)

    @sd.kernel
    def put(v: sd.i32):
        for i in range(N):
            y[i] = v

    return y, put


@test_archs()
def test_argument_errors_after_a_rebound_launch(arch):
    y, put = _filler()
    put(1)
    put(2)
    with pytest.raises(sd.SpiradValueError, match="does not fit"):
        put(2 ** 40)
    with pytest.raises(sd.SpiradTypeError, match="float"):
        put(1.5)
    put(3)
    assert y[0] == 3


@test_archs()
def test_adstack_sizes_from_a_changing_scalar(arch):
    x = sd.field(sd.f32, shape=N, needs_grad=True)
    y = sd.field(sd.f32, shape=N, needs_grad=True)

    @sd.kernel
    def power(n: sd.i32, a: sd.f32):
        for i in range(N):
            v = x[i]
            for _ in range(n):
                v = v * a + sd.sin(v) * 0.0  # a non-linear op: v goes on an adstack
            y[i] = v

    x.from_numpy(np.linspace(0.1, 1.0, N).astype(np.float32))
    for n, a in ((3, 0.9), (40, 0.99), (7, 0.5), (40, 0.95)):
        power(n, a)
        y.grad.fill(1.0)
        x.grad.fill(0.0)
        power.grad(n, a)
        np.testing.assert_allclose(x.grad.to_numpy(), np.full(N, a ** n), rtol=1e-5)


LONG = 1500  # launches without a sync: past a batch (Vulkan's arena grows, wgpu's fills)


@test_archs()
def test_many_launches_of_several_kernels_each_see_their_scalars(arch):
    """Two kernels relaunched LONG times each, interleaved, with new scalars at every launch
    and no sync until the end; `both` has two parallel loops (two dispatches of one argument
    block). Every row is checked."""
    x = sd.field(sd.f32, shape=(LONG + 1, N))
    y = sd.field(sd.i32, shape=(LONG, 2))

    @sd.kernel
    def step(t: sd.i32, s: sd.f32):
        for i in range(N):
            x[t + 1, i] = x[t, i] * s + t

    @sd.kernel
    def both(t: sd.i32, v: sd.i32):
        for i in range(1):
            y[t, 0] = v
        for i in range(1):
            y[t, 1] = v * 3 + t

    x.from_numpy(np.zeros((LONG + 1, N), np.float32))
    ref = np.zeros((LONG + 1, N), np.float64)
    for t in range(LONG):
        s = (0.5, 1.0, 0.25)[t % 3]
        step(t, s)
        both(t, 7 * t + 1)
        ref[t + 1] = ref[t] * s + t
    np.testing.assert_allclose(x.to_numpy(), ref, rtol=1e-6)
    t = np.arange(LONG)
    np.testing.assert_array_equal(y.to_numpy(), np.stack([7 * t + 1, 21 * t + 3 + t], axis=1))



@test_archs()
def test_one_bytes_object_per_set_of_argument_values(arch, monkeypatch):
    """A plan's argument bytes, with what the backend appends (`launch_arguments`: the SPIR-V
    programs' root offsets), are made once per set of values: a relaunch with the same values
    gives the backend the same object, which the SPIR-V runtimes place once per batch (identity:
    `gfx_runtime.arena`, the only "same bytes" check); new values get new bytes, same tail."""
    from spirad.runtime import state
    y, put = _filler()
    put(1)
    be = state.backend()
    p = put._plans[0]
    tail = be.launch_arguments(p.compiled.program, b"", p.storages)
    assert p.argbuf.endswith(tail) and len(p.argbuf) == p.compiled.abi.arg_buffer_size + len(tail)
    if arch in ("vulkan", "metal"):
        assert tail  # the root offsets of y and of the status words
    put(1)
    assert put._plans[0].argbuf is p.argbuf
    sd.sync()
    written = []
    if arch in ("vulkan", "metal"):
        cls = type(be.rt._arena)
        write = cls._write
        monkeypatch.setattr(cls, "_write", lambda a, off, data: (written.append(data),
                                                                 write(a, off, data)))
        if arch == "vulkan":
            monkeypatch.setattr(be.rt, "max_pending_s", 60.0)  # one batch for the launches
    for v in (2, 2, 2, 3, 3):
        put(v)
    q = put._plans[0]
    assert q.argbuf.endswith(tail) and q.argbuf != p.argbuf
    assert y.to_numpy().tolist() == [3] * N
    if arch in ("vulkan", "metal"):
        assert len(written) == 2 and written[1] is q.argbuf  # once per set of values
