"""spirad/compile/gc_pause: the cyclic garbage collector is off while a kernel compiles (a cold
Genesis ndarray build spent a fifth of `kernel_detection`'s compile in its full collections)
and as it was before once the compile ends, also after a compile that fails and for nested
pauses."""
import gc

import numpy as np
import pytest

import spirad as sd
from spirad.compile import driver, gc_pause


@sd.kernel
def _double(a: sd.types.ndarray(), b: sd.types.ndarray()):
    for i in range(a.shape[0]):
        b[i] = a[i] * 2.0


def _spy(monkeypatch, seen, fail=False):
    orig = driver._compile_forward

    def compile_forward(kernel, specs, state, *rest):
        seen.append(gc.isenabled())
        if fail:
            raise RuntimeError("probe")
        return orig(kernel, specs, state, *rest)
    monkeypatch.setattr(driver, "_compile_forward", compile_forward)


@pytest.mark.parametrize("enabled", [True, False])
def test_collector_off_while_compiling_and_restored(monkeypatch, enabled):
    sd.init(arch=sd.cpu, offline_cache=False)
    seen = []
    _spy(monkeypatch, seen)
    (gc.enable if enabled else gc.disable)()
    try:
        a = np.arange(8, dtype=np.float32)
        b = np.zeros(8, np.float32)
        _double(a, b)
        assert seen == [False]
        assert gc.isenabled() is enabled
        np.testing.assert_allclose(b, 2 * a)
    finally:
        gc.enable()


def test_restored_after_a_failed_compile(monkeypatch):
    sd.init(arch=sd.cpu, offline_cache=False)
    seen = []
    _spy(monkeypatch, seen, fail=True)
    gc.enable()
    with pytest.raises(RuntimeError, match="probe"):
        _double(np.zeros(4, np.float32), np.zeros(4, np.float32))
    assert seen == [False] and gc.isenabled()


def test_nested_pauses():
    gc.enable()
    with gc_pause.paused():
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
