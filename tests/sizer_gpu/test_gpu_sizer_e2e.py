"""End to end on Vulkan: a reverse-mode kernel whose inner loop bound is read from a large ndarray
(`for j in range(steps[i])`) at 2,000,000 threads. The adstack capacity reads device data, so
the launch sizes it with the GPU sizer kernel: once per change of `steps` (the sizing cache hits
in between), and the gradients are right."""
import numpy as np
import pytest

import spirad as sd
from spirad.runtime import sizing_cache
import spirad.runtime.state as sd_state
from tests.support.archs import SPIRV_ARCHS, test_archs
from tests.support.grad_programs import per_element_trips, per_element_trips_grad

N = 2_000_000
ND = sd.types.ndarray()


@sd.kernel
def bump_steps(steps: ND):
    for i in steps:
        if i % 1000 == 7:
            steps[i] = 9


def _grad(x, s, o):
    x.grad.fill(0)
    o.grad.fill(1)
    per_element_trips.grad(x, s, o)
    return x.grad.to_numpy()


@test_archs(archs=SPIRV_ARCHS)
def test_large_data_dependent_loop_bound(arch):
    rng = np.random.default_rng(3)
    xs = rng.uniform(-1.5, 1.5, N).astype(np.float32)
    st = rng.integers(0, 6, N).astype(np.int32)
    x = sd.ndarray(sd.f32, N, needs_grad=True)
    s = sd.ndarray(sd.i32, N)
    o = sd.ndarray(sd.f32, N, needs_grad=True)
    x.from_numpy(xs)
    s.from_numpy(st)
    per_element_trips(x, s, o)
    g = per_element_trips.compile_adjoint((x, s, o))
    assert any(ts is not None and ts.device for ts in g.sizing.tasks)   # sized on the device
    stats = sizing_cache.stats

    gs = sd_state.backend().gpu_sizer
    reduced = gs.reduced_nodes
    stats.reset()
    got = _grad(x, s, o)
    assert (stats.gpu_dispatches, stats.host_evaluations) == (1, 0)
    assert gs.reduced_nodes == reduced + 1     # max over steps: one device reduction
    sample = rng.integers(0, N, 4000)
    np.testing.assert_allclose(got[sample], per_element_trips_grad(xs[sample], st[sample]),
                               rtol=2e-5, atol=2e-6)

    stats.reset()
    _grad(x, s, o)                                     # nothing changed: the cache hits
    assert (stats.gpu_dispatches, stats.cache_hits) == (0, 1)

    st[123_457] = 8                                    # a host write raises the capacity
    s.from_numpy(st)
    stats.reset()
    got = _grad(x, s, o)
    assert stats.gpu_dispatches == 1
    one = slice(123_457, 123_458)
    np.testing.assert_allclose(got[123_457], per_element_trips_grad(xs[one], st[one])[0],
                               rtol=2e-5, atol=2e-6)

    bump_steps(s)                                      # a kernel write raises it again
    st[7::1000] = 9
    stats.reset()
    got = _grad(x, s, o)
    assert stats.gpu_dispatches == 1
    idx = np.arange(7, N, 1000)[:500]
    np.testing.assert_allclose(got[idx], per_element_trips_grad(xs[idx], st[idx]), rtol=2e-5, atol=2e-6)
    ts = next(t for t in per_element_trips.compile_adjoint((x, s, o)).sizing.tasks if t is not None)
    assert max(ts.sized.caps) == 9 + 2                       # K trips: K + 2 entries

    s[5] = -3                                          # element assignment: a fresh sizing too
    stats.reset()
    _grad(x, s, o)
    assert stats.gpu_dispatches == 1


@test_archs(archs=SPIRV_ARCHS)
def test_sizing_error_names_the_leaf(arch):
    @sd.kernel
    def indirect(x: ND, idx: ND, steps: ND, out: ND):
        for i in x:
            v = x[i]
            for j in range(steps[idx[i]]):
                v = sd.sin(v)
            out[i] = v

    n = 64
    x = sd.ndarray(sd.f32, n, needs_grad=True)
    idx = sd.ndarray(sd.i32, n)
    steps = sd.ndarray(sd.i32, 8)
    out = sd.ndarray(sd.f32, n, needs_grad=True)
    idx.from_numpy(np.arange(n, dtype=np.int32) % 8)
    steps.fill(2)
    g = indirect.compile_adjoint((x, idx, steps, out))
    # the premise, asserted (a skip would hide the day this bound stops being sized on the device)
    assert any(ts is not None and ts.device for ts in g.sizing.tasks), \
        "steps[idx[i]] should be sized by the GPU sizer from device data"
    idx[9] = 100
    with pytest.raises(sd.SpiradAutodiffError, match=r"NdarrayRead\(arg 2\): index 100"):
        indirect.grad(x, idx, steps, out)


@test_archs(archs=SPIRV_ARCHS)
def test_field_bound_is_reduced_on_the_device(arch):
    """`range(f[i])` with `f` a field: the bound is one device reduction per change of `f`, and
    the gradients follow every change."""
    n = 50_000
    f = sd.field(sd.i32, shape=n)
    x = sd.field(sd.f32, shape=n, needs_grad=True)
    out = sd.field(sd.f32, shape=n, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            for j in range(f[i]):
                v = sd.sin(v) * 0.9 + 0.1
            out[i] = v

    rng = np.random.default_rng(8)
    xs = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    x.from_numpy(xs)
    gs = sd_state.backend().gpu_sizer
    for top in (3, 17, 2):
        st = rng.integers(0, top, n).astype(np.int32)
        st[n // 3] = top
        f.from_numpy(st)
        k()
        x.grad.fill(0)
        out.grad.fill(1)
        reduced = gs.reduced_nodes
        k.grad()
        assert gs.reduced_nodes == reduced + 1
        sample = rng.integers(0, n, 2000)
        np.testing.assert_allclose(x.grad.to_numpy()[sample], per_element_trips_grad(xs[sample], st[sample]),
                                   rtol=2e-5, atol=2e-6)
        ts = next(t for t in k.compile_adjoint(()).sizing.tasks if t is not None)
        assert max(ts.sized.caps) == top + 2
