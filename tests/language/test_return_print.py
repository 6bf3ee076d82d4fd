"""Kernel return values (scalars, Vector, Matrix, tuples; Taichi's rules) and `print` in kernels
(buffered on the device, printed at sync, in order per thread; Python's formatting of values).
Every expected value comes from numpy or Python itself."""
import warnings

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, exactly, test_archs



# -- return values --------------------------------------------------------------------------------


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_scalar_returns_cast_to_the_declared_type(arch):
    @sd.kernel
    def mul(a: sd.i32, b: sd.f32) -> sd.f32:
        return a * b

    @sd.kernel
    def trunc(a: sd.f32) -> sd.i32:
        return a * 2.0             # cast to i32 (toward zero), as in Taichi

    @sd.kernel
    def const() -> float:
        return 3

    @sd.kernel
    def flag(a: sd.i32) -> bool:
        return a > 2

    assert mul(3, 1.25) == 3.75 and isinstance(mul(3, 1.25), float)
    assert trunc(1.7) == 3 and isinstance(trunc(1.7), int)
    assert trunc(-1.7) == -3
    assert const() == 3.0
    assert flag(3) is True and flag(1) is False


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_return_after_parallel_loops_reads_fields_and_locals(arch):
    n = 100
    x = sd.field(sd.f32, shape=n)
    total = sd.field(sd.f32, shape=())
    xs = np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32)
    x.from_numpy(xs)

    @sd.kernel
    def reduce(scale: sd.f32) -> sd.f32:
        total[None] = 0.0
        for i in x:
            total[None] += x[i] * scale
        s = total[None] * 2.0
        return s + 1.0

    got = reduce(0.5)              # no sync needed: a kernel that returns waits for its result
    np.testing.assert_allclose(got, np.sum(xs * np.float32(0.5)) * 2.0 + 1.0, rtol=1e-5)
    x.from_numpy(xs * 2)
    np.testing.assert_allclose(reduce(0.5), np.sum(xs) * 2.0 + 1.0, rtol=1e-5)


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_vector_matrix_and_tuple_returns(arch):
    v = sd.Vector.field(3, sd.f32, shape=2)
    v.from_numpy(np.array([[1, 2, 3], [4, 5, 6]], np.float32))

    @sd.kernel
    def vec(k: sd.i32) -> sd.types.vector(3, sd.f32):
        return v[k] * 2.0

    @sd.kernel
    def mat(a: sd.f32) -> sd.types.matrix(2, 2, sd.i32):
        return sd.Matrix([[a, 1], [2, a * 2]])

    @sd.kernel
    def both(a: sd.f32) -> (sd.i32, sd.types.vector(2, sd.f32), sd.f32):
        return 7, sd.Vector([a, -a]), a * a

    np.testing.assert_array_equal(vec(1), [8, 10, 12])
    m = mat(3.5)
    assert m.shape == (2, 2) and m.dtype == np.int32
    np.testing.assert_array_equal(m, [[3, 1], [2, 7]])
    r = both(1.5)
    assert isinstance(r, tuple) and r[0] == 7 and r[2] == 2.25
    np.testing.assert_array_equal(r[1], [1.5, -1.5])


@test_archs(archs=EVERY_ARCH)
def test_return_in_static_if_and_static_for(arch):
    @sd.kernel
    def pick(a: sd.template()) -> sd.i32:
        if sd.static(a == 1):
            return 1
        elif sd.static(a == 2):
            return 2
        return 3

    @sd.kernel
    def partial() -> sd.i32:
        a = 0
        for i in sd.static(range(10)):
            a += i * i
            if sd.static(i == 8):
                return a

    assert (pick(1), pick(2), pick(123)) == (1, 2, 3)
    assert partial() == sum(i * i for i in range(9))


@test_archs(archs=exactly("cpu"))
def test_return_errors(arch):
    @sd.kernel
    def untyped():
        return 1

    @sd.kernel
    def in_loop() -> sd.i32:
        for i in range(10):
            return i

    @sd.kernel
    def in_if(a: sd.i32) -> sd.i32:
        if a > 0:
            return 1
        return 0

    @sd.kernel
    def missing() -> sd.i32:
        pass

    @sd.kernel
    def vec_for_scalar() -> sd.i32:
        return sd.Vector([1, 2, 3])

    @sd.kernel
    def wrong_size() -> sd.types.vector(4, sd.f32):
        return sd.Vector([1.0, 2.0, 3.0])

    @sd.kernel
    def void():
        return None

    for k, cls, what in ((untyped, sd.SpiradSyntaxError, "return type annotation"),
                         (in_loop, sd.SpiradSyntaxError, "Return inside non-static if/for"),
                         (in_if, sd.SpiradSyntaxError, "Return inside non-static if/for"),
                         (missing, sd.SpiradSyntaxError, "does not have a return statement"),
                         (vec_for_scalar, sd.SpiradTypeError, r"shape \(3,\)"),
                         (wrong_size, sd.SpiradTypeError, r"vector\(4, f32\)")):
        with pytest.raises(cls, match=what):
            k(*([1] if k is in_if else []))
    assert void() is None


@test_archs(archs=EVERY_ARCH)
def test_returning_kernels_under_tape_and_fwd_mode(arch):
    x = sd.field(sd.f32, shape=4, needs_grad=True, needs_dual=True)
    y = sd.field(sd.f32, shape=(), needs_grad=True, needs_dual=True)
    x.from_numpy(np.array([1, 2, 3, 4], np.float32))

    @sd.kernel
    def sq() -> sd.f32:
        for i in x:
            y[None] += x[i] * x[i]
        return y[None]

    with sd.ad.Tape(loss=y):
        assert sq() == 30.0
    np.testing.assert_allclose(x.grad.to_numpy(), [2, 4, 6, 8])
    y[None] = 0.0
    with sd.ad.FwdMode(loss=y, param=x, seed=[0, 1, 0, 0]):
        assert sq() == 30.0
    assert y.dual[None] == 4.0


# -- print ----------------------------------------------------------------------------------------


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_print_formats_like_python(arch, capsys):
    @sd.kernel
    def k(i: sd.i32, f: sd.f32):
        print("hello", 42, "world!")
        print("hello", 42, "Tai", end="")
        print("chi", 233, "world!")
        print("hello", 42, "world!", sep="")
        print("  ", 42, sep="aswd", end="qwer\n")
        print(f"qwe {i} {f} {f:.3f} {i:>5} {i!r} {4} {True} {1.23}")
        print("{} abc {name} {}".format(i, f * 2, name=i + 1))
        print(i, 1234.5, f, -i, i > 100, f < 1e9)
        print(sd.Vector([f, f * 2]), sd.Matrix([[i, 1], [2, i]]), [i, 2.5], (f,), (1, 2))

    f = np.float32(233.3)
    k(666, f)
    sd.sync()
    # an f32 prints as numpy prints it (its shortest repr: 233.3), unless a format spec is given
    s, s2 = str(f), str(f * np.float32(2))
    want = ["hello 42 world!", "hello 42 Taichi 233 world!", "hello42world!", "  aswd42qwer",
            f"qwe 666 {s} {f:.3f} {666:>5} 666 4 True 1.23",
            f"666 abc 667 {s2}",
            f"666 1234.5 {s} -666 True True",
            f"[{s}, {s2}] [[666, 1], [2, 666]] [666, 2.5] ({s},) (1, 2)"]
    assert capsys.readouterr().out.splitlines() == want


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_print_wide_and_unsigned_types(arch, capsys):
    @sd.kernel
    def k(a: sd.i64, b: sd.u32, c: sd.f64):
        print("a =", a, "b =", b, "c =", c, c * 0.1)

    a, b, c = -2**62 + 2**31 + 5, 2**32 - 1, 0.1
    k(a, b, c)
    sd.sync()
    assert capsys.readouterr().out == f"a = {a} b = {b} c = {c} {c * 0.1}\n"


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_print_is_buffered_until_sync_in_launch_order(arch, capsys):
    @sd.kernel
    def say(t: sd.i32):
        print("kernel", t)

    @sd.kernel
    def other(t: sd.i32):
        for _ in range(1):
            print("other", t)

    say(1)
    other(2)
    say(3)
    assert capsys.readouterr().out == ""            # nothing before the sync
    sd.sync()
    assert capsys.readouterr().out == "kernel 1\nother 2\nkernel 3\n"
    say(4)
    x = sd.field(sd.f32, shape=2)
    x.to_numpy()                                    # a host read is a sync point too
    assert capsys.readouterr().out == "kernel 4\n"


@test_archs(archs=EVERY_ARCH)
def test_print_in_order_per_thread_across_many_threads(arch, capsys):
    n = 500
    x = sd.field(sd.f32, shape=n)

    @sd.func
    def report(i, j, v):
        print("t", i, "step", j, "v", v)

    @sd.kernel
    def k(scale: sd.f32):
        for i in x:
            v = 0.0
            for j in range(3):
                v += i * scale
                report(i, j, v)
            x[i] = v

    k(0.5)
    sd.sync()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 * n
    steps = {}
    for ln in lines:
        _, i, _, j, _, v = ln.split()
        steps.setdefault(int(i), []).append((int(j), float(v)))
    for i in range(n):
        assert steps[i] == [(j, (j + 1) * i * 0.5) for j in range(3)], i


@test_archs(archs=EVERY_ARCH)
def test_grad_launch_does_not_print_and_fwd_mode_prints_once(arch, capsys):
    x = sd.field(sd.f32, shape=3, needs_grad=True, needs_dual=True)
    y = sd.field(sd.f32, shape=3, needs_grad=True, needs_dual=True)

    @sd.kernel
    def k():
        for i in x:
            y[i] = x[i] * 2.0
            print("i", i)

    k()
    k.grad()
    with sd.ad.FwdMode(loss=y, param=x, seed=[1, 0, 0]):
        k()
    sd.sync()
    assert sorted(capsys.readouterr().out.splitlines()) == sorted(["i 0", "i 1", "i 2"] * 2)


@test_archs(archs=EVERY_ARCH)
def test_print_buffer_overflow_drops_later_records_and_warns(arch, capsys):
    n = 40000                                      # 2 words per record: more than the buffer

    @sd.kernel
    def k():
        for i in range(n):
            print(i)

    k()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sd.sync()
    lines = capsys.readouterr().out.splitlines()
    note = lines.pop()  # the output ends saying how many lines were dropped (issue #42)
    out = [v.strip() for v in lines]
    assert 0 < len(out) < n and len(set(out)) == len(out)
    assert set(int(v) for v in out) <= set(range(n))
    assert f"{n - len(out)} print line(s) dropped" in note, note
    assert any("print buffer was full" in str(m.message) for m in w)

    @sd.kernel
    def one():
        print("again")
    one()
    sd.sync()
    assert capsys.readouterr().out == "again\n"


def test_print_errors():
    sd.init(arch="cpu")

    @sd.kernel
    def bad_kw():
        print(1, file=None)

    @sd.kernel
    def bad_sep(s: sd.i32):
        print(1, sep=s)

    @sd.kernel
    def fstring_value(x: sd.types.ndarray()):
        x[0] = len(f"{x[0]}")

    with pytest.raises(sd.SpiradSyntaxError, match="sep= and end= only"):
        bad_kw()
    with pytest.raises(sd.SpiradTypeError, match="strings known at compile time"):
        bad_sep(1)
    with pytest.raises(sd.SpiradTypeError, match="can only be printed"):
        fstring_value(sd.ndarray(sd.f32, 2))
