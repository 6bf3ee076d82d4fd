"""passes/bounds_versioning on a range task's body: versioned against the task index, its guard
run once per iteration (the body of an environment loop made parallel, or any parallel loop).

As in test_bounds_versioning, every kernel runs with data in range (the guarded copy runs: the
result matches numpy) and with data that makes accesses of some iterations leave their array
(those iterations' guards fail, their checked bodies run: the accesses are skipped and
`SpiradOutOfBoundsError` raised at the sync, every other element written). A guard that passed
where it must not — or a check dropped without one — fails the second half.
"""
from __future__ import annotations

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradOutOfBoundsError
from tests.passes.test_bounds_versioning import _arr, _compiled_tasks
from tests.support.archs import EVERY_ARCH, test_archs

ARCHS = EVERY_ARCH  # every arch: the checks are per backend


@sd.kernel
def envs(a: sd.types.ndarray(), b: sd.types.ndarray(), c: sd.types.ndarray(), n: sd.i32):
    """Genesis' environment loop made parallel: per-environment code indexed by the task
    index, a `continue`, a `while`, a nested loop whose index a local copies."""
    for i in range(n):
        if c[i] < 0.0:
            continue
        s = c[i] * 2.0
        for j in range(3):
            a[j, i] = b[j, i] + s
            if b[j, i] > 100.0:
                break
        k = 0
        while k < 2:
            a[k + 1, i] += 1.0
            k += 1


def _envs_numpy(a, b, c, n):
    for i in range(n):
        if c[i] < 0:
            continue
        for j in range(3):
            a[j, i] = b[j, i] + c[i] * 2
            if b[j, i] > 100:
                break
        a[1:3, i] += 1
    return a


@test_archs(ARCHS)
def test_env_body_in_range_and_past_the_end(arch):
    sd.init(arch=arch)
    bv = np.arange(15, dtype=np.float32).reshape(3, 5)
    bv[1, 3] = 200.0  # a break in environment 3
    cv = np.array([1, -1, 2, 3, 4], dtype=np.float32)
    a = _arr(np.zeros((3, 5)))
    envs(a, _arr(bv), _arr(cv), 5)
    sd.sync()
    np.testing.assert_array_equal(a.to_numpy(), _envs_numpy(np.zeros((3, 5)), bv, cv, 5))
    # b and c have 5 environments, a only 4: environment 4's stores leave a (skipped, reported)
    a = _arr(np.zeros((3, 4)))
    envs(a, _arr(bv), _arr(cv), 5)
    with pytest.raises(SpiradOutOfBoundsError, match="kernel envs .*'a'"):
        sd.sync()
    want = _envs_numpy(np.zeros((3, 5)), bv, cv, 5)[:, :4]
    np.testing.assert_array_equal(a.to_numpy(), want)
    # c has 3 environments: environments 3 and 4 read c past its end (as 0: s = 0)
    a = _arr(np.zeros((3, 5)))
    envs(a, _arr(bv), _arr(cv[:3]), 5)
    with pytest.raises(SpiradOutOfBoundsError, match="kernel envs .*'c'"):
        sd.sync()
    want = _envs_numpy(np.zeros((3, 5)), bv, np.concatenate([cv[:3], [0, 0]]), 5)
    np.testing.assert_array_equal(a.to_numpy(), want)


@test_archs(ARCHS)
def test_env_offsets_and_fields(arch):
    """Offsets of the task index (i - 1, i + 1) against an ndarray, and a field of a static
    shape: a guard per iteration, failing only for the iterations at the ends."""
    sd.init(arch=arch)
    f = sd.field(sd.f32, shape=(2, 4), name="f")

    @sd.kernel
    def shift(a: sd.types.ndarray(), lo: sd.i32, n: sd.i32):
        for i in range(lo, n):
            f[0, i] += a[i - 1]
            for k in range(2):   # (a body without a loop is not versioned)
                f[1, i] += a[i + 1] * 5.0

    av = np.arange(6, dtype=np.float32)
    shift(_arr(av), 1, 4)
    sd.sync()
    want = np.zeros((2, 4))
    for i in range(1, 4):
        want[0, i] += av[i - 1]
        want[1, i] += av[i + 1] * 10
    np.testing.assert_array_equal(f.to_numpy(), want)
    shift(_arr(av), 0, 4)  # a[-1] in iteration 0
    with pytest.raises(SpiradOutOfBoundsError, match="kernel shift .*'a'"):
        sd.sync()
    want[0, 1:] += av[:3]
    want[1, :] += av[1:5] * 10
    np.testing.assert_array_equal(f.to_numpy(), want)
    shift(_arr(av[:4]), 1, 4)  # a[4] in iteration 3
    with pytest.raises(SpiradOutOfBoundsError, match="kernel shift .*'a'"):
        sd.sync()
    want[0, 1:] += av[:3]
    want[1, 1:3] += av[2:4] * 10
    np.testing.assert_array_equal(f.to_numpy(), want)
    shift(_arr(av), 1, 5)  # f[., 4] in iteration 4
    with pytest.raises(SpiradOutOfBoundsError, match="kernel shift .*'f'"):
        sd.sync()


def test_the_task_body_is_versioned_once():
    """The environment loop's task: one guard at the top of its body, every access of the
    copy but one proven (the nested loops need no guard of their own), none of the
    original's; a task with a single access to prove keeps its check (a guard per iteration
    would only replace it), and so does a body without a loop."""
    from kernel_ir.index_range import in_range_accesses
    from kernel_ir.nodes import walk
    from kernel_ir.ops import GLOBAL_ACCESS, LOOPS, Op
    sd.init(arch=sd.cpu, offline_cache=False)
    (tl,) = _compiled_tasks("cpu", envs, _arr(np.zeros((3, 5))), _arr(np.zeros((3, 5))),
                            _arr(np.zeros(5)), 5)
    (task,) = tl.tasks
    assert task.kind == "range"
    top = [n for n in task.body.nodes if n.op == Op.IF]
    assert len(top) == 1
    fast, slow = top[0].blocks
    assert not any(n.op == Op.IF and n.srcs[0].op == Op.AND for n in walk(fast))
    fast_acc = [n for n in walk(fast) if n.op in GLOBAL_ACCESS]
    slow_acc = [n for n in walk(slow) if n.op in GLOBAL_ACCESS]
    assert len(fast_acc) == len(slow_acc) >= 5
    # every one but the while loop's `a[k + 1, i]` (k a local the loop stores: checked)
    (loop,) = [n for n in walk(fast) if n.op in LOOPS and n.op != Op.RANGE_FOR]
    in_while = {n for n in walk(loop.blocks[0]) if n.op in GLOBAL_ACCESS}
    assert in_while and set(fast_acc) - in_range_accesses(task) == in_while
    assert not in_range_accesses(task) & set(slow_acc)

    @sd.kernel
    def one(a: sd.types.ndarray(), n: sd.i32):
        for i in range(n):
            for j in range(2):
                a[i] += 1.0

    @sd.kernel
    def flat(a: sd.types.ndarray(), b: sd.types.ndarray(), c: sd.types.ndarray(), n: sd.i32):
        for i in range(n):
            c[i] = a[i] * 2.0 + b[i]   # no loop in the body: left to its checks (SIMD lanes)

    for k, args in ((one, (_arr(np.zeros(3)), 3)),
                    (flat, (_arr(np.zeros(3)), _arr(np.zeros(3)), _arr(np.zeros(3)), 3))):
        (tl,) = _compiled_tasks("cpu", k, *args)
        assert not tl.tasks[0].proven
        assert not any(n.op == Op.IF for n in walk(tl.tasks[0].body))


@test_archs(ARCHS)
def test_task_bodies_versioned_on_the_cpu_only(arch):
    """The driver versions range task bodies for the CPU only (`version_loops(task_bodies=)`):
    on a GPU the two copies' atomics are merged by LLVM, losing AMDGPU's float-atomic metadata
    (tests/gpu_llvm/test_target.py), and a grid's body gains nothing from a per-thread guard.
    Loops are versioned everywhere."""
    from kernel_ir.nodes import walk
    from kernel_ir.ops import Op
    from tests.support.driver_spy import versioned_task_lists
    with versioned_task_lists() as seen:
        sd.init(arch=arch, offline_cache=False)
        envs(_arr(np.zeros((3, 5))), _arr(np.zeros((3, 5))), _arr(np.zeros(5)), 5)
        sd.sync()
    (tl,) = seen
    (task,) = [t for t in tl.tasks if t.kind == "range"]
    # `c[i]`, read twice outside any loop: in both copies where the body is versioned
    c_reads = [n for n in walk(task.body) if n.op == Op.GLOBAL_LOAD and n.srcs == (task.index,)]
    assert len(c_reads) == (4 if arch == "cpu" else 2)
