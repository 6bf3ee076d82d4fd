"""Debug bounds checks (`compile_tasks(tl, abi, bounds_check=True)`): every GLOBAL_LOAD /
GLOBAL_STORE / ATOMIC_ADD index is checked against its axis extent; a bad access is skipped (loads
and atomic adds give 0) and recorded in the status buffer bufs[n+3] (layout in
`llvm_codegen.cpu_program`). Buffers are guarded: a skipped access must write nothing anywhere."""
from __future__ import annotations

import numpy as np

from tests.llvm_codegen.harness import run_interp, run_llvm_checked
from tests.llvm_codegen.kit import (field, kernel, key, nd_arg, ndarray, range_task, scalar,
                                   serial_task)
from llvm_codegen.codegen import compile_tasks
from kernel_ir.abi import STATUS_INDEX_OUT_OF_RANGE
from kernel_ir.abi import kernel_abi
from kernel_ir.dtypes import f32, i32, i64, u32
from kernel_ir.ops import Op

OOB = STATUS_INDEX_OUT_OF_RANGE


def _u32(v):
    return v & 0xFFFFFFFF


def _words(task, k, value, axis, extent, site):
    """Expected status words for an out-of-range access (kernel_ir.abi.StatusWord order; the
    ticket word stays 0)."""
    return [OOB, task, k, _u32(value), axis, extent, _u32(value >> 32), site, 0]


def _shifted_store():
    """OUT[i + o] = i + 1 over i in [0, 4); OUT has shape (4,)."""
    OUT = field(0, f32, (4,), name="out")

    def body(b, i):
        b.global_store(OUT, [b.binary(Op.ADD, i, b.arg(0, i32))],
                       b.cast(b.binary(Op.ADD, i, b.const(1, i32)), f32))
    return kernel("shifted", range_task(body, 0, 4, name="st"), args=(scalar("o", i32),)), OUT


def test_unchecked_code_is_unchanged():
    tl, _ = _shifted_store()
    abi = kernel_abi(tl)
    plain = compile_tasks(tl, abi)
    off = compile_tasks(tl, abi, bounds_check=False)
    on = compile_tasks(tl, abi, bounds_check=True)
    assert plain.llvm_ir == off.llvm_ir and not plain.bounds_check
    for marker in ("spirad.bounds.fail", "status", "bc.ok", "cmpxchg"):
        assert marker not in plain.llvm_ir
        assert marker in on.llvm_ir
    assert on.bounds_check


def test_in_range_matches_interpreter_and_status_stays_zero():
    """2-D field and ndarray, loads, stores and atomics, all in range: same as unchecked."""
    F = field(0, f32, (3, 4), name="f")
    A = ndarray(1, i32, 2)
    ACC = field(2, i32, (4,), name="acc")

    def body(b, i):
        with b.range_for(b.const(0, i32), b.const(4, i32)) as j:
            v = b.global_load(F, [i, j])
            b.global_store(A, [i, j], b.binary(Op.ADD, b.cast(v, i32), b.global_load(A, [i, j])))
            b.atomic_add(ACC, [j], b.const(1, i32))
    tl = kernel("inrange", range_task(body, 0, 3), args=(scalar("u", i32), nd_arg("a", i32, 2)))
    arrays = {key(F): np.arange(12, dtype=np.float32).reshape(3, 4),
              key(A): np.ones((3, 4), np.int32), key(ACC): np.zeros(4, np.int32)}
    got, status = run_llvm_checked(tl, arrays, [0, None])
    want = run_interp(tl, arrays, [0, None])
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    assert (status == 0).all()


def test_store_out_of_range_is_skipped_and_recorded():
    tl, OUT = _shifted_store()
    got, status = run_llvm_checked(tl, {key(OUT): np.zeros(4, np.float32)}, [2], parallel=False)
    np.testing.assert_array_equal(got[key(OUT)], [0, 0, 1, 2])
    assert status.tolist() == _words(0, 0, 4, 0, 4, 0)  # i = 2 writes index 4 first


def test_negative_load_reads_zero():
    IN, OUT = field(0, f32, (4,), name="in"), field(1, f32, (4,), name="out")

    def body(b, i):
        v = b.global_load(IN, [b.binary(Op.SUB, i, b.const(1, i32))])
        b.global_store(OUT, [i], b.binary(Op.ADD, v, b.const(10.0, f32)))
    tl = kernel("neg", range_task(body, 0, 4))
    arrays = {key(IN): np.array([1, 2, 3, 4], np.float32), key(OUT): np.zeros(4, np.float32)}
    got, status = run_llvm_checked(tl, arrays)
    np.testing.assert_array_equal(got[key(OUT)], [10, 11, 12, 13])
    np.testing.assert_array_equal(got[key(IN)], [1, 2, 3, 4])
    assert status.tolist() == _words(0, 0, -1, 0, 4, 0)


def test_atomic_add_out_of_range_returns_zero():
    ACC, OLD = field(0, i32, (4,), name="acc"), field(1, i32, (4,), name="old")

    def body(b, i):
        old = b.atomic_add(ACC, [b.binary(Op.MUL, i, b.const(2, i32))], b.const(5, i32))
        b.global_store(OLD, [i], old)
    tl = kernel("atomic", range_task(body, 0, 4))
    arrays = {key(ACC): np.full(4, 7, np.int32), key(OLD): np.full(4, -1, np.int32)}
    got, status = run_llvm_checked(tl, arrays, parallel=False)
    np.testing.assert_array_equal(got[key(ACC)], [12, 7, 12, 7])
    np.testing.assert_array_equal(got[key(OLD)], [7, 7, 0, 0])
    assert status.tolist() == _words(0, 0, 4, 0, 4, 0)


def test_2d_ndarray_inner_axis_is_checked():
    """A[i, j + 1] for j = 3: the linear index stays inside the buffer (the next row) but axis 1
    is out of range; the extent comes from the argument buffer."""
    A = ndarray(0, f32, 2)

    def body(b, i):
        with b.range_for(b.const(0, i32), b.const(4, i32)) as j:
            b.global_store(A, [i, b.binary(Op.ADD, j, b.const(1, i32))], b.const(1.0, f32))
    tl = kernel("nd2", range_task(body, 0, 3), args=(nd_arg("a", f32, 2),))
    got, status = run_llvm_checked(tl, {key(A): np.zeros((3, 4), np.float32)}, [None],
                                   parallel=False)
    np.testing.assert_array_equal(got[key(A)], [[0, 1, 1, 1]] * 3)
    assert status.tolist() == _words(0, 0, 4, 1, 4, 0)


def test_first_failing_axis_and_i64_value():
    """F[i, big] with an i64 index: the reported value keeps its high word; the access site
    counts the task's global accesses in walk order."""
    F = field(0, f32, (2, 3), name="f")
    OUT = field(1, f32, (2,), name="out")

    def body(b):
        b.global_store(OUT, [b.const(0, i32)], b.const(1.0, f32))           # site 0
        big = b.const((2 << 32) + 1, i64)
        v = b.global_load(F, [b.const(1, i64), big])                        # site 1
        b.global_store(OUT, [b.const(1, i32)], v)                           # site 2
    tl = kernel("wide", serial_task(body))
    arrays = {key(F): np.ones((2, 3), np.float32), key(OUT): np.full(2, 9, np.float32)}
    got, status = run_llvm_checked(tl, arrays)
    np.testing.assert_array_equal(got[key(OUT)], [1, 0])
    assert status.tolist() == _words(0, 0, (2 << 32) + 1, 1, 3, 1)


def test_unsigned_index_and_first_error_wins():
    """u32 indices compare unsigned; with two failing tasks, the first one's error stays."""
    OUT = field(0, i32, (4,), name="out")
    IN = field(1, i32, (2,), name="in")

    def t0(b):
        b.global_store(OUT, [b.const(4, u32)], b.const(1, i32))

    def t1(b):
        b.global_store(OUT, [b.const(0, i32)], b.global_load(IN, [b.const(-5, i32)]))
    tl = kernel("two", serial_task(t0), serial_task(t1))
    got, status = run_llvm_checked(tl, {key(OUT): np.full(4, 3, np.int32),
                                        key(IN): np.ones(2, np.int32)})
    np.testing.assert_array_equal(got[key(OUT)], [0, 3, 3, 3])
    assert status.tolist() == _words(0, 0, 4, 0, 4, 0)


def test_range_task_index_dtype_i64():
    OUT = field(0, f32, (3,), name="out")
    tl = kernel("idx64", range_task(lambda b, i: b.global_store(OUT, [i], b.const(2.0, f32)),
                                    0, 5, index_dtype=i64))
    got, status = run_llvm_checked(tl, {key(OUT): np.zeros(3, np.float32)}, parallel=False)
    np.testing.assert_array_equal(got[key(OUT)], [2, 2, 2])
    assert status.tolist() == _words(0, 0, 3, 0, 3, 0)
