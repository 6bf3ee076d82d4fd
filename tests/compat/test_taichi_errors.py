"""Programs Taichi refuses are refused by spirad with Taichi's error class and the words Taichi's
tests match (issue #36), at the user's line; the programs next to them that Taichi accepts still
run and give the right values."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_kernel_arguments_are_immutable(arch):
    x = sd.field(sd.i32, shape=3)

    @sd.kernel
    def assign(a: sd.i32):
        a = 1

    @sd.kernel
    def augassign(a: sd.i32):
        a += 1

    @sd.kernel
    def annassign(a: sd.i32):
        a: sd.i32 = 1

    @sd.kernel
    def template_arg(a: sd.template()):
        a = 5

    for k, line in ((assign, "a = 1"), (augassign, "a += 1"), (annassign, "a: sd.i32 = 1"),
                    (template_arg, "a = 5")):
        with pytest.raises(sd.TaichiSyntaxError, match='Kernel argument "a" is immutable in the '
                                                        'kernel') as e:
            k(5)
        assert line in str(e.value) and "^" in str(e.value)

    @sd.func
    def bump(a):  # a func's parameters are its own locals: assignable
        a += 10
        return a

    @sd.kernel
    def copy_then_change(a: sd.i32):
        b = a
        b += 1
        for i in x:
            x[i] = bump(b) + i

    copy_then_change(4)
    assert x.to_numpy().tolist() == [15, 16, 17]


@test_archs()
def test_vector_condition_of_a_conditional_expression(arch):
    v = sd.Vector.field(3, sd.f32, shape=2)

    @sd.kernel
    def ifexp():
        for i in v:
            v[i] = 0 if v[i] < 0 else v[i]

    with pytest.raises(sd.TaichiSyntaxError, match='Please use "ti.select" instead') as e:
        ifexp()
    assert "v[i] < 0" in str(e.value)

    @sd.kernel
    def with_select():
        for i in v:
            v[i] = sd.select(v[i] < 0, 0.0, v[i])

    v.from_numpy(np.array([[-1, 2, -3], [4, -5, 6]], np.float32))
    with_select()
    assert v.to_numpy().tolist() == [[0, 2, 0], [4, 0, 6]]


@test_archs()
def test_taichi_words_of_refused_programs(arch):
    @sd.kernel
    def undefined():
        a + 1  # noqa: F821

    @sd.kernel
    def stepped_range():
        for i in range(3, 7, 2):
            pass

    @sd.kernel
    def def_in_kernel():
        def bar():
            pass

    @sd.kernel
    def raise_in_kernel():
        raise ValueError()

    @sd.kernel
    def break_parallel():
        for i in range(10):
            break

    @sd.kernel
    def float_bits():
        a = 1
        b = 3.1
        c = a & b  # noqa: F841

    @sd.kernel
    def select_shapes():
        a = sd.math.vec2(1.0, 1.0)
        c = sd.math.vec3(1.0, 1.0, 2.0)
        d = a if 3 > sd.random() else c  # noqa: F841

    @sd.kernel
    def static_of_a_run_time_value(val: float):
        if sd.static(val > 0.5):
            pass

    cases = [(undefined, sd.TaichiNameError, 'Name "a" is not defined'),
             (stepped_range, sd.TaichiSyntaxError, "Range should have 1 or 2 arguments, found 3"),
             (def_in_kernel, sd.TaichiSyntaxError, "Function definition is not allowed in 'ti.kernel'"),
             (raise_in_kernel, sd.TaichiSyntaxError, 'Unsupported node "Raise"'),
             (break_parallel, sd.TaichiSyntaxError, "Cannot break in the outermost loop"),
             (float_bits, sd.TaichiTypeError, r"unsupported operand type\(s\) for '&'"),
             (select_shapes, sd.TaichiCompilationError, "Cannot broadcast tensor to tensor"),
             (static_of_a_run_time_value, sd.TaichiCompilationError, "must be compile-time constants")]
    for k, cls, words in cases:
        with pytest.raises(cls, match=words) as e:
            k(1.0) if k is static_of_a_run_time_value else k()
        assert "^" in str(e.value), str(e.value)  # the user's line, with a caret
