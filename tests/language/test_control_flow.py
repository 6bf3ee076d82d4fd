"""Control flow: if / for / while / break / continue, parallel outer loop vs serial inner loops,
static unrolling, and the arithmetic semantics (true division, Python // and %, local casts)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs

N = 16


@sd.kernel
def branches(x: sd.types.ndarray(), out: sd.types.ndarray()):
    for i in x:
        v = x[i]
        if v < -1:
            out[i] = -2
        elif v < 0:
            out[i] = -1
        elif v == 0 or v > 100:
            out[i] = 0
        else:
            out[i] = 1 if v < 2 else 2
        if not (v >= -1 and v <= 1):
            out[i] += 10


@test_archs()
def test_if_elif_else(arch):
    xs = np.array([-3, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 200], np.float32)
    x, out = sd.ndarray(sd.f32, len(xs)), sd.ndarray(sd.i32, len(xs))
    x.from_numpy(xs)
    branches(x, out)
    want = np.where(xs < -1, -2, np.where(xs < 0, -1, np.where((xs == 0) | (xs > 100), 0,
                                                                np.where(xs < 2, 1, 2))))
    want += np.where((xs >= -1) & (xs <= 1), 0, 10)
    np.testing.assert_array_equal(out.to_numpy(), want)


@sd.kernel
def loops(out: sd.types.ndarray()):
    for i in range(N):           # parallel
        s = 0
        for j in range(i):       # serial
            if j % 3 == 1:
                continue
            if j > 9:
                break
            s += j
        k = 0
        while True:              # serial
            k += 1
            if k * k >= i:
                break
        t = 0
        m = i
        while m > 0:
            if m % 2 == 0:
                m = m // 2
                continue
            m -= 1
            t += 1
        out[i, 0] = s
        out[i, 1] = k
        out[i, 2] = t


def _loops_ref(i):
    s = 0
    for j in range(i):
        if j % 3 == 1:
            continue
        if j > 9:
            break
        s += j
    k = 0
    while True:
        k += 1
        if k * k >= i:
            break
    t, m = 0, i
    while m > 0:
        if m % 2 == 0:
            m //= 2
            continue
        m -= 1
        t += 1
    return s, k, t


@test_archs()
def test_for_while_break_continue(arch):
    out = sd.ndarray(sd.i32, (N, 3))
    loops(out)
    np.testing.assert_array_equal(out.to_numpy(), [_loops_ref(i) for i in range(N)])


@test_archs()
def test_continue_in_parallel_loop(arch):
    @sd.kernel
    def k(out: sd.types.ndarray()):
        for i in out:
            if i % 3 == 0:
                continue
            out[i] = 1

    out = sd.ndarray(sd.i32, 10)
    k(out)
    np.testing.assert_array_equal(out.to_numpy(), [0 if i % 3 == 0 else 1 for i in range(10)])


@test_archs()
def test_inner_loops_are_serial(arch):
    """A local accumulated by an inner loop is per-thread: the inner loop runs serially."""
    @sd.kernel
    def k(out: sd.types.ndarray()):
        for i in range(64):
            acc = 0.0
            for j in range(100):
                acc = acc * 0.5 + j   # order-dependent: wrong if the inner loop ran in parallel
            out[i] = acc + i

    out = sd.ndarray(sd.f64, 64)
    k(out)
    acc = 0.0
    for j in range(100):
        acc = np.float32(acc * np.float32(0.5) + np.float32(j))
    np.testing.assert_allclose(out.to_numpy(), acc + np.arange(64), rtol=1e-6)


@test_archs()
def test_serial_top_level_code_and_several_tasks(arch):
    x = sd.field(sd.i32, shape=8)
    total = sd.field(sd.i32, shape=())

    @sd.kernel
    def k(base: sd.i32):
        total[None] = base       # serial task
        for i in x:              # parallel task 1
            x[i] = i
        for i in x:              # parallel task 2 sees task 1's writes
            total[None] += x[i]
        m = total[None]          # serial task after both: a local across tasks
        total[None] = m * 2

    k(100)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(8))
    assert total[None] == (100 + 28) * 2


@test_archs()
def test_serial_outer_loop_when_not_at_top(arch):
    """A loop under an `if` at the top level is not the outermost loop: it runs serially."""
    out = sd.field(sd.i32, shape=10)

    @sd.kernel
    def k(flag: sd.i32):
        if flag:
            for i in range(1, 10):
                out[i] = out[i - 1] + i   # serial dependency

    k(1)
    np.testing.assert_array_equal(out.to_numpy(), np.cumsum(np.arange(10)))


@test_archs()
def test_static_if_and_unroll(arch):
    out = sd.field(sd.i32, shape=4)

    @sd.kernel
    def k(mode: sd.template()):
        for i in out:
            if sd.static(mode == 1):
                out[i] = i
            else:
                out[i] = -i
            for j in sd.static(range(3)):
                out[i] += j

    k(1)
    np.testing.assert_array_equal(out.to_numpy(), np.arange(4) + 3)
    k(0)
    np.testing.assert_array_equal(out.to_numpy(), -np.arange(4) + 3)


@test_archs()
def test_static_loop_over_one_tuple_and_star_of_a_generator(arch):
    """`sd.static(((0,),))` iterates once, binding the tuple `(0,)` (it is not unwrapped into
    its element); `f(*gen)` takes a generator known at compile time, as a tuple; an ndrange
    entry may be a list [begin, end]."""
    out = sd.field(sd.i32, shape=8)
    stencil = ((1,),)
    bounds = ([2, 6] for _ in range(1))  # a list entry, as (begin, end)

    @sd.kernel
    def k():
        for I in sd.grouped(sd.ndrange(*bounds)):
            for offset in sd.static(stencil):
                out[I + sd.Vector(offset)] = I[0]

    k()
    assert out.to_numpy().tolist() == [0, 0, 0, 2, 3, 4, 5, 0]


@test_archs()
def test_ndrange_bounds(arch):
    out = sd.field(sd.i32, shape=(5, 6))

    @sd.kernel
    def k():
        for i, j in sd.ndrange((1, 4), (2, 6)):
            out[i, j] = i * 10 + j
        for i in range(1):
            for a, b in sd.ndrange(2, 2):   # inner ndrange: serial nest
                out[4, a * 2 + b] = 1 + a + b

    k()
    want = np.zeros((5, 6), np.int32)
    for i in range(1, 4):
        for j in range(2, 6):
            want[i, j] = i * 10 + j
    want[4, :4] = [1, 2, 2, 3]
    np.testing.assert_array_equal(out.to_numpy(), want)


@test_archs()
def test_grouped_indices(arch):
    out = sd.field(sd.i32, shape=(3, 4))

    @sd.kernel
    def k():
        for I in sd.grouped(out):
            out[I] = I[0] * 100 + I.y
        for I in sd.grouped(sd.ndrange((1, 2), (0, 2))):
            out[I] = -1

    k()
    want = np.add.outer(np.arange(3) * 100, np.arange(4))
    want[1, :2] = -1
    np.testing.assert_array_equal(out.to_numpy(), want)


@test_archs()
def test_division_semantics(arch):
    """`/` is true division, `//` and `%` follow Python (floored), on ints and floats."""
    a = np.array([7, -7, 7, -7, 0, 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, 5], np.int32)

    @sd.kernel
    def k(a: sd.types.ndarray(), b: sd.types.ndarray(), out: sd.types.ndarray()):
        for i in a:
            out[i, 0] = a[i] / b[i]
            out[i, 1] = a[i] // b[i]
            out[i, 2] = a[i] % b[i]
            fa, fb = a[i] * 1.5, b[i] * 1.0
            out[i, 3] = fa // fb
            out[i, 4] = fa % fb

    da, db, out = sd.ndarray(sd.i32, 6), sd.ndarray(sd.i32, 6), sd.ndarray(sd.f64, (6, 5))
    da.from_numpy(a)
    db.from_numpy(b)
    k(da, db, out)
    fa, fb = a * 1.5, b * 1.0
    want = np.stack([a / b, a // b, a % b, fa // fb, np.mod(fa, fb)], axis=1)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-6)


@test_archs()
def test_local_assignment_casts_to_its_type(arch):
    out = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        a = 1           # i32
        a = 2.75        # stays i32: truncated
        b = 0.5         # f32
        b = 3           # stays f32
        c: sd.f64 = 1   # annotated
        c += 0.25
        d = a
        d += 1.9        # i32 += float: truncated on store
        out[0] = a
        out[1] = b / 2
        out[2] = c
        out[3] = d

    k()
    np.testing.assert_array_equal(out.to_numpy(), [2, 1.5, 1.25, 3])


@test_archs()
def test_literal_weak_typing(arch):
    out = sd.field(sd.f64, shape=5)
    o32 = sd.field(sd.u32, shape=1)

    @sd.kernel
    def k(x: sd.f64, u: sd.u32):
        out[0] = x * 0.1            # literal takes f64 from x: no f32 rounding
        out[1] = 1 / 3              # compile-time Python: full precision, stored in f64
        n = 7
        out[2] = n / 2              # int / int is a float
        out[3] = 2 ** 10            # integer power
        out[4] = x ** 0.5
        o32[0] = u * 2              # literal takes u32

    k(3.0, 2 ** 31 + 1)
    np.testing.assert_allclose(out.to_numpy(), [0.3, 1 / 3, 3.5, 1024, np.sqrt(3.0)], rtol=1e-15)
    assert o32[0] == ((2 ** 31 + 1) * 2) % 2 ** 32


@test_archs()
def test_comparison_chain_and_boolops(arch):
    xs = np.array([-2, 0, 1, 3, 5, 9], np.int32)

    @sd.kernel
    def k(x: sd.types.ndarray(), out: sd.types.ndarray()):
        for i in x:
            v = x[i]
            out[i, 0] = 0 <= v < 5
            out[i, 1] = v < 0 or v > 4
            out[i, 2] = not v
            out[i, 3] = (v & 1) | ((v >> 1) << 4) ^ 2

    x, out = sd.ndarray(sd.i32, 6), sd.ndarray(sd.i32, (6, 4))
    x.from_numpy(xs)
    k(x, out)
    want = np.stack([(0 <= xs) & (xs < 5), (xs < 0) | (xs > 4), xs == 0,
                     (xs & 1) | ((xs >> 1) << 4) ^ 2], axis=1)
    np.testing.assert_array_equal(out.to_numpy(), want.astype(np.int32))


@test_archs()
def test_func_loops_are_serial(arch):
    @sd.func
    def prefix(n):
        s = 0
        for j in range(n):
            s += j
        return s

    @sd.kernel
    def k(out: sd.types.ndarray()):
        for i in out:
            out[i] = prefix(i)

    out = sd.ndarray(sd.i32, 10)
    k(out)
    np.testing.assert_array_equal(out.to_numpy(), [i * (i - 1) // 2 for i in range(10)])


@test_archs()
def test_parallel_loop_over_float_range_is_error(arch):
    @sd.kernel
    def k(n: sd.f32):
        for i in range(n):
            pass

    with pytest.raises(sd.SpiradTypeError, match="integers"):
        k(3.0)


@test_archs()
def test_conditional_expression_runs_the_chosen_side_only(arch):
    """`x[j] if 0 <= j < n else 0` reads x[j] only in range (Taichi's ifte): under debug=True
    (this decorator) a read of x[-1] would be reported; its adjoint adds into x.grad only there.
    Vector and tuple sides, and Python numbers, still select."""
    n = 8
    x = sd.field(sd.f32, shape=n, needs_grad=True)
    y = sd.field(sd.f32, shape=n, needs_grad=True)
    v = sd.Vector.field(2, sd.f32, shape=n)
    k = sd.field(sd.i32, shape=n)

    @sd.kernel
    def stencil():
        for i in range(n):
            left = x[i - 1] if i >= 1 else 0.0
            right = x[i + 1] if i + 1 < n else x[i] * 2.0
            y[i] = left * 3.0 + right * right
            v[i] = sd.Vector([x[i], -1.0]) if x[i] > 0.5 else sd.Vector([0.0, 1.0])
            a, b = (i, 1) if i % 2 == 0 else (0, k[i])
            k[i] = a + b

    xs = np.linspace(0.1, 0.9, n).astype(np.float32)
    x.from_numpy(xs)
    k.from_numpy(np.full(n, 7, np.int32))
    stencil()
    left = np.concatenate([[0.0], xs[:-1]])
    right = np.concatenate([xs[1:], [xs[-1] * 2.0]])
    np.testing.assert_allclose(y.to_numpy(), left * 3.0 + right ** 2, rtol=1e-6)
    np.testing.assert_allclose(v.to_numpy(), [[a, -1.0] if a > 0.5 else [0.0, 1.0] for a in xs])
    np.testing.assert_array_equal(k.to_numpy(), [i + 1 if i % 2 == 0 else 7 for i in range(n)])
    y.grad.fill(1.0)
    stencil.grad()
    want = np.zeros(n)
    want[:-1] += 3.0                      # d left_{i+1} / d x_i
    want[1:] += 2.0 * xs[1:]              # d right_{i-1}^2 / d x_i
    want[-1] += 2.0 * (2.0 * xs[-1]) * 2.0  # right_{n-1} = 2 x_{n-1}
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-5)


def test_conditional_expression_without_reads_is_a_select():
    """Sides of pure arithmetic are computed in front and selected (no IF, nothing for reverse
    mode to keep); a side that reads memory becomes an IF."""
    from kernel_ir.nodes import walk
    from kernel_ir.ops import Op
    sd.init(arch=sd.cpu, offline_cache=False)
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def pure():
        for i in range(4):
            x[i] = i * 2.0 if i > 1 else i - 1.0

    @sd.kernel
    def reads():
        for i in range(4):
            x[i] = x[i - 1] if i > 1 else 0.0

    for kern, ifs in ((pure, 0), (reads, 1)):
        kern()
        tl = kern._plans[0].compiled.tl
        assert sum(n.op == Op.IF for t in tl.tasks for n in walk(t.body)) == ifs
