"""Programs Taichi refuses with an error are refused by spirad too, with Taichi's error kind
(spirad's class, exported under Taichi's name) and the user's line."""
import numpy as np
import pytest

import spirad as sd


def test_is_and_in_outside_static_are_syntax_errors():
    sd.init(arch="cpu")
    b = sd.field(sd.i32, shape=())
    c = sd.field(sd.i32, shape=())

    @sd.kernel
    def is_not():
        b[None] = b is not c

    @sd.kernel
    def not_in():
        b[None] = b not in [c]

    @sd.kernel
    def inside_static():  # compile-time Python inside static(...), as spirad allows
        if sd.static(b is not c and 2 in (1, 2) and None is None):
            b[None] = 7

    with pytest.raises(sd.TaichiSyntaxError, match='Operator "is not" in Taichi scope') as e:
        is_not()
    assert "b[None] = b is not c" in str(e.value) and "^" in str(e.value)
    assert isinstance(e.value, sd.TaichiCompilationError)
    with pytest.raises(sd.TaichiSyntaxError, match='"NotIn" is only supported inside `ti.static`'):
        not_in()
    inside_static()
    assert b[None] == 7


@pytest.mark.parametrize("shape", [1.5, (1, 0.5), (2, -1), 2**31, (1, 2**31)])
def test_invalid_ndarray_shapes(shape):
    sd.init(arch="cpu")
    with pytest.raises(sd.TaichiRuntimeError, match="is not a valid shape for ndarray") as e:
        sd.ndarray(sd.i32, shape)
    assert isinstance(e.value, ValueError)  # spirad's kind for a bad value, as before
    assert sd.ndarray(sd.i32, (1, np.int32(2))).shape == (1, 2)  # numpy integers are integers
    assert sd.ndarray(sd.i32, 0).shape == (0,)  # an empty ndarray: a spirad extension


def test_trace_of_a_non_square_matrix():
    sd.init(arch="cpu")
    with pytest.raises(sd.TaichiCompilationError, match=r"expected a square matrix, got shape \(3, 2\)"):
        sd.Matrix([[0.1, 3.0], [5.0, 7.0], [1.0, 2.0]]).trace()

    @sd.kernel
    def k() -> sd.f32:
        x = sd.Matrix([[0.1, 3.0], [5.0, 7.0], [1.0, 2.0]])
        return x.trace()

    with pytest.raises(sd.TaichiCompilationError, match=r"expected a square matrix, got shape \(3, 2\)"):
        k()
    assert abs(sd.Matrix([[0.1, 3.0], [5.0, 7.0]]).trace() - 7.1) < 1e-6


@pytest.mark.parametrize("arch", ["cpu", "vulkan"])
def test_run_time_vector_index_out_of_range_under_debug(arch):
    sd.init(arch=arch, debug=True)

    @sd.kernel
    def vec(i: sd.i32):
        x = sd.Vector([1, 0])
        x[i] = 42
        assert x[i] == 42  # fails too when i is out of range: the index check is reported

    @sd.kernel
    def mat(i: sd.i32, j: sd.i32) -> sd.i32:
        y = sd.Matrix([[1, 1, 1], [2, 2, 2], [3, 3, 3]])
        return y[i, j]

    vec(1)
    assert mat(2, 2) == 3
    for bad in (lambda: vec(2), lambda: vec(-1), lambda: mat(2, 3), lambda: mat(3, 0)):
        with pytest.raises(sd.TaichiAssertionError, match="Out of bound access") as e:
            bad()
            sd.sync()
        assert isinstance(e.value, AssertionError)
    sd.init(arch=arch)  # without debug: unchecked (reads the last component), as documented
    assert mat(3, 0) == 3


def test_launch_while_a_field_is_not_placed():
    sd.init(arch="cpu")
    a = sd.field(sd.i32)

    @sd.kernel
    def k():
        pass

    with pytest.raises(sd.TaichiRuntimeError, match=r"These field\(s\) are not placed: 'a'"):
        k()
    with pytest.raises(sd.TaichiRuntimeError, match="not placed"):
        k()  # still refused at the next launch
    sd.root.dense(sd.i, 2).place(a)
    k()
