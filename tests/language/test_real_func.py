"""`sd.real_func` keeps Taichi's contract of a real function (typed parameters, an annotated
return value) and is refused at decoration without it (spirad/real_func.py); it runs inlined,
and may return from inside loops and branches (frontend/early_return.py)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


def test_real_func_needs_annotations():
    sd.init(arch="cpu")
    with pytest.raises(sd.TaichiSyntaxError, match="Argument 'a' of real function .* must be type annotated"):
        @sd.real_func
        def add(a, b: sd.i32) -> sd.i32:
            return a + b

    with pytest.raises(sd.TaichiCompilationError, match="return value must be annotated"):
        @sd.real_func
        def add2(a: sd.i32, b: sd.i32):
            return a + b

    @sd.real_func
    def store(x: sd.template(), v: sd.i32):  # no value returned: no return annotation needed
        x[None] = v

    @sd.real_func
    def add3(a: sd.i32, b: sd.i32) -> sd.i32:
        return a + b

    x = sd.field(sd.i32, shape=())

    @sd.kernel
    def k():
        store(x, add3(30, 2))

    k()
    assert x[None] == 32


@test_archs()
def test_real_func_returns_from_loops_and_branches(arch):
    """A real_func may `return` inside `if`, `for` and `while` (Taichi's real functions do;
    spirad rewrites the inlined body: frontend/early_return.py), also when inlined at a
    kernel's top level (its loops are serialized) and from nested loops."""
    x = sd.field(sd.i32, shape=())

    @sd.real_func
    def step(val: sd.i32) -> sd.i32:
        if x[None] > 10:
            if x[None] > 20:
                return 1
            x[None] += 1
        x[None] += val
        return 0

    @sd.real_func
    def partial_sum(a: sd.i32) -> sd.i32:
        s = 0
        for i in range(100):
            if i == a + 1:
                return s
            s = s + i
        return s

    @sd.real_func
    def first(a: sd.i32) -> sd.math.vec2:
        for i in range(3):
            j = 0
            while j < 3:
                if i * 3 + j == a:
                    return sd.math.vec2(i, j)
                j += 1
        return sd.math.vec2(-1, -1)

    @sd.kernel
    def run() -> sd.i32:
        return step(15) * 100 + step(10) * 10 + step(100)

    @sd.kernel
    def sums(a: sd.i32) -> sd.i32:
        return partial_sum(a)

    out = sd.Vector.field(2, sd.f32, shape=8)

    @sd.kernel
    def firsts():
        for k in range(8):
            out[k] = first(k + 3)

    assert run() == 1 and x[None] == 26
    assert sums(10) == 55 and sums(200) == 4950
    firsts()
    np.testing.assert_array_equal(out.to_numpy(), [[1, 0], [1, 1], [1, 2], [2, 0], [2, 1], [2, 2],
                                                   [-1, -1], [-1, -1]])

    @sd.func
    def plain(a):
        if a > 0:
            return 1.0
        return 0.0

    @sd.kernel
    def refused(a: sd.f32) -> sd.f32:
        return plain(a)

    with pytest.raises(sd.SpiradSyntaxError, match="Return inside non-static if/for"):
        refused(1.0)


@test_archs()
def test_real_func_loops_are_serial_and_ref_parameters(arch):
    """A real_func's loops run serially in the calling thread, as a Taichi real function's do,
    also when it is called at the kernel's top level: `break` is allowed and an accumulation
    is exact; `sd.ref(dtype)` parameters are bound by reference (`a = v`, `a += v` change the
    caller's variable)."""
    out = sd.field(sd.i32, shape=3)

    @sd.real_func
    def count_to_five() -> sd.i32:
        a = 0
        for i in range(10):
            if i == 5:
                break
            a += 1
        return a

    @sd.real_func
    def set_and_double(a: sd.ref(sd.i32), b: sd.ref(sd.i32)):
        a = 7
        b += b

    @sd.kernel
    def k():
        out[0] = count_to_five()
        a, b = 0, 21
        set_and_double(a, b)
        out[1] = a
        out[2] = b

    k()
    assert out.to_numpy().tolist() == [5, 7, 42]


@test_archs(archs=exactly("cpu"))
def test_func_vector_parameter_of_another_shape_is_taichis_error(arch):
    @sd.func
    def first(a: sd.types.vector(3, sd.f32)) -> sd.f32:
        return a[0]

    @sd.kernel
    def k() -> sd.f32:
        return first(sd.Vector([3.0, 4.0]))

    with pytest.raises(sd.TaichiSyntaxError, match="Argument a of type .* is expected to be a "
                                                   "Matrix with n 3, but got 2"):
        k()


@test_archs(archs=exactly("cpu"))
def test_func_ndarray_parameter_of_another_element_is_taichis_error(arch):
    @sd.func
    def put(a: sd.types.ndarray(dtype=sd.math.vec2, ndim=1)):
        a[0] = [100, 100]

    @sd.kernel
    def k(x: sd.types.ndarray(ndim=1)):
        put(x)

    arr = sd.ndarray(sd.math.vec3, shape=4)
    with pytest.raises(sd.TaichiCompilationError, match=r"Invalid value for argument a: elements "
                                                        r"of f32 of shape \(2,\) expected"):
        k(arr)
    ok = sd.ndarray(sd.math.vec2, shape=4)
    k(ok)
    assert ok.to_numpy()[0].tolist() == [100, 100]


@test_archs()
def test_real_func_takes_the_kernels_ndarray_arguments_only(arch):
    """A real_func's ndarray parameter given a global ndarray (which kernels and plain funcs may
    read) is Taichi's TaichiTypeError; the kernel's own ndarray argument is fine."""
    weight = sd.ndarray(dtype=sd.f32, shape=(2, 2, 2))
    weight.fill(42.0)

    @sd.real_func
    def corner(w: sd.types.ndarray(sd.f32, ndim=3)) -> sd.f32:
        return w[1, 1, 1]

    @sd.kernel
    def global_one() -> sd.f32:
        return corner(weight)

    @sd.kernel
    def argument(w: sd.types.ndarray(sd.f32, ndim=3)) -> sd.f32:
        return corner(w)

    with pytest.raises(sd.TaichiTypeError, match="Expected ndarray in the kernel argument for "
                                                 "argument w, got a global ndarray"):
        global_one()
    assert argument(weight) == 42.0


@test_archs(archs=exactly("cpu"))  # a compile error: the same on every arch
def test_real_func_recursion_is_refused_at_the_call(arch):
    """spirad inlines real functions: a run-time recursive call is refused at its line, naming
    the real_func and the loop-with-a-stack alternative (Taichi runs it on cpu / cuda)."""
    @sd.real_func
    def total(n: sd.i32) -> sd.i32:
        if n == 0:
            return 0
        return total(n - 1) + n

    @sd.kernel
    def run(n: sd.i32) -> sd.i32:
        return total(n)

    with pytest.raises(sd.SpiradSyntaxError, match="real_func recursion is not supported") as e:
        run(10)
    assert "total(n - 1)" in str(e.value) and "explicit stack" in str(e.value)
