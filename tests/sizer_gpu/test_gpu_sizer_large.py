"""The GPU sizer on large inputs: `MaxOverRange` over millions of elements read from a device
ndarray (split over many invocations, each well under lavapipe's loop cap, then reduced), range
bounds that themselves read device data (one extra round), loop bodies far costlier than the
slicing estimate (invocations suspend and resume over several rounds), and error reports that
name the leaf."""
import time

import numpy as np
import pytest

import sizer as sz
import spirad as sd
from tests.sizer_gpu.util import device_sizer
import spirad.runtime.state as sd_state
from spirad.backends.gpu_sizer import Leaf
from tests.support.archs import test_archs

N = 4 * 1024 * 1024
V0, V1 = sz.BoundVariable(0), sz.BoundVariable(1)


def _leaf(nd):
    """A leaf over an ndarray's or a field's memory, as the launch path makes it
    (`gpu_sizer.runner.task_leaves`): an ndarray's storage (on the SPIR-V backends a slice of an
    arena, whose buffer may be replaced by a larger one as kernels and ndarrays are created: the
    slice is bound through its chunk at each launch), a field's root buffer at its offset."""
    from spirad.data.ndarray import Ndarray
    if isinstance(nd, Ndarray):
        return Leaf(nd._storage(), nd.dtype, nd.full_shape)
    buf, off = sd_state.backend().storage_parts(nd._storage())
    return Leaf(buf, nd.dtype, nd.full_shape, off // nd.dtype.nbytes)


def _uncapped_rounds(arch):
    cap = getattr(getattr(sd_state.backend(), "caps", None), "loop_iteration_cap", None)
    return cap is None


@test_archs()
def test_max_over_4m_ndarray(arch):
    rng = np.random.default_rng(5)
    data = rng.integers(0, 1000, N).astype(np.int32)
    data[rng.integers(0, N)] = 123456
    steps = sd.ndarray(sd.i32, N)
    steps.from_numpy(data)
    e = sz.MaxOverRange(0, sz.Const(0), sz.NdarrayShape(0, 0),
                        sz.Add(sz.NdarrayRead(0, (V0,)), sz.Const(2)))
    gs = device_sizer()
    plan = gs.plan([e, sz.Const(3)], leaves={("ndarray", 0): _leaf(steps)}, scalars={},
                   shapes={0: (N,)}, entry_sizes=[4, 4], kinds=["float", "int"])
    assert plan.n_jobs >= 1024 + 1                     # split over many invocations
    t = time.perf_counter()
    res = gs.run(plan, layout=True)
    dt = time.perf_counter() - t
    assert res.values == [123458, 3]
    assert res.dispatches == 1                         # no invocation ran out of budget
    assert res.metadata == sz.compute_layout([123458, 3], [4, 4], ["float", "int"]).metadata()
    print(f"{arch}: 4M-element MaxOverRange in {dt * 1e3:.1f} ms, {plan.n_jobs} jobs")
    # the max moves: a host write, a fresh evaluation of the same plan
    data[7] = 10**6
    steps.from_numpy(data)
    assert gs.run(plan).values == [10**6 + 2, 3]


@test_archs()
def test_range_end_read_from_device(arch):
    """`end` is a field value: a first round evaluates it, then the range is split."""
    data = np.arange(N, dtype=np.int64) % 977
    a = sd.ndarray(sd.i64, N)
    a.from_numpy(data)
    n = sd.field(sd.i32, shape=())
    n[None] = N - 5
    e = sz.MaxOverRange(0, sz.Const(3), sz.FieldLoad(n.id, ()),
                        sz.Mul(sz.NdarrayRead(0, (V0,)), sz.Const(2)))
    gs = device_sizer()
    plan = gs.plan([e], leaves={("ndarray", 0): _leaf(a), ("field", n.id): _leaf(n)},
                   scalars={}, shapes={0: (N,)})
    res = gs.run(plan)
    assert res.values == [2 * int(data[3:N - 5].max())]
    assert res.dispatches == 2
    assert plan.n_jobs > 1000


@test_archs()
def test_costly_body_resumes_across_rounds(arch):
    """A body with a 200,000-trip inner loop: far past the per-invocation budget on lavapipe, so
    invocations suspend and resume; the answer is the same as on an uncapped device."""
    m = 200_000
    data = (np.arange(m, dtype=np.int32) * 7919) % 100_003
    a = sd.ndarray(sd.i32, m)
    a.from_numpy(data)
    inner = sz.MaxOverRange(1, sz.Const(0), sz.Const(m),
                            sz.Mul(sz.NdarrayRead(0, (V1,)), sz.Add(V0, sz.Const(1))))
    e = sz.MaxOverRange(0, sz.Const(0), sz.Const(3), inner)
    gs = device_sizer()
    plan = gs.plan([e], leaves={("ndarray", 0): _leaf(a)}, scalars={}, shapes={})
    res = gs.run(plan)
    assert res.values == [3 * int(data.max())]
    if _uncapped_rounds(arch):
        assert res.dispatches == 1
    else:
        assert res.dispatches > 5


@test_archs()
def test_2d_triangular_ranges(arch):
    rng = np.random.default_rng(1)
    r, c = 1500, 1400
    data = rng.integers(-50, 50, (r, c)).astype(np.int32)
    a = sd.ndarray(sd.i32, (r, c))
    a.from_numpy(data)
    # max over i < r, j < min(i, c) of a[i, j] - i  (Sub clamps at 0)
    e = sz.MaxOverRange(0, sz.Const(0), sz.Const(r), sz.MaxOverRange(
        1, sz.Const(0), sz.Sub(V0, sz.Sub(V0, sz.Const(c))),
        sz.Sub(sz.NdarrayRead(0, (V0, V1)), sz.Const(-40))))
    gs = device_sizer()
    plan = gs.plan([e], leaves={("ndarray", 0): _leaf(a)}, scalars={}, shapes={})
    want = sz.eval_fast(e, sz.DictContext(ndarrays={0: data}))
    assert gs.run(plan).values == [want]


@test_archs()
def test_errors_name_the_leaf(arch):
    a = sd.ndarray(sd.i32, 1000)
    a.from_numpy(np.arange(1000, dtype=np.int32))
    gs = device_sizer()
    e = sz.MaxOverRange(0, sz.Const(0), sz.Const(1001), sz.NdarrayRead(0, (V0,)))
    plan = gs.plan([e], leaves={("ndarray", 0): _leaf(a)}, scalars={}, shapes={})
    with pytest.raises(sz.SizerError, match=r"NdarrayRead\(arg 0\): index 1000 out of range "
                                            r"\[0, 1000\) on axis 0"):
        gs.run(plan)
    big = sz.Mul(sz.NdarrayRead(0, (sz.Const(999),)), sz.Const(2**61))
    plan = gs.plan([big], leaves={("ndarray", 0): _leaf(a)}, scalars={}, shapes={})
    with pytest.raises(sz.SizerError, match="overflow in Mul"):
        gs.run(plan)
    f = sd.field(sd.f32, shape=4)
    f.from_numpy(np.array([1.5, np.nan, 2, 3], np.float32))
    plan = gs.plan([sz.FieldLoad(f.id, (sz.Const(1),))], leaves={("field", f.id): _leaf(f)},
                   scalars={}, shapes={})
    with pytest.raises(sz.SizerError, match=rf"FieldLoad\(field {f.id}\): non-finite"):
        gs.run(plan)
