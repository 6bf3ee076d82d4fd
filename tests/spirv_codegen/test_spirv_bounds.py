"""Debug bounds checks in SPIR-V (`compile_tasks(tl, abi, caps, bounds_check=True)`): each index
of a GLOBAL_LOAD / GLOBAL_STORE / ATOMIC_ADD is checked against its axis extent; a bad access is
skipped (loads and atomic adds give 0) and recorded with code STATUS_INDEX_OUT_OF_RANGE in the
status buffer (words in `spirv_codegen.lower`). Every module is validated."""
from __future__ import annotations

import numpy as np
import pytest

import spv_harness as H
from spv_kit import (ArgSpec, IRBuilder, Op, Task, TaskList, f32, i32, i64, index_node, nd,
                     range_task, u32)
from kernel_ir.abi import kernel_abi
from kernel_ir.nodes import GlobalRef
from kernel_ir.abi import STATUS_INDEX_OUT_OF_RANGE
from spirv_codegen import SpirvCaps, compile_tasks, disassemble, validate

OOB = STATUS_INDEX_OUT_OF_RANGE


def field(key, dt, shape, name):
    return GlobalRef("field", key, dt, len(shape), tuple(shape), name)


def k_(ref):
    return (ref.kind, ref.key, ref.grad)


def _u32(v):
    return v & 0xFFFFFFFF


def _words(task, k, value, axis, extent, site):
    return [OOB, task, k, _u32(value), axis, extent, _u32(value >> 32), site]


def _shifted_store():
    """OUT[i + o] = i + 1 over i in [0, 4); OUT is a field of shape (4,)."""
    OUT = field(0, f32, (4,), "out")
    b = IRBuilder()
    i = index_node()
    b.global_store(OUT, [b.binary(Op.ADD, i, b.arg(0, i32))],
                   b.cast(b.binary(Op.ADD, i, b.const(1, i32)), f32))
    tl = TaskList("shifted", (ArgSpec("o", "scalar", i32),), (range_task(b.finish(), i, n=4),))
    return tl, OUT


def test_unchecked_module_is_unchanged():
    tl, _ = _shifted_store()
    abi, caps = kernel_abi(tl), SpirvCaps()
    (plain,) = compile_tasks(tl, abi, caps)
    (off,) = compile_tasks(tl, abi, caps, bounds_check=False)
    (on,) = compile_tasks(tl, abi, caps, bounds_check=True)
    assert plain.words == off.words
    assert "OpAtomicCompareExchange" not in disassemble(plain.words)
    assert "OpAtomicCompareExchange" in disassemble(on.words)
    validate(on.words)


@pytest.mark.parametrize("caps", [SpirvCaps(), SpirvCaps(True, True, True, False, False),
                                  SpirvCaps(True, True, True, True, True, 65535)],
                         ids=["min", "cas", "full"])
def test_checked_modules_validate(caps):
    """Loads, stores, native and CAS-loop atomics, 1-D to 3-D, i32/u32/i64 indices, a loop cap
    and an early return."""
    F = field(0, f32, (3, 4, 2), "f")
    A = nd(1, f32, 2, name="a")
    C = field(2, i32, (5,), "c")
    b = IRBuilder()
    i = index_node()
    with b.range_for(b.const(0, i32), b.const(4, i32)) as j:
        v = b.global_load(F, [i, j, b.const(1, u32)])
        b.atomic_add(A, [i, b.cast(j, i64) if caps.has_i64 else j], v)
        b.atomic_add(C, [j], b.const(1, i32))
        b.global_store(A, [i, j], b.global_load(A, [j, i]))
    with b.if_(b.binary(Op.CMP_GT, i, b.arg(0, i32))) as (then, _):
        with then:
            b.continue_()  # a top-level CONTINUE returns: the recorded failure is written first
    b.global_store(C, [i], b.const(0, i32))
    tl = TaskList("many", (ArgSpec("x", "scalar", i32), ArgSpec("a", "ndarray", f32, 2)),
                  (range_task(b.finish(), i, n=3),))
    for t in compile_tasks(tl, kernel_abi(tl), caps, bounds_check=True):
        validate(t.words)


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_store_out_of_range_is_skipped_and_recorded(vk):
    tl, OUT = _shifted_store()
    got = H.run_vulkan(vk, tl, {k_(OUT): np.zeros(4, np.float32)}, [2], bounds_check=True)
    np.testing.assert_array_equal(got.arrays[k_(OUT)], [0, 0, 1, 2])
    assert got.status[:8].tolist() in (_words(0, 0, 4, 0, 4, 0), _words(0, 0, 5, 0, 4, 0))


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_in_range_kernel_has_clean_status(vk):
    tl, OUT = _shifted_store()
    got = H.run_vulkan(vk, tl, {k_(OUT): np.zeros(4, np.float32)}, [0], bounds_check=True)
    np.testing.assert_array_equal(got.arrays[k_(OUT)], [1, 2, 3, 4])
    assert (got.status == 0).all()


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_negative_load_reads_zero(vk):
    IN, OUT = field(0, f32, (4,), "in"), field(1, f32, (4,), "out")
    b = IRBuilder()
    i = index_node()
    v = b.global_load(IN, [b.binary(Op.SUB, i, b.const(1, i32))])
    b.global_store(OUT, [i], b.binary(Op.ADD, v, b.const(10.0, f32)))
    tl = TaskList("neg", (), (range_task(b.finish(), i, n=4),))
    arrays = {k_(IN): np.array([1, 2, 3, 4], np.float32), k_(OUT): np.zeros(4, np.float32)}
    got = H.run_vulkan(vk, tl, arrays, [], bounds_check=True)
    np.testing.assert_array_equal(got.arrays[k_(OUT)], [10, 11, 12, 13])
    assert got.status[:8].tolist() == _words(0, 0, -1, 0, 4, 0)


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
@pytest.mark.parametrize("cas", [False, True], ids=["native", "cas"])
def test_atomic_add_out_of_range_returns_zero(vk, cas):
    ACC, OLD = field(0, f32, (4,), "acc"), field(1, f32, (4,), "old")
    b = IRBuilder()
    i = index_node()
    old = b.atomic_add(ACC, [b.binary(Op.MUL, i, b.const(2, i32))], b.const(5.0, f32))
    b.global_store(OLD, [i], old)
    tl = TaskList("atomic", (), (range_task(b.finish(), i, n=4),))
    caps = H.device_caps(vk, has_atomic_float32_add=False) if cas else None
    arrays = {k_(ACC): np.full(4, 7, np.float32), k_(OLD): np.full(4, -1, np.float32)}
    got = H.run_vulkan(vk, tl, arrays, [], caps=caps, bounds_check=True)
    np.testing.assert_array_equal(got.arrays[k_(ACC)], [12, 7, 12, 7])
    np.testing.assert_array_equal(got.arrays[k_(OLD)], [7, 7, 0, 0])
    assert got.status[:8].tolist() in (_words(0, 0, 4, 0, 4, 0), _words(0, 0, 6, 0, 4, 0))


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_2d_ndarray_inner_axis_is_checked(vk):
    """A[i, j + 1] at j = 3: the linear index is inside the buffer (the next row) but axis 1 is
    out of range; its extent comes from the argument buffer."""
    A = nd(0, f32, 2, name="a")
    b = IRBuilder()
    i = index_node()
    with b.range_for(b.const(0, i32), b.const(4, i32)) as j:
        b.global_store(A, [i, b.binary(Op.ADD, j, b.const(1, i32))], b.const(1.0, f32))
    tl = TaskList("nd2", (ArgSpec("a", "ndarray", f32, 2),), (range_task(b.finish(), i, 0),))
    got = H.run_vulkan(vk, tl, {("ndarray", 0, False): np.zeros((3, 4), np.float32)}, [None],
                       bounds_check=True)
    np.testing.assert_array_equal(got.arrays[("ndarray", 0, False)], [[0, 1, 1, 1]] * 3)
    assert got.status[:8].tolist() == _words(0, 0, 4, 1, 4, 0)


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_serial_first_error_wins_and_wide_values(vk):
    """Task 0 fails first (u32 index 4); task 1's later errors (an i64 index with a high word,
    when the device has Int64) do not overwrite it."""
    OUT = field(0, i32, (4,), "out")
    F = field(1, i32, (2, 3), "f")
    has64 = H.device_caps(vk).has_i64
    b0 = IRBuilder()
    b0.global_store(OUT, [b0.const(4, u32)], b0.const(1, i32))
    b1 = IRBuilder()
    big = b1.const((2 << 32) + 1, i64) if has64 else b1.const(-7, i32)
    b1.global_store(OUT, [b1.const(0, i32)], b1.global_load(F, [b1.const(1, i32), big]))
    tl = TaskList("two", (), (Task("serial", b0.finish(), name="t0"),
                              Task("serial", b1.finish(), name="t1")))
    arrays = {k_(OUT): np.full(4, 3, np.int32), k_(F): np.ones((2, 3), np.int32)}
    got = H.run_vulkan(vk, tl, arrays, [], bounds_check=True)
    np.testing.assert_array_equal(got.arrays[k_(OUT)], [0, 3, 3, 3])
    assert got.status[:8].tolist() == _words(0, 0, 4, 0, 4, 0)
    # task 1 alone reports its own error: axis 1, the full value, access site 0
    tl1 = TaskList("one", (), (Task("serial", tl.tasks[1].body, name="t1"),))
    got = H.run_vulkan(vk, tl1, arrays, [], bounds_check=True)
    value = (2 << 32) + 1 if has64 else -7
    assert got.status[:8].tolist() == _words(0, 1, value, 1, 3, 0)


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_failure_before_an_early_return_is_reported(vk):
    """The invocation's failure is written when it ends, also through a top-level CONTINUE."""
    IN, OUT = field(0, f32, (4,), "in"), field(1, f32, (4,), "out")
    b = IRBuilder()
    i = index_node()
    v = b.global_load(IN, [b.binary(Op.SUB, i, b.const(1, i32))])
    with b.if_(b.binary(Op.CMP_EQ, i, b.const(0, i32))) as (then, _):
        with then:
            b.continue_()
    b.global_store(OUT, [i], v)
    tl = TaskList("early", (), (range_task(b.finish(), i, n=4),))
    arrays = {k_(IN): np.array([1, 2, 3, 4], np.float32), k_(OUT): np.zeros(4, np.float32)}
    got = H.run_vulkan(vk, tl, arrays, [], bounds_check=True)
    np.testing.assert_array_equal(got.arrays[k_(OUT)], [0, 1, 2, 3])
    assert got.status[:8].tolist() == _words(0, 0, -1, 0, 4, 0)
