"""Compiled kernels are cached per (init, argument signature): a second call does not recompile."""
import importlib

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs

kmod = importlib.import_module("spirad.kernel")


@pytest.fixture
def compiles(monkeypatch):
    """Counts front-to-back compilations (frontend, passes and backend codegen)."""
    calls = []
    orig = kmod.compile_forward

    def counting(kernel, specs, st, *rest):
        calls.append(kernel.fn.__name__)
        return orig(kernel, specs, st, *rest)

    monkeypatch.setattr(kmod, "compile_forward", counting)
    return calls


@sd.kernel
def add_scalar(a: sd.types.ndarray(), s: sd.f32):
    for I in sd.grouped(a):
        a[I] += s


@sd.kernel
def touch(f: sd.template()):
    for i in f:
        f[i] += 1


@test_archs()
def test_second_call_does_not_recompile(arch, compiles):
    a = sd.ndarray(sd.f32, 4)
    add_scalar(a, 1.0)
    add_scalar(a, 2.5)
    add_scalar(a, 3)
    assert compiles == ["add_scalar"]
    np.testing.assert_array_equal(a.to_numpy(), [6.5] * 4)


@test_archs()
def test_signature_parts_key_the_cache(arch, compiles):
    # shape: not in the signature; the first launch's program is specialised on its shapes
    # (passes/shape_specialise), every other shape shares one generic program
    add_scalar(sd.ndarray(sd.f32, 4), 1.0)
    add_scalar(sd.ndarray(sd.f32, 100), 1.0)           # the generic program
    add_scalar(sd.ndarray(sd.f32, 37), 1.0)            # the same generic program
    add_scalar(sd.ndarray(sd.f32, 4), 1.0)             # the first shapes: the specialised one
    assert len(compiles) == 2
    add_scalar(sd.ndarray(sd.f64, 4), 1.0)             # dtype: new program
    add_scalar(sd.ndarray(sd.f32, (2, 2)), 1.0)        # rank: new program
    add_scalar(sd.ndarray(sd.f32, 4, needs_grad=True), 1.0)  # has a grad buffer: new program
    add_scalar(sd.Vector.ndarray(2, sd.f32, 4), 1.0)   # element shape: new program
    assert len(compiles) == 6
    add_scalar(sd.ndarray(sd.f64, 7), 2.0)             # another shape: its generic program
    add_scalar(sd.ndarray(sd.f32, (3, 5)), 2.0)        # (once per signature)
    add_scalar(sd.ndarray(sd.f64, 9), 2.0)
    add_scalar(sd.ndarray(sd.f32, (5, 3)), 2.0)
    assert len(compiles) == 8


@test_archs()
def test_template_identity_keys_the_cache(arch, compiles):
    f, g = sd.field(sd.i32, shape=3), sd.field(sd.i32, shape=3)
    touch(f)
    touch(f)
    assert len(compiles) == 1
    touch(g)
    assert len(compiles) == 2
    touch(f)
    touch(g)
    assert len(compiles) == 2
    np.testing.assert_array_equal(f.to_numpy(), [3, 3, 3])
    np.testing.assert_array_equal(g.to_numpy(), [2, 2, 2])


@test_archs()
def test_host_writes_do_not_recompile(arch, compiles):
    f = sd.field(sd.i32, shape=3)
    touch(f)
    f.from_numpy(np.array([5, 6, 7], np.int32))
    f.fill(1)
    f[0] = 9
    touch(f)
    assert len(compiles) == 1
    np.testing.assert_array_equal(f.to_numpy(), [10, 2, 2])


@test_archs()
def test_new_init_recompiles_and_drops_old_programs(arch, compiles):
    a = sd.ndarray(sd.f32, 2)
    add_scalar(a, 1.0)
    sd.init(arch=arch, debug=True)
    a = sd.ndarray(sd.f32, 2)
    add_scalar(a, 1.0)
    assert len(compiles) == 2
    epochs = {k[0] for k in add_scalar._cache}
    assert epochs == {sd._state.current().epoch}


@test_archs()
def test_each_kernel_compiles_once_per_signature_in_a_loop(arch, compiles):
    f = sd.field(sd.i32, shape=3)
    for _ in range(20):
        touch(f)
    assert len(compiles) == 1
    np.testing.assert_array_equal(f.to_numpy(), [20, 20, 20])
