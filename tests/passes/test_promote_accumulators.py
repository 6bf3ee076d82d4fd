"""`x[i] += v` inside a serial loop of a task (passes/promote_accumulators): summed in a local and
added once after the loop. Same results (and gradients) as the per-trip atomics, on every arch;
not applied where the loop reads or stores the global, or uses an atomic's old value."""
import numpy as np

import spirad as sd
from kernel_ir.nodes import walk
from kernel_ir.ops import Op
from passes.promote_accumulators import promote_accumulators
from tests.support.archs import test_archs

N = 24


def _pairwise(pos, force):
    @sd.kernel
    def k():
        for i in range(N):
            p = pos[i]
            for j in range(N):
                if i != j:
                    d = p - pos[j]
                    r = d.norm(1e-2)
                    force[i] += -(1.0 / r) ** 3 * d
    return k


def _reference(p):
    d = p[:, None, :] - p[None, :, :]
    r = np.sqrt((d ** 2).sum(-1) + 1e-2)
    f = -(1 / r ** 3)[..., None] * d
    f[np.arange(N), np.arange(N)] = 0
    return f.sum(1)


@test_archs()
def test_pairwise_forces_and_gradient(arch):
    rng = np.random.default_rng(1)
    p0 = rng.random((N, 2)).astype(np.float32)
    pos = sd.Vector.field(2, sd.f32, shape=N, needs_grad=True)
    force = sd.Vector.field(2, sd.f32, shape=N, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    k = _pairwise(pos, force)

    @sd.kernel
    def energy():
        for i in range(N):
            loss[None] += force[i].x * 0.5 + force[i].y

    pos.from_numpy(p0)
    with sd.ad.Tape(loss):
        k()
        energy()
    np.testing.assert_allclose(force.to_numpy(), _reference(p0.astype(np.float64)), rtol=2e-4,
                               atol=2e-3)
    h, g = 1e-4, pos.grad.to_numpy()
    for i, c in ((0, 0), (5, 1)):  # central differences of the float64 reference
        a, b = p0.astype(np.float64).copy(), p0.astype(np.float64).copy()
        a[i, c] += h
        b[i, c] -= h
        fd = ((_reference(a) - _reference(b)) @ [0.5, 1.0]).sum() / (2 * h)
        assert abs(g[i, c] - fd) <= 2e-3 * max(1.0, abs(fd)), (i, c, g[i, c], fd)


def _atomics_in_loops(tl):
    n = 0
    for t in tl.tasks:
        for m in walk(t.body):
            if m.op == Op.RANGE_FOR:
                n += sum(x.op == Op.ATOMIC_ADD for x in walk(m.blocks[0]))
    return n


def test_pass_moves_atomics_out_of_loops_only_when_valid():
    sd.init(arch=sd.cpu)
    pos = sd.Vector.field(2, sd.f32, shape=N)
    force = sd.Vector.field(2, sd.f32, shape=N)
    k = _pairwise(pos, force)
    k()
    tl = next(iter(k._cache.values())).tl
    assert _atomics_in_loops(tl) == 2 and _atomics_in_loops(promote_accumulators(tl)) == 0

    s = sd.field(sd.f32, shape=N)

    @sd.kernel
    def reads_back():
        for i in range(N):
            for j in range(3):
                s[i] += s[(i + 1) % N] * 0.5  # the loop reads s: not promoted

    reads_back()
    tl = next(iter(reads_back._cache.values())).tl
    assert _atomics_in_loops(promote_accumulators(tl)) == _atomics_in_loops(tl) == 1
