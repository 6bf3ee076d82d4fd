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
