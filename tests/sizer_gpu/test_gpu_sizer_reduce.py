"""The GPU sizer's MaxOverRange fast path (`spirad/backends/gpu_sizer/reduce.py`): a range over
one data read whose body is non-decreasing in the value read is replaced by the body at the
device-computed maximum. It must agree with the host reference `sizer.eval_tree` on every root,
errors included: the random cases below mix qualifying bodies with ones the path must refuse
(decreasing, negative factors, overflow near 2**62), ranges past the array or empty, and data
with NaN / inf / huge values; whatever the fast path leaves goes to the interpreter."""
import random

import numpy as np

import sizer as sz
import spirad as sd
import spirad.runtime.state as sd_state
from spirad.backends.gpu_sizer import Leaf
from tests.sizer_gpu.util import outcome, run_batch, device_sizer
from tests.support.archs import test_archs

M = sz.MAX_ABS
V0 = sz.BoundVariable(0)
_SD = {np.dtype(np.int32): sd.i32, np.dtype(np.uint32): sd.u32, np.dtype(np.int64): sd.i64,
       np.dtype(np.float32): sd.f32, np.dtype(np.float64): sd.f64}
_CONSTS = [0, 1, 2, 3, 7, 2**31, 2**40, 2**61, M, M - 1]


def _data(rng: random.Random, n: int) -> np.ndarray:
    kind = rng.choice(["i32", "u32", "i64", "f32", "f64", "bool"])
    if kind == "bool":
        return np.array([rng.random() < 0.5 for _ in range(n)], np.uint32)
    if kind in ("i32", "u32", "i64"):
        small = np.array([rng.randint(-50, 50) for _ in range(n)], np.int64)
        if kind == "u32":
            small = np.abs(small)
        a = small.astype({"i32": np.int32, "u32": np.uint32, "i64": np.int64}[kind])
        if rng.random() < 0.3:
            big = {"i32": [2**31 - 1, -2**31], "u32": [2**32 - 1],
                   "i64": [M, -M, M + 1, 2**63 - 1, 2**50]}[kind]
            a[rng.randrange(n)] = rng.choice(big)
        return a
    a = np.array([rng.uniform(-20, 60) for _ in range(n)],
                 np.float32 if kind == "f32" else np.float64)
    if rng.random() < 0.25:
        a[rng.randrange(n)] = rng.choice([np.nan, np.inf, -np.inf, 2.0**62, 4.0e18, -2.5])
    return a


def _body(rng: random.Random, read, depth: int):
    if depth == 0:
        return read
    x = _body(rng, read, depth - 1)
    c = sz.Const(rng.choice(_CONSTS))
    return rng.choice([
        lambda: sz.Add(x, c), lambda: sz.Add(c, x), lambda: sz.Sub(x, c), lambda: sz.Max(x, c),
        lambda: sz.Max(c, x), lambda: sz.Mul(x, c), lambda: sz.Mul(c, x),
        lambda: sz.Sub(c, x),                          # decreasing: refused
        lambda: sz.Mul(x, sz.Const(-rng.randint(1, 3))),  # negative factor: refused
        lambda: sz.Mul(x, x),                            # two reads: refused
    ])()


def _case(rng: random.Random):
    n = rng.choice([1, 2, 5, 17, 300, 5000, 9000])
    data = _data(rng, n)
    two_d = n % 5 == 0 and rng.random() < 0.5
    if two_d:
        data = data.reshape(5, n // 5)
        if rng.random() < 0.5:
            read, ext = sz.NdarrayRead(0, (V0, sz.Const(rng.randrange(n // 5)))), 5
        else:
            read, ext = sz.NdarrayRead(0, (sz.Const(rng.randrange(5)), V0)), n // 5
    else:
        read, ext = sz.NdarrayRead(0, (V0,)), n
    b = rng.choice([0, 0, 1, -1, ext - 1, ext])
    e = rng.choice([ext, ext, ext - 1, ext + 1, b, b + 1, sz.NdarrayShape(0, 0)])
    root = sz.MaxOverRange(0, sz.Const(b), e if isinstance(e, sz.SizeExpr) else sz.Const(e),
                           _body(rng, read, rng.randint(0, 3)))
    if rng.random() < 0.3:
        root = sz.Add(sz.Const(2), root)
    return root, data


def _device_outcome(gs, root, data):
    nd = sd.ndarray(_SD[data.dtype], data.shape)
    nd.from_numpy(data)
    leaves = {("ndarray", 0): Leaf(nd._storage(), nd.dtype, data.shape)}
    shapes = {0: data.shape}
    (rewritten,) = gs.reduce_ranges([root], leaves, {}, shapes)
    if not sz.has_device_leaves(rewritten):
        return outcome(lambda: sz.eval_tree(rewritten, sz.DictContext(shapes=shapes))), True
    ctx = sz.DictContext(ndarrays={0: data})
    (got,), _ = run_batch([([rewritten], ctx)])
    return got[0], False


# not metal: f64 leaves / more leaf buffers than Metal's sizer slots (host-sized there)
@test_archs(exclude=("metal",))
def test_fast_path_agrees_with_reference(arch):
    rng = random.Random(11)
    gs = device_sizer()
    fast = errors = 0
    for _ in range(160):
        root, data = _case(rng)
        want = outcome(lambda: sz.eval_tree(root, sz.DictContext(ndarrays={0: data})))
        got, reduced = _device_outcome(gs, root, data)
        assert got == want, (str(root), data.dtype, data.shape, got, want)
        fast += reduced
        errors += want[0] == "error"
    assert fast >= 40 and errors >= 10, (fast, errors)  # both sides of the path really ran


# not metal: f64 leaves / more leaf buffers than Metal's sizer slots (host-sized there)
@test_archs(exclude=("metal",))
def test_values_without_a_sizer_int_are_errors(arch):
    """NaN, inf, |x| >= 2**62 (floats) and |x| > MAX_ABS (i64) inside the range: the reduction
    flags them, the node stays for the interpreter, and the evaluation raises as on the host.
    The same value just outside the range is never read."""
    gs = device_sizer()
    body = sz.Add(sz.NdarrayRead(0, (V0,)), sz.Const(2))
    for np_dt, bad in ((np.float32, np.nan), (np.float32, np.inf), (np.float64, -np.inf),
                       (np.float64, 2.0**62), (np.float32, -4.7e18), (np.int64, M + 1),
                       (np.int64, -(2**63))):
        data = np.arange(6000).astype(np_dt)
        data[4500] = bad
        for b, e in ((0, 6000), (4500, 4501), (0, 4500), (4501, 6000)):
            root = sz.MaxOverRange(0, sz.Const(b), sz.Const(e), body)
            want = outcome(lambda: sz.eval_tree(root, sz.DictContext(ndarrays={0: data})))
            assert (want[0] == "error") == (b <= 4500 < e)
            got, _ = _device_outcome(gs, root, data)
            assert got == want, (np_dt, bad, b, e, got, want)


@test_archs()
def test_typical_trip_count_bound_is_reduced_not_interpreted(arch):
    """`range(steps[i])` over 300,000 elements: one reduction, no interpreter node left."""
    n = 300_000
    rng = np.random.default_rng(3)
    steps = rng.integers(0, 40, n).astype(np.int32)
    steps[12345] = 977
    nd = sd.ndarray(sd.i32, n)
    nd.from_numpy(steps)
    e = sz.MaxOverRange(0, sz.Const(0), sz.NdarrayShape(0, 0),
                        sz.Add(sz.Sub(sz.NdarrayRead(0, (V0,)), sz.Const(0)), sz.Const(2)))
    gs = device_sizer()
    before = gs.reduced_nodes
    (out,) = gs.reduce_ranges([e], {("ndarray", 0): Leaf(nd._storage(), nd.dtype, (n,))}, {},
                              {0: (n,)})
    assert out == sz.Const(979) and gs.reduced_nodes == before + 1
    steps[7] = -5          # smaller values do not matter; a NaN-free int array never refuses
    nd.from_numpy(steps)
    (out,) = gs.reduce_ranges([e], {("ndarray", 0): Leaf(nd._storage(), nd.dtype, (n,))}, {},
                              {0: (n,)})
    assert out == sz.Const(979)
