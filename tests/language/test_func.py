"""`@sd.func`: inlined calls with return values, vectors, fields, nesting, keyword arguments."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


@sd.func
def square(x):
    return x * x


@sd.func
def clamp(x, lo, hi):
    return sd.min(sd.max(x, lo), hi)


@sd.func
def poly(x):
    return square(x) + 2 * x + 1   # nested call


@sd.func
def swap(v):
    return sd.Vector([v[1], v[0]])


@sd.func
def write_twice(f: sd.template(), i, value):
    f[i] = value * 2


@sd.func
def branchy(x):
    r = 0.0
    if x > 0:
        r = x
    else:
        r = -x * 10
    return r


@sd.func
def no_return(f: sd.template(), i):
    f[i] += 1


@test_archs()
def test_func_returns(arch):
    out = sd.field(sd.f32, shape=(6, 6))
    v = sd.Vector.field(2, sd.f32, shape=6)

    @sd.kernel
    def k():
        for i in range(6):
            x = i - 2.5
            out[i, 0] = square(x)
            out[i, 1] = clamp(x, -1.0, 1.0)
            out[i, 2] = poly(x)
            out[i, 3] = branchy(x)
            out[i, 4] = clamp(hi=2, lo=0, x=i)   # keyword arguments
            write_twice(out, (i, 5), x)
            no_return(out, (i, 5))
            v[i] = swap(sd.Vector([x, i * 1.0]))

    k()
    x = np.arange(6) - 2.5
    want = np.stack([x * x, np.clip(x, -1, 1), x * x + 2 * x + 1, np.where(x > 0, x, -10 * x),
                     np.clip(np.arange(6), 0, 2), 2 * x + 1], 1)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(v.to_numpy(), np.stack([np.arange(6), x], 1), rtol=1e-6)


@test_archs()
def test_func_args_are_by_value(arch):
    out = sd.field(sd.i32, shape=2)

    @sd.func
    def bump(a):
        a += 10
        return a

    @sd.kernel
    def k():
        a = 1
        b = bump(a)
        out[0] = a   # unchanged: the func got a copy
        out[1] = b

    k()
    np.testing.assert_array_equal(out.to_numpy(), [1, 11])


@test_archs()
def test_func_return_type_follows_value(arch):
    out = sd.field(sd.f64, shape=2)

    @sd.func
    def half(x):
        return x / 2

    @sd.kernel
    def k(a: sd.f64, n: sd.i32):
        out[0] = half(a)
        out[1] = half(n)   # int / int: a float

    k(0.1, 3)
    np.testing.assert_allclose(out.to_numpy(), [0.05, 1.5], rtol=1e-15)


@test_archs()
def test_func_errors(arch):
    out = sd.field(sd.f32, shape=1)

    @sd.func
    def early(x):
        if x > 0:
            return 1.0
        return 2.0

    @sd.kernel
    def k1():
        out[0] = early(1.0)

    with pytest.raises(sd.SpiradSyntaxError, match="last statement") as ei:
        k1()
    assert "return 1.0" in str(ei.value) and "^" in str(ei.value)

    @sd.kernel
    def k2():
        out[0] = square(1.0, 2.0)

    with pytest.raises(sd.SpiradTypeError, match="takes parameters"):
        k2()

    @sd.func
    def recurse(x):
        return recurse(x)

    @sd.kernel
    def k3():
        out[0] = recurse(1.0)

    with pytest.raises(sd.SpiradSyntaxError, match="recursion"):
        k3()

    with pytest.raises(sd.SpiradSyntaxError, match="only be called from a kernel"):
        square(2.0)


@test_archs()
def test_kernel_cannot_call_kernel(arch):
    out = sd.field(sd.f32, shape=1)

    @sd.kernel
    def inner():
        out[0] = 1

    @sd.kernel
    def outer():
        inner()

    with pytest.raises(sd.SpiradSyntaxError, match="@sd.func"):
        outer()


@test_archs(archs=exactly("cpu"))
def test_argument_mistakes_name_the_parameter(arch):
    """A func or kernel called with the wrong arguments: `SpiradArgumentError`, a TypeError (as
    Python's) and a SyntaxError (as Taichi's), in Taichi's words."""
    @sd.func
    def f(a, b, c=3):
        return a + b + c

    calls = {"Too many arguments": lambda: f(1, 2, 3, 4),
             "Unexpected argument 'd'": lambda: f(1, 2, 3, d=3),
             "Parameter `b` missing": lambda: f(1, c=3),
             "Multiple values for argument 'a'": lambda: f(1, a=3, b=3)}
    for words, call in calls.items():
        @sd.kernel
        def k() -> sd.i32:
            return call()

        with pytest.raises(sd.SpiradArgumentError, match=words) as e:
            k()
        assert isinstance(e.value, TypeError) and isinstance(e.value, SyntaxError)

    @sd.kernel
    def kern(a: sd.i32, b: sd.i32) -> sd.i32:
        return a + b

    assert kern(1, b=2) == 3
    for words, call in {"Parameter `a : i32` missing": lambda: kern(b=2),
                        "Unexpected argument 'c'": lambda: kern(1, 2, c=2),
                        "Too many arguments": lambda: kern(1, 2, 3)}.items():
        with pytest.raises(sd.SpiradArgumentError, match=words):
            call()
