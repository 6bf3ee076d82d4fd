"""passes/bounds_versioning `_tail` (the split chosen by passes/bounds_tails): a block's accesses
indexed by a value read a few nodes earlier are checked once, by a guard after its definition.

Every kernel runs with data in range (the guarded copy runs; results against numpy) and with
data that sends one access out of its array (the guard fails, the original tail runs: that
access is skipped, `SpiradOutOfBoundsError` raised at the sync, the other elements written). A
check dropped wrongly fails the second half. Shapes from the pass's soundness argument: a local
reassigned inside a versioned region, `continue` / `break` and a loop in it, a sentinel
index tested before its use. Regions are versioned on the CPU only, and only with
`bounds_versioning.TAILS` (off by default; on here); every arch runs the kernels (the results
and errors must not depend on it).
"""
from __future__ import annotations

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradOutOfBoundsError
from tests.support.archs import EVERY_ARCH, test_archs


@pytest.fixture(autouse=True)
def _tails_on(monkeypatch):
    """Regions are versioned only with `bounds_versioning.TAILS` (off by default, see there)."""
    import passes.bounds_versioning as bv
    monkeypatch.setattr(bv, "TAILS", True)


def _arr(values, dtype=sd.f32):
    a = sd.ndarray(dtype, shape=np.shape(values))
    a.from_numpy(np.asarray(values, dtype=np.float32 if dtype == sd.f32 else np.int32))
    return a


@sd.kernel
def gather_rows(x: sd.types.ndarray(), y: sd.types.ndarray(), idx: sd.types.ndarray(),
                n: sd.i32):
    """Genesis' narrow phase: an index read from another array, then several accesses."""
    sd.loop_config(serialize=True)
    for b in range(n):
        g = idx[b]
        x[g, b] += 1.0
        x[g, b] *= 2.0
        y[g] += x[g, b]


def _gather_want(idx, n):
    x, y = np.zeros((4, n)), np.zeros(4)
    for b in range(n):
        g = idx[b]
        if 0 <= g < 4:
            x[g, b] = (x[g, b] + 1) * 2
            y[g] += x[g, b]
    return x, y


@test_archs(EVERY_ARCH)
def test_read_index_in_range_and_out_of_range(arch):
    sd.init(arch=arch)
    for idx, bad in (([0, 3, 1, 3, 2], False), ([0, 3, 4, 1, -1], True)):
        x, y = _arr(np.zeros((4, 5))), _arr(np.zeros(4))
        gather_rows(x, y, _arr(idx, sd.i32), 5)
        if bad:  # rows 4 and -1: skipped and reported, the other iterations written
            with pytest.raises(SpiradOutOfBoundsError, match="kernel gather_rows .*'[xy]'"):
                sd.sync()
        else:
            sd.sync()
        wx, wy = _gather_want(idx, 5)
        np.testing.assert_array_equal(x.to_numpy(), wx)
        np.testing.assert_array_equal(y.to_numpy(), wy)


@sd.kernel
def moved(x: sd.types.ndarray(), idx: sd.types.ndarray(), n: sd.i32, shift: sd.i32):
    sd.loop_config(serialize=True)
    for b in range(n):
        g = idx[b]
        h = idx[b]
        x[h] += 1.0
        if shift != 0:
            g = g + shift  # a store inside the region of h's accesses: g's later loads
        x[g] += 10.0       # are never hoisted before it
        x[g] += 10.0
        x[g + 1] += 100.0
        x[h] += 1.0


def _moved_want(idx, shift):
    x = np.zeros(6)
    for h in idx:
        g = h + shift
        for i, v in ((h, 1), (g, 10), (g, 10), (g + 1, 100), (h, 1)):
            if 0 <= i < 6:
                x[i] += v
    return x


@test_archs(EVERY_ARCH)
def test_index_reassigned_in_the_region_stays_checked(arch):
    sd.init(arch=arch)
    x = _arr(np.zeros(6))
    moved(x, _arr([0, 1], sd.i32), 2, 2)
    sd.sync()
    np.testing.assert_array_equal(x.to_numpy(), _moved_want([0, 1], 2))
    for shift in (4, -1):  # x[6]; x[-1]
        x = _arr(np.zeros(6))
        moved(x, _arr([0, 1], sd.i32), 2, shift)
        with pytest.raises(SpiradOutOfBoundsError, match="kernel moved .*'x'"):
            sd.sync()
        np.testing.assert_array_equal(x.to_numpy(), _moved_want([0, 1], shift))


@sd.kernel
def sentinel(x: sd.types.ndarray(), idx: sd.types.ndarray(), n: sd.i32, m: sd.i32):
    sd.loop_config(serialize=True)
    for b in range(n):
        g = idx[b]
        if g < 0:
            continue       # a sentinel tested before the accesses
        x[g, 0] += 1.0
        x[g, 1] += 2.0
        if g == 2:
            break
        x[g, 2] += 3.0
        for k in range(m):  # a loop in the tail
            x[g, k] += 10.0


def _sentinel_want(idx, n, m):
    x = np.zeros((4, 3))
    for b in range(n):
        g = idx[b]
        if g < 0:
            continue
        ok = g < 4
        if ok:
            x[g, 0] += 1
            x[g, 1] += 2
        if g == 2:
            break
        if ok:
            x[g, 2] += 3
            for k in range(min(m, 3)):
                x[g, k] += 10
    return x


@test_archs(EVERY_ARCH)
def test_continue_break_and_a_loop_in_the_tail(arch):
    sd.init(arch=arch)
    for idx, m, bad in (([0, -1, 1, 3, 2, 0], 3, False),   # stops at g == 2
                        ([0, -1, 5, 1, 2, 0], 3, True),    # x[5, ...]
                        ([0, -1, 1, 3, 2, 0], 4, True)):   # x[g, 3] in the loop
        x = _arr(np.zeros((4, 3)))
        sentinel(x, _arr(idx, sd.i32), len(idx), m)
        if bad:
            with pytest.raises(SpiradOutOfBoundsError, match="kernel sentinel .*'x'"):
                sd.sync()
        else:
            sd.sync()
        np.testing.assert_array_equal(x.to_numpy(), _sentinel_want(idx, len(idx), m))


def test_tails_proven_on_the_cpu():
    """On the CPU the accesses after `g = idx[b]` are proven (unchecked in the guarded copy);
    without tail versioning no loop guard can know `g` and all of them stay checked."""
    from kernel_ir.nodes import walk
    from kernel_ir.ops import GLOBAL_ACCESS, Op
    from tests.support.driver_spy import versioned_task_lists
    with versioned_task_lists() as seen:
        sd.init(arch=sd.cpu, offline_cache=False)
        gather_rows(_arr(np.zeros((4, 5))), _arr(np.zeros(4)), _arr([0, 1, 2, 3, 0], sd.i32), 5)
        sd.sync()
    (tl,) = seen
    (task,) = tl.tasks
    rows = {n for n in walk(task.body) if n.op in GLOBAL_ACCESS and n.arg.name in ("x", "y")}
    assert len(rows & task.proven) == 7  # x: 2 + 2 + 1 accesses, y: 2 (the guarded copy)
    assert any(n.op == Op.IF for n in walk(task.body))


@sd.kernel
def escaping(x: sd.types.ndarray(), out: sd.types.ndarray(), idx: sd.types.ndarray(), n: sd.i32):
    sd.loop_config(serialize=True)
    for b in range(n):
        g = idx[b]
        t = x[g, 0] + x[g, 1] + x[g, 2]
        if t > 1.0:        # t, computed among the covered accesses, used after them
            out[b] = t


@test_archs(EVERY_ARCH)
def test_values_used_after_the_region(arch):
    sd.init(arch=arch)
    xv = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
    for idx, bad in (([0, 3, 1], False), ([0, 4, 1], True)):
        x, out = _arr(xv), _arr(np.zeros(3))
        escaping(x, out, _arr(idx, sd.i32), 3)
        if bad:
            with pytest.raises(SpiradOutOfBoundsError, match="kernel escaping .*'x'"):
                sd.sync()
        else:
            sd.sync()
        t = np.array([xv[g].sum() if g < 4 else 0.0 for g in idx])
        np.testing.assert_allclose(out.to_numpy(), np.where(t > 1, t, 0), rtol=1e-6)
