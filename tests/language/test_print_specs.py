"""Format specs in kernel prints mean what they mean in Taichi: printf's (`{:.10d}` pads to ten
digits, `{:.2}` of a float is `%.2f`), checked against the value's dtype when the kernel
compiles; `.format` must use every argument it is given (frontend/print_spec.py)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, test_archs



@test_archs(archs=EVERY_ARCH)
def test_printf_specs_of_scalars_vectors_and_constants(arch, capsys):
    v = sd.Vector.field(3, sd.f32, shape=())
    z = sd.Matrix.field(2, 2, sd.i32, shape=())

    @sd.kernel
    def k(i: sd.i32, f: sd.f32, u: sd.u32):
        v[None] = sd.Vector([1.0, 2.0, 3.0])
        z[None] = sd.Matrix([[1, 2], [3, 4]])
        print("{:d} {:.10d} {:i} {:.2} {:u} {:x}".format(i, i, i, f, u, u))
        print(f"{f:.3f} {f:e} {f:.3G} {i:-5d}| {i:5}|")
        print("{:.2} {:.3d}".format(v[None], z[None]))
        print("{:i} {:.1} {:.10d} {:.2}".format(1, 2, 3, 2.5))
        print("{2} {1} {}".format(3, 2, 1))  # `{}` takes the first of the automatic positions

    k(42, 233.3, 255)
    sd.sync()
    assert capsys.readouterr().out.splitlines() == [
        "42 0000000042 42 233.30 255 ff",
        "%.3f %e 233 42   |    42|" % (np.float32(233.3), np.float32(233.3)),
        "[1.00, 2.00, 3.00] [[001, 002], [003, 004]]",
        "1 2 0000000003 2.50",
        "1 2 3"]


def test_spec_that_does_not_fit_the_dtype_is_a_compile_error():
    sd.init(arch="cpu")

    @sd.kernel
    def signed_as_unsigned(i: sd.i32):
        print("{:u}".format(i))

    @sd.kernel
    def float_as_int(f: sd.f32):
        print(f"{f:d}")

    @sd.kernel
    def int_as_float():
        z = sd.Vector([1, 2])
        print("{:.2e}".format(z))

    @sd.kernel
    def char(i: sd.i32):
        print("{:c}".format(i))

    @sd.kernel
    def python_spec_that_does_not_fit(f: sd.f32):
        print("{:,x}".format(f))

    with pytest.raises(sd.TaichiTypeError, match=r"'u' doesn't match 'i32'") as e:
        signed_as_unsigned(1)
    assert 'print("{:u}".format(i))' in str(e.value)  # the user's line
    with pytest.raises(sd.TaichiTypeError, match=r"'d' doesn't match 'f32'"):
        float_as_int(1.0)
    with pytest.raises(sd.TaichiTypeError, match=r"'.2e' doesn't match 'i32'"):
        int_as_float()
    with pytest.raises(sd.TaichiTypeError, match="conversion 'c' is not supported"):
        char(1)
    with pytest.raises(sd.TaichiTypeError, match="does not fit a f32 value"):
        python_spec_that_does_not_fit(1.0)


def test_format_arguments_must_match_the_fields():
    sd.init(arch="cpu")

    @sd.kernel
    def more_args():
        print("{0} {1} {2}".format(1, 2, 3, 4))

    @sd.kernel
    def fewer_args(k: sd.f32):
        print("{0} {1} {2}".format(1, k))

    @sd.kernel
    def kw_not_used(k: sd.f32):
        print("".format(k=k))

    @sd.kernel
    def kw_not_found():
        print("{k}".format())

    with pytest.raises(sd.TaichiSyntaxError, match=r"Expected 3 positional argument\(s\), but received 4"):
        more_args()
    with pytest.raises(sd.TaichiSyntaxError, match=r"Expected 3 positional argument\(s\), but received 2"):
        fewer_args(1.0)
    with pytest.raises(sd.TaichiSyntaxError, match="Keyword 'k' not used"):
        kw_not_used(1.0)
    with pytest.raises(sd.TaichiSyntaxError, match="Keyword 'k' not found"):
        kw_not_found()
