"""Quadrants language constructs (issue #37), checked against Quadrants 1.3.3 on the CPU: a
for-loop iterable chosen at compile time (`for i in (A if sd.static(f) else B)`), bare
`types.NDArray` annotations, Quadrants' / Taichi's error classes (run-time failures are
RuntimeErrors and AssertionErrors), an adstack overflow raised by the CPU launch itself,
`stop_grad`, dataclasses of ndarrays as template() arguments, `Tape(validation=True)`,
`init(print_full_traceback=)`, the `quadrants` module's defaults, and Python-scope vector
elements compared with lists."""
import dataclasses
import os
import textwrap

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs
from tests.support.grad_programs import overflowing
from tests.support.quadrants_process import run_program


# -- 1. the loop's iterable chosen at compile time ------------------------------------------------
@test_archs()
def test_for_over_a_compile_time_choice(arch):
    out = sd.field(sd.f32, shape=(8, 8))

    @sd.kernel
    def k(n: sd.i32, par: sd.template()):
        for i in (range(n) if sd.static(par) else sd.static(range(3))):
            out[i, 0] += 1.0

    @sd.kernel
    def k2(par: sd.template()):
        for i, j in (sd.ndrange(2, 3) if sd.static(par) else sd.ndrange(4, 1)):
            out[i, j + 1] += 1.0

    @sd.kernel
    def k3(par: sd.template()):
        for i in range(1):  # an inner loop; a static range on either side
            for j in (sd.static(range(2)) if sd.static(par) else range(4)):
                out[j, 6] += 1.0

    @sd.kernel
    def k4(par: sd.template()):
        for I in (sd.grouped(sd.ndrange(2, 2)) if sd.static(par) else sd.grouped(out)):
            out[I] += 0.5

    k(5, True)
    k(5, False)
    k2(True)
    k2(False)
    k3(True)
    k3(False)
    k4(True)
    got = out.to_numpy()
    np.testing.assert_array_equal(got[:, 0], [2.5, 2.5, 2, 1, 1, 0, 0, 0])  # as Quadrants
    np.testing.assert_array_equal(got[:4, 1:4], [[2.5, 1, 1], [2.5, 1, 1], [1, 0, 0], [1, 0, 0]])
    np.testing.assert_array_equal(got[:, 6], [2, 2, 1, 1, 0, 0, 0, 0])


@test_archs(archs=exactly("cpu"))
def test_for_over_a_run_time_choice_is_refused(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in range(2):
            for j in (range(2) if x[i] > 0 else range(3)):
                x[j] += 1.0

    with pytest.raises(sd.SpiradSyntaxError, match="known at compile time") as e:
        k()
    assert "x[i] > 0" in str(e.value)


# -- 2. bare NDArray annotations ------------------------------------------------------------------
@test_archs()
def test_bare_ndarray_annotations(arch):
    @sd.kernel
    def k(x: sd.types.NDArray, y: sd.types.ndarray()):
        for I in sd.grouped(x):
            y[I] = x[I] * 2

    a, b = sd.ndarray(sd.f32, 4), sd.ndarray(sd.f32, 4)
    a.from_numpy(np.arange(4, dtype=np.float32))
    k(a, b)
    np.testing.assert_array_equal(b.to_numpy(), [0, 2, 4, 6])
    v, w = sd.Vector.ndarray(2, sd.i32, (2, 3)), sd.Vector.ndarray(2, sd.i32, (2, 3))
    v.fill(3)
    k(v, w)  # another dtype, rank and element shape: read at the launch
    np.testing.assert_array_equal(w.to_numpy(), np.full((2, 3, 2), 6))
    assert isinstance(sd.types.NDArray, sd.types.NdarrayType)


# -- 3. error classes -------------------------------------------------------------------------------
def test_quadrants_and_taichi_error_classes():
    for run_time in (sd.QuadrantsAssertionError, sd.TaichiAssertionError, sd.SpiradAdStackOverflow,
                     sd.SpiradDataAccessError):
        assert issubclass(run_time, RuntimeError) and issubclass(run_time, AssertionError)
        assert issubclass(run_time, sd.QuadrantsRuntimeError) and issubclass(run_time, sd.SpiradError)
    assert sd.QuadrantsRuntimeError is sd.TaichiRuntimeError is sd.SpiradRuntimeError
    assert issubclass(sd.QuadrantsRuntimeError, RuntimeError)
    assert issubclass(sd.SpiradDeviceError, sd.QuadrantsRuntimeError)
    assert issubclass(sd.SpiradAdStackOverflow, sd.QuadrantsAssertionError)
    for compile_time, base in ((sd.QuadrantsSyntaxError, SyntaxError),
                               (sd.QuadrantsTypeError, TypeError),
                               (sd.QuadrantsNameError, NameError)):
        assert issubclass(compile_time, sd.QuadrantsCompilationError)
        assert issubclass(compile_time, base) and not issubclass(compile_time, RuntimeError)
    assert issubclass(sd.SpiradAutodiffError, sd.QuadrantsCompilationError)
    assert not issubclass(sd.SpiradAutodiffError, RuntimeError)


@test_archs()
def test_failed_assert_is_a_runtime_error(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in x:
            assert x[i] > 100, "too small"

    with pytest.raises(RuntimeError, match="too small") as e:  # as Quadrants' (debug=True)
        k()
        sd.sync()
    assert isinstance(e.value, AssertionError) and isinstance(e.value, sd.QuadrantsAssertionError)


# -- 4. adstack overflow: raised by the CPU launch --------------------------------------------------
# `overflowing` (tests/support/grad_programs) carries its value in the local `carried` through n
# trips: its adstack needs n + 2 entries, so n = 9 overflows ad_stack_size=4.
@test_archs(ad_stack_size=4)
def test_adstack_overflow_is_a_runtime_error(arch):
    x = sd.field(sd.f32, shape=8, needs_grad=True)
    y = sd.field(sd.f32, shape=8, needs_grad=True)
    x.fill(0.5)
    y.grad.fill(1.0)
    if arch == "cpu":  # the launch that overflowed raises (Quadrants on the CPU)
        with pytest.raises(RuntimeError, match="adstack overflow") as e:
            overflowing.grad(x, y, 9)
        sd.sync()  # reported once
    else:  # a GPU: at the next sync, naming kernel and stack
        overflowing.grad(x, y, 9)
        with pytest.raises(RuntimeError, match="adstack overflow") as e:
            sd.sync()
    assert isinstance(e.value, sd.QuadrantsAssertionError)
    assert "kernel overflowing" in str(e.value) and "'carried'" in str(e.value)
    y.grad.fill(1.0)
    overflowing.grad(x, y, 2)  # fits: the runtime keeps working
    sd.sync()


@test_archs(archs=exactly("cpu"), ad_stack_size=4)
def test_adstack_overflow_inside_a_tape(arch):
    x = sd.field(sd.f32, shape=8, needs_grad=True)
    y = sd.field(sd.f32, shape=8, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def total():
        for i in y:
            loss[None] += y[i]

    with pytest.raises(sd.QuadrantsAssertionError, match="adstack overflow"):
        with sd.ad.Tape(loss=loss):
            overflowing(x, y, 9)
            total()


# -- 5. stop_grad, dataclasses as templates, validation, init options ----------------------------
@test_archs()
def test_stop_grad(arch):
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    w = sd.field(sd.f32, shape=4, needs_grad=True)
    y = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def inner():
        for i in x:
            y[None] += x[i] * w[i] * w[i]  # read before the stop_grad of its block: stopped too
            sd.stop_grad(w)

    @sd.kernel
    def outer():
        sd.stop_grad(w)
        for i in x:
            y[None] += x[i] * w[i]

    @sd.kernel
    def other_block():
        for i in x:
            if i >= 0:
                sd.stop_grad(w)
            y[None] += x[i] * w[i]  # outside the block of the stop_grad: differentiated

    x.from_numpy(np.arange(4, dtype=np.float32))
    w.fill(2.0)
    for kernel, xg, wg in ((inner, 4.0, 0.0), (outer, 2.0, 0.0), (other_block, 2.0, [0, 1, 2, 3])):
        with sd.ad.Tape(loss=y):
            kernel()
        np.testing.assert_allclose(x.grad.to_numpy(), xg)  # as Quadrants (the first two)
        np.testing.assert_allclose(w.grad.to_numpy(), wg)


@dataclasses.dataclass(frozen=True)
class _Pair:
    a: sd.types.NDArray[sd.f32, 1]
    b: sd.types.NDArray[sd.f32, 1]
    scale: float = 2.0


@sd.func
def _plus_one(s: sd.template(), i):
    return s.a[i] + 1.0


@test_archs()
def test_dataclass_of_ndarrays_as_template(arch):
    @sd.kernel
    def k(s: sd.template()):
        for i in s.a:
            s.b[i] = s.a[i] * s.scale + _plus_one(s, i)

    a, b = sd.ndarray(sd.f32, 4), sd.ndarray(sd.f32, 4)
    a.from_numpy(np.arange(4, dtype=np.float32))
    k(_Pair(a, b))
    np.testing.assert_array_equal(b.to_numpy(), 3 * np.arange(4) + 1)
    k(_Pair(a, b, 3.0))  # a compile-time member: another program
    np.testing.assert_array_equal(b.to_numpy(), 4 * np.arange(4) + 1)
    a2, b2 = sd.ndarray(sd.f32, 6), sd.ndarray(sd.f32, 6)
    a2.fill(1.0)
    k(_Pair(a2, b2))  # other ndarrays, other sizes: run-time arguments
    np.testing.assert_array_equal(b2.to_numpy(), 4.0)
    np.testing.assert_array_equal(b.to_numpy(), 4 * np.arange(4) + 1)


@test_archs()
def test_tape_validation_raises_an_assertion_error(arch):
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    y = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def bad():
        for i in x:
            y[None] += x[i]
            x[i] = 2.0

    with pytest.raises(sd.QuadrantsAssertionError, match="global data access rule"):
        with sd.ad.Tape(loss=y, validation=True):
            bad()


def test_init_print_full_traceback():
    from spirad import options
    try:
        sd.init(arch=sd.cpu, print_full_traceback=True)
        assert options.get("SPIRAD_DEBUG") or "SPIRAD_DEBUG" in os.environ
        sd.init(arch=sd.cpu)
        assert options.get("SPIRAD_DEBUG") == bool(os.environ.get("SPIRAD_DEBUG"))
    finally:
        options.reset_default("SPIRAD_DEBUG")


def test_quadrants_module_names_and_defaults(tmp_path):
    """In a process that imports `quadrants` (the shim): Quadrants' error classes at their
    paths, and a kernel that reads a global it overwrites runs as in Quadrants (differentiated
    with the overwritten value, here with a SpiradWarning)."""
    prog = textwrap.dedent('''
        import warnings
        import numpy as np
        import quadrants as qd
        from quadrants.lang.exception import QuadrantsAssertionError, QuadrantsCompilationError
        assert QuadrantsAssertionError is qd.QuadrantsAssertionError
        assert issubclass(QuadrantsAssertionError, RuntimeError)
        qd.init(arch=qd.cpu)
        x = qd.field(qd.f32, shape=4, needs_grad=True)
        y = qd.field(qd.f32, shape=4, needs_grad=True)

        @qd.kernel
        def k():
            for i in x:
                y[i] = x[i] * x[i]
                x[i] = 3.0

        x.from_numpy(np.arange(4, dtype=np.float32))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            k()
            y.grad.fill(1.0)
            k.grad()
        assert any("overwrit" in str(m.message) for m in w), [str(m.message) for m in w]
        print(y.to_numpy().tolist(), x.grad.to_numpy().tolist())
    ''')
    r = run_program(tmp_path, prog, drop=("SPIRAD_AD_OVERWRITTEN_READS",))
    assert r.stdout.split("\n")[-2] == "[0.0, 1.0, 4.0, 9.0] [6.0, 6.0, 6.0, 6.0]"  # as Quadrants


# -- 6. Python-scope vector / matrix elements ----------------------------------------------------
@test_archs()
def test_python_scope_elements_compare_as_matrices(arch):
    p = sd.Vector.field(2, sd.f32, shape=3)
    n = sd.Vector.ndarray(2, sd.f32, 3)
    m = sd.Matrix.field(2, 2, sd.f32, shape=3)
    p[1] = [1.0, 2.0]
    n[1] = [1.0, 2.0]
    m[1] = [[1, 2], [3, 4]]
    for e in (p[1], n[1]):
        assert isinstance(e, sd.Vector) and isinstance(e, sd.Matrix)
        eq = e == [1.0, 2.0]
        assert isinstance(eq, sd.Matrix)
        np.testing.assert_array_equal(eq, [True, True])  # elementwise, as Quadrants' Matrix
        np.testing.assert_array_equal(e == [1.0, 5.0], [True, False])
        assert e == [1.0, 2.0] and not (e == [1.0, 5.0])  # truth: equal everywhere
        assert e != [1.0, 5.0] and not (e != [1.0, 2.0])  # different somewhere
        assert (e == [1.0, 2.0]).all() and e.norm_sqr() == 5.0 and e.dot(e) == 5.0
        np.testing.assert_array_equal(e + [1, 1], [2.0, 3.0])
    assert isinstance(m[1], sd.Matrix) and not isinstance(m[1], sd.Vector)
    assert m[1] == [[1, 2], [3, 4]] and not (m[1] == [[1, 2], [3, 5]])
    np.testing.assert_array_equal(m[1] @ p[1], [5.0, 11.0])
    assert not isinstance(3.0, sd.Matrix) and not isinstance(np.zeros(2), sd.Vector)
    e = p[1]
    e[0] = 9.0  # still writes through
    assert p[1] == [9.0, 2.0]
