"""`ndrange(*dims, axes=perm)` (Quadrants'): the nesting order, outermost first, with the loop
targets bound to the canonical axes (spirad/data/ndrange_axes.py). The order is observable where a
loop is serialised, nested or unrolled: each test records the visit order through a counter and
compares it with nested Python loops written in the permuted order (Quadrants 1.3.3 gives the
same orders on these programs). Before `axes=` was implemented the keyword was dropped silently
and these loops ran in the canonical order."""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradSyntaxError, SpiradTypeError
from tests.support.archs import EVERY_ARCH, test_archs

M, N = 3, 4


def order_2d_10():
    """ndrange(M, N, axes=(1, 0)): j outermost."""
    return [(i, j) for j in range(N) for i in range(M)]


def order_3d_201():
    """ndrange((1, 3), 4, (2, 5), axes=(2, 0, 1)): c outermost, then a, then b."""
    return [(a, b, c) for c in range(2, 5) for a in range(1, 3) for b in range(4)]


def recorder(rows, width):
    return sd.field(sd.i32, shape=(rows, width)), sd.field(sd.i32, shape=())


@test_archs(EVERY_ARCH)
def test_serialised_top_level(arch):
    rec, cnt = recorder(M * N, 2)

    @sd.kernel
    def k():
        sd.loop_config(serialize=True)
        for i, j in sd.ndrange(M, N, axes=(1, 0)):
            n = cnt[None]
            rec[n, 0] = i
            rec[n, 1] = j
            cnt[None] = n + 1

    k()
    assert [tuple(r) for r in rec.to_numpy()] == order_2d_10()


@test_archs(EVERY_ARCH)
def test_serialised_three_axes_grouped(arch):
    rec, cnt = recorder(24, 3)

    @sd.kernel
    def k():
        sd.loop_config(serialize=True)
        for I in sd.grouped(sd.ndrange((1, 3), 4, (2, 5), axes=(2, 0, 1))):
            n = cnt[None]
            for d in sd.static(range(3)):
                rec[n, d] = I[d]
            cnt[None] = n + 1

    k()
    assert [tuple(r) for r in rec.to_numpy()] == order_3d_201()


@test_archs(EVERY_ARCH)
def test_nested(arch):
    """An ndrange loop inside another loop is serial: its order is the permuted one (each
    parallel outer iteration r counts its own visits in cnt[r])."""
    rec = sd.field(sd.i32, shape=(2 * 24, 4))
    cnt = sd.field(sd.i32, shape=2)

    @sd.kernel
    def k():
        for r in range(2):
            for a, b, c in sd.ndrange((1, 3), 4, (2, 5), axes=(2, 0, 1)):
                n = r * 24 + cnt[r]
                cnt[r] += 1
                rec[n, 0] = a
                rec[n, 1] = b
                rec[n, 2] = c
                rec[n, 3] = r

    k()
    got = rec.to_numpy()
    for r in range(2):
        assert [tuple(x[:3]) for x in got[r * 24:(r + 1) * 24]] == order_3d_201()
        assert (got[r * 24:(r + 1) * 24, 3] == r).all()


@test_archs(EVERY_ARCH)
def test_nested_grouped(arch):
    rec, cnt = recorder(M * N, 2)

    @sd.kernel
    def k():
        for _ in range(1):
            for I in sd.grouped(sd.ndrange(M, N, axes=[1, 0])):
                n = cnt[None]
                rec[n, 0] = I[0]
                rec[n, 1] = I[1]
                cnt[None] = n + 1

    k()
    assert [tuple(r) for r in rec.to_numpy()] == order_2d_10()


@test_archs(EVERY_ARCH)
def test_static_choice_of_axes(arch):
    """Genesis' form: `axes=qd.static((1, 0) if batch_first else None)`, a template flag."""
    rec, cnt = recorder(M * N, 2)

    @sd.kernel
    def k(batch_first: sd.template()):
        sd.loop_config(serialize=True)
        for i, j in sd.ndrange(M, N, axes=sd.static((1, 0) if batch_first else None)):
            n = cnt[None]
            rec[n, 0] = i
            rec[n, 1] = j
            cnt[None] = n + 1

    for flag, want in ((True, order_2d_10()), (False, [(i, j) for i in range(M) for j in range(N)])):
        cnt[None] = 0
        k(flag)
        assert [tuple(r) for r in rec.to_numpy()] == want


@test_archs(EVERY_ARCH)
def test_parallel_binds_canonical_axes(arch):
    """A top-level (parallel) loop covers every index once, each bound to its own axis."""
    x = sd.field(sd.i32, shape=(M, 5))
    hits = sd.field(sd.i32, shape=(M, 5))

    @sd.kernel
    def k():
        for i, j in sd.ndrange(M, (1, 5), axes=(1, 0)):
            x[i, j] = i * 10 + j
            sd.atomic_add(hits[i, j], 1)

    k()
    want = np.add.outer(np.arange(M) * 10, np.arange(5))
    want[:, 0] = 0
    np.testing.assert_array_equal(x.to_numpy(), want)
    np.testing.assert_array_equal(hits.to_numpy()[:, 1:], 1)
    np.testing.assert_array_equal(hits.to_numpy()[:, 0], 0)


@test_archs(EVERY_ARCH)
def test_parallel_grouped_run_time_bounds(arch):
    x = sd.ndarray(sd.i32, (M, N))

    @sd.kernel
    def k(a: sd.types.ndarray(), m: sd.i32, n: sd.i32):
        for I in sd.grouped(sd.ndrange(m, n, axes=(1, 0))):
            a[I] = I[0] * 100 + I[1]

    k(x, M, N)
    np.testing.assert_array_equal(x.to_numpy(), np.add.outer(np.arange(M) * 100, np.arange(N)))


@test_archs(EVERY_ARCH)
def test_static_unrolled(arch):
    rec, cnt = recorder(M * N, 2)

    @sd.kernel
    def k():
        for i, j in sd.static(sd.ndrange(M, N, axes=(1, 0))):
            rec[cnt[None], 0] = i
            rec[cnt[None], 1] = j
            cnt[None] += 1

    @sd.kernel
    def kg():
        for I in sd.static(sd.grouped(sd.ndrange(M, N, axes=(1, 0)))):
            rec[cnt[None], 0] = I[0]
            rec[cnt[None], 1] = I[1]
            cnt[None] += 1

    for kern in (k, kg):
        cnt[None] = 0
        kern()
        assert [tuple(r) for r in rec.to_numpy()] == order_2d_10()


def test_python_scope():
    assert list(sd.ndrange(M, N, axes=(1, 0))) == order_2d_10()
    assert list(sd.ndrange((1, 3), 4, (2, 5), axes=(2, 0, 1))) == order_3d_201()
    assert list(sd.ndrange(M, N, axes=(0, 1))) == list(sd.ndrange(M, N))
    assert sd.ndrange(M, N, axes=(0, 1)).axes is None  # the identity is today's loop
    assert sd.ndrange(M, N, axes=[np.int64(1), 0]).axes == (1, 0)


BAD = [
    ("(0,)", SpiradSyntaxError, "qd.ndrange(axes=(0,)) has 1 entries but ndrange was called with 2 "
                                "dimension argument(s); they must match"),
    ("(0, 0)", SpiradSyntaxError, "qd.ndrange(axes=(0, 0)) is not a permutation of range(2)"),
    ("(1, 2)", SpiradSyntaxError, "qd.ndrange(axes=(1, 2)) is not a permutation of range(2)"),
    ("(0, True)", SpiradTypeError, "qd.ndrange(axes=(0, True)) entries must be Python ints; got bool (True)"),
    ("(0.0, 1)", SpiradTypeError, "qd.ndrange(axes=(0.0, 1)) entries must be Python ints; got float (0.0)"),
]


@pytest.mark.parametrize("axes,cls,text", BAD)
def test_errors_python_scope(axes, cls, text):
    with pytest.raises(cls) as e:
        sd.ndrange(2, 3, axes=eval(axes))
    assert str(e.value) == text


@pytest.mark.parametrize("axes,cls,text", BAD)
def test_errors_kernel_scope(axes, cls, text):
    sd.init(arch=sd.cpu)
    x = sd.field(sd.i32, shape=(2, 3))
    perm = eval(axes)

    @sd.kernel
    def k():
        for i, j in sd.ndrange(2, 3, axes=perm):
            x[i, j] = 1

    with pytest.raises(cls) as e:
        k()
    msg = str(e.value)
    assert text in msg and "^" in msg and __file__ in msg, msg
    assert "sd.ndrange(2, 3, axes=perm)" in msg, msg


def test_error_unknown_keyword():
    sd.init(arch=sd.cpu)
    x = sd.field(sd.i32, shape=(2, 3))

    @sd.kernel
    def k():
        for i, j in sd.ndrange(2, 3, order=(1, 0)):
            x[i, j] = 1

    with pytest.raises(SpiradTypeError, match="unexpected keyword argument 'order'") as e:
        k()
    assert "^" in str(e.value)


def test_error_fewer_targets():
    """Quadrants refuses fewer loop targets than axes in ndrange-for; spirad refuses them with
    or without `axes=` (no collapse of the last axes whose order `axes=` would scramble)."""
    sd.init(arch=sd.cpu)
    x = sd.field(sd.i32, shape=6)

    @sd.kernel
    def k():
        for i in sd.ndrange(2, 3, axes=(1, 0)):
            x[i] = 1

    with pytest.raises(SpiradSyntaxError, match="number of the loop variables not equal") as e:
        k()
    assert "^" in str(e.value)
