"""Quadrants' language surface beyond Taichi: u64, `sd.math.popcnt / clz / ffs` (and Taichi's
`sd.bit_shr`), run-time
indexing and slicing of vector / matrix locals (read, write, in place, under reverse mode),
`fill`, `any`, `all`, `vec @ vec`, `vec @ mat`, `sd.math.outer`."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


@test_archs()
def test_u64_arithmetic_and_shifts(arch):
    out = sd.field(sd.u64, shape=4)

    @sd.kernel
    def k():
        for i in range(4):
            key = (sd.u64(i + 1) << sd.u64(40)) | sd.u64(7 * i)
            out[i] = key + sd.u64(0xFFFFFFFF)

    k()
    want = [((i + 1) << 40 | 7 * i) + 0xFFFFFFFF for i in range(4)]
    np.testing.assert_array_equal(out.to_numpy(), np.array(want, np.uint64))
    assert out.to_numpy().dtype == np.uint64


@test_archs()
def test_bit_counting(arch):
    vals32 = np.array([0, 1, 6, 0x80000000, 0xFFFFFFFF, 0x00F0F000, 12345, 2], np.uint32)
    vals64 = np.array([0, 1, 1 << 40, (1 << 63) | 5, 0xFFFFFFFFFFFFFFFF, 3 << 33, 77, 1 << 32],
                      np.uint64)
    a = sd.field(sd.u32, shape=8)
    b = sd.field(sd.u64, shape=8)
    a.from_numpy(vals32)
    b.from_numpy(vals64)
    out = sd.field(sd.i32, shape=(8, 6))

    @sd.kernel
    def k():
        for i in range(8):
            out[i, 0] = sd.math.popcnt(a[i])
            out[i, 1] = sd.math.clz(a[i])
            out[i, 2] = sd.math.ffs(sd.cast(a[i], sd.i32))
            out[i, 3] = sd.math.popcnt(b[i])
            out[i, 4] = sd.math.clz(b[i])
            out[i, 5] = sd.math.ffs(b[i])

    k()

    def ref(v, w):
        v = int(v)
        return [bin(v).count("1"), w - v.bit_length(), (v & -v).bit_length()]
    want = [ref(x, 32) + ref(y, 64) for x, y in zip(vals32, vals64)]
    np.testing.assert_array_equal(out.to_numpy(), want)
    assert sd.math.popcnt(np.uint32(7)) == 3 and sd.math.clz(np.int32(1)) == 31
    assert sd.math.ffs(np.int64(1 << 40)) == 41


@test_archs()
def test_bit_shr_is_logical(arch):
    vals = np.array([256, -256, -1, 5, -(2 ** 31), 2 ** 31 - 1], np.int32)
    a = sd.field(sd.i32, shape=6)
    a.from_numpy(vals)
    out = sd.field(sd.i32, shape=(6, 3))
    uout = sd.field(sd.u32, shape=6)

    @sd.kernel
    def k():
        for i in range(6):
            for s in sd.static(range(3)):
                out[i, s] = sd.bit_shr(a[i], s * 3)
            uout[i] = sd.bit_shr(sd.cast(a[i], sd.u32), 4)

    k()
    want = [[(int(v) & 0xFFFFFFFF) >> (3 * s) for s in range(3)] for v in vals]
    np.testing.assert_array_equal(out.to_numpy(), np.array(want, np.int64).astype(np.int32))
    np.testing.assert_array_equal(uout.to_numpy(), (vals.astype(np.uint32) >> 4))
    assert sd.bit_shr(-256, 1) == (2 ** 32 - 256) >> 1 and sd.bit_shr(np.int32(-1), 1) == 2 ** 31 - 1


@test_archs()
def test_runtime_index_of_local_vectors_and_matrices(arch):
    idx = sd.field(sd.i32, shape=6)
    idx.from_numpy(np.array([0, 2, 1, 3, 2, 0], np.int32))
    out = sd.field(sd.f32, shape=(6, 4))

    @sd.kernel
    def k():
        for i in range(6):
            v = sd.Vector([10.0, 20.0, 30.0, 40.0])
            m = sd.Matrix([[1.0, 2.0], [3.0, 4.0]])
            j = idx[i]
            out[i, 0] = v[j]
            v[j] = -1.0
            v[(j + 1) % 4] += 0.5
            out[i, 1] = v.sum()
            out[i, 2] = m[j % 2, (j + 1) % 2]
            m[j % 2][0] = 9.0
            out[i, 3] = m[0, 0] * 10 + m[1, 0]

    k()
    got = out.to_numpy()
    base = np.array([10.0, 20.0, 30.0, 40.0])
    for i, j in enumerate([0, 2, 1, 3, 2, 0]):
        v = base.copy()
        v[j] = -1.0
        v[(j + 1) % 4] += 0.5
        m = np.array([[1.0, 2.0], [3.0, 4.0]])
        r = m[j % 2, (j + 1) % 2]
        m[j % 2, 0] = 9.0
        np.testing.assert_allclose(got[i], [base[j], v.sum(), r, m[0, 0] * 10 + m[1, 0]])


@test_archs()
def test_slices_read_and_write(arch):
    out = sd.Matrix.field(3, 3, sd.f32, shape=2)

    @sd.kernel
    def k():
        for i in range(2):
            m = sd.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
            row = m[i, :]
            col = m[:, i + 1]
            m[2, :] = row * 2.0
            m[:, 0] += col
            m[0, 1:3] = sd.Vector([-1.0, -2.0])
            out[i] = m

    k()
    for i in range(2):
        m = np.arange(1.0, 10.0).reshape(3, 3)
        row, col = m[i, :].copy(), m[:, i + 1].copy()
        m[2, :] = row * 2
        m[:, 0] += col
        m[0, 1:3] = [-1, -2]
        np.testing.assert_allclose(out.to_numpy()[i], m)


@test_archs()
def test_slices_of_global_elements(arch):
    """`T[None][:3, :3]`, `x[i][1, 1:3]`: a slice of a field element reads the element;
    assigning to one is refused."""
    T = sd.Matrix.field(4, 4, sd.f32, shape=2)
    out = sd.Matrix.field(3, 3, sd.f32, shape=2)
    row = sd.Vector.field(2, sd.f32, shape=2)

    @sd.kernel
    def k():
        for i in range(2):
            out[i] = T[i][:3, :3].inverse()
            row[i] = T[i][1, 1:3]

    m = np.tile(np.eye(4, dtype=np.float32), (2, 1, 1))
    m[:, :3, :3] = [[2, 0, 0], [0, 4, 1], [0, 0, 5]]
    m[1, 1, 2] = 3.0
    T.from_numpy(m)
    k()
    np.testing.assert_allclose(out.to_numpy(), np.linalg.inv(m[:, :3, :3]), rtol=1e-6)
    np.testing.assert_allclose(row.to_numpy(), m[:, 1, 1:3])

    @sd.kernel
    def write():
        T[0][0, :3] = sd.Vector([1.0, 2.0, 3.0])

    with pytest.raises(sd.SpiradSyntaxError, match="cannot be assigned"):
        write()


@test_archs()
def test_runtime_index_differentiates(arch):
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    sel = sd.field(sd.i32, shape=4)
    data = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
    x.from_numpy(data)
    sel.from_numpy(np.array([3, 0, 0, 2], np.int32))

    @sd.kernel
    def k():
        for i in range(4):
            v = sd.Vector([x[0], x[1], x[2], x[3]])
            for t in range(3):  # a dynamic loop: the local is carried on the adstack
                v[sel[(i + t) % 4]] = v[(i + t) % 4] * v[sel[i]]
            loss[None] += v[i] * v[(i + 1) % 4]

    with sd.ad.Tape(loss=loss):
        k()

    def f(xs):
        tot = 0.0
        s = [3, 0, 0, 2]
        for i in range(4):
            v = list(xs)
            for t in range(3):
                v[s[(i + t) % 4]] = v[(i + t) % 4] * v[s[i]]
            tot += v[i] * v[(i + 1) % 4]
        return tot
    d = data.astype(np.float64)
    num = []
    for j in range(4):
        e = np.zeros(4)
        e[j] = 1e-6
        num.append((f(d + e) - f(d - e)) / 2e-6)
    assert abs(loss[None] - f(d)) < 1e-4 * max(1, abs(f(d)))
    np.testing.assert_allclose(x.grad.to_numpy(), num, rtol=1e-3, atol=1e-4)


@test_archs()
def test_fill_any_all_products_outer(arch):
    out = sd.field(sd.f32, shape=8)
    flags = sd.field(sd.i32, shape=4)
    g = sd.Vector.field(3, sd.f32, shape=2)

    @sd.kernel
    def k():
        for _ in range(1):
            a = sd.Vector([1.0, 2.0, 3.0])
            b = sd.Vector([4.0, -5.0, 6.0])
            m = sd.Matrix([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0], [3.0, 0.0, 1.0]])
            out[0] = a @ b
            r = a @ m
            out[1], out[2], out[3] = r[0], r[1], r[2]
            o = sd.math.outer(a, b)
            out[4] = o[2, 1]
            m.fill(0.5)
            out[5] = m.sum()
            g[1].fill(2.0)
            flags[0] = (a > 2.5).any()
            flags[1] = (a > 0.5).all()
            flags[2] = (b > 0.0).all()
            flags[3] = (sd.abs(b) < 10.0).all() and (a == 7.0).any() == 0

    k()
    a, b = np.array([1.0, 2, 3]), np.array([4.0, -5, 6])
    m = np.array([[1.0, 0, 2], [0, 1, 0], [3, 0, 1]])
    np.testing.assert_allclose(out.to_numpy()[:6], [a @ b, *(a @ m), a[2] * b[1], 4.5])
    np.testing.assert_array_equal(flags.to_numpy(), [1, 1, 0, 1])
    np.testing.assert_array_equal(g.to_numpy(), [[0, 0, 0], [2, 2, 2]])


@test_archs(archs=exactly("cpu"))
def test_slice_bounds_must_be_static(arch):
    out = sd.field(sd.f32, shape=2)

    @sd.kernel
    def k(n: sd.i32):
        v = sd.Vector([1.0, 2.0, 3.0])
        w = v[0:n]
        out[0] = w[0]

    with pytest.raises(sd.SpiradTypeError, match="slice bounds"):
        k(2)


@test_archs()
def test_raw_mod_is_c_remainder(arch):
    out = sd.field(sd.f32, shape=4)
    iout = sd.field(sd.i32, shape=4)
    a = sd.field(sd.i32, shape=4)
    a.from_numpy(np.array([7, -7, 7, -7], np.int32))

    @sd.kernel
    def k():
        for i in range(4):
            b = 3 if i < 2 else -3
            iout[i] = sd.raw_mod(a[i], b)
            out[i] = sd.raw_mod(sd.cast(a[i], sd.f32) + 0.5, sd.cast(b, sd.f32))

    k()
    np.testing.assert_array_equal(iout.to_numpy(), [1, -1, 1, -1])
    np.testing.assert_allclose(out.to_numpy(), np.fmod([7.5, -6.5, 7.5, -6.5], [3, 3, -3, -3]))
    assert sd.raw_mod(-7, 3) == -1
