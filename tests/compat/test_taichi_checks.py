"""Taichi's checks and semantics at the edges of the language: a loop variable may not reuse a
name of the enclosing scope (range and struct-fors; ndrange may), a string annotation that names
nothing is refused when the kernel / func is decorated, `grad_for` on a kernel is a TypeError and
a RuntimeError, a dict key computed at run time is a key of its own, a signed field takes the
unsigned values of its width in element writes and fill (the bit pattern)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_a_loop_variable_may_not_reuse_a_declared_name(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def after_local():
        i = 0
        for i in range(4):
            x[i] = 1.0

    @sd.kernel
    def nested_same_name():
        for i in x:
            for i in range(2):
                x[i] = 2.0

    @sd.kernel
    def param(i: sd.i32):
        for i in x:
            x[i] = 3.0

    for k, args in ((after_local, ()), (nested_same_name, ()), (param, (1,))):
        with pytest.raises(sd.SpiradSyntaxError, match="Variable 'i' is already declared in the "
                                                       "outer scope and cannot be used as loop "
                                                       "variable"):
            k(*args)

    @sd.kernel
    def allowed():
        for i in range(2):  # sequential loops: each name lives in its own loop
            x[i] = 4.0
        for i in range(2, 4):
            x[i] = 5.0
        j = 0
        for j in sd.ndrange(4):  # Taichi checks range and struct-fors only
            x[j] += 1.0

    allowed()
    np.testing.assert_array_equal(x.to_numpy(), [5.0, 5.0, 6.0, 6.0])


def test_a_string_annotation_naming_nothing_is_refused_at_decoration():
    with pytest.raises(sd.SpiradSyntaxError, match=r"Invalid type annotation \(argument 1\) of "
                                                   r"kernel k: 'no_such_type'"):
        @sd.kernel
        def k(a: sd.i32, b: "no_such_type"):  # noqa: F821
            pass

    with pytest.raises(sd.SpiradSyntaxError, match="Invalid type annotation"):
        @sd.func
        def f(v: "nor_this"):  # noqa: F821
            return v

    @sd.kernel
    def fine(a: "sd.f32") -> sd.f32:  # a string that names a type is read as that type
        return a * 2.0

    assert fine(1.5) == 3.0


@test_archs()
def test_grad_for_needs_a_grad_replaced_function(arch):
    x = sd.field(sd.f32, shape=4, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            x[i] += 1.0

    for kind in (TypeError, RuntimeError, sd.SpiradCustomGradError):
        with pytest.raises(kind, match="grad_replaced"):
            sd.ad.grad_for(k)
    with pytest.raises(sd.SpiradCustomGradError, match="plain function|function"):
        sd.ad.grad_for(lambda: None)

    @sd.ad.grad_replaced
    def step():
        k()

    @sd.ad.grad_for(step)
    def step_grad():
        pass

    with pytest.raises(sd.SpiradCustomGradError, match="already has a gradient"):
        sd.ad.grad_for(step)(lambda: None)


@test_archs()
def test_run_time_dict_keys_are_keys_of_their_own(arch):
    x = sd.field(sd.i32, shape=8)
    x.from_numpy(np.arange(8, dtype=np.int32) * 2)

    @sd.kernel
    def comp() -> sd.i32:
        a = {x[j]: x[j] + j for j in range(8) if j > 2 if j < 6}  # keys 6, 8, 10 at run time
        return sum(a.values())

    @sd.kernel
    def literal() -> sd.i32:
        d = {x[1]: 1, x[1]: 10, "k": 100}  # the same element twice: two keys, as in Taichi
        s = 0
        for k, v in sd.static(d.items()):
            s += v
        return s + len(d.keys())

    assert comp() == sum(2 * j + j for j in range(3, 6))
    assert literal() == 111 + 3


@test_archs()
def test_a_signed_field_takes_the_unsigned_values_of_its_width(arch):
    a = sd.field(sd.i16, shape=3)
    a[0] = 0xFFFF
    a[1] = 0x8000
    assert a[0] == -1 and a[1] == -32768
    a.fill(0xFFFE)
    np.testing.assert_array_equal(a.to_numpy(), [-2, -2, -2])
    with pytest.raises(sd.SpiradValueError, match="do not fit"):
        a[2] = 0x10000  # wider than the type: never wrapped
    with pytest.raises(sd.SpiradValueError, match="do not fit"):  # from_numpy checks the range
        a.from_numpy(np.array([0xFFFF, 1, 2], dtype=np.int64))
    b = sd.field(sd.i64, shape=1)
    b[0] = 2 ** 64 - 1
    assert b[0] == -1


@test_archs()
def test_a_struct_argument_of_another_type_says_why(arch):
    sphere = sd.types.struct(center=sd.math.vec3, radius=float)
    circle = sd.types.struct(center=sd.math.vec2, radius=float)

    @sd.kernel
    def volume(s: sphere) -> sd.f32:
        return s.radius ** 3 + s.center[2]

    assert volume(sphere(center=sd.math.vec3([0, 0, 1]), radius=2.0)) == 9.0
    with pytest.raises(TypeError, match=r"Argument .* cannot be converted into required type .*"
                                        r"takes 3 components, got 2"):
        volume(circle(center=sd.math.vec2([1, 2]), radius=2.33))
