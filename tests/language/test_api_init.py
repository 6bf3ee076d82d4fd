"""`sd.init`: repeatable, resets state, rejects unknown keywords and unavailable archs."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@sd.kernel
def fill_range(x: sd.template()):
    for i in x:
        x[i] = i


@test_archs()
def test_init_twice_resets_fields_and_kernels(arch):
    x = sd.field(sd.i32, shape=5)
    fill_range(x)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(5))
    sd.init(arch=arch, debug=True)
    with pytest.raises(sd.SpiradValueError, match="previous sd.init"):
        x.to_numpy()
    with pytest.raises(sd.SpiradValueError, match="previous sd.init"):
        x.fill(1)
    with pytest.raises(sd.SpiradValueError, match="previous sd.init"):
        fill_range(x)
    y = sd.field(sd.i32, shape=3)   # a new init: new fields, the same kernel object compiles again
    fill_range(y)
    np.testing.assert_array_equal(y.to_numpy(), np.arange(3))


@test_archs()
def test_stale_ndarray_rejected(arch):
    a = sd.ndarray(sd.f32, 4)
    sd.init(arch=arch)
    with pytest.raises(sd.SpiradValueError, match="previous sd.init"):
        a.to_numpy()


@test_archs()
def test_unknown_keywords_named(arch):
    with pytest.raises(sd.SpiradError) as ei:
        sd.init(arch=arch, bogus_option=1, another=2)
    assert "bogus_option" in str(ei.value) and "another" in str(ei.value)
    assert not isinstance(ei.value, RuntimeError)


@test_archs()
def test_unknown_arch_and_bad_defaults(arch):
    with pytest.raises(sd.SpiradArchError, match="unknown arch"):
        sd.init(arch="tpu")
    with pytest.raises(sd.SpiradTypeError, match="default_fp"):
        sd.init(arch=arch, default_fp=sd.i32)
    with pytest.raises(sd.SpiradTypeError, match="default_ip"):
        sd.init(arch=arch, default_ip=sd.f32)


def test_unavailable_arch_is_a_clear_error():
    from spirad.backends import arch_available
    missing = [a for a in ("metal", "cuda", "amdgpu", "vulkan") if not arch_available(a)]
    if not missing:
        pytest.skip("every arch is available here")
    sd.init(arch="cpu")
    x = sd.field(sd.f32, shape=2)
    with pytest.raises(sd.SpiradArchError, match=f"arch={missing[0]} is not (available|implemented)"):
        sd.init(arch=missing[0])
    x.fill(3.0)  # a failed init leaves the previous state usable
    np.testing.assert_array_equal(x.to_numpy(), [3.0, 3.0])


@test_archs(default_fp=sd.f64, default_ip=sd.i64)
def test_defaults_type_literals(arch):
    out_f = sd.field(sd.f64, shape=())
    out_i = sd.field(sd.i64, shape=())

    @sd.kernel
    def k():
        a = 0.1      # default_fp = f64: no rounding to f32
        b = 2 ** 40  # default_ip = i64: no wrap
        out_f[None] = a * 3
        out_i[None] = b + 1

    k()
    assert out_f[None] == 0.1 * 3
    assert out_i[None] == 2 ** 40 + 1


@test_archs()
def test_default_fp_f32_rounds_literals(arch):
    out = sd.field(sd.f64, shape=())

    @sd.kernel
    def k():
        a = 0.1  # f32 local
        out[None] = a

    k()
    assert out[None] == float(np.float32(0.1))


@test_archs()
def test_sync_and_python_scope_helpers(arch):
    x = sd.field(sd.f32, shape=3)
    fill_range(x)
    sd.sync()
    np.testing.assert_array_equal(x.to_numpy(), [0, 1, 2])
    with pytest.raises(sd.SpiradSyntaxError):
        sd.atomic_add(x, 1)
    assert sd.Vector([1, 2]).to_list() == [1, 2]  # Python-scope values (issue #13 item 8)
    assert sd.sqrt(4.0) == 2.0  # math helpers work from Python too
