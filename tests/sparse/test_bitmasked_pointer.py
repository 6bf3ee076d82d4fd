"""bitmasked and pointer SNodes against a numpy model: which cells are active (a boolean array
over the node's cells), what struct-for visits, what inactive cells read, and what
deactivation clears (spirad.data.sparse_layout)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


def _visit_counter(x):
    """A field `count` and a kernel `visit` whose struct-for over x's active cells counts its
    visits into it."""
    count = sd.field(sd.i32, shape=())

    @sd.kernel
    def visit():
        for i in x:
            count[None] += 1
    return count, visit


def _model_cells(written, block):
    """The active cells of a node whose cells span `block` indices, after writes at `written`."""
    return sorted({w // block for w in written})


@test_archs()
def test_bitmasked_dense_struct_for_visits_active_blocks(arch):
    n, block = 32, 8
    rng = np.random.default_rng(1)
    written = sorted(set(rng.integers(0, n * block, 11).tolist()))
    x = sd.field(sd.i32)
    bm = sd.root.bitmasked(sd.i, n)
    bm.dense(sd.i, block).place(x)
    hits = sd.field(sd.i32, shape=n * block)
    active = sd.field(sd.i32, shape=n)

    idx = sd.field(sd.i32, shape=len(written))
    idx.from_numpy(np.array(written, dtype=np.int32))

    @sd.kernel
    def write():
        for k in idx:
            x[idx[k]] = idx[k] + 1

    @sd.kernel
    def visit():
        for i in x:
            hits[i] += 1 + x[i] * 0
        for c in range(n):
            active[c] = sd.is_active(bm, [c])

    write()
    visit()
    cells = _model_cells(written, block)
    want_hits = np.zeros(n * block, np.int32)
    for c in cells:
        want_hits[c * block:(c + 1) * block] = 1
    np.testing.assert_array_equal(hits.to_numpy(), want_hits)
    want_active = np.zeros(n, np.int32)
    want_active[cells] = 1
    np.testing.assert_array_equal(active.to_numpy(), want_active)
    want_x = np.zeros(n * block, np.int32)
    want_x[written] = np.array(written) + 1
    np.testing.assert_array_equal(x.to_numpy(), want_x)


@test_archs()
def test_nested_bitmasked_2d_sum_and_count(arch):
    x = sd.field(sd.f32)
    bm = sd.root.bitmasked(sd.ij, (3, 6)).bitmasked(sd.i, 8)
    bm.place(x)
    count, total = sd.field(sd.i32, shape=()), sd.field(sd.f32, shape=())
    pts = {(5, 1): 2.0, (9, 4): 20.0, (0, 3): 0.5, (23, 5): 1.25}

    @sd.kernel
    def reduce():
        for i, j in x:
            count[None] += sd.is_active(bm, [i, j])
            total[None] += x[i, j]

    for (i, j), val in pts.items():
        x[i, j] = val  # a host write activates too
    reduce()
    assert count[None] == len(pts)
    assert total[None] == pytest.approx(sum(pts.values()))
    model = np.zeros((24, 6), np.float32)
    for k, val in pts.items():
        model[k] = val
    np.testing.assert_array_equal(x.to_numpy(), model)


@test_archs()
def test_deactivate_zeroes_block_and_struct_for_skips_it(arch):
    n, block = 8, 4
    x = sd.field(sd.f32)
    bm = sd.root.bitmasked(sd.i, n)
    bm.dense(sd.i, block).place(x)
    count, visit = _visit_counter(x)

    @sd.kernel
    def fill():
        for i in range(n * block):
            x[i] = i + 1.0

    @sd.kernel
    def drop_odd():
        for c in bm:
            if c % 2 == 1:
                sd.deactivate(bm, [c])

    fill()
    drop_odd()
    visit()
    model = np.arange(1, n * block + 1, dtype=np.float32)
    for c in range(1, n, 2):
        model[c * block:(c + 1) * block] = 0
    np.testing.assert_array_equal(x.to_numpy(), model)
    assert count[None] == (n // 2) * block
    sd.root.deactivate_all()
    count[None] = 0
    visit()
    assert count[None] == 0
    assert not x.to_numpy().any()


@test_archs()
def test_pointer_activate_rescale_and_reactivation_reads_zero(arch):
    n = 16
    x = sd.field(sd.f32)
    ptr = sd.root.pointer(sd.i, n)
    ptr.dense(sd.i, n).place(x)
    count, visit = _visit_counter(x)

    @sd.kernel
    def activate():
        sd.activate(ptr, sd.rescale_index(x, ptr, [1]))
        sd.activate(ptr, sd.rescale_index(x, ptr, [40]))

    @sd.kernel
    def fill():
        for i in range(n * n):
            x[i] = 1.0

    @sd.kernel
    def clear():
        for c in ptr:
            sd.deactivate(ptr, c)

    @sd.kernel
    def set10():
        x[10] = 10.0

    activate()
    visit()
    assert count[None] == 2 * n
    assert sd.rescale_index(x, ptr, [40]) == [2]
    fill()
    clear()
    set10()
    model = np.zeros(n * n, np.float32)
    model[10] = 10.0
    np.testing.assert_array_equal(x.to_numpy(), model)
    count[None] = 0
    visit()
    assert count[None] == n


@test_archs()
def test_vector_field_under_bitmasked_and_parent(arch):
    v = sd.Vector.field(3, sd.f32)
    blk = sd.root.dense(sd.i, 4).bitmasked(sd.j, 5)
    blk.place(v)
    seen = sd.field(sd.i32, shape=(4, 5))

    @sd.kernel
    def write():
        v[1, 2] = sd.Vector([1.0, 2.0, 3.0])
        v[3, 0][1] = 7.0

    @sd.kernel
    def visit():
        for i, j in v:
            seen[i, j] = 1 + sd.is_active(v.parent(), [i, j])

    write()
    visit()
    want = np.zeros((4, 5), np.int32)
    want[1, 2] = want[3, 0] = 2
    np.testing.assert_array_equal(seen.to_numpy(), want)
    assert v.parent() is blk and v.snode.parent() is blk
    got = v.to_numpy()
    assert got[1, 2].tolist() == [1.0, 2.0, 3.0] and got[3, 0].tolist() == [0.0, 7.0, 0.0]


@test_archs()
def test_gradient_through_bitmasked_matches_finite_differences(arch):
    n = 12
    x = sd.field(sd.f32, needs_grad=True)
    sd.root.bitmasked(sd.i, n).place(x)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def compute():
        for i in x:
            loss[None] += sd.sin(x[i]) * x[i]

    vals = {1: 0.3, 4: -1.2, 7: 0.8, 11: 2.0}
    for i, val in vals.items():
        x[i] = val
    with sd.ad.Tape(loss=loss):
        compute()
    g = x.grad.to_numpy()

    def f(d):
        return sum(np.sin(val + d.get(i, 0.0)) * (val + d.get(i, 0.0)) for i, val in vals.items())
    eps = 1e-3
    for i in range(n):
        if i in vals:
            fd = (f({i: eps}) - f({i: -eps})) / (2 * eps)
            assert g[i] == pytest.approx(fd, rel=1e-2, abs=1e-3)
        else:
            assert g[i] == 0.0  # an inactive cell is not visited: no gradient


def test_refusals_and_errors():
    sd.init(arch=sd.cpu)
    x = sd.field(sd.f32)
    dense = sd.root.dense(sd.i, 4)
    dense.place(x)

    @sd.kernel
    def bad():
        sd.deactivate(dense, [0])

    with pytest.raises(sd.SpiradTypeError, match="sparse node") as e:
        bad()
    assert "sd.deactivate(dense, [0])" in str(e.value)
    y = sd.field(sd.f32)
    bm = sd.root.bitmasked(sd.ij, 4)
    bm.place(y)

    @sd.kernel
    def wrong_rank() -> sd.i32:
        return sd.is_active(bm, [0])

    with pytest.raises(sd.SpiradTypeError, match="2 axes, got 1 indices"):
        wrong_rank()
    with pytest.raises(sd.SpiradNotSupportedError, match="densely"):
        sd.root.pointer(sd.ijk, 2048).dense(sd.ijk, 8).place(sd.field(sd.f32))
    with pytest.raises(sd.SpiradSyntaxError, match="inside a kernel"):
        sd.is_active(bm, [0, 0])


@test_archs()
def test_host_fill_active_only_and_from_numpy_activates(arch):
    x = sd.field(sd.f32)
    bm = sd.root.bitmasked(sd.i, 4)
    bm.dense(sd.i, 2).place(x)
    count, visit = _visit_counter(x)

    x[3] = 1.0  # cell 1 active
    x.fill(5.0)  # Taichi's fill is a struct-for: the active elements only
    np.testing.assert_array_equal(x.to_numpy(), [0, 0, 5, 5, 0, 0, 0, 0])
    x.from_numpy(np.arange(8, dtype=np.float32))  # writes every element: all cells active
    visit()
    assert count[None] == 8
    bm.deactivate_all()
    assert not x.to_numpy().any()


@test_archs()
def test_rescale_index_follows_taichis_shape_rule(arch):
    """Taichi's rule: index d divided by a's size over b's where a is finer, multiplied where
    it is coarser; the positions past either's dimensions stay (a particle list below a
    pointer grid: a 2-index of the grid maps to the 3-index space of the lists and back)."""
    grid = sd.field(sd.i32)
    pid = sd.field(sd.i32)
    blk = sd.root.pointer(sd.ij, 4)
    blk.dense(sd.ij, 8).place(grid)
    blk.dynamic(sd.k, 16).place(pid)
    out = sd.field(sd.i32, shape=(2, 3))

    @sd.kernel
    def k():
        a = sd.rescale_index(grid, pid, [13, 30])          # grid (32, 32) -> lists (4, 4, 16)
        b = sd.rescale_index(pid, grid, sd.Vector([3, 1, 9]))  # back: x8 on i, j; k kept
        for d in sd.static(range(2)):
            out[0, d] = a[d]
        for d in sd.static(range(3)):
            out[1, d] = b[d]

    k()
    assert out.to_numpy().tolist() == [[1, 3, 0], [24, 8, 9]]
    assert sd.rescale_index(grid, pid, [13, 30]) == [1, 3]
    assert sd.rescale_index(pid, grid, [3, 1, 9]) == [24, 8, 9]
