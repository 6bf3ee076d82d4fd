"""Run-time indices into local matrices touch only the components they can name
(`frontend/local_index.py`): rows, columns and views of views against numpy, the gradient
through a row-indexed matrix against float64 finite differences, and the size of the IR (a row
write into an 8x3 matrix is 24 selects, not 72)."""
import numpy as np

import spirad as sd
from kernel_ir.nodes import walk
from kernel_ir.ops import Op
from spirad.frontend.transformer import compile_kernel
from spirad.runtime import state as _state
from tests.support.archs import exactly, test_archs

ROWS = [3, 0, 5, 2, 7, 1]
COLS = [2, 0, 1, 1, 0, 2]


def _want():
    out = np.zeros((6, 8, 3))
    probe = np.zeros((6, 4))
    for k, (i, j) in enumerate(zip(ROWS, COLS)):
        m = np.arange(24.0).reshape(8, 3)
        m[i, :] = [-1.0, -2.0, -3.0]           # a row write
        m[(i + 1) % 8, j] += 10.0              # one component, both indices at run time
        m[:, j] *= 2.0                         # a column, in place
        probe[k] = [m[i, j], m[(i + 2) % 8, :][j], m[:, j][i], m[i, :].sum()]
        out[k] = m
    return out, probe


@test_archs()
def test_rows_columns_and_views_of_views(arch):
    idx = sd.field(sd.i32, shape=(6, 2))
    idx.from_numpy(np.array([ROWS, COLS], np.int32).T.copy())
    out = sd.Matrix.field(8, 3, sd.f32, shape=6)
    probe = sd.field(sd.f32, shape=(6, 4))

    @sd.kernel
    def k():
        for t in range(6):
            m = sd.Matrix([[3.0 * r + c for c in sd.static(range(3))]
                           for r in sd.static(range(8))])
            i = idx[t, 0]
            j = idx[t, 1]
            m[i, :] = sd.Vector([-1.0, -2.0, -3.0])
            m[(i + 1) % 8, j] += 10.0
            m[:, j] *= 2.0
            probe[t, 0] = m[i, j]
            probe[t, 1] = m[(i + 2) % 8, :][j]
            probe[t, 2] = m[:, j][i]
            probe[t, 3] = m[i, :].sum()
            out[t] = m

    k()
    want, want_probe = _want()
    np.testing.assert_allclose(out.to_numpy(), want)
    np.testing.assert_allclose(probe.to_numpy(), want_probe)


@test_archs()
def test_gradient_through_a_row_indexed_matrix(arch):
    """A row written and read at run-time indices (Genesis' `polygons[i] = v`): the adjoint
    reaches exactly the components the forward pass read, as float64 differences say."""
    x = sd.field(sd.f32, shape=6, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    sel = sd.field(sd.i32, shape=4)
    data = np.array([0.5, -1.0, 2.0, 0.25, 1.5, -0.75], np.float32)
    x.from_numpy(data)
    sel.from_numpy(np.array([2, 0, 3, 1], np.int32))

    @sd.kernel
    def k():
        for t in range(4):
            m = sd.Matrix([[x[0], x[1]], [x[2], x[3]], [x[4], x[5]], [x[1], x[4]]])
            r = sel[t]
            m[r, :] = m[(r + 1) % 4, :] * m[t, 0]
            loss[None] += m[r, 1] * m[(r + 3) % 4, 0] + m[t, :].sum()

    with sd.ad.Tape(loss=loss):
        k()

    def f(xs):
        tot = 0.0
        for t, r in enumerate([2, 0, 3, 1]):
            m = np.array([[xs[0], xs[1]], [xs[2], xs[3]], [xs[4], xs[5]], [xs[1], xs[4]]])
            m[r, :] = m[(r + 1) % 4, :] * m[t, 0]
            tot += m[r, 1] * m[(r + 3) % 4, 0] + m[t, :].sum()
        return tot
    d = data.astype(np.float64)
    num = []
    for j in range(6):
        e = np.zeros(6)
        e[j] = 1e-6
        num.append((f(d + e) - f(d - e)) / 2e-6)
    assert abs(loss[None] - f(d)) < 1e-5 * max(1, abs(f(d)))
    np.testing.assert_allclose(x.grad.to_numpy(), num, rtol=1e-4, atol=1e-5)


@test_archs(exactly("cpu"))
def test_a_row_access_selects_only_among_its_column(arch):
    """`m[i, :] = v` on an 8x3 local: each of the 3 components may be one of 8 positions, so
    24 compare / select / store triples (one per component of the matrix), not 3 x 24; reading
    `m[i, 2]` is a chain over the 8 positions of column 2 (7 selects), not over all 24."""
    out = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k(i: sd.i32):
        for t in range(4):
            m = sd.Matrix.zero(sd.f32, 8, 3)
            m[i, :] = sd.Vector([1.0, 2.0, 3.0])
            out[t] = m[i + t, 2]

    st = _state.current()
    _, specs = k._signature((1,), st)
    ops = [n.op for n in walk(compile_kernel(k, specs, st).body)]
    assert ops.count(Op.SELECT) == 24 + 7
    k(1)
    np.testing.assert_allclose(out.to_numpy(), [3.0, 0.0, 0.0, 0.0])
