"""A struct-for over a sparse node visits exactly the cells active when the loop starts (Taichi
lists them first): cells its body activates under that node are not visited, cells its body
deactivates still are (reading 0), appends to a dynamic list it iterates are not visited; on
nested levels, in a gradient kernel and in a replayed launch graph alike. Every case is checked
against a numpy model of the launch-time cells; on a loop that read the masks while it ran, the
result would depend on the order of the iterations (frontend/sparse_ops.py)."""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradSyntaxError
from tests.support.archs import EVERY_ARCH, exactly, test_archs

N = 64


def _start_cells(seed, n=N, k=12):
    return sorted(set(np.random.default_rng(seed).integers(0, n, k).tolist()))


def _check_spread(x, y, hits, spread, cells, step, active_of):
    for c in cells:
        x[c] = 10 * c + 1
    spread()
    want_hits = np.zeros(N, np.int32)
    want_hits[cells] = 1
    np.testing.assert_array_equal(hits.to_numpy(), want_hits)
    want_y = np.zeros(N, np.int32)
    for c in cells:
        if 0 <= c + step < N:
            want_y[c + step] = 10 * c + 2
    np.testing.assert_array_equal(y.to_numpy(), want_y)
    want_active = np.zeros(N, bool)
    want_active[cells] = True
    want_active[[c + step for c in cells if 0 <= c + step < N]] = True
    np.testing.assert_array_equal(active_of(), want_active)


def _spread_program(x, y, step, cell_active):
    """The spreading program over x's cells: `spread` counts each visit in `hits` and writes y one
    `step` away (activating that cell); `active_of()` is `cell_active(i)` (an @sd.func over the
    layout's levels) for every cell, as a numpy bool array."""
    hits = sd.field(sd.i32, shape=N)
    act = sd.field(sd.i32, shape=N)

    @sd.kernel
    def spread():
        for i in x:
            hits[i] += 1
            if 0 <= i + step < N:
                y[i + step] = x[i] + 1

    @sd.kernel
    def activity():
        for i in range(N):
            act[i] = cell_active(i)

    def active_of():
        activity()
        return act.to_numpy() != 0

    return hits, spread, active_of


def _leaf_program(kind, step):
    x, y = sd.field(sd.i32), sd.field(sd.i32)
    node = getattr(sd.root, kind)(sd.i, N)
    node.place(x, y)

    @sd.func
    def cell_active(i):
        return sd.is_active(node, [i])

    return (x, y) + _spread_program(x, y, step, cell_active)


@pytest.mark.parametrize("kind", ["bitmasked", "pointer"])
@pytest.mark.parametrize("step", [1, -1, 5, -7])
@test_archs()
def test_cells_the_body_activates_are_not_visited(arch, kind, step):
    x, y, hits, spread, active_of = _leaf_program(kind, step)
    _check_spread(x, y, hits, spread, _start_cells(abs(step)), step, active_of)


@test_archs(exactly("interp") | EVERY_ARCH)  # the IR interpreter too
def test_a_chain_does_not_run_ahead_either_way(arch):
    """Every active cell activates both neighbours: whatever the order, a loop reading the masks
    while it ran would visit some of them."""
    x = sd.field(sd.i32)
    node = sd.root.bitmasked(sd.i, N)
    node.place(x)
    hits = sd.field(sd.i32, shape=N)

    @sd.kernel
    def grow():
        for i in x:
            hits[i] += 1
            if i + 1 < N:
                x[i + 1] += 1
            if i >= 1:
                x[i - 1] += 1

    cells = [3, 20, 21, 40, 63]
    for c in cells:
        x[c] = 100
    grow()
    want_hits = np.zeros(N, np.int32)
    want_hits[cells] = 1
    np.testing.assert_array_equal(hits.to_numpy(), want_hits)
    want_x = np.zeros(N, np.int32)
    want_x[cells] = 100
    for c in cells:
        for d in (c - 1, c + 1):
            if 0 <= d < N:
                want_x[d] += 1
    np.testing.assert_array_equal(x.to_numpy(), want_x)


@test_archs()
def test_cells_the_body_deactivates_are_still_visited(arch):
    x = sd.field(sd.i32)
    node = sd.root.bitmasked(sd.i, N)
    node.place(x)
    hits = sd.field(sd.i32, shape=N)
    act = sd.field(sd.i32, shape=N)

    @sd.kernel
    def thin():
        for i in x:
            hits[i] += 1
            if i % 2 == 0:
                sd.deactivate(node, [i + 1])  # the odd neighbour: visited all the same
            if i % 2 == 1 and i >= 1:
                sd.deactivate(node, [i - 1])  # and the even one, from the other side

    @sd.kernel
    def activity():
        for i in range(N):
            act[i] = sd.is_active(node, [i])

    cells = _start_cells(4, k=30)
    for c in cells:
        x[c] = c + 1
    thin()
    want_hits = np.zeros(N, np.int32)
    want_hits[cells] = 1
    np.testing.assert_array_equal(hits.to_numpy(), want_hits)
    gone = {c + 1 for c in cells if c % 2 == 0} | {c - 1 for c in cells if c % 2 == 1}
    activity()
    want_act = np.zeros(N, np.int32)
    want_act[[c for c in cells if c not in gone]] = 1
    np.testing.assert_array_equal(act.to_numpy(), want_act)


@test_archs()
def test_appends_to_the_iterated_list_are_not_visited(arch):
    rows, cap = 4, 64
    x = sd.field(sd.i32)
    lst = sd.root.dense(sd.i, rows).dynamic(sd.j, cap, chunk_size=8)
    lst.place(x)
    visits = sd.field(sd.i32, shape=rows)
    lens = sd.field(sd.i32, shape=rows)
    start = [3, 0, 7, 1]

    @sd.kernel
    def seed(a: sd.types.ndarray()):
        for i in range(rows):
            for k in range(a[i]):
                sd.append(lst, i, k + 1)

    @sd.kernel
    def grow():
        for i, j in x:
            visits[i] += 1
            sd.append(lst, i, 100 + j)

    @sd.kernel
    def lengths():
        for i in range(rows):
            lens[i] = sd.length(lst, i)

    a = sd.ndarray(sd.i32, rows)
    a.from_numpy(np.array(start, np.int32))
    seed(a)
    grow()
    lengths()
    np.testing.assert_array_equal(visits.to_numpy(), start)
    np.testing.assert_array_equal(lens.to_numpy(), 2 * np.array(start))
    got = x.to_numpy()
    for i, s in enumerate(start):
        np.testing.assert_array_equal(got[i, :s], np.arange(1, s + 1))
        assert sorted(got[i, s:2 * s].tolist()) == [100 + j for j in range(s)]


@pytest.mark.parametrize("step", [1, -1, 4, -4])
@test_archs()
def test_nested_levels_pointer_of_bitmasked(arch, step):
    """Both levels at launch: a write into a block whose pointer cell is inactive activates
    both, a write beside an active cell activates the bitmasked cell only."""
    x, y = sd.field(sd.i32), sd.field(sd.i32)
    outer = sd.root.pointer(sd.i, N // 4)
    inner = outer.bitmasked(sd.i, 4)
    inner.place(x, y)

    @sd.func
    def cell_active(i):
        return sd.is_active(outer, [i // 4]) * sd.is_active(inner, [i])

    hits, spread, active_of = _spread_program(x, y, step, cell_active)
    _check_spread(x, y, hits, spread, _start_cells(7 + step), step, active_of)


@test_archs()
def test_dense_under_pointer_blocks_activated_are_not_visited(arch):
    """Taichi's test_bls scatter shape: the body writes the neighbouring elements, some in
    blocks that were inactive."""
    x, y = sd.field(sd.i32), sd.field(sd.i32)
    block = sd.root.pointer(sd.ij, (4, 4))
    block.dense(sd.ij, (4, 4)).place(x)
    block.dense(sd.ij, (4, 4)).place(y)
    hits = sd.field(sd.i32, shape=(16, 16))

    @sd.kernel
    def scatter():
        for i, j in x:
            hits[i, j] += 1
            for d in sd.static([(0, 0), (0, -1), (0, 1), (1, 0), (-1, 0)]):
                if 0 <= i + d[0] < 16 and 0 <= j + d[1] < 16:
                    y[i + d[0], j + d[1]] += x[i, j]

    xs = np.zeros((16, 16), np.int32)
    xs[4:8, 4:8] = np.arange(16).reshape(4, 4) + 1  # block (1, 1) only
    for (i, j), v in np.ndenumerate(xs):
        if v:
            x[i, j] = int(v)
    scatter()
    want_hits = np.zeros((16, 16), np.int32)
    want_hits[4:8, 4:8] = 1  # the whole block (its inactive... none) visited once
    np.testing.assert_array_equal(hits.to_numpy(), want_hits)
    want_y = np.zeros((16, 16), np.int32)
    for (i, j), v in np.ndenumerate(xs):
        if v:
            for di, dj in [(0, 0), (0, -1), (0, 1), (1, 0), (-1, 0)]:
                want_y[i + di, j + dj] += v
    np.testing.assert_array_equal(y.to_numpy(), want_y)


@test_archs()
def test_gradient_of_a_loop_that_activates_its_own_cells_is_refused(arch):
    """The forward visits the launch-time cells only (b[i] = a[i] + c[i] on cell 0, which
    activates cell 1). A true gradient has c.grad[1] == 0; an adjoint over the live masks (cells
    0 and 1, Taichi's) would give 1 there. Reverse mode refuses the kernel at its loop instead;
    the forward alone runs, and activating in a kernel of its own is differentiated exactly."""
    a = sd.field(sd.f32, needs_grad=True)
    blk = sd.root.bitmasked(sd.i, N)
    blk.place(a, a.grad)
    b = sd.field(sd.f32, shape=N, needs_grad=True)
    c = sd.field(sd.f32, shape=N, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def forward():
        for i in a:
            b[i] = a[i] + c[i]
            if i + 1 < N:
                sd.activate(blk, [i + 1])

    @sd.kernel
    def activate(k: sd.i32):
        sd.activate(blk, [k])

    @sd.kernel
    def plain():
        for i in a:
            b[i] = a[i] + c[i]

    @sd.kernel
    def total():
        for i in b:
            loss[None] += b[i]

    a[0] = 1.0
    forward()  # forward only: fine
    assert b.to_numpy()[:2].tolist() == [1.0, 0.0]
    with pytest.raises(sd.SpiradAutodiffError, match="activates or deactivates cells") as e:
        with sd.ad.Tape(loss=loss):
            forward()
            total()
    assert "for i in a:" in str(e.value)
    b.fill(0)
    c.grad.fill(0)
    activate(3)  # cells 0 to 3 active (the two forwards activated 1 and 2) before the loop
    with sd.ad.Tape(loss=loss):
        plain()
        total()
    np.testing.assert_allclose(c.grad.to_numpy()[:5], [1.0, 1.0, 1.0, 1.0, 0.0])
    np.testing.assert_allclose(a.grad.to_numpy()[:5], [1.0, 1.0, 1.0, 1.0, 0.0])


@test_archs()
def test_two_loops_over_one_node_one_activating_is_refused_in_reverse_mode(arch):
    """A second loop over the node visits the first loop's new cells (active when it starts);
    the kernel runs forward, and its gradient is refused at the activating loop."""
    x = sd.field(sd.f32, needs_grad=True)
    y = sd.field(sd.f32)
    node = sd.root.bitmasked(sd.i, N)
    node.place(x, x.grad, y)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    hits = sd.field(sd.i32, shape=N)

    @sd.kernel
    def forward():
        for i in x:
            hits[i] += 1
            loss[None] += x[i] * x[i]
            if i + 1 < N:
                y[i + 1] = 1.0
        for i in x:
            hits[i] += 10
            loss[None] += 3.0 * x[i]

    cells = [0, 5, 6, 30]
    for c in cells:
        x[c] = 1.0
    forward()
    want_hits = np.zeros(N, np.int32)
    want_hits[cells] += 1
    second = sorted(set(cells) | {c + 1 for c in cells})
    want_hits[second] += 10
    np.testing.assert_array_equal(hits.to_numpy(), want_hits)
    with pytest.raises(sd.SpiradAutodiffError, match="activates or deactivates cells"):
        with sd.ad.Tape(loss=loss):
            forward()


@test_archs()
def test_launch_graph_replay_takes_the_snapshot_each_time(arch):
    x = sd.field(sd.i32)
    node = sd.root.bitmasked(sd.i, N)
    node.place(x)
    count = sd.field(sd.i32, shape=())

    @sd.kernel
    def step():
        for i in x:
            count[None] += 1
            if i + 1 < N:
                x[i + 1] = 1

    x[0] = 1
    g = sd.Graph()
    with g.capture():
        step()
    counts = [count[None]]
    for _ in range(4):
        g.replay()
        counts.append(count[None])
    # launch k visits cells 0 .. k (one more each time): 1, 3, 6, 10, 15
    assert counts == [1, 3, 6, 10, 15]


@test_archs()
def test_a_loop_that_writes_no_mask_reads_the_masks_directly(arch):
    """The snapshot is taken only where the body writes a mask of the iterated node (nothing to
    copy otherwise): the loop over x that writes a field of another node stays one task."""
    x = sd.field(sd.f32)
    sd.root.bitmasked(sd.i, N).place(x)
    other = sd.field(sd.f32)
    sd.root.bitmasked(sd.i, N).place(other)

    @sd.kernel
    def copy():
        for i in x:
            other[i] = x[i] * 2.0

    for c in (1, 9, 60):
        x[c] = float(c)
    copy()
    want = np.zeros(N, np.float32)
    want[[1, 9, 60]] = [2.0, 18.0, 120.0]
    np.testing.assert_array_equal(other.to_numpy(), want)


@test_archs()
def test_serial_struct_for_in_serial_code_takes_the_snapshot(arch):
    x = sd.field(sd.i32)
    node = sd.root.bitmasked(sd.i, N)
    node.place(x)
    count = sd.field(sd.i32, shape=())

    @sd.kernel
    def serial_step():
        sd.loop_config(serialize=True)
        for i in x:
            count[None] += 1
            if i + 1 < N:
                x[i + 1] = 1

    x[0] = 1
    serial_step()
    assert count[None] == 1
    serial_step()
    assert count[None] == 3


@test_archs()
def test_nested_struct_for_that_activates_its_own_node_is_refused(arch):
    """Taichi refuses every struct-for nested in another loop; spirad runs one serially in each
    thread, where no launch-time list exists: one whose body changes the node it iterates is a
    compile error at the loop, not a loop whose visits depend on the other threads."""
    x = sd.field(sd.i32)
    node = sd.root.bitmasked(sd.i, N)
    node.place(x)

    @sd.kernel
    def nested():
        for t in range(4):
            for i in x:
                x[(i + t) % N] = 1

    x[0] = 1
    with pytest.raises(SpiradSyntaxError, match="struct-for nested"):
        nested()


@test_archs()
def test_a_loop_over_a_node_inside_a_func_takes_the_snapshot_too(arch):
    """`for c in node` (the node's cells), written in an @sd.func called at the kernel's top
    level (still the kernel's outermost loop), activating through `sd.activate`."""
    x = sd.field(sd.i32)
    node = sd.root.pointer(sd.i, N // 4)
    node.dense(sd.i, 4).place(x)
    hits = sd.field(sd.i32, shape=N // 4)

    @sd.func
    def spread_cells():
        for c in node:
            hits[c] += 1
            if c + 1 < N // 4:
                sd.activate(node, [c + 1])

    @sd.kernel
    def spread():
        spread_cells()

    x[0] = 1
    x[21] = 1  # cells 0 and 5
    spread()
    want = np.zeros(N // 4, np.int32)
    want[[0, 5]] = 1
    np.testing.assert_array_equal(hits.to_numpy(), want)
    spread()  # now cells 0, 1, 5, 6 are active
    want[[0, 1, 5, 6]] += 1
    np.testing.assert_array_equal(hits.to_numpy(), want)
