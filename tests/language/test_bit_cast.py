"""`sd.bit_cast(x, dtype)` (Taichi's `ti.bit_cast`): the operand's bits read as a type of the
same width (the IR's BITCAST), on every arch, against numpy's `view`; NaN payloads, signed
zeros, denormals and infinities keep their bits; no derivative flows through it (one side is an
integer, as in Taichi); different widths, u1 and vectors are refused at the user's line."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs

BITS32 = np.array([0, 1, 2333, 0x3F800000, 0x7F800000, 0xFF800000, 0x7FC00001, 0x80000000,
                   0x00000001, 0xDEADBEEF, 0x7FFFFFFF], np.uint32)


@test_archs()
def test_32_bit_casts_keep_every_bit(arch):
    n = len(BITS32)
    u = sd.field(sd.u32, shape=n)
    f = sd.field(sd.f32, shape=n)
    i = sd.field(sd.i32, shape=n)
    back = sd.field(sd.u32, shape=n)

    @sd.kernel
    def run():
        for k in u:
            x = sd.bit_cast(u[k], sd.f32)
            f[k] = x
            i[k] = sd.bit_cast(x, sd.i32)
            back[k] = sd.bit_cast(sd.bit_cast(sd.bit_cast(u[k], sd.i32), sd.f32), sd.u32)

    u.from_numpy(BITS32)
    run()
    want = BITS32.view(np.float32)
    got = f.to_numpy()
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[finite].view(np.uint32), BITS32[finite])
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.all(got[np.isinf(want)] ==
                                                                     want[np.isinf(want)])
    np.testing.assert_array_equal(i.to_numpy(), BITS32.view(np.int32))  # NaN payloads too
    np.testing.assert_array_equal(back.to_numpy(), BITS32)


@test_archs()
def test_64_bit_casts_and_literals(arch):
    """f64 <-> i64 / u64 of kernel arguments, and a literal (typed by default_fp: f32)."""
    out = sd.field(sd.i64, shape=3)
    outf = sd.field(sd.f64, shape=1)

    @sd.kernel
    def run(a: sd.f64, b: sd.u64):
        out[0] = sd.bit_cast(a, sd.i64)
        outf[0] = sd.bit_cast(b, sd.f64)
        out[1] = sd.cast(sd.bit_cast(3.14, sd.i32), sd.i64)
        out[2] = sd.bit_cast(sd.bit_cast(a, sd.u64), sd.i64)

    run(-1.5, 0x400921FB54442D18)
    want = np.array([-1.5], np.float64).view(np.int64)[0]
    assert out.to_numpy().tolist() == [want, 1078523331, want]
    assert outf[0] == np.pi  # the bits of float64 pi


@test_archs()
def test_no_derivative_flows_through_bit_cast(arch):
    """loss = x * bit_cast(bit_cast(x, i32), f32): the second factor is x, reached through an
    integer, so d loss / dx is x (Taichi's meaning), not 2x."""
    x = sd.field(sd.f32, shape=3, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def run():
        for k in x:
            loss[None] += x[k] * sd.bit_cast(sd.bit_cast(x[k], sd.i32), sd.f32)

    x.from_numpy(np.array([1.5, -2.0, 3.0], np.float32))
    with sd.ad.Tape(loss=loss):
        run()
    assert loss[None] == pytest.approx(1.5 ** 2 + 4 + 9)
    np.testing.assert_array_equal(x.grad.to_numpy(), [1.5, -2.0, 3.0])


def test_python_scope_and_refusals():
    sd.init(arch=sd.cpu)
    assert sd.bit_cast(1.0, sd.i32) == 1065353216
    assert sd.bit_cast(np.int32(1065353216), sd.f32) == 1.0
    assert sd.bit_cast(np.float64(-1.5), sd.u64) == np.array([-1.5]).view(np.uint64)[0]
    with pytest.raises(sd.SpiradTypeError, match="same width"):
        sd.bit_cast(np.float32(1), sd.i64)
    with pytest.raises(sd.SpiradTypeError, match="takes a scalar"):
        sd.bit_cast(np.zeros(2, np.float32), sd.i32)
    y = sd.field(sd.f64, shape=())
    v = sd.field(sd.i32, shape=())

    @sd.kernel
    def wide():
        y[None] = sd.bit_cast(v[None], sd.f64)

    with pytest.raises(sd.SpiradTypeError, match="from i32 to f64: the two types must have the "
                                                 "same width") as e:
        wide()
    assert "sd.bit_cast(v[None], sd.f64)" in str(e.value)

    @sd.kernel
    def vec():
        v[None] = sd.bit_cast(sd.Vector([1.0, 2.0]), sd.i32)[0]

    with pytest.raises(sd.SpiradTypeError, match="takes a scalar"):
        vec()
