"""The launch path's reuse of the last plan (`Kernel._repeat`): the same argument objects as
the last launch skip conversion, dataclass flattening and the plan check; anything that can
change behind the same objects is never reused (a dataclass that is not frozen may get a
new member, a list changes in place), and keyword arguments bind as Python binds them."""
import dataclasses

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


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


def _put():
    """A one-task serial kernel: adds v to a[0..3] and 100 to a[at] (an index the caller may put
    out of range)."""
    @sd.kernel
    def put(a: sd.types.ndarray(), v: sd.i32, at: sd.i32):
        sd.loop_config(serialize=True)
        for i in range(4):
            a[i] += v
        a[at] += 100
    return put


@test_archs()
def test_serial_kernel_repeats_with_new_scalars_arrays_and_errors(arch):
    """A one-task serial kernel (the CPU backend's one-call path, its argument address and
    bounds kept between launches): each launch sees its own scalars and arrays, an
    out-of-range index is still raised at the next sync, and the launch after it runs."""
    put = _put()
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


# -- repeated eager launches through the backend's record (`Kernel.__call__`, `launch.run_entry`)
def _square_kernels():
    x = sd.field(sd.f32, shape=4, needs_grad=True, needs_dual=True)
    y = sd.field(sd.f32, shape=4, needs_grad=True, needs_dual=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True, needs_dual=True)

    @sd.kernel
    def square():
        sd.loop_config(serialize=True)  # one serial task: the CPU's record of a launch
        for i in range(4):
            y[i] = x[i] * x[i]

    @sd.kernel
    def total():
        for i in range(4):
            loss[None] += y[i]

    x.from_numpy(np.arange(1, 5, dtype=np.float32))
    for _ in range(3):  # the third launch takes the shortcut, where the backend has one
        square()
    return x, y, loss, square, total


@test_archs()
def test_repeated_launch_is_recorded_by_a_tape(arch):
    x, y, loss, square, total = _square_kernels()
    with sd.ad.Tape(loss=loss):
        square()  # the arguments of the last launches: still recorded for the backward pass
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(1, 5))


@test_archs()
def test_repeated_launch_in_forward_mode_and_in_a_graph(arch):
    x, y, loss, square, total = _square_kernels()
    with sd.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0, 0.0, 0.0]):
        square()
    np.testing.assert_allclose(y.dual.to_numpy(), [2, 0, 0, 0])
    g = sd.Graph()
    with g.capture():
        square()
    assert g.launches == 1
    x.from_numpy(np.full(4, 3, np.float32))
    g.replay()
    np.testing.assert_allclose(y.to_numpy(), 9)


@test_archs(kernel_profiler=True)
def test_repeated_launch_is_timed(arch):
    a, put = sd.ndarray(sd.i32, 4), _put()
    for _ in range(4):
        put(a, 1, 0)
    assert sd.profiler.query_kernel_profiler_info("put").counter == 4
    np.testing.assert_array_equal(a.to_numpy(), [404, 4, 4, 4])


@test_archs()
def test_repeated_launch_bumps_generations_and_reports_errors(arch):
    a, put = sd.ndarray(sd.i32, 4), _put()
    for _ in range(4):
        g0 = a.generation
        put(a, 1, 0)
        assert a.generation != g0  # what the adstack sizing cache reads (architecture §4)
    np.testing.assert_array_equal(a.to_numpy(), [404, 4, 4, 4])
    for _ in range(3):
        put(a, 1, 1)
    put(a, 1, 4)  # out of range: raised at the next sync, the launches after it run
    put(a, 1, 1)
    with pytest.raises(IndexError, match="out of range"):
        sd.sync()
    for _ in range(3):
        put(a, 1, 4)  # the same out-of-range launch again and again (the repeated path)
        with pytest.raises(IndexError, match="out of range"):
            sd.sync()
    np.testing.assert_array_equal(a.to_numpy(), [412, 412, 12, 12])


@test_archs(archs=exactly("cpu"))
def test_repeated_cpu_launch_runs_the_backends_record(arch):
    """On the CPU the third launch with the same arguments runs the backend's record of the
    plan (`launch.eager_entry`); a new init() drops it with the plans."""
    x, y, loss, square, total = _square_kernels()
    args, p, entry, n = square._fast
    runs = []
    square._fast = (args, p, lambda: runs.append(1) or entry(), n)
    x.from_numpy(np.arange(2, 6, dtype=np.float32))
    square()
    square()
    assert len(runs) == 2 and square._fast[1] is p
    np.testing.assert_allclose(y.to_numpy(), np.arange(2, 6) ** 2)
    assert square._fast is not None
    sd.init(arch=arch)
    assert square._fast is None
