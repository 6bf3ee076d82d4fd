"""Scattered atomic adds (data-dependent and shifted targets, forward kernels and adjoints,
fields and ndarrays, several arrays per kernel) give the float64 reference's sums and gradients
on every arch. On the CPU such tasks are split over every worker with per-worker copies of the
slabs they add into (`spirad/backends/private_scatter.py`): the same results as the atomic and
one-thread code, and the analysis refuses what copies would change."""
import numpy as np
import pytest

import spirad as sd
import spirad.runtime.state as sd_state
from tests.support.archs import arch_or_skip, test_archs

T, G = 3, 24


def _pipeline(n, grid_kind="field"):
    """P2G / G2P-shaped kernels over `n` particles: forward scatters into two grids (one a
    2-vector) at data-dependent cells, G2P gathers (its adjoint scatters into the grids'
    gradients), a reduction into the loss. `grid_kind` "ndarray": the scalar grid and its
    gradient are an ndarray argument."""
    s = G / n  # sums per cell of order one
    x = sd.field(sd.f32, shape=(T + 1, n), needs_grad=True)
    cell = sd.field(sd.i32, shape=n)
    gv = sd.Vector.field(2, sd.f32, shape=(T, G), needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    if grid_kind == "field":
        gm = sd.field(sd.f32, shape=(T, G), needs_grad=True)
    else:
        gm = sd.ndarray(sd.f32, (T, G), needs_grad=True)

    @sd.kernel
    def p2g(f: sd.i32, m: sd.types.ndarray() if grid_kind == "ndarray" else sd.template()):
        for p in range(n):
            c = cell[p]
            m[f, c] += s * (x[f, p] ** 2 + 0.5)
            m[f, (c + 5) % G] += s * 0.25 * x[f, p]
            gv[f, (c * 7 + 1) % G] += s * sd.Vector([x[f, p], sd.sin(x[f, p])])

    @sd.kernel
    def g2p(f: sd.i32, m: sd.types.ndarray() if grid_kind == "ndarray" else sd.template()):
        for p in range(n):
            c = cell[p]
            v = gv[f, (c + 3) % G]
            x[f + 1, p] = x[f, p] * 0.9 + 0.3 * m[f, c] + 0.2 * sd.cos(m[f, (c + 1) % G]) \
                + 0.1 * v[0] * v[1]

    @sd.kernel
    def total():
        for p in range(n):
            loss[None] += x[T, p] * (1.0 + 0.001 * p)

    def run(x0, cells):
        x.from_numpy(np.concatenate([x0[None], np.zeros((T, n))]).astype(np.float32))
        cell.from_numpy(cells.astype(np.int32))
        gv.fill(0.0)
        gm.fill(0.0)
        loss[None] = 0.0
        with sd.ad.Tape(loss):
            for f in range(T):
                p2g(f, gm)
                g2p(f, gm)
            total()
        return (loss[None], x.grad.to_numpy()[0].astype(np.float64),
                gm.to_numpy().astype(np.float64), gv.to_numpy().astype(np.float64))

    return run


def _reference(x0, cells):
    """(loss, m grids, v grids) in float64 numpy."""
    n = len(x0)
    s = G / n
    x = x0.astype(np.float64)
    ms, vs = np.zeros((T, G)), np.zeros((T, G, 2))
    for f in range(T):
        np.add.at(ms[f], cells, s * (x ** 2 + 0.5))
        np.add.at(ms[f], (cells + 5) % G, s * 0.25 * x)
        np.add.at(vs[f], (cells * 7 + 1) % G, s * np.stack([x, np.sin(x)], 1))
        v = vs[f][(cells + 3) % G]
        x = x * 0.9 + 0.3 * ms[f][cells] + 0.2 * np.cos(ms[f][(cells + 1) % G]) \
            + 0.1 * v[:, 0] * v[:, 1]
    return (x * (1.0 + 0.001 * np.arange(n))).sum(), ms, vs


def _check(run, n, seed, grads=True):
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(0.1, 0.9, n)
    cells = rng.integers(0, G, n)
    loss, grad, ms, vs = run(x0, cells)
    want, ms_ref, vs_ref = _reference(x0, cells)
    np.testing.assert_allclose(ms, ms_ref, rtol=2e-5, atol=1e-4)
    np.testing.assert_allclose(vs, vs_ref, rtol=2e-5, atol=1e-4)
    assert loss == pytest.approx(want, rel=1e-5)
    if not grads:
        return loss, grad
    h = 1e-5
    for i in rng.choice(n, 3, replace=False):
        a, b = x0.copy(), x0.copy()
        a[i] += h
        b[i] -= h
        fd = (_reference(a, cells)[0] - _reference(b, cells)[0]) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=2e-3, abs=1e-4), i
    return loss, grad


@test_archs()
@pytest.mark.parametrize("grid_kind", ["field", "ndarray"])
def test_scattered_sums_and_gradients(arch, grid_kind):
    _check(_pipeline(300, grid_kind), 300, seed=1)


@test_archs()
def test_shifted_slab_next_to_its_reads(arch):
    """smoke_taichi's pressure adjoint: reads and clears row a + 1, adds into row a at
    neighbours' cells; and the same kernel where a read names the added row (a == b)."""
    n = 200
    q = sd.field(sd.f32, shape=(4, n))
    nb = sd.field(sd.i32, shape=n)

    @sd.kernel
    def shift(a: sd.i32, b: sd.i32):
        for i in range(n):
            v = q[b, i]
            q[b, i] = 0.0
            q[a, nb[i]] += 0.5 * v
            q[a, (nb[i] + 1) % n] += 0.25 * v

    rng = np.random.default_rng(2)
    q0 = rng.uniform(-1, 1, (4, n))
    nbs = rng.integers(0, n, n)
    q.from_numpy(q0.astype(np.float32))
    nb.from_numpy(nbs.astype(np.int32))
    want = q0.copy()
    for a in (2, 1, 0):
        shift(a, a + 1)
        v = want[a + 1].copy()
        want[a + 1] = 0
        np.add.at(want[a], nbs, 0.5 * v)
        np.add.at(want[a], (nbs + 1) % n, 0.25 * v)
    np.testing.assert_allclose(q.to_numpy(), want, rtol=1e-5, atol=1e-5)


def _cpu_no_debug(monkeypatch, force):
    """The CPU backend as programs run it (no bounds checks: the variants exist), two workers;
    `force`: every launch that can be privatised is."""
    arch_or_skip("cpu")
    import spirad.backends.cpu as cpu
    if force is not None:
        monkeypatch.setattr(cpu, "worth", lambda *a: force)
    sd.init(arch=sd.cpu, offline_cache=False, cpu_max_num_threads=2)
    return sd_state.backend().private


@pytest.mark.parametrize("grid_kind", ["field", "ndarray"])
def test_cpu_privatised_launches_match_atomics(monkeypatch, grid_kind):
    """Forced privatised launches (P2G and the G2P adjoint), then the atomic / one-thread
    code: the reference's values and gradients, each other's within float tolerance."""
    n = 3000
    out = {}
    for force in (True, False):
        private = _cpu_no_debug(monkeypatch, force)
        out[force] = _check(_pipeline(n, grid_kind), n, seed=3)
        assert (private.launches > 0) == force, private.launches
        assert all(not row.any() for row in private.rows)  # the copies are zero again
    assert out[True][0] == pytest.approx(out[False][0], rel=1e-6)
    np.testing.assert_allclose(out[True][1], out[False][1], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("force", [True, False])
def test_cpu_scatter_into_a_0d_ndarray(monkeypatch, force):
    """A 0-d ndarray target (`f[None] += b[i]`, and its gradient read by the adjoint) has no
    extents in the argument buffer; the slab evaluation takes its shape as (). Taichi's
    test_ad_ndarray::test_ad_fibonacci_index: a[q] for the Fibonacci numbers q, N times."""
    private = _cpu_no_debug(monkeypatch, force)
    n, m = 5, 10
    a = sd.ndarray(sd.f32, shape=m, needs_grad=True)
    b = sd.ndarray(sd.f32, shape=m, needs_grad=True)
    f = sd.ndarray(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def fib(a: sd.types.ndarray(), b: sd.types.ndarray(), f: sd.types.ndarray()):
        for i in range(n):
            p = 0
            q = 1
            for j in range(5):
                p, q = q, p + q
                b[q] += a[q]
        for i in range(m):
            f[None] += b[i]

    f.grad[None] = 1
    a.fill(1)
    fib(a, b, f)
    fib.grad(a, b, f)
    want = n * np.isin(np.arange(m), [1, 2, 3, 5, 8])
    np.testing.assert_array_equal(b.to_numpy(), want)
    np.testing.assert_array_equal(a.grad.to_numpy(), want)
    assert f[None] == want.sum()
    assert (private.launches > 0) == force, private.launches


def test_cpu_privatised_by_the_estimate(monkeypatch):
    """Without forcing: a scatter heavy enough is privatised by the estimate alone, and the
    copies of a large slab are merged in parallel pieces."""
    from spirad.backends import private_scatter
    monkeypatch.setattr(private_scatter, "MERGE_SPLIT_BYTES", 1024)
    private = _cpu_no_debug(monkeypatch, None)
    n, rows = 200_000, 3
    idx = sd.field(sd.i32, shape=n)
    w = sd.field(sd.f32, shape=n)
    h = sd.field(sd.f32, shape=(rows, 4096))

    @sd.kernel
    def hist(r: sd.i32):
        for i in range(n):
            for k in sd.static(range(4)):
                h[r, (idx[i] + 97 * k) % 4096] += w[i] * (k + 1)

    rng = np.random.default_rng(4)
    idxs, ws = rng.integers(0, 4096, n), rng.uniform(0, 1, n)
    idx.from_numpy(idxs.astype(np.int32))
    w.from_numpy(ws.astype(np.float32))
    hist(1)
    assert private.launches == 1
    want = np.zeros((rows, 4096))
    for k in range(4):
        np.add.at(want[1], (idxs + 97 * k) % 4096, ws * (k + 1))
    np.testing.assert_allclose(h.to_numpy(), want, rtol=1e-4, atol=1e-3)


def test_cpu_slab_read_or_ndarray_passed_twice_is_not_privatised(monkeypatch):
    """A launch whose read names the added slab (a == b below), and an ndarray passed for the
    added array and the read one, run the usual way; another launch of the same kernel is
    privatised."""
    private = _cpu_no_debug(monkeypatch, True)
    n = 512
    q = sd.field(sd.f32, shape=(3, n))
    nb = sd.field(sd.i32, shape=n)

    @sd.kernel
    def move(a: sd.i32, b: sd.i32):
        for i in range(n):
            q[a, nb[i]] += q[b, i]

    @sd.kernel
    def gather(src: sd.types.ndarray(), dst: sd.types.ndarray()):
        for i in range(n):
            dst[nb[i]] += src[i]

    nb.from_numpy(np.random.default_rng(5).integers(0, n, n).astype(np.int32))
    move(0, 0)
    assert private.launches == 0
    move(0, 1)
    assert private.launches == 1
    arr = sd.ndarray(sd.f32, n)
    gather(arr, arr)
    assert private.launches == 1
    other = sd.ndarray(sd.f32, n)
    gather(arr, other)
    assert private.launches == 2


def test_scatter_slabs_refuses():
    """What copies would change keeps the usual path: an add whose old value is used, another
    atomic (max) on a shared array, a read of the array with no uniform leading index."""
    from spirad.backends.private_scatter import scatter_slabs
    sd.init(arch=sd.cpu, offline_cache=False)
    n = 64
    g = sd.field(sd.f32, shape=(2, n))
    nb = sd.field(sd.i32, shape=n)
    out = sd.field(sd.f32, shape=n)

    @sd.kernel
    def used(f: sd.i32):
        for i in range(n):
            out[i] = sd.atomic_add(g[f, nb[i]], 1.0)

    @sd.kernel
    def maxed(f: sd.i32):
        for i in range(n):
            sd.atomic_max(g[f, nb[i]], 1.0)

    @sd.kernel
    def read_any(f: sd.i32):
        for i in range(n):
            g[f, nb[i]] += g[nb[i] % 2, i]

    @sd.kernel
    def fine(f: sd.i32):
        for i in range(n):
            g[f, nb[i]] += g[f + 1, i]

    for k in (used, maxed, read_any, fine):
        k(0)
    tasks = {k.fn.__name__: k._plans[0].compiled.tl.tasks[0]
             for k in (used, maxed, read_any, fine)}
    assert {name: scatter_slabs(t) is not None for name, t in tasks.items()} == {
        "used": False, "maxed": False, "read_any": False, "fine": True}
    (prefix, others), = scatter_slabs(tasks["fine"]).values()
    assert len(prefix) == 1 and len(others) == 1


def _relax(ny, nx, steps):
    """smoke_taichi's pressure iterations: row a + 1 from row a's wrapped neighbours (an inner
    serial loop whose neighbour indices are locals set under `if`, with a `%` in the branch,
    which forward_stores does not copy out of it: adstacks in the adjoint, which adds into row
    a's neighbours), then a weighted sum into the loss. (smoke_taichi's own `if` branches assign
    constants: its indices become selects, recomputed without stacks.)"""
    p = sd.field(sd.f32, shape=(steps + 1, ny, nx), needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.func
    def dec(i, n: sd.template()):
        j = i - 1
        if j < 0:
            j = (j + n) % n
        return j

    @sd.func
    def inc(i, n: sd.template()):
        j = i + 1
        if j >= n:
            j = j % n
        return j

    @sd.kernel
    def relax(a: sd.i32):
        for y in range(ny):
            for x in range(nx):
                p[a + 1, y, x] = 0.3 * p[a, y, x] + 0.2 * p[a, dec(y, ny), x] + \
                    0.2 * p[a, inc(y, ny), x] + 0.15 * p[a, y, dec(x, nx)] + \
                    0.15 * sd.sin(p[a, y, inc(x, nx)])

    @sd.kernel
    def total():
        for y, x in sd.ndrange(ny, nx):
            loss[None] += p[steps, y, x] * (1.0 + 0.01 * x - 0.02 * y)

    def run(p0):
        p.from_numpy(np.concatenate([p0[None], np.zeros((steps, ny, nx))]).astype(np.float32))
        loss[None] = 0.0
        with sd.ad.Tape(loss):
            for a in range(steps):
                relax(a)
            total()
        return loss[None], p.grad.to_numpy()[0].astype(np.float64), relax

    return run


def _relax_reference(p0, steps):
    q = p0.astype(np.float64)
    for _ in range(steps):
        q = 0.3 * q + 0.2 * np.roll(q, 1, 0) + 0.2 * np.roll(q, -1, 0) + \
            0.15 * np.roll(q, 1, 1) + 0.15 * np.sin(np.roll(q, -1, 1))
    ny, nx = q.shape
    return (q * (1.0 + 0.01 * np.arange(nx)[None] - 0.02 * np.arange(ny)[:, None])).sum()


def _relax_check(ny, nx, steps, seed):
    p0 = np.random.default_rng(seed).uniform(-1, 1, (ny, nx))
    loss, grad, relax = _relax(ny, nx, steps)(p0)
    assert loss == pytest.approx(_relax_reference(p0, steps), rel=1e-5, abs=1e-4)
    h = 1e-5
    for y, x in ((0, 0), (ny - 1, 3), (ny // 2, nx - 1)):
        a, b = p0.copy(), p0.copy()
        a[y, x] += h
        b[y, x] -= h
        fd = (_relax_reference(a, steps) - _relax_reference(b, steps)) / (2 * h)
        assert grad[y, x] == pytest.approx(fd, rel=2e-3, abs=1e-4), (y, x)
    return loss, grad, relax


@test_archs()
def test_neighbour_adds_in_adjoints_with_adstacks(arch):
    _relax_check(12, 16, 3, seed=6)


@pytest.mark.parametrize("force", [True, False])
def test_cpu_privatised_adjoint_with_adstacks(monkeypatch, force):
    """The adjoint's adds into row a's neighbours run privatised (forced) or in the own /
    one-thread code: the float64 reference's gradients either way, each worker on its own
    adstack heap rows."""
    private = _cpu_no_debug(monkeypatch, force)
    _, grad, relax = _relax_check(64, 48, 3, seed=7)
    assert relax._plans[1].compiled.program.stacks[0]  # the adjoint task has adstacks
    assert (private.launches > 0) == force
