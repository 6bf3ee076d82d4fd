"""Control flow, locals, globals, atomics, arguments and multi-task kernels: LLVM vs interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from tests.llvm_codegen.harness import run_llvm
from tests.llvm_codegen.kit import (check, field, kernel, key, leaf_const, nd_arg, ndarray,
                                    range_task, scalar, serial_task)
from kernel_ir.dtypes import f32, f64, i32, i64, u1, u32
from kernel_ir.nodes import GlobalRef, Node, TaskList
from kernel_ir.ops import Op


def c(b, v, dt=i32):
    return b.const(v, dt)


def add(b, x, y):
    return b.binary(Op.ADD, x, y)


def test_nested_loops_break_continue():
    """acc over j < i%7+3 (break at j == 5, skip odd j), inner k in [j, 4), carried local."""
    OUT = field(0, i32, (64,))

    def body(b, i):
        acc = b.alloca(i32, "acc")
        end = add(b, b.binary(Op.MOD, i, c(b, 7)), c(b, 3))
        with b.range_for(c(b, 0), end, carried=(acc,)) as j:
            with b.if_(b.binary(Op.CMP_EQ, j, c(b, 5))) as (then, _):
                with then:
                    b.break_()
            with b.if_(b.binary(Op.CMP_EQ, b.binary(Op.MOD, j, c(b, 2)), c(b, 1))) as (then, _):
                with then:
                    b.continue_()
            with b.range_for(j, c(b, 4), carried=(acc,)) as k:
                with b.if_(b.binary(Op.CMP_GT, k, c(b, 2))) as (then, _):
                    with then:
                        b.break_()
                        b.store(acc, c(b, -1000))  # dead code after BREAK
                v = add(b, b.binary(Op.MUL, i, j), k)
                b.store(acc, add(b, b.load(acc), v))
            b.store(acc, b.binary(Op.MUL, b.load(acc), c(b, 3)))
        b.global_store(OUT, [i], b.load(acc))

    got = check(kernel("nested", range_task(body, 0, 64)), {key(OUT): np.zeros(64, np.int32)})
    assert got[key(OUT)].any()


def test_while_collatz():
    OUT = field(0, i64, (200,))

    def body(b, i):
        x, steps = b.alloca(i64, "x"), b.alloca(i64, "steps")
        b.store(x, add(b, b.cast(i, i64), c(b, 1, i64)))
        with b.while_(carried=(x, steps)):
            xv = b.load(x)
            with b.if_(b.binary(Op.CMP_EQ, xv, c(b, 1, i64))) as (then, _):
                with then:
                    b.break_()
            even = b.binary(Op.CMP_EQ, b.binary(Op.MOD, xv, c(b, 2, i64)), c(b, 0, i64))
            with b.if_(even) as (then, orelse):
                with then:
                    b.store(x, b.binary(Op.FLOORDIV, xv, c(b, 2, i64)))
                with orelse:
                    b.store(x, add(b, b.binary(Op.MUL, xv, c(b, 3, i64)), c(b, 1, i64)))
            b.store(steps, add(b, b.load(steps), c(b, 1, i64)))
        b.global_store(OUT, [i], b.load(steps))

    got = check(kernel("collatz", range_task(body, 0, 200)), {key(OUT): np.zeros(200, np.int64)})
    assert got[key(OUT)][26] == 111  # 27 takes 111 steps


def test_while_with_continue():
    """A WHILE whose CONTINUE jumps back to the top; counter-based exit."""
    OUT = field(0, i32, (40,))

    def body(b, i):
        n, s = b.alloca(i32, "n"), b.alloca(i32, "s")
        with b.while_(carried=(n, s)):
            b.store(n, add(b, b.load(n), c(b, 1)))
            with b.if_(b.binary(Op.CMP_GT, b.load(n), i)) as (then, _):
                with then:
                    b.break_()
            third = b.binary(Op.CMP_EQ, b.binary(Op.MOD, b.load(n), c(b, 3)), c(b, 0))
            with b.if_(third) as (t, _):
                with t:
                    b.continue_()
            b.store(s, add(b, b.load(s), b.load(n)))
        b.global_store(OUT, [i], b.load(s))

    check(kernel("wcont", range_task(body, 0, 40)), {key(OUT): np.zeros(40, np.int32)})


def test_top_level_continue_and_serial_continue():
    OUT, S = field(0, f32, (50,)), field(1, i32, (2,))

    def body(b, i):
        with b.if_(b.binary(Op.CMP_EQ, b.binary(Op.MOD, i, c(b, 3)), c(b, 0))) as (then, _):
            with then:
                b.continue_()
        b.global_store(OUT, [i], b.cast(i, f32))

    def serial(b):
        b.global_store(S, [c(b, 0)], c(b, 7))
        b.continue_()
        b.global_store(S, [c(b, 1)], c(b, 9))

    tl = kernel("cont", range_task(body, 0, 50), serial_task(serial))
    got = check(tl, {key(OUT): np.full(50, -1, np.float32), key(S): np.zeros(2, np.int32)})
    assert got[key(S)].tolist() == [7, 0]


def test_alloca_rezeroes_each_execution():
    OUT = field(0, f64, (10, 4))

    def body(b, i):
        with b.range_for(c(b, 0), c(b, 4)) as j:
            t = b.alloca(f64, "t")  # re-zeroed every trip
            with b.range_for(c(b, 0), j) as k:
                b.store(t, add(b, b.load(t), b.cast(add(b, i, k), f64)))
            b.global_store(OUT, [i, j], b.load(t))

    check(kernel("rezero", range_task(body, 0, 10)), {key(OUT): np.zeros((10, 4))})


def test_loop_index_i64_and_u32_and_empty_ranges():
    OUT = field(0, i64, (30,))

    def body(b, i):
        acc = b.alloca(i64)
        with b.range_for(c(b, 5, u32), b.cast(i, u32), index_dtype=u32) as j:
            b.store(acc, add(b, b.load(acc), b.cast(j, i64)))
        with b.range_for(c(b, 3, i64), c(b, -2, i64), index_dtype=i64) as k:  # empty
            b.store(acc, c(b, -1, i64))
        b.global_store(OUT, [b.cast(i, i32)], b.load(acc))

    check(kernel("idx64", range_task(body, 0, 30, index_dtype=i64)),
          {key(OUT): np.zeros(30, np.int64)})


@pytest.mark.parametrize("kind", ["field", "ndarray"])
@pytest.mark.parametrize("ndim", [2, 3])
def test_field_and_ndarray_indexing(kind, ndim):
    shape = (5, 6, 7)[:ndim]
    if kind == "field":
        X, Y = field(0, f32, shape), field(1, f32, shape)
        args = ()
        extents = [lambda b, ax=ax: c(b, shape[ax]) for ax in range(ndim)]
    else:
        X, Y = ndarray(0, f32, ndim), ndarray(1, f32, ndim)
        args = (nd_arg("x", f32, ndim), nd_arg("y", f32, ndim))
        extents = [lambda b, ax=ax: b.emit(Op.NDARRAY_SHAPE, i32, (), (0, ax))
                   for ax in range(ndim)]

    def body(b, i):
        def nest(idx):
            ax = len(idx)
            if ax == ndim:
                v = b.global_load(X, idx)
                tag = c(b, 0)
                for t in idx:
                    tag = add(b, b.binary(Op.MUL, tag, c(b, 10)), t)
                b.global_store(Y, idx, add(b, b.binary(Op.MUL, v, b.const(2.0, f32)),
                                           b.cast(tag, f32)))
                return
            with b.range_for(c(b, 0), extents[ax](b)) as j:
                nest(idx + [j])

        with b.range_for(c(b, 0), extents[1](b)) as j:
            nest([i, j])

    end = leaf_const(shape[0]) if kind == "field" else Node(Op.NDARRAY_SHAPE, i32, (), (0, 0))
    tl = kernel("idx", range_task(body, 0, end), args=args)
    rng = np.random.default_rng(ndim)
    arrays = {key(X): rng.standard_normal(shape).astype(np.float32),
              key(Y): np.zeros(shape, np.float32)}
    got = check(tl, arrays)
    expect = arrays[key(X)] * 2 + sum(np.indices(shape)[a] * 10 ** (ndim - 1 - a)
                                      for a in range(ndim))
    np.testing.assert_allclose(got[key(Y)], expect, rtol=1e-6)


def test_ndarray_grad_buffer_shares_shape():
    X = ndarray(0, f64, 2)
    XG = GlobalRef("ndarray", 0, f64, 2, None, "x", grad=True)

    def body(b, i):
        with b.range_for(c(b, 0), b.emit(Op.NDARRAY_SHAPE, i32, (), (0, 1))) as j:
            b.atomic_add(XG, [i, j], b.binary(Op.MUL, b.global_load(X, [i, j]), c(b, 3.0, f64)))

    tl = kernel("grad", range_task(body, 0, Node(Op.NDARRAY_SHAPE, i32, (), (0, 0))),
                args=(nd_arg("x", f64, 2),))
    x = np.arange(12.0).reshape(3, 4)
    got = check(tl, {key(X): x, key(XG): np.ones((3, 4))})
    np.testing.assert_array_equal(got[key(XG)], 1 + 3 * x)


@pytest.mark.parametrize("dt", [f32, f64, i32, i64, u32, u1], ids=str)
def test_scalar_args(dt):
    OUT = field(0, dt, (3,))

    def body(b):
        b.global_store(OUT, [c(b, 0)], b.arg(0, dt))
        b.global_store(OUT, [c(b, 1)], b.arg(2, dt))
        b.global_store(OUT, [c(b, 2)], b.cast(b.arg(1, f64), dt))

    vals = {f32: (1.5, -2.25), f64: (1e300, -3.5), i32: (-7, 2**31 - 1), i64: (-2**62, 5),
            u32: (2**32 - 1, 3), u1: (True, False)}[dt]
    tl = kernel("args", serial_task(body),
                args=(scalar("a", dt), scalar("x", f64), scalar("b", dt)))
    got = check(tl, {key(OUT): np.zeros(3, dt.np)}, [vals[0], 1.0, vals[1]])
    assert got[key(OUT)][0] == dt.np.type(vals[0])


def test_u1_memory_and_atomics():
    B, OLD = field(0, u1, (8,)), field(1, u1, (8,))

    def body(b, i):
        old = b.atomic_add(B, [i], b.binary(Op.CMP_GT, i, c(b, 3)))
        b.global_store(OLD, [i], b.unary(Op.NOT, old))

    check(kernel("bools", range_task(body, 0, 8)),
          {key(B): np.array([0, 1] * 4, np.uint32), key(OLD): np.zeros(8, np.uint32)})


def test_atomic_add_returns_old_value_serially():
    A, OLD = field(0, i32, (1,)), field(1, i32, (10,))

    def body(b):
        with b.range_for(c(b, 0), c(b, 10)) as j:
            b.global_store(OLD, [j], b.atomic_add(A, [c(b, 0)], j))

    got = check(kernel("old", serial_task(body)),
                {key(A): np.array([5], np.int32), key(OLD): np.zeros(10, np.int32)})
    assert got[key(OLD)].tolist() == [5 + j * (j - 1) // 2 for j in range(10)]


@pytest.mark.parametrize("dt", [f32, f64, i32, i64, u32], ids=str)
def test_atomics_from_many_parallel_iterations(dt):
    """100k iterations add 1 into one cell (exact in f32 below 2**24) and into 16 bins."""
    n = 100_000
    ONE, BINS = field(0, dt, (1,)), field(1, dt, (16,))

    def body(b, i):
        b.atomic_add(ONE, [c(b, 0)], b.const(1, dt))
        b.atomic_add(BINS, [b.binary(Op.MOD, i, c(b, 16))], b.cast(b.binary(Op.MOD, i, c(b, 3)),
                                                                    dt))

    tl = kernel("atom", range_task(body, 0, n))
    got = run_llvm(tl, {key(ONE): np.zeros(1, dt.np), key(BINS): np.zeros(16, dt.np)})
    assert got[key(ONE)][0] == n
    want = np.zeros(16, np.int64)
    np.add.at(want, np.arange(n) % 16, np.arange(n) % 3)
    np.testing.assert_array_equal(got[key(BINS)], want.astype(dt.np))


def test_large_parallel_range_matches_numpy():
    n = 300_001
    X, Y = ndarray(0, f64, 1), ndarray(1, f64, 1)

    def body(b, i):
        x = b.global_load(X, [i])
        y = b.binary(Op.ADD, b.binary(Op.MUL, x, x), b.unary(Op.SQRT, b.unary(Op.ABS, x)))
        b.global_store(Y, [i], y)

    tl = kernel("big", range_task(body, 0, Node(Op.NDARRAY_SHAPE, i32, (), (0, 0))),
                args=(nd_arg("x", f64, 1), nd_arg("y", f64, 1)))
    x = np.random.default_rng(0).standard_normal(n)
    got = run_llvm(tl, {key(X): x, key(Y): np.zeros(n)})
    np.testing.assert_array_equal(got[key(Y)], x * x + np.sqrt(np.abs(x)))


def test_tasks_run_in_order_through_temps():
    T = GlobalRef("temp", 0, f32, 1, (1,), "t")
    OUT = field(0, f32, (20,))

    def first(b):
        acc = b.alloca(f32)
        with b.range_for(c(b, 0), c(b, 10)) as j:
            b.store(acc, add(b, b.load(acc), b.cast(j, f32)))
        b.global_store(T, [c(b, 0)], b.load(acc))

    def second(b, i):
        b.global_store(OUT, [i], b.binary(Op.MUL, b.global_load(T, [c(b, 0)]), b.cast(i, f32)))

    tl = TaskList("temps", (), (serial_task(first), range_task(second, 0, 20)), (T,))
    got = check(tl, {key(OUT): np.zeros(20, np.float32)})
    assert got[key(OUT)][2] == 90.0


def test_task_bounds_from_scalar_args():
    OUT = field(0, i32, (100,))

    def body(b, i):
        b.global_store(OUT, [i], b.binary(Op.MUL, i, b.arg(2, i32)))

    begin = Node(Op.ARG, i32, (), 0)
    end = Node(Op.ADD, i32, (Node(Op.ARG, i32, (), 1), leaf_const(3)))
    tl = kernel("bounds", range_task(body, begin, end),
                args=(scalar("b", i32), scalar("e", i32), scalar("m", i32)))
    got = check(tl, {key(OUT): np.zeros(100, np.int32)}, [10, 40, -3])
    assert got[key(OUT)][9] == 0 and got[key(OUT)][42] == -126 and got[key(OUT)][43] == 0
