"""Kernel arguments: scalars of every dtype, Python annotations, `template()`, wrong arguments."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


@test_archs()
def test_scalar_args_every_dtype(arch):
    out_f = sd.field(sd.f64, shape=4)
    out_i = sd.field(sd.i64, shape=4)

    @sd.kernel
    def k(a: sd.f32, b: sd.f64, c: sd.i32, d: sd.i64, e: sd.u32, f: sd.u1):
        out_f[0] = a
        out_f[1] = b
        out_i[0] = c
        out_i[1] = d
        out_i[2] = e
        out_i[3] = f

    k(0.1, 0.1, -7, -2 ** 40, 2 ** 32 - 1, True)
    np.testing.assert_array_equal(out_f.to_numpy()[:2], [np.float32(0.1), 0.1])
    np.testing.assert_array_equal(out_i.to_numpy(), [-7, -2 ** 40, 2 ** 32 - 1, 1])
    k(np.float32(2.5), np.float64(-1.0), np.int32(3), np.int64(4), np.uint32(5), False)
    np.testing.assert_array_equal(out_i.to_numpy(), [3, 4, 5, 0])


@test_archs()
def test_python_annotations(arch):
    out = sd.field(sd.f32, shape=3)

    @sd.kernel
    def k(a: float, n: int, flag: bool):
        for i in range(n):
            out[i] = a if flag else -a

    k(2, 2, True)  # an int passed to a float argument converts
    np.testing.assert_array_equal(out.to_numpy(), [2, 2, 0])
    k(1.5, 3, False)
    np.testing.assert_array_equal(out.to_numpy(), [-1.5] * 3)


@test_archs()
def test_args_in_loop_bounds(arch):
    x = sd.field(sd.i32, shape=10)

    @sd.kernel
    def k(lo: sd.i32, hi: sd.i32, step: sd.i32):
        for i in range(lo, hi):
            x[i] = step * i

    k(2, 6, 3)
    np.testing.assert_array_equal(x.to_numpy(), [0, 0, 6, 9, 12, 15, 0, 0, 0, 0])
    k(5, 2, 1)  # empty range
    np.testing.assert_array_equal(x.to_numpy(), [0, 0, 6, 9, 12, 15, 0, 0, 0, 0])


@sd.kernel
def scale_into(src: sd.template(), dst: sd.template(), factor: sd.template()):
    for i in src:
        dst[i] = src[i] * factor


@test_archs()
def test_template_fields_and_values(arch):
    a, b = sd.field(sd.f32, shape=4), sd.field(sd.f32, shape=4)
    a.from_numpy(np.arange(4, dtype=np.float32))
    scale_into(a, b, 2)
    np.testing.assert_array_equal(b.to_numpy(), [0, 2, 4, 6])
    scale_into(a, b, 3)  # a template value is part of the compiled kernel: recompiles
    np.testing.assert_array_equal(b.to_numpy(), [0, 3, 6, 9])
    scale_into(b, a, 0.5)
    np.testing.assert_array_equal(a.to_numpy(), [0, 1.5, 3, 4.5])
    epoch = sd._state.current().epoch
    assert len([k for k in scale_into._cache if k[0] == epoch]) == 3
    scale_into(a, b, 2)
    assert len([k for k in scale_into._cache if k[0] == epoch]) == 3


@test_archs()
def test_template_float_keyed_by_value(arch):
    a, b = sd.field(sd.f32, shape=2), sd.field(sd.f32, shape=2)
    a.fill(1.0)
    for factor in (0.25, 0.5, 0.75, 1.25):  # floats built at run time: their ids may be reused
        scale_into(a, b, float(str(factor)))
        np.testing.assert_array_equal(b.to_numpy(), [factor, factor])


@test_archs()
def test_template_static_unroll(arch):
    out = sd.field(sd.i32, shape=8)

    @sd.kernel
    def k(n: sd.template()):
        for i in sd.static(range(n)):
            out[i] = i * i

    k(3)
    np.testing.assert_array_equal(out.to_numpy(), [0, 1, 4, 0, 0, 0, 0, 0])
    k(5)
    np.testing.assert_array_equal(out.to_numpy(), [0, 1, 4, 9, 16, 0, 0, 0])


@test_archs()
def test_template_ndarray_and_tuple(arch):
    out = sd.field(sd.f32, shape=3)

    @sd.kernel
    def k(coefs: sd.template()):
        for i in sd.static(range(3)):
            out[i] = coefs[i]

    k((1.0, 2.5, -3.0))
    np.testing.assert_array_equal(out.to_numpy(), [1.0, 2.5, -3.0])


@test_archs()
def test_wrong_argument_errors(arch):
    x = sd.field(sd.f32, shape=2)

    @sd.kernel
    def k(n: sd.i32, f: sd.f32):
        x[0] = n + f

    k(1, 2)
    with pytest.raises(sd.SpiradTypeError, match="pass an int"):
        k(1.5, 2.0)
    with pytest.raises(sd.SpiradTypeError, match="must be a number"):
        k("1", 2.0)
    with pytest.raises(sd.SpiradTypeError, match="must be a number"):
        k(1, [2.0])
    with pytest.raises(sd.SpiradTypeError, match="takes 2 argument"):
        k(1)
    with pytest.raises(sd.SpiradValueError, match="does not fit"):
        k(2 ** 31, 1.0)

    @sd.kernel
    def unannotated(n):
        x[0] = n

    with pytest.raises(sd.SpiradTypeError, match="annotation"):
        unannotated(1)

    @sd.kernel
    def bad_annotation(n: str):
        x[0] = 1

    with pytest.raises(sd.SpiradTypeError, match="unsupported annotation"):
        bad_annotation("a")


@test_archs(archs=exactly("cpu"))
def test_annotated_parameters_read_the_spirad_annotation(arch):
    """PEP 593: `Annotated[T, a]` is annotation `a` to spirad (T is for type checkers),
    evaluated or not (string annotations)."""
    from typing import Annotated

    @sd.kernel
    def k(a: Annotated[float, sd.f32], n: Annotated[int, sd.i32],
          y: Annotated[sd.Ndarray, sd.types.ndarray()]) -> Annotated[float, sd.f32]:
        for i in range(n):
            y[i] = a * i
        return a * 2.0

    y = sd.ndarray(sd.f32, (4,))
    assert k(1.5, 3, y) == 3.0
    assert y.to_numpy().tolist() == [0.0, 1.5, 3.0, 0.0]
    with pytest.raises(sd.SpiradTypeError):
        k(1.5, 3, "not an array")
