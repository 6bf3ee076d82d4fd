"""The 8- and 16-bit types `u8 i8 u16 i16 f16` (Taichi's semantics): storage in fields,
ndarrays and vector fields at their own width, kernel arguments, casts, wraparound, Taichi's
promotion (typed operands: the wider wins, unsigned at equal width, a float beats an int; a
literal beside a small type takes the default type), f16 math in f32, atomics (LLVM archs; SPIR-V
refuses them with the reason) and f16 gradients. Metal refuses every small type at compile time
(strict xfails through the arch decorator); Vulkan needs the device features
(`spirad/backends/small_types.py`), which lavapipe has."""
import subprocess
import sys

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradTypeError
from tests.support.archs import exactly, test_archs
from tests.support.quadrants_process import ROOT, shim_env

SMALL = [("u8", np.uint8), ("i8", np.int8), ("u16", np.uint16), ("i16", np.int16),
         ("f16", np.float16)]


@pytest.mark.parametrize("name,npt", SMALL, ids=[s for s, _ in SMALL])
@test_archs()
def test_storage_round_trip(arch, name, npt):
    dt = getattr(sd, name)
    # neighbours of another width around it: each field keeps its own bytes
    a, x, b = sd.field(sd.i32, 5), sd.field(dt, 7), sd.field(sd.f32, 3)
    v = sd.Vector.field(3, dt, shape=4)
    nd = sd.ndarray(dt, shape=(6,))
    vals = np.array([0, 1, 2, 3, 100, 7, 9], npt)
    x.from_numpy(vals)
    a.fill(-1)
    b.fill(2.5)

    @sd.kernel
    def k(s: dt, arr: sd.types.ndarray()):
        for i in x:
            x[i] = x[i] + s
        for i in range(4):
            v[i] = [dt(i), dt(i + 1), s]
        for i in arr:
            arr[i] = dt(i) * s

    k(3, nd)
    got = x.to_numpy()
    assert got.dtype == npt
    np.testing.assert_array_equal(got, (vals.astype(np.int64) + 3).astype(npt))
    np.testing.assert_array_equal(a.to_numpy(), np.full(5, -1, np.int32))
    np.testing.assert_array_equal(b.to_numpy(), np.full(3, 2.5, np.float32))
    assert v.to_numpy().dtype == npt
    np.testing.assert_array_equal(v.to_numpy()[:, 2], np.full(4, 3, npt))
    np.testing.assert_array_equal(v.to_numpy()[:, 1], np.arange(1, 5).astype(npt))
    np.testing.assert_array_equal(nd.to_numpy(), (np.arange(6) * 3).astype(npt))
    x[2] = 5  # Python-scope element write and read
    assert x[2] == 5 and type(x[2]) is (float if name == "f16" else int)
    if name.startswith("u"):  # the negative values of the width wrap, as in Taichi; no further
        x[2] = -128
        assert x[2] == (1 << npt(0).nbytes * 8) - 128
        with pytest.raises(sd.SpiradValueError, match="do not fit"):
            x[2] = -(1 << npt(0).nbytes * 8)


@test_archs()
def test_wraparound_and_promotion(arch):
    u, i, c, d = sd.field(sd.u8, 4), sd.field(sd.i8, 4), sd.field(sd.i32, 4), sd.field(sd.i32, 4)
    w = sd.field(sd.i16, 4)

    @sd.kernel
    def k():
        for j in u:
            u[j] = sd.u8(250) + sd.u8(3 * j)        # u8 + u8: wraps at 8 bits
            i[j] = sd.i8(125) + sd.i8(j)            # i8: wraps to -128
            c[j] = u[j] + i[j]                      # u8 + i8 -> u8 (unsigned at equal width)
            d[j] = u[j] + 1                         # a literal takes i32 (Taichi): no wrap
            w[j] = sd.i16(i[j]) * sd.i16(300)       # i16 wraps at 16 bits

    k()
    us = (250 + 3 * np.arange(4)).astype(np.uint8)
    is_ = (125 + np.arange(4)).astype(np.int8)
    np.testing.assert_array_equal(u.to_numpy(), us)
    np.testing.assert_array_equal(i.to_numpy(), is_)
    np.testing.assert_array_equal(c.to_numpy(), (us + is_.astype(np.uint8)).astype(np.int32))
    np.testing.assert_array_equal(d.to_numpy(), us.astype(np.int32) + 1)
    np.testing.assert_array_equal(w.to_numpy(), (is_.astype(np.int16) * np.int16(300)))


@test_archs()
def test_bit_counting_in_the_own_width(arch):
    x, out = sd.field(sd.i8, 3), sd.field(sd.i32, (3, 3))
    x.from_numpy(np.array([-1, 1, 0x10], np.int8))

    @sd.kernel
    def k():
        for i in x:
            out[i, 0] = sd.math.popcnt(x[i])
            out[i, 1] = sd.math.clz(x[i])
            out[i, 2] = sd.math.ffs(x[i])

    k()
    np.testing.assert_array_equal(out.to_numpy(), [[8, 0, 1], [1, 7, 1], [1, 3, 5]])


@test_archs()
def test_f16_arithmetic_and_math(arch):
    h = sd.field(sd.f16, 8)
    s = sd.field(sd.f16, 8)
    q = sd.field(sd.f32, 8)

    @sd.kernel
    def k():
        for j in h:
            x = sd.f16(j) * sd.f16(0.25) + sd.f16(0.1)
            h[j] = x * x - x                         # f16 arithmetic, rounded per op
            s[j] = sd.sin(x)                         # computed in f32, rounded to f16
            q[j] = x / 3                             # f16 / literal -> f32 (Taichi)

    k()
    x = np.arange(8).astype(np.float16) * np.float16(0.25) + np.float16(0.1)
    np.testing.assert_array_equal(h.to_numpy(), x * x - x)
    np.testing.assert_allclose(s.to_numpy(), np.sin(x.astype(np.float32)).astype(np.float16),
                               rtol=0, atol=1e-3)
    np.testing.assert_allclose(q.to_numpy(), x.astype(np.float32) / 3, rtol=1e-6)


@test_archs()
def test_print(arch, capfd):
    x, u = sd.field(sd.f16, 3), sd.field(sd.i16, 3)

    @sd.kernel
    def k():
        for i in range(3):
            x[i] = sd.f16(i) * sd.f16(0.3)
            u[i] = sd.i16(-5 * i)
            print(x[i], u[i])

    k()
    sd.sync()
    lines = sorted(capfd.readouterr().out.split("\n")[-4:-1])
    assert lines == ["0.0 0", "0.3 -5", "0.6 -10"]  # f16 values print as np.float16 does


@test_archs()
def test_casts(arch):
    f = sd.field(sd.f32, 6)
    out8, outu8, out16, outh = (sd.field(t, 6) for t in (sd.i8, sd.u8, sd.u16, sd.f16))
    back = sd.field(sd.f32, 6)
    f.from_numpy(np.array([-3.7, 2.9, 100.5, -128.0, 70000.0, 0.333], np.float32))

    @sd.kernel
    def k():
        for j in f:
            out8[j] = sd.cast(sd.cast(f[j], sd.i32), sd.i8)
            outu8[j] = sd.cast(sd.i32(-1) - j, sd.u8)
            out16[j] = sd.cast(f[j], sd.u16) if f[j] >= 0 else sd.u16(0)
            outh[j] = sd.cast(f[j], sd.f16)
            back[j] = sd.cast(outh[j], sd.f32)

    k()
    fv = f.to_numpy()
    np.testing.assert_array_equal(out8.to_numpy(), fv.astype(np.int32).astype(np.int8))
    np.testing.assert_array_equal(outu8.to_numpy(), (-1 - np.arange(6)).astype(np.uint8))
    want16 = np.where(fv >= 0, fv.astype(np.int64).astype(np.uint16), 0)
    np.testing.assert_array_equal(out16.to_numpy(), want16.astype(np.uint16))
    with np.errstate(over="ignore"):  # 70000 -> inf, in numpy too
        fh = fv.astype(np.float16)
    np.testing.assert_array_equal(outh.to_numpy(), fh)
    np.testing.assert_array_equal(back.to_numpy(), fh.astype(np.float32))


def _atomics():
    c8, c16, ch = sd.field(sd.u8, ()), sd.field(sd.i16, ()), sd.field(sd.f16, ())
    m8 = sd.field(sd.i8, ())

    @sd.kernel
    def k():
        for j in range(100):
            sd.atomic_add(c8[None], sd.u8(3))
            sd.atomic_add(c16[None], sd.i16(-400))
            sd.atomic_add(ch[None], sd.f16(0.5))
            sd.atomic_max(m8[None], sd.i8(j - 50))

    k()
    return c8[None], c16[None], ch[None], m8[None]


@test_archs()
def test_atomics(arch):
    assert _atomics() == (300 % 256, -40000 + 65536, 50.0, 49)  # u8 and i16 wrap


@test_archs()
def test_atomics_on_neighbouring_elements(arch):
    """Elements sharing a 32-bit word, updated at once by many invocations (SPIR-V: one
    compare-and-swap loop per update on the word, which must keep the neighbours' bits), with
    plain stores to other elements of the same words in the same task."""
    c8, c16 = sd.field(sd.u8, 16), sd.field(sd.i16, 8)
    h = sd.field(sd.f16, 8)
    nd = sd.ndarray(sd.u16, 6)

    @sd.kernel
    def k(a: sd.types.ndarray()):
        for i in range(4000):
            a[i % 3] += sd.u16(20)
            if i < 3:
                a[3 + i] = sd.u16(65535 - i)
            c8[i % 8] += sd.u8(1)
            c16[i % 4] -= sd.i16(1)
            h[i % 4] += sd.f16(0.25)
            if i < 8:
                c8[8 + i] = sd.u8(i + 100)
                c16[4 + i % 4] = sd.i16(-7)
                h[4 + i % 4] = sd.f16(1.5)

    k(nd)
    want = [(1334 * 20) % 65536, (1333 * 20) % 65536, (1333 * 20) % 65536, 65535, 65534, 65533]
    np.testing.assert_array_equal(nd.to_numpy(), want)
    np.testing.assert_array_equal(c8.to_numpy(), [500 % 256] * 8 + [100 + i for i in range(8)])
    np.testing.assert_array_equal(c16.to_numpy(), [-1000] * 4 + [-7] * 4)
    np.testing.assert_array_equal(h.to_numpy(), [250.0] * 4 + [1.5] * 4)


def _f16_grad(n=8, end=1.5):
    x = sd.field(sd.f16, n, needs_grad=True)
    loss = sd.field(sd.f16, (), needs_grad=True)
    xs = np.linspace(-end, end, n).astype(np.float16)
    x.from_numpy(xs)

    @sd.kernel
    def f():
        for i in x:
            loss[None] += sd.sin(x[i]) * x[i] * sd.f16(0.25)

    with sd.ad.Tape(loss=loss):
        f()
    return xs.astype(np.float64), x.grad.to_numpy()


@test_archs()
def test_f16_gradient(arch):
    xs, g = _f16_grad()
    assert g.dtype == np.float16
    want = 0.25 * (np.cos(xs) * xs + np.sin(xs))  # d/dx (sin x * x / 4), float64
    np.testing.assert_allclose(g.astype(np.float64), want, rtol=0, atol=4e-3)


@test_archs(debug=False)
def test_f16_gradient_in_simd_lanes(arch):
    """The release build of a long f16 loop: on the CPU the adjoint runs in SIMD lanes, whose
    atomic add at one address is a compare-and-swap loop; it was built on 32-bit words for
    every float but f64, so half failed to compile (an LLVM IR parsing error: bitcast i32 to
    half). Found 2026-12-07 running tests/language in release."""
    xs, g = _f16_grad(1024, 1.0)
    want = 0.25 * (np.cos(xs) * xs + np.sin(xs))
    np.testing.assert_allclose(g.astype(np.float64), want, rtol=0, atol=4e-3)


@test_archs(archs=exactly("metal"))
def test_metal_refuses_small_types(arch):
    x = sd.field(sd.u8, 4)

    @sd.kernel
    def k():
        for i in x:
            x[i] = sd.u8(i)

    with pytest.raises(SpiradTypeError, match="has no 8- or 16-bit integers"):
        k()


def test_names_and_numpy_types():
    for name, npt in SMALL:
        dt = getattr(sd, name)
        assert getattr(sd.types, name) is dt and dt.np == np.dtype(npt)
    assert (sd.float16, sd.int8, sd.uint8, sd.int16, sd.uint16) == (sd.f16, sd.i8, sd.u8,
                                                                    sd.i16, sd.u16)
    assert [sd.types.is_signed(t) for t in (sd.i8, sd.u8, sd.i16, sd.u16)] == [True, False] * 2
    assert sd.types.is_integral(sd.u8) and not sd.types.is_integral(sd.f16)
    assert sd.types.is_real(sd.f16) and sd.f16.to_string() == "f16"
    # Taichi's and Quadrants' names (each module in a fresh process: importing them changes
    # process defaults)
    env = shim_env()
    for mod in ("taichi", "quadrants"):
        prog = (f"import spirad as sd; from spirad.compat import taichi_alias\n"
                f"taichi_alias.install(); import {mod} as m\n"
                f"assert all(getattr(m, n) is getattr(sd, n) for n in "
                f"('u8', 'i8', 'u16', 'i16', 'f16', 'float16', 'uint8'))")
        r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                           env=env, cwd=ROOT, timeout=120)
        assert r.returncode == 0, r.stderr



@pytest.mark.filterwarnings("ignore::spirad.SpiradWarning")
def test_f16_atomic_max_in_release():
    """Taichi's test_f16.py::test_atomic_max_f16: LLVM 22's loop vectoriser aborted the process
    on the parallel `atomic_max(f[0], 1.12 * i)` into an f16 field compiled in release (an
    assertion in llvmlite's LLVM: "VPlan cost model and legacy cost model disagreed"); f16
    modules are not loop-vectorised (llvm_codegen/cpu_runtime._has_half)."""
    sd.init(arch=sd.cpu, debug=False, offline_cache=False)
    f = sd.field(dtype=sd.f16, shape=2)

    @sd.kernel
    def foo():
        for i in range(1000):
            sd.atomic_max(f[0], 1.12 * i)
        for _ in range(1):
            for i in range(1000):
                f[1] = sd.max(1.12 * i, f[1])

    foo()
    assert f[0] == f[1] == np.float16(1.12 * 999)
