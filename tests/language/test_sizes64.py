"""Sizes and indices past 2**31 (architecture §8): the CPU indexes fields and runs parallel loops in 64
bits; backends with 32-bit indices refuse such a field when it is created and such a loop when
it is launched; `range` with 64-bit bounds runs in 64 bits (never narrowed); an integer literal
that does not fit the type it takes is a compile error unless typed.

The CPU tests allocate one field of 2**31 + 16 f32 (8 GiB of address space; only the pages
touched become memory) and run once, not per arch."""
from __future__ import annotations

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, SPIRV_ARCHS, test_archs

BIG = 2**31 + 16


def _big(shape=BIG):
    """A CPU field of 8 GiB of address space (zero pages: only touched ones become memory);
    skipped only where the system refuses that much address space (overcommit off)."""
    try:
        np.zeros(4 * BIG, np.uint8)  # what the CPU backend's allocation asks for (freed here)
    except MemoryError:
        pytest.skip("8 GiB of address space not available (vm.overcommit_memory?)")
    return sd.field(sd.f32, shape)


def test_cpu_field_past_2_31_indexes_in_64_bits():
    sd.init(arch=sd.cpu)
    x = _big()
    out = sd.field(sd.f32, 2)

    @sd.kernel
    def near_the_top():
        for i in range(sd.i64(2**31 - 8), sd.i64(BIG)):  # a parallel task with 64-bit bounds
            x[i] = sd.cast(i - sd.i64(2**31), sd.f32)

    @sd.kernel
    def read_last():
        out[0] = x[sd.i64(BIG - 1)]
        out[1] = x[0]

    near_the_top()
    assert x[BIG - 1] == 15.0 and x[2**31 - 8] == -8.0 and x[0] == 0.0
    x[BIG - 1] = 5.0  # host access past 2**31
    read_last()
    assert out.to_numpy().tolist() == [5.0, 0.0]


def test_cpu_literal_index_past_2_31():
    """`x[2**31 + 15] = 5.0` with a Python-int index in the kernel (was cast to i32: SIGSEGV),
    and a 2-d field whose axes fit i32 but whose linear offset does not."""
    sd.init(arch=sd.cpu)
    x = _big()
    y = _big((2, 2**30 + 8))

    @sd.kernel
    def poke():
        x[2**31 + 15] = 5.0
        y[1, 2**30 + 7] = 6.0   # linear offset 2**31 + 15
        y[1, 0] = 3.0

    poke()
    assert x[BIG - 1] == 5.0 and x[15] == 0.0 and x[2**31 - 1] == 0.0
    assert y[1, 2**30 + 7] == 6.0 and y[1, 0] == 3.0 and y[0, 2**30 + 7] == 0.0


def test_cpu_struct_for_over_a_field_past_2_31():
    sd.init(arch=sd.cpu)
    x = _big()
    found = sd.field(sd.i64, ())

    @sd.kernel
    def find_last():
        for i in x:  # 2**31 + 16 iterations: an i64 index (was i32: wrapped, or crashed)
            if i == BIG - 1:
                found[None] = i

    find_last()
    assert found[None] == BIG - 1


@test_archs()
def test_serial_loop_with_i64_bounds_is_not_narrowed(arch):
    count = sd.field(sd.i32, ())

    @sd.kernel
    def trips(a: sd.i64, b: sd.i64):
        for _ in range(1):
            c = 0
            for j in range(a, b):  # was narrowed to i32: ran zero times
                c += 1
            count[None] = c

    trips(2**31 - 2, 2**31 + 2)
    assert count[None] == 4


@test_archs()
def test_parallel_range_past_2_31(arch):
    x = sd.field(sd.i64 if arch != "metal" else sd.i32, 16)

    @sd.kernel
    def offsets():
        for i in range(2**31 - 8, 2**31 + 8):  # Python-int bounds past i32: an i64 loop
            x[i - (2**31 - 8)] = sd.cast(i - 2**31, x.dtype)  # was: ran zero times

    if arch == "cpu":
        offsets()
        assert x.to_numpy().tolist() == list(range(-8, 8))
    else:  # 32-bit task ranges: refused at launch, never wrapped
        with pytest.raises(sd.SpiradValueError, match="32-bit task ranges"):
            offsets()


@test_archs(archs=EVERY_ARCH)
def test_integer_literal_outside_its_type_is_an_error(arch):
    x = sd.field(sd.i32, 4)
    y = sd.field(sd.i64, 4)

    @sd.kernel
    def wraps():
        x[0] = 3000000000

    @sd.kernel
    def wraps_in_expression():
        x[1] = x[0] * 3000000000

    @sd.kernel
    def typed():
        y[0] = sd.i64(3000000000) + y[1] * 3000000000  # the i64 operand types the literal
        x[2] = sd.cast(3000000000, sd.i32)              # an explicit cast wraps, as in C

    for k in (wraps, wraps_in_expression):
        with pytest.raises(sd.SpiradTypeError, match="integer literal 3000000000 does not fit i32") \
                as e:
            k()
        assert "3000000000" in str(e.value).splitlines()[2]  # the line (after File ...), with a caret
    typed()
    assert y[0] == 3000000000 and x[2] == 3000000000 - 2**32


@test_archs(exclude=("cpu",))
def test_fields_past_2_31_refused_at_creation_on_32_bit_backends(arch):
    with pytest.raises(sd.SpiradValueError, match="indexes at most 2,147,483,647 elements"):
        sd.field(sd.f32, BIG)
    with pytest.raises(sd.SpiradValueError, match="indexes at most"):
        sd.root.dense(sd.ij, (2, 2**30 + 8)).place(sd.field(sd.f32))


def test_ndarrays_past_2_31_refused_at_creation():
    sd.init(arch=sd.cpu)
    with pytest.raises(sd.SpiradValueError, match="an sd.ndarray holds at most"):
        sd.ndarray(sd.f32, (2, 2**30 + 8))


@test_archs()
def test_array_arguments_past_2_31_refused(arch):
    """A numpy array of 2**31 + 16 elements (calloc'd: no page touched) passed as an ndarray
    argument is refused with the limit, never indexed in 32 bits."""
    try:
        big = np.zeros(BIG, np.float32)
    except MemoryError:
        pytest.skip("8 GiB of address space not available")

    @sd.kernel
    def first(a: sd.types.ndarray()):
        a[0] = 1.0

    with pytest.raises(sd.SpiradValueError, match="holds at most 2,147,483,647"):
        first(big)
    assert big[0] == 0.0


@test_archs(archs=SPIRV_ARCHS)
def test_largest_field_lavapipe_binds(arch):
    """The largest field one storage-buffer binding of the device holds (lavapipe: 128 MiB)
    works up to its last element."""
    limit = sd._state.backend().caps.max_storage_buffer_range
    n = limit // 4 - 16384  # room for what shares the binding
    x = sd.field(sd.f32, n)

    @sd.kernel
    def last():
        x[n - 1] = 7.0
        x[0] = 1.0

    last()
    assert x[n - 1] == 7.0 and x[0] == 1.0 and x[n - 2] == 0.0


@test_archs()
def test_zero_d_field_written_from_a_parallel_loop(arch):
    """A 0-d field stored from lanes of the CPU's SPMD path (a scatter with no index: crashed
    the code generator; debug=False: bounds checks keep the scalar path)."""
    sd.init(arch=arch)
    x = sd.field(sd.f32, 100)
    found = sd.field(sd.i64 if arch != "metal" else sd.i32, ())

    @sd.kernel
    def find_last():
        for i in x:
            if i == 99:
                found[None] = i

    find_last()
    assert found[None] == 99
