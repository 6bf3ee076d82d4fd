"""The launch path's reuse of the last plan (`Kernel._repeat`): the same argument objects as
the last launch skip conversion, dataclass flattening and the plan check; anything that can
change behind the same objects is never reused (a dataclass that is not frozen may get a
new member, a list changes in place), and keyword arguments bind as Python binds them."""
import dataclasses

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@dataclasses.dataclass
class Loose:
    a: sd.types.NDArray


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: sd.types.NDArray


@test_archs()
def test_reassigned_member_of_a_mutable_dataclass_is_seen(arch):
    @sd.kernel
    def put(s: Loose, v: sd.i32):
        for i in range(4):
            s.a[i] = v

    one, two = sd.ndarray(sd.i32, 4), sd.ndarray(sd.i32, 4)
    s = Loose(one)
    put(s, 1)
    one.fill(0)
    s.a = two  # the same dataclass object, another ndarray, the same arguments as given
    put(s, 1)
    np.testing.assert_array_equal(one.to_numpy(), [0] * 4)
    np.testing.assert_array_equal(two.to_numpy(), [1] * 4)


@test_archs()
def test_frozen_dataclass_repeats(arch):
    @sd.kernel
    def add(s: Frozen, v: sd.i32):
        for i in range(4):
            s.a[i] += v

    s = Frozen(sd.ndarray(sd.i32, 4))
    v = 3
    for _ in range(5):
        add(s, v)
    np.testing.assert_array_equal(s.a.to_numpy(), [15] * 4)
    add(Frozen(s.a), 1)  # another object, equal members: planned anew, same array
    np.testing.assert_array_equal(s.a.to_numpy(), [16] * 4)


@test_archs()
def test_list_template_changed_in_place(arch):
    y = sd.field(sd.i32, shape=2)

    @sd.kernel
    def put(c: sd.template()):
        for i in sd.static(range(2)):
            y[i] = c[i]

    c = [1, 2]
    put(c)
    c[0] = 7
    put(c)
    np.testing.assert_array_equal(y.to_numpy(), [7, 2])


@test_archs()
def test_keywords_bind_like_python(arch):
    y = sd.field(sd.f32, shape=3)

    @sd.kernel
    def put(a: sd.f32, b: sd.f32, c: sd.f32):
        y[0], y[1], y[2] = a, b, c

    for _ in range(2):  # the second time through the cached order
        put(1.0, c=3.0, b=2.0)
        np.testing.assert_array_equal(y.to_numpy(), [1, 2, 3])
        put(c=6.0, a=4.0, b=5.0)
        np.testing.assert_array_equal(y.to_numpy(), [4, 5, 6])


@test_archs()
def test_serial_kernel_repeats_with_new_scalars_arrays_and_errors(arch):
    """A one-task serial kernel (the CPU backend's one-call path, its argument address and
    bounds kept between launches): each launch sees its own scalars and arrays, an
    out-of-range index is still raised at the next sync, and the launch after it runs."""
    @sd.kernel
    def put(a: sd.types.ndarray(), v: sd.i32, at: sd.i32):
        sd.loop_config(serialize=True)
        for i in range(4):
            a[i] += v
        a[at] += 100

    one, two = sd.ndarray(sd.i32, 4), sd.ndarray(sd.i32, 4)
    for _ in range(2):
        put(one, 1, 0)
        put(two, 2, 3)
        put(one, 1, 0)
    np.testing.assert_array_equal(one.to_numpy(), [404, 4, 4, 4])
    np.testing.assert_array_equal(two.to_numpy(), [4, 4, 4, 204])
    put(one, 5, 4)  # out of range
    with pytest.raises(IndexError, match="out of range"):  # the default or debug=True checks
        sd.sync()
    put(one, 1, 1)
    np.testing.assert_array_equal(one.to_numpy(), [410, 110, 10, 10])
