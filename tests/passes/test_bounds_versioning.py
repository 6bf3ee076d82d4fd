"""passes/bounds_versioning: a loop's default bounds checks run once, before it, and only where
proven.

Every kernel here runs twice: with data in range (the versioned, unchecked copy runs and the
result matches numpy) and with data that makes one access leave its array (the guard fails, the
checked loop runs: the access is skipped and `SpiradOutOfBoundsError` raised at the sync, the
other elements written). A check dropped wrongly fails the second half: no error, or a write
outside the array. The loop shapes are those the pass's docstring argues about: `break`,
`continue`, `while`, locals reassigned in the loop, nested and triangular loops, negative and
large offsets, indices read from other arrays.
"""
from __future__ import annotations

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradOutOfBoundsError
from tests.support.archs import EVERY_ARCH, test_archs
from tests.support.driver_spy import cpu_compiles

ARCHS = EVERY_ARCH  # every arch: the checks are per backend


def _arr(values, dtype=sd.f32):
    a = sd.ndarray(dtype, shape=np.shape(values))
    a.from_numpy(np.asarray(values, dtype=np.float32 if dtype == sd.f32 else np.int32))
    return a


@sd.kernel
def batch(a: sd.types.ndarray(), b: sd.types.ndarray(), n: sd.i32):
    """Genesis' shape: a serial loop over rows, an inner loop over another array's batch axis."""
    B = b.shape[1]
    sd.loop_config(serialize=True)
    for i in range(n):
        for j in range(B):
            a[i, j] = b[i + 1, j] * 2.0 + b[0, j]


@test_archs(ARCHS)
def test_batched_rows_in_range_and_past_the_end(arch):
    sd.init(arch=arch)
    a = _arr(np.zeros((4, 3)))
    bv = np.arange(15, dtype=np.float32).reshape(5, 3)
    b = _arr(bv)
    batch(a, b, 4)
    sd.sync()
    np.testing.assert_array_equal(a.to_numpy(), bv[1:] * 2 + bv[0])
    a2 = _arr(np.zeros((5, 3)))
    batch(a2, b, 5)  # b[5, j] is past the end: skipped (read as 0) and reported
    with pytest.raises(SpiradOutOfBoundsError, match="kernel batch .*'b'"):
        sd.sync()
    want = np.vstack([bv[1:] * 2 + bv[0], bv[:1]])
    np.testing.assert_array_equal(a2.to_numpy(), want)


@sd.kernel
def shifted(a: sd.types.ndarray(), n: sd.i32, lo: sd.i32):
    sd.loop_config(serialize=True)
    for i in range(lo, n):
        a[i - 1] += 1.0          # lo = 0: a[-1]
        if i == 100:
            break
        if i % 2 == 1:
            continue
        a[i + 1] += 10.0         # n = len(a): a[len] at the last even i


@test_archs(ARCHS)
def test_negative_and_positive_offsets_with_break_and_continue(arch):
    sd.init(arch=arch)
    a = _arr(np.zeros(6))
    shifted(a, 5, 1)
    sd.sync()
    want = np.zeros(6)
    for i in range(1, 5):
        want[i - 1] += 1
        if i % 2 == 0:
            want[i + 1] += 10
    np.testing.assert_array_equal(a.to_numpy(), want)
    for n, lo in ((5, 0), (5, 1)):   # a[-1]; a[5] at i = 4
        a = _arr(np.zeros(5))
        shifted(a, n, lo)
        with pytest.raises(SpiradOutOfBoundsError, match="kernel shifted .*'a'"):
            sd.sync()


@sd.kernel
def reassigned(a: sd.types.ndarray(), n: sd.i32, step: sd.i32):
    sd.loop_config(serialize=True)
    for i in range(n):
        j = i
        k = 0
        while k < step:      # the index grows inside the loop: never hoisted
            j += 1
            k += 1
        a[j] = 1.0


@sd.kernel
def carried(a: sd.types.ndarray(), n: sd.i32):
    j = 0
    sd.loop_config(serialize=True)
    for i in range(n):
        a[j] += 1.0          # j is 0 before the loop, but stored in it: never hoisted
        j += 1


@test_archs(ARCHS)
def test_index_reassigned_in_the_loop_stays_checked(arch):
    sd.init(arch=arch)
    a = _arr(np.zeros(4))
    reassigned(a, 3, 1)
    sd.sync()
    np.testing.assert_array_equal(a.to_numpy(), [0, 1, 1, 1])
    a = _arr(np.zeros(4))
    reassigned(a, 4, 1)  # a[4]
    with pytest.raises(SpiradOutOfBoundsError, match="kernel reassigned .*'a'"):
        sd.sync()
    np.testing.assert_array_equal(a.to_numpy(), [0, 1, 1, 1])
    a = _arr(np.zeros(4))
    carried(a, 3)
    sd.sync()
    np.testing.assert_array_equal(a.to_numpy(), [1, 1, 1, 0])
    carried(a, 6)  # a[4], a[5]
    with pytest.raises(SpiradOutOfBoundsError, match="kernel carried .*'a'"):
        sd.sync()
    np.testing.assert_array_equal(a.to_numpy(), [2, 2, 2, 1])


@sd.kernel
def hoisted(a: sd.types.ndarray(), idx: sd.types.ndarray(), n: sd.i32):
    sd.loop_config(serialize=True)
    for r in range(idx.shape[0]):
        base = idx[r]            # read from another array: loaded before the inner loop
        off = 1
        for i in range(n):
            a[base + 2, i] += 1.0
            if i == 1:
                off = base   # a local stored in the loop: its accesses stay checked
            a[off, i] += 100.0


@test_archs(ARCHS)
def test_indices_read_from_arrays_and_locals(arch):
    sd.init(arch=arch)
    a = _arr(np.zeros((5, 3)))
    hoisted(a, _arr([0, 2], sd.i32), 3)
    sd.sync()
    want = np.zeros((5, 3))
    for base in (0, 2):
        off = 1
        for i in range(3):
            want[base + 2, i] += 1
            if i == 1:
                off = base
            want[off, i] += 100
    np.testing.assert_array_equal(a.to_numpy(), want)
    for idx, n in (([0, 3], 3), ([-3, 0], 3), ([0, 1], 4)):
        a = _arr(np.zeros((5, 3)))
        hoisted(a, _arr(idx, sd.i32), n)
        with pytest.raises(SpiradOutOfBoundsError, match="kernel hoisted .*'a'"):
            sd.sync()
    a = _arr(np.zeros((5, 3)))
    hoisted(a, _arr([1, 7], sd.i32), 3)  # a[7 + 2] (guarded), then off = 7: a[7] (checked)
    with pytest.raises(SpiradOutOfBoundsError, match="kernel hoisted .*'a'"):
        sd.sync()


@sd.kernel
def triangle(a: sd.types.ndarray(), n: sd.i32, extra: sd.i32):
    for t in range(1):       # a parallel task; the loops below are versioned inside it
        for i in range(n):
            for j in range(i + extra):
                a[j] += 1.0


@test_archs(ARCHS)
def test_triangular_nest_in_a_parallel_task(arch):
    sd.init(arch=arch)
    a = _arr(np.zeros(5))
    triangle(a, 5, 1)
    sd.sync()
    np.testing.assert_array_equal(a.to_numpy(), [5, 4, 3, 2, 1])
    a = _arr(np.zeros(5))
    triangle(a, 5, 2)  # j reaches 5
    # (the CPU names no array here: its add goes to a privatised copy, as on main)
    with pytest.raises(SpiradOutOfBoundsError, match="kernel triangle "):
        sd.sync()
    np.testing.assert_array_equal(a.to_numpy(), [5, 5, 4, 3, 2])


@test_archs(ARCHS)
def test_fields_and_far_constant_offsets(arch):
    sd.init(arch=arch)
    f = sd.field(sd.f32, shape=(3, 4), name="f")

    @sd.kernel
    def fill(n: sd.i32):
        sd.loop_config(serialize=True)
        for i in range(n):
            for j in range(4):
                f[2, j] += 1.0
                f[i, j] += 1.0

    fill(3)
    sd.sync()
    want = np.ones((3, 4))
    want[2] += 3
    np.testing.assert_array_equal(f.to_numpy(), want)
    fill(4)
    with pytest.raises(SpiradOutOfBoundsError, match="kernel fill .*'f'"):
        sd.sync()

    @sd.kernel
    def far(a: sd.types.ndarray(), n: sd.i32):
        sd.loop_config(serialize=True)
        for i in range(n):
            a[i + 1073741824 - 1073741824] += 1.0
            a[i + 1073741824] += 1.0   # never in range: checked, skipped, reported

    a = _arr(np.zeros(3))
    far(a, 3)
    with pytest.raises(SpiradOutOfBoundsError, match="kernel far .*'a'"):
        sd.sync()
    np.testing.assert_array_equal(a.to_numpy(), [1, 1, 1])


def _compiled_tasks(arch, kernel, *args):
    """The task lists the backend compiles for `kernel(*args)` (cpu: llvm_codegen)."""
    return [tl for tl, _ in cpu_compiles(kernel, *args)]


def test_proven_only_where_a_guard_holds(monkeypatch):
    """The Genesis-shaped kernel gets its guarded copy with every access proven; a kernel with
    nothing to prove compiles to the task list it had (no copy, no guard). (The generic
    program: one specialised on its shapes proves them without a guard, passes/shape_specialise.)"""
    from kernel_ir.index_range import in_range_accesses
    from kernel_ir.nodes import walk
    from kernel_ir.ops import GLOBAL_ACCESS, Op
    monkeypatch.setenv("SPIRAD_SHAPE_SPECIALISE", "0")
    sd.init(arch=sd.cpu, offline_cache=False)
    (tl,) = _compiled_tasks("cpu", batch, _arr(np.zeros((4, 3))), _arr(np.zeros((5, 3))), 4)
    (task,) = tl.tasks
    top = [n for n in task.body.nodes if n.op == Op.IF]
    assert len(top) == 1
    fast, slow = top[0].blocks
    fast_acc = [n for n in walk(fast) if n.op in GLOBAL_ACCESS]
    slow_acc = [n for n in walk(slow) if n.op in GLOBAL_ACCESS]
    assert len(fast_acc) == len(slow_acc) == 3
    assert task.proven == frozenset(fast_acc)
    assert not in_range_accesses(task) & set(slow_acc)

    @sd.kernel
    def gather(a: sd.types.ndarray(), idx: sd.types.ndarray()):
        sd.loop_config(serialize=True)
        for i in range(idx.shape[0]):
            a[idx[i]] += 1.0   # an index read in the loop: nothing to prove

    (tl,) = _compiled_tasks("cpu", gather, _arr(np.zeros(3)), _arr([0, 2], sd.i32))
    assert not tl.tasks[0].proven
    assert not any(n.op == Op.IF for n in walk(tl.tasks[0].body))


def test_not_under_debug_nor_without_checks():
    """debug=True checks every access (naming the line); check_bounds=False checks none: the
    pass runs only for the default checks."""
    from kernel_ir.ops import Op
    for kw in ({"debug": True}, {"check_bounds": False}):
        sd.init(arch=sd.cpu, offline_cache=False, **kw)
        (tl,) = _compiled_tasks("cpu", batch, _arr(np.zeros((4, 3))), _arr(np.zeros((5, 3))), 4)
        assert not tl.tasks[0].proven
        assert not [n for n in tl.tasks[0].body.nodes if n.op == Op.IF]


def test_copies_stay_within_the_growth_budget():
    """A nest whose both levels have accesses to prove: the outer loop's copy takes the budget
    (`GROWTH` times the task), so the loop inside it is not copied again; the program at most
    doubles (plus the guard)."""
    import passes.bounds_versioning as bv
    import spirad.compile.driver as drv
    from kernel_ir.nodes import walk
    from kernel_ir.ops import Op
    sizes = []

    def spy(tl, **k):
        out = bv.version_loops(tl, **k)
        sizes.append((tl, out))
        return out

    @sd.kernel
    def nest(a: sd.types.ndarray(), b: sd.types.ndarray(), idx: sd.types.ndarray(), n: sd.i32):
        sd.loop_config(serialize=True)
        for i in range(n):
            lo = idx[i]                   # proven by the outer guard
            for k in range(lo, lo + 2):   # a[k]: by a guard inside the outer copy, budget allowing
                a[k] += b[i]

    sd.init(arch=sd.cpu, offline_cache=False)
    drv.version_loops = spy
    try:
        a, b, idx = _arr(np.zeros(6)), _arr(np.arange(6)), _arr([0, 3, 1], sd.i32)
        nest(a, b, idx, 3)
        sd.sync()
    finally:
        drv.version_loops = bv.version_loops
    want = np.zeros(6)
    for i, lo in enumerate([0, 3, 1]):
        want[lo:lo + 2] += i
    np.testing.assert_array_equal(a.to_numpy(), want)
    (before, after), = sizes
    ifs = [n for n in walk(after.tasks[0].body) if n.op == Op.IF]
    assert len(ifs) == 1  # the outer loop only: no copy inside the copy
    n0 = sum(1 for _ in walk(before.tasks[0].body))
    n1 = sum(1 for _ in walk(after.tasks[0].body))
    guard = len(after.tasks[0].body.nodes) - len(before.tasks[0].body.nodes)
    assert n1 - guard <= (1 + bv.GROWTH) * n0


def test_a_huge_task_versions_its_inner_loops_within_the_cap(monkeypatch):
    """`GROWTH_CAP` bounds the copies in nodes whatever the task's size: with a cap below the
    outer loop's copy the inner loop is versioned instead (its guard inside the outer loop), with
    a cap of 0 nothing is; either way the results are numpy's and an index past the end is
    still reported."""
    import passes.bounds_versioning as bv
    import spirad.compile.driver as drv
    from kernel_ir.nodes import walk
    from kernel_ir.ops import Op
    seen = []

    def spy(tl, **k):
        out = bv.version_loops(tl, **k)
        seen.append((tl, out))
        return out

    @sd.kernel
    def nest(a: sd.types.ndarray(), b: sd.types.ndarray(), idx: sd.types.ndarray(), n: sd.i32):
        sd.loop_config(serialize=True)
        for i in range(n):
            lo = idx[i]
            s = b[i] * 2.0 + b[n - 1 - i]
            for k in range(lo, lo + 2):
                a[k] += s

    def run(idx_values):
        a, b, idx = _arr(np.zeros(6)), _arr(np.arange(6)), _arr(idx_values, sd.i32)
        nest(a, b, idx, 3)
        sd.sync()
        return a.to_numpy()

    want = np.zeros(6)
    for i, lo in enumerate([0, 3, 1]):
        want[lo:lo + 2] += i * 2.0 + (2 - i)
    monkeypatch.setattr(drv, "version_loops", spy)
    for cap, where in ((0, None), (20, "inner")):
        monkeypatch.setattr(bv, "GROWTH_CAP", cap)
        sd.init(arch=sd.cpu, offline_cache=False)
        seen.clear()
        np.testing.assert_array_equal(run([0, 3, 1]), want)
        (before, after), = seen
        body = after.tasks[0].body
        ifs = [n for n in walk(body) if n.op == Op.IF]
        n0 = sum(1 for _ in walk(before.tasks[0].body))
        n1 = sum(1 for _ in walk(body))
        if where is None:
            assert not ifs and n1 == n0
        else:
            (guard,) = ifs
            assert guard not in body.nodes  # inside the outer loop, not around it
            assert 0 < n1 - n0 <= cap + 16   # the copy within the cap (plus its guard)
        with pytest.raises(SpiradOutOfBoundsError):
            run([0, 5, 1])
