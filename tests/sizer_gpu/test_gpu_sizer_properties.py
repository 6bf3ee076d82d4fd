"""The GPU sizer kernel agrees with the host reference `sizer.eval_tree` on every root of
thousands of random expressions and launch data, errors included (architecture §4 "Sizing": host and
GPU evaluators agree on every expression), on lavapipe (`arch=vulkan`) and on the CPU
backend (the kernel is plain spirad). Cases are batched: one GPU evaluation per batch.

Two generators: the sizer package's hypothesis strategies (small values, data-dependent loop
bounds, float data, out-of-range reads) and a wide one below (values near and past the 2**62
range, u32 / i64 / f32 / f64 / u1 data, NaN and inf, 3-D reads, wrong index counts)."""
import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sizer as sz
from tests.sizer.sizer_strategies import exprs, make_context, seeds
from tests.sizer_gpu.util import device_sizer, reference, run_batch
from tests.support.archs import test_archs

M = sz.MAX_ABS


def _check(cases, got):
    bad = []
    for (roots, ctx), g in zip(cases, got):
        ref = reference(roots, ctx)
        if ref != g:
            bad.append(([str(r) for r in roots], ref, g))
    assert not bad, f"{len(bad)} disagreements, first: {bad[:3]}"


# not metal: f64 leaves / more leaf buffers than Metal's sizer slots (host-sized there)
@test_archs(exclude=("metal",))
def test_agrees_with_reference_on_strategies(arch):
    seen = {"cases": 0, "errors": 0}

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(batch=st.lists(st.tuples(st.lists(exprs(), min_size=1, max_size=3), seeds),
                          min_size=20, max_size=60))
    def run(batch):
        cases = [(roots, make_context(seed)) for roots, seed in batch]
        got, _ = run_batch(cases)
        _check(cases, got)
        seen["cases"] += len(cases)
        seen["errors"] += sum(o[0] == "error" for g in got for o in g)

    run()
    assert seen["cases"] >= 1500 and seen["errors"] > 0, seen


# -- the wide generator ------------------------------------------------------------------------

_CONSTS = [0, 1, -1, 2, 3, 7, -5, 2**31 - 1, 2**31, 2**32, 2**40 + 3, 2**61, -(2**61), 3 * 2**60,
           M, -M, M - 1, 2**31 + 7]


def wide_context(rng: random.Random) -> sz.DictContext:
    def ints(n, lo, hi):
        return [rng.randint(lo, hi) for _ in range(n)]
    n0 = rng.randint(0, 6)
    nd0 = np.array(ints(n0, -9, 9) if rng.random() < 0.6 else ints(n0, -2**31, 2**31 - 1), np.int32)
    r, c = rng.randint(1, 4), rng.randint(1, 4)
    nd1 = np.array(ints(r * c, 0, 9) if rng.random() < 0.6 else ints(r * c, 0, 2**32 - 1),
                   np.uint32).reshape(r, c)
    big = [M, -M, M + 1, -(M + 1), 2**63 - 1, -(2**63), 2**62 - 5, 12345678901234]
    nd2 = np.array([rng.choice(big) if rng.random() < 0.3 else rng.randint(-9, 9)
                    for _ in range(rng.randint(1, 6))], np.int64)
    specials = [np.nan, np.inf, -np.inf, 2.0**62, -(2.0**62), 4.6e18, -4.6e18, 2.9, -2.9, 0.5]
    f0 = np.array([rng.choice(specials) if rng.random() < 0.3 else rng.uniform(-3, 9)
                   for _ in range(rng.randint(1, 6))], np.float32)
    shape3 = (rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 3))
    f1 = np.array([rng.choice(specials + [1e300]) if rng.random() < 0.2 else rng.uniform(-3, 9)
                   for _ in range(int(np.prod(shape3)))], np.float64).reshape(shape3)
    f2 = np.array([rng.random() < 0.5 for _ in range(rng.randint(1, 5))], np.bool_)
    scalars = {0: rng.choice([3, -2, 2**40, M]), 1: rng.choice([2.5, -0.7, float("nan"), 1e19, 6.0]),
               2: rng.randint(0, 5)}
    return sz.DictContext(scalars=scalars, ndarrays={0: nd0, 1: nd1, 2: nd2},
                          fields={0: f0, 1: f1, 2: f2})


def wide_expr(rng: random.Random, depth: int, bound: tuple, loops: int):
    def small_index():
        opts = [lambda: sz.Const(rng.randint(0, 2)), lambda: sz.Const(rng.randint(0, 2)),
                lambda: sz.ScalarArg(2), lambda: sz.Const(rng.choice([-1, 5, 2**33]))]
        if bound:
            opts += [lambda: sz.BoundVariable(rng.choice(bound))] * 3
        return rng.choice(opts)()

    def read():
        k = rng.randint(0, 5)
        wrong = rng.random() < 0.05
        rank = {0: 1, 1: 2, 2: 1, 3: 1, 4: 3, 5: 1}[k] + (rng.choice([-1, 1]) if wrong else 0)
        idx = tuple(small_index() if depth <= 0 or rng.random() < 0.8
                    else wide_expr(rng, depth - 1, bound, loops) for _ in range(max(rank, 0)))
        if k < 3:
            return sz.NdarrayRead(k, idx)
        return sz.FieldLoad(k - 3, idx)

    leaves = [lambda: sz.Const(rng.choice(_CONSTS) if rng.random() < 0.25 else rng.randint(-4, 9)),
              lambda: sz.ScalarArg(rng.randint(0, 3)),
              lambda: sz.NdarrayShape(rng.randint(0, 3), rng.randint(0, 2)), read]
    if bound:
        leaves += [lambda: sz.BoundVariable(rng.choice(bound))] * 2
    if depth <= 0 or rng.random() < 0.25:
        return rng.choice(leaves)()
    kind = rng.random()
    if kind < 0.6:
        op = rng.choice([sz.Add, sz.Sub, sz.Mul, sz.Max])
        return op(wide_expr(rng, depth - 1, bound, loops), wide_expr(rng, depth - 1, bound, loops))
    if kind < 0.75 or loops <= 0:
        return read()
    var = rng.randint(0, 2)

    def small_bound():  # loop bounds stay small (the reference evaluator loops in Python)
        opts = [lambda: sz.Const(rng.randint(-1, 7)), lambda: sz.ScalarArg(2),
                lambda: sz.NdarrayShape(rng.randint(0, 2), 0),
                lambda: sz.Add(sz.FieldLoad(2, (small_index(),)), sz.Const(rng.randint(0, 3)))]
        if bound:
            opts.append(lambda: sz.BoundVariable(rng.choice(bound)))
        return rng.choice(opts)()
    begin, end = small_bound(), small_bound()
    body = wide_expr(rng, depth - 1, tuple(set(bound) | {var}), loops - 1)
    return sz.MaxOverRange(var, begin, end, body)


# not metal: f64 leaves / more leaf buffers than Metal's sizer slots (host-sized there)
@test_archs(exclude=("metal",))
def test_agrees_with_reference_on_wide_values(arch):
    rng = random.Random(1234)
    n_cases = n_roots = n_err = 0
    for batch in range(12):
        cases = []
        for _ in range(200):
            roots = [wide_expr(rng, 4, (), 2) for _ in range(rng.randint(1, 3))]
            cases.append((roots, wide_context(rng)))
        got, _ = run_batch(cases)
        _check(cases, got)
        n_cases += len(cases)
        n_roots += sum(len(g) for g in got)
        n_err += sum(o[0] == "error" for g in got for o in g)
    assert n_cases == 2400 and 0.1 < n_err / n_roots < 0.75, (n_err, n_roots)


@test_archs()
def test_layout_and_metadata_agree_with_compute_layout(arch):
    """The device layout step equals `sizer.compute_layout(...).metadata()`, and reports the
    same failures (a stride past 2**62 - 1; a word past 32 bits, which `meta_words` rejects)."""
    rng = random.Random(7)
    import spirad.runtime.state as sd_state
    gs = device_sizer()
    for case in range(120):
        n = rng.randint(1, 6)
        pick = rng.random()
        caps = [rng.choice([0, 1, 5, 17, 2**20, -3]) if pick < 0.7 else
                rng.choice([2**29, 2**31, 2**59, 2**61, M]) for _ in range(n)]
        sizes = [rng.choice([4, 8]) for _ in range(n)]
        kinds = [rng.choice(["float", "primal", "int"]) for _ in range(n)]
        plan = gs.plan([sz.Const(c) for c in caps], leaves={}, scalars={}, shapes={},
                       entry_sizes=sizes, kinds=kinds)
        try:
            lay = sz.compute_layout([max(c, 0) for c in caps], sizes, kinds)
            want = lay.metadata()
            if max(want) >= 2**32:
                want = "error"
        except sz.SizerError:
            want = "error"
        try:
            res = gs.run(plan, layout=True)
            got = res.metadata
        except sz.SizerError:
            got = "error"
        assert got == want, (caps, sizes, kinds)
        if want != "error":
            words = res.meta.to_numpy()[:len(want)]       # what the device wrote for the launch
            assert words.tolist() == want
            assert sz.Layout.from_metadata(got, sizes, kinds) == lay


@test_archs()
def test_range_boundaries(arch):
    """Values at the edges of the sizer range, with operands read from device data."""
    B = 2**31
    data = np.array([B, -B, B - 1, B + 1, M, -M, 1, 0, -1, 2, M // 2 + 1, 2**61], np.int64)
    ctx = sz.DictContext(ndarrays={0: data})

    def r(i):
        return sz.NdarrayRead(0, (sz.Const(i),))
    n = len(data)
    roots = [op(r(i), r(j)) for op in (sz.Add, sz.Sub, sz.Mul, sz.Max)
             for i in range(n) for j in range(n)]
    roots += [sz.Mul(r(i), sz.Const(c)) for i in range(n) for c in (2, -2, 4, B, -B)]
    got, _ = run_batch([(roots, ctx)])
    _check([(roots, ctx)], got)
    assert sum(o[0] == "error" for o in got[0]) > 50
