"""Compile-time evaluation as Quadrants does it: template() func parameters stay compile-time
values, `X = sd.static(v)`, `return` under a static `if`, Python `in` / `is` / `==` / `or` on
compile-time values (dtypes, tuples, None), Python calls on compile-time values, list arithmetic,
lists as indices, `enumerate` / `zip` in `static`, `if ... else` over tuples, `n, m = a.shape`."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, exactly, test_archs

MODES = ("fast", "slow")


@sd.func
def pick(x, flag: sd.template(), other: sd.template()):
    if sd.static(flag or other):
        return x * 2.0
    return x + 100.0


@sd.func
def write_if(I, value, arr: sd.template(), cond: sd.template()):
    if sd.static(cond):
        arr[I] = value
    return value


@test_archs()
def test_compile_time_values(arch):
    out = sd.field(sd.f32, shape=(4, 8))
    grid = sd.field(sd.f32, shape=(2, 3))
    cfg = {"mode": "fast", "dt": sd.f32}

    @sd.kernel
    def k(a: sd.types.ndarray()):
        for i in range(4):
            BW = sd.static(cfg["mode"] == "fast")
            out[i, 0] = pick(1.0 * i, BW, False)
            out[i, 1] = pick(1.0 * i, False, sd.static(None is not None))
            if sd.static(cfg["dt"] == sd.f32 and "slow" in MODES and cfg["mode"] is not None):
                out[i, 2] = 1.0
            eps = sd.static(float(np.nextafter(1.0, 2.0) - 1.0))
            out[i, 3] = eps * sd.static(2.0 ** 52)
            w = sd.static([0.5] * 3)
            out[i, 4] = w[0] + w[2]
            I = [i % 2, 1]
            write_if(I, 7.0, grid, BW)
            total = 0.0
            for k_, v in sd.static(enumerate((i, 2 * i))):
                total += k_ * v
            out[i, 5] = total
            lo, hi = (i, 2 * i) if a[i] > 0 else (10 * i, 20 * i)
            out[i, 6] = lo + hi
            n, = a.shape
            out[i, 7] = n

    a = sd.ndarray(sd.i32, 4)
    a.from_numpy(np.array([1, 0, 1, 0], np.int32))
    k(a)
    got = out.to_numpy()
    i = np.arange(4)
    np.testing.assert_allclose(got[:, 0], 2.0 * i)
    np.testing.assert_allclose(got[:, 1], i + 100.0)
    np.testing.assert_allclose(got[:, 2:5], [[1.0, 1.0, 1.0]] * 4)
    np.testing.assert_allclose(got[:, 5], 2 * i)
    np.testing.assert_allclose(got[:, 6], np.where([1, 0, 1, 0], 3 * i, 30 * i))
    np.testing.assert_allclose(got[:, 7], 4)
    np.testing.assert_allclose(grid.to_numpy()[:, 1], [7.0, 7.0])


@test_archs(archs=exactly("cpu"))
def test_compile_time_errors_name_the_line(arch):
    out = sd.field(sd.f32, shape=2)

    @sd.kernel
    def bad_tuple():
        for i in range(2):
            a, b = (1.0, 2.0) if out[i] > 0 else (1.0, 2.0, 3.0)
            out[i] = a + b

    with pytest.raises(sd.SpiradTypeError, match="different lengths") as e:
        bad_tuple()
    assert "^" in str(e.value)

    @sd.kernel
    def bad_call():
        for i in range(2):
            out[i] = sd.static(divmod(1, 0)[0])

    with pytest.raises(sd.SpiradTypeError, match="compile time failed: ZeroDivisionError"):
        bad_call()

    @sd.func
    def dyn_return(x):
        if x > 0:
            return x
        return -x

    @sd.kernel
    def bad_return():
        for i in range(2):
            out[i] = dyn_return(out[i])

    with pytest.raises(sd.SpiradSyntaxError, match="only return"):
        bad_return()


@test_archs(archs=EVERY_ARCH)
def test_starred_arguments_and_struct_layout(arch):
    res = np.array([2, 3])
    grid = sd.field(sd.i32, shape=(2, 3, 2))
    P = sd.types.struct(x=sd.f32)
    p = P.field(shape=4, layout=sd.Layout.SOA)

    @sd.kernel
    def k():
        for i, j, b in sd.ndrange(*res, 2):
            grid[i, j, b] = i * 100 + j * 10 + b
        for i in range(4):
            p[i].x = i * 0.5

    k()
    want = np.add.outer(np.add.outer(np.arange(2) * 100, np.arange(3) * 10), np.arange(2))
    np.testing.assert_array_equal(grid.to_numpy(), want)
    np.testing.assert_allclose(p.x.to_numpy() if hasattr(p, "x") else [p[i].x for i in range(4)],
                               [0, 0.5, 1.0, 1.5])


@test_archs(archs=EVERY_ARCH)
def test_struct_field_grad_view(arch):
    P = sd.types.struct(x=sd.f32, n=sd.i32)
    p = P.field(shape=3, needs_grad=True)

    @sd.kernel
    def k():
        for i in range(3):
            p.grad[i].x = i + 1.0

    k()
    np.testing.assert_array_equal(p.x.grad.to_numpy(), [1, 2, 3])
    assert set(p.grad.members) == {"x"}


@test_archs()
def test_static_grouped_index_vector(arch):
    """`for o in sd.static(sd.grouped(sd.ndrange(...)))` (an MPM stencil): `o` is a vector of
    constants in arithmetic and `.cast`, and `o[d]` a Python int that indexes a Python list."""
    x = sd.field(sd.f32, shape=8)
    out = sd.Vector.field(2, sd.f32, shape=(8, 4))
    grid = sd.field(sd.f32, shape=(3, 3))

    @sd.kernel
    def k():
        for i in range(8):
            fx = sd.Vector([x[i], 2.0 * x[i]])
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2]
            base = sd.Vector([i % 2, 1])
            n = 0
            for o in sd.static(sd.grouped(sd.ndrange(2, 2))):
                weight = 1.0
                for d in sd.static(range(2)):
                    weight *= w[o[d]][d]
                if sd.static(o[0] == 1):
                    weight *= 2.0
                out[i, n] = (o.cast(sd.f32) - fx) * weight + (base + o).cast(sd.f32)
                grid[base + o] += weight
                n += 1

    xs = np.linspace(0.1, 0.9, 8).astype(np.float32)
    x.from_numpy(xs)
    k()
    want = np.zeros((8, 4, 2))
    want_grid = np.zeros((3, 3))
    for i, xv in enumerate(xs.astype(np.float64)):
        fx = np.array([xv, 2 * xv])
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2]
        for n, o in enumerate(np.ndindex(2, 2)):
            weight = w[o[0]][0] * w[o[1]][1] * (2.0 if o[0] == 1 else 1.0)
            want[i, n] = (np.array(o) - fx) * weight + np.array([i % 2, 1]) + np.array(o)
            want_grid[i % 2 + o[0], 1 + o[1]] += weight
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grid.to_numpy(), want_grid, rtol=1e-5)


@test_archs()
def test_tuple_inside_an_index_spreads(arch):
    """`I = (i, j)`; `x[f, I, b]`: a tuple (or list) inside an index stands for its elements."""
    x = sd.field(sd.f32, shape=(2, 3, 4, 2))
    a = sd.ndarray(sd.f32, (3, 4))

    @sd.kernel
    def k(a: sd.types.ndarray()):
        for i, j, b in sd.ndrange(3, 4, 2):
            I = (i, j)
            x[1, I, b] = i * 10 + j + b * 0.5
            if b == 0:
                a[[i, j]] = x[1, I, b] + 1.0

    k(a)
    want = np.add.outer(np.arange(3)[:, None] * 10.0 + np.arange(4), [0.0, 0.5])
    np.testing.assert_array_equal(x.to_numpy()[1], want)
    np.testing.assert_array_equal(a.to_numpy(), want[..., 0] + 1.0)


@test_archs()
def test_python_sequence_beside_a_vector(arch):
    """`(i, j, k) + offset` and `[[...]] * m`: a tuple / list of scalars beside a vector or
    matrix of its shape stands for one; another length is refused."""
    offset = sd.Vector([1, -2, 3])
    out = sd.Vector.field(3, sd.f32, shape=4)
    mat = sd.Matrix.field(2, 2, sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in range(4):
            I = (i, 2 * i, 3)
            out[i] = (I + offset) * 0.5 - [1.0, 0.0, i]
            mat[i] = [[i, 1], [2, 3]] * sd.Matrix([[1.0, 2.0], [3.0, 4.0]])

    k()
    i = np.arange(4.0)
    want = (np.stack([i, 2 * i, np.full(4, 3.0)], 1) + [1, -2, 3]) * 0.5 - np.stack(
        [np.ones(4), np.zeros(4), i], 1)
    np.testing.assert_allclose(out.to_numpy(), want)
    np.testing.assert_allclose(mat.to_numpy()[:, 0, 0], i)
    np.testing.assert_allclose(mat.to_numpy()[:, 1], np.tile([6.0, 12.0], (4, 1)))

    @sd.kernel
    def bad():
        for i in range(4):
            out[i] = (i, 1) + offset

    with pytest.raises(sd.SpiradTypeError, match="beside a vector"):
        bad()
