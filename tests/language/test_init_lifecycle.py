"""What `sd.init()` does to the previous state (architecture §8): an error its launches reported but
nobody raised is reported, not lost; its fields' memory and every kernel's programs are
released; later launches of the new state are correct."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_pending_error_is_reported_by_the_next_init(arch):
    @sd.kernel
    def shifted(a: sd.types.ndarray()):
        for i in a:
            a[i + 1] = 1.0  # out of range at the last i (bounds checks: debug=True)

    a = sd.ndarray(sd.f32, 4)
    shifted(a)  # no sync, no host read: the error is still pending
    with pytest.warns(RuntimeWarning, match="(?s)never raised.*out of range"):
        sd.init(arch=arch)
    x = sd.field(sd.f32, 4)  # the new state works

    @sd.kernel
    def fill():
        for i in x:
            x[i] = i

    fill()
    assert x.to_numpy().tolist() == [0, 1, 2, 3]


@test_archs()
def test_fields_and_programs_released_at_init(arch):
    x = sd.field(sd.f32, 1 << 16)

    @sd.kernel
    def fill(v: sd.f32):
        for i in x:
            x[i] = v

    fill(1.0)
    assert x[0] == 1.0
    buf = weakref.ref(x._buf) if arch == "cpu" else None
    sd.init(arch=arch)
    gc.collect()
    assert x._buf is None
    if buf is not None:
        assert buf() is None  # the memory itself is gone (kernel plans held it before)
    with pytest.raises(sd.SpiradValueError, match="previous sd.init"):
        x.to_numpy()
    assert fill._cache == {} and fill._plans == [None] * len(fill._plans)
