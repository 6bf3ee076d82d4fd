"""Quantized types and bit-packed fields (`sd.types.quant`, `sd.BitpackedFields`,
`root.quant_array`; spirad.data.quant): values written in kernels and from Python read back as
an independent numpy model of Taichi's encoding says (wrapping ints, fixed point rounded half
away from zero, floats rounded to nearest and flushed to zero, shared exponents), and atomics on
members of one word under contention lose nothing. Metal refuses stores (no compare-and-swap)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs

Q = sd.types.quant


def wrap(v, bits, signed):
    """Two's complement wrap of ints `v` to `bits` bits."""
    v = np.asarray(v, np.int64) & ((1 << bits) - 1)
    return np.where(v >= 1 << (bits - 1), v - (1 << bits), v) if signed else v


def fixed_model(v, bits, signed, scale):
    """Taichi's fixed point: digits = trunc(f32(v) * f32(1/scale) +- 0.5), wrapped; read back
    as f32(digits) * f32(scale)."""
    x = np.float32(v) * np.float32(1.0 / scale)
    d = np.trunc(x + np.where(x > 0, np.float32(0.5), np.float32(-0.5))).astype(np.int64)
    return np.float32(wrap(d, bits, signed)) * np.float32(scale)


def float_model(v, exp, frac, signed):
    """A quant.float with its own exponent: the magnitude rounded (half up) to the digit bits,
    zero when the exponent falls below the type's range."""
    d = frac - int(signed)
    out = []
    for x in np.asarray(v, np.float64):
        if x == 0:
            out.append(0.0)
            continue
        e = np.frexp(abs(x))[1] - 1             # |x| in [2**e, 2**(e+1))
        ulp = 2.0 ** (e - d)
        r = np.floor(abs(x) / ulp + 0.5) * ulp
        er = np.frexp(r)[1] - 1
        low = 127 - (1 << (exp - 1)) + 1 - 127  # the smallest exponent kept is low + 1
        out.append(0.0 if er <= low else float(np.copysign(r, x)))
    return np.array(out)


def _pack(*fields, bits=32, shape=None, shared=False):
    bp = sd.BitpackedFields(max_num_bits=bits)
    bp.place(*fields, shared_exponent=shared)
    (sd.root.dense(sd.i, shape) if shape else sd.root).place(bp)
    return bp


@test_archs()
def test_quant_int_store_wraps(arch):
    n = 64
    x, y, z = sd.field(Q.int(13, True)), sd.field(Q.int(14, False)), sd.field(Q.int(5, True))
    _pack(x, y, z, shape=n)
    vals = np.arange(n, dtype=np.int64) * 523 - 9000  # crosses every range: wraps
    src = sd.field(sd.i32, shape=n)
    src.from_numpy(vals.astype(np.int32))
    back = sd.Vector.field(3, sd.i32, shape=n)

    @sd.kernel
    def store():
        for i in range(n):
            x[i] = src[i]
            y[i] = src[i] * 3
            z[i] = src[i] + 1

    @sd.kernel
    def load():
        for i in range(n):
            back[i] = sd.Vector([x[i], sd.cast(y[i], sd.i32), z[i]])

    store()
    load()
    want = np.stack([wrap(vals, 13, True), wrap(vals * 3, 14, False), wrap(vals + 1, 5, True)], -1)
    np.testing.assert_array_equal(back.to_numpy(), want)
    np.testing.assert_array_equal(x.to_numpy(), want[:, 0])
    np.testing.assert_array_equal(y.to_numpy(), want[:, 1])
    assert z[7] == want[7, 2]


@test_archs()
def test_quant_host_writes_read_in_kernels(arch):
    n = 16
    x, y = sd.field(Q.int(7, True)), sd.field(Q.fixed(bits=12, max_value=4.0))
    _pack(x, y, shape=n)
    xs = np.arange(n) * 13 - 100
    ys = np.linspace(-3.9, 3.9, n)
    x.from_numpy(xs)
    y.from_numpy(ys)
    x[3] = 1000  # wraps
    out = sd.field(sd.f32, shape=(n, 2))

    @sd.kernel
    def read():
        for i in range(n):
            out[i, 0] = x[i]
            out[i, 1] = y[i]

    read()
    want_x = wrap(xs, 7, True)
    want_x[3] = wrap(1000, 7, True)
    np.testing.assert_array_equal(out.to_numpy()[:, 0], want_x)
    np.testing.assert_array_equal(out.to_numpy()[:, 1], fixed_model(ys, 12, True, 4.0 / 2 ** 11))
    y.fill(1.5)
    read()
    assert (out.to_numpy()[:, 1] == 1.5).all() and (out.to_numpy()[:, 0] == want_x).all()


def _store_value_and_abs(signed, unsigned, vals):
    """Pack two quant fields of len(vals) into one word, then store vals into `signed` and
    |vals| into `unsigned` in a kernel (the device path of the encoding)."""
    n = len(vals)
    _pack(signed, unsigned, shape=n)
    src = sd.field(sd.f32, shape=n)
    src.from_numpy(vals)

    @sd.kernel
    def store():
        for i in range(n):
            signed[i] = src[i]
            unsigned[i] = sd.abs(src[i])

    store()


@test_archs()
def test_quant_fixed_rounding(arch):
    vals = np.array([0.25, -0.25, 0.75, -0.75, 1.24, 63.9, 64.0, 100.0, -64.2, -70.0, 3.1, -0.1],
                    np.float32)
    x = sd.field(Q.fixed(bits=8, signed=True, scale=0.5))
    u = sd.field(Q.fixed(bits=10, signed=False, max_value=100.0))
    _store_value_and_abs(x, u, vals)
    np.testing.assert_array_equal(x.to_numpy(), fixed_model(vals, 8, True, 0.5))
    np.testing.assert_array_equal(u.to_numpy(), fixed_model(np.abs(vals), 10, False, 100.0 / 2 ** 10))
    x[0] = 1.24  # the host path encodes the same way
    assert x[0] == fixed_model(np.float32(1.24), 8, True, 0.5)


@test_archs()
def test_quant_float_own_exponent(arch):
    vals = np.array([0.0, 1.0, -1.5, 3.3, -1e-3, 1e-7, 123.456, -0.3, 7.9, 1e4, 2.0 ** -14,
                     -2.0 ** -15], np.float32)
    a = sd.field(Q.float(exp=5, frac=11, signed=True))
    b = sd.field(Q.float(exp=6, frac=10, signed=False))
    _store_value_and_abs(a, b, vals)
    np.testing.assert_array_equal(a.to_numpy(), float_model(vals, 5, 11, True))
    np.testing.assert_array_equal(b.to_numpy(), float_model(np.abs(vals), 6, 10, False))
    b[2] = 3.3  # host write, same encoding
    assert b[2] == float_model([3.3], 6, 10, False)[0]


@test_archs()
def test_quant_float_shared_exponent(arch):
    a = sd.field(Q.float(exp=8, frac=10, signed=False))
    b = sd.field(Q.float(exp=8, frac=14, signed=True))
    _pack(a, b, shared=True)

    @sd.kernel
    def store(x: sd.f32, y: sd.f32):
        a[None] = x
        b[None] = y

    store(100.0, 0.3)  # one exponent, 100's: b keeps 14 - 1 bits below 2**7
    assert a[None] == 100.0
    ulp = 2.0 ** (6 + 1 - 13)
    assert b[None] == np.floor(0.3 / ulp + 0.5) * ulp
    store(1000.0, 1e-6)  # b falls below the shared exponent's last digit
    assert (a[None], b[None]) == (1000.0, 0.0)
    store(3.0, -0.25)
    assert (a[None], b[None]) == (3.0, -0.25)
    a[None] = 0.5  # a host write re-encodes b to the new exponent (-0.25 is exact there)
    assert (a[None], b[None]) == (0.5, -0.25)


@test_archs()
def test_quant_atomics_under_contention(arch):
    m = 8  # words; four members in each
    p, q = sd.field(Q.int(6, True)), sd.field(Q.int(9, False))
    r, s = sd.field(Q.fixed(bits=9, signed=True, scale=0.25)), sd.field(Q.int(8, True))
    _pack(p, q, r, s, shape=m)
    n = 4096

    @sd.kernel
    def hammer():
        for i in range(n):
            w = i % m
            p[w] += 1
            q[w] -= 3
            sd.atomic_add(r[w], 0.25)
            s[w] += i % 3

    hammer()
    per = n // m
    np.testing.assert_array_equal(p.to_numpy(), wrap(np.full(m, per), 6, True))
    np.testing.assert_array_equal(q.to_numpy(), wrap(np.full(m, -3 * per), 9, False))
    np.testing.assert_array_equal(r.to_numpy(), wrap(np.full(m, per), 9, True) * 0.25)
    sums = np.array([sum(i % 3 for i in range(w, n, m)) for w in range(m)])
    np.testing.assert_array_equal(s.to_numpy(), wrap(sums, 8, True))


@test_archs()
def test_quant_neighbours_stored_concurrently(arch):
    n = 256  # iteration i stores member i % 4 of word i // 4: every word written by 4 threads
    f = [sd.field(Q.int(8, False)) for _ in range(4)]
    _pack(*f, shape=n // 4)

    @sd.kernel
    def store():
        for i in range(n):
            k, w = i % 4, i // 4
            if k == 0:
                f[0][w] = i
            elif k == 1:
                f[1][w] = i
            elif k == 2:
                f[2][w] = i
            else:
                f[3][w] = i

    store()
    for k in range(4):
        np.testing.assert_array_equal(f[k].to_numpy(), wrap(np.arange(k, n, 4), 8, False))


@test_archs()
def test_quant_array_bits(arch):
    x = sd.field(Q.int(1, False))
    y = sd.field(Q.int(7, True))
    sd.root.dense(sd.i, 3).quant_array(sd.j, 32, max_num_bits=32).place(x)
    sd.root.quant_array(sd.i, 4, max_num_bits=32).place(y)
    assert x.shape == (3, 32) and y.shape == (4,)

    @sd.kernel
    def store():
        for i, j in sd.ndrange(3, 32):
            x[i, j] = (i * 7 + j * j) % 3 == 0
        for i in range(4):
            y[i] = -i * 20

    store()
    i, j = np.meshgrid(np.arange(3), np.arange(32), indexing="ij")
    np.testing.assert_array_equal(x.to_numpy(), ((i * 7 + j * j) % 3 == 0).astype(np.uint32))
    np.testing.assert_array_equal(y.to_numpy(), -np.arange(4) * 20)


@test_archs(require=("i64",))
def test_quant_u64_words(arch):
    x = sd.field(Q.int(32, True))
    y = sd.field(Q.int(23, False))
    z = sd.field(Q.int(9, True))
    _pack(x, y, z, bits=64, shape=4)

    @sd.kernel
    def store():
        for i in range(4):
            x[i] = 2 ** 31 - 1 - i
            y[i] = 2 ** 23 - 1 - i
            z[i] = -(2 ** 8) + i
        for i in range(40):
            z[i % 4] += 1

    store()
    np.testing.assert_array_equal(x.to_numpy(), 2 ** 31 - 1 - np.arange(4))
    np.testing.assert_array_equal(y.to_numpy(), 2 ** 23 - 1 - np.arange(4))
    np.testing.assert_array_equal(z.to_numpy(), -(2 ** 8) + np.arange(4) + 10)


@test_archs()
def test_quant_vector_field(arch):
    qf = Q.fixed(bits=16, max_value=2.0)
    v = sd.Vector.field(2, dtype=qf)
    _pack(v)
    v[None] = [1.0, -0.5]

    @sd.kernel
    def rotate():
        c, s = sd.cos(0.3), sd.sin(0.3)
        p = v[None]
        v[None] = sd.Vector([c * p[0] - s * p[1], s * p[0] + c * p[1]])

    rotate()
    c, s = np.cos(np.float32(0.3)), np.sin(np.float32(0.3))
    want = fixed_model(np.array([c * 1.0 + s * 0.5, s * 1.0 - c * 0.5], np.float32), 16, True,
                       2.0 / 2 ** 15)
    np.testing.assert_allclose(v.to_numpy(), want, atol=2.0 / 2 ** 15)
    assert v.get_scalar_field(1)[None] == v[None][1]
    m = sd.Matrix.field(2, 2, dtype=[[Q.float(exp=6, frac=10), qf], [qf, Q.float(exp=6, frac=10)]])
    _pack(m.get_scalar_field(0, 0), m.get_scalar_field(0, 1), shape=2)
    _pack(m.get_scalar_field(1, 0), m.get_scalar_field(1, 1), shape=2)

    @sd.kernel
    def fill_m():
        for i in range(2):
            m[i] = sd.Matrix([[1.5, -0.25], [0.125, 3.0]]) * (i + 1)

    fill_m()
    np.testing.assert_array_equal(m.to_numpy(), [[[1.5, -0.25], [0.125, 3.0]],
                                                 [[3.0, -0.5], [0.25, 6.0]]])


def test_quant_errors():
    sd.init(arch=sd.cpu)
    with pytest.raises(sd.SpiradTypeError, match="no gradients"):
        sd.field(Q.int(8), needs_grad=True)
    with pytest.raises(sd.SpiradValueError, match="placed through a bit-pack"):
        sd.field(Q.int(8), shape=4)
    a, b = sd.field(Q.int(20)), sd.field(Q.int(20))
    bp = sd.BitpackedFields(max_num_bits=32)
    with pytest.raises(sd.SpiradValueError, match="is full"):
        bp.place(a, b)
    f = sd.field(Q.float(exp=5, frac=10))
    with pytest.raises(sd.SpiradSyntaxError, match="At least 2 fields"):
        sd.BitpackedFields(max_num_bits=32).place(f, shared_exponent=True)
    with pytest.raises(sd.SpiradTypeError, match="through sd.BitpackedFields"):
        sd.root.dense(sd.i, 4).place(sd.field(Q.int(4)))
    with pytest.raises(sd.SpiradValueError, match="quant.float: exp"):
        Q.float(exp=9, frac=10)
    with pytest.raises(RuntimeError, match="same compute type"):
        sd.Vector.field(2, dtype=[Q.int(10), Q.fixed(bits=10, scale=0.1)])
