"""`init(debug=True, debug_sync=True)` (on through the Taichi alias): a kernel's bounds error or
failed assert raises at its launch, as Taichi's synchronous debug mode does; without
`debug_sync` at the next synchronisation. Bounds errors are `SpiradBoundsError`s: index errors
that are also assertion / runtime errors, as Taichi raises them (kernels and Python scope)."""
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


@test_archs(debug_sync=True, debug_only="debug_sync, the named bounds error and kernel asserts "
                                        "are debug=True's")
def test_bounds_errors_and_asserts_raise_at_the_launch(arch):
    x = sd.field(sd.i32, shape=(8, 16), offset=(0, -4))

    @sd.kernel
    def write(j: sd.i32):
        x[3, j] = 1

    write(11)                                   # in range: runs
    with pytest.raises(sd.SpiradBoundsError, match=r"indexed with 12 on axis 1") as e:
        write(12)
    assert isinstance(e.value, (RuntimeError)) and isinstance(e.value, AssertionError)
    assert isinstance(e.value, IndexError) and "x[3, j] = 1" in str(e.value)

    @sd.kernel
    def check(v: sd.i32):
        assert v > 0, "v must be positive"

    check(1)
    with pytest.raises(sd.SpiradAssertionError, match="v must be positive"):
        check(0)
    sd.sync()                                   # reported once
    assert x[3, 11] == 1


@test_archs(archs=exactly("cpu"), debug_only="SpiradBoundsError: debug=True's named bounds "
                                             "check (release: SpiradOutOfBoundsError)")
def test_without_debug_sync_the_next_sync_raises(arch):
    x = sd.field(sd.i32, shape=4)

    @sd.kernel
    def write(j: sd.i32):
        x[j] = 1

    write(4)                                    # the launch returns
    with pytest.raises(sd.SpiradBoundsError):
        sd.sync()


def test_python_scope_index_errors_are_assertion_errors():
    sd.init(arch=sd.cpu)
    x = sd.field(sd.f32, shape=3)
    for bad in (3, -1):
        with pytest.raises(AssertionError, match="out of range"):
            x[bad] = 1.0
        with pytest.raises(IndexError):
            x[bad]
