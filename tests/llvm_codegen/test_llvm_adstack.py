"""ADSTACK_* on the LLVM CPU backend (heap-backed, the Adstack ABI of kernel_ir.abi) vs the
interpreter, plus the ABI's edge cases the interpreter does not define (overflow, empty, cap 0)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from llvm_codegen.codegen import compile_tasks
from llvm_codegen.context import CodegenError
from llvm_codegen.cpu_runtime import CpuRuntime
from tests.llvm_codegen.harness import (HEAP_FILL, compile_and_load, run_interp_adstack,
                                        run_llvm_adstack)
from tests.llvm_codegen.kit import (assert_same, field, kernel, key, range_task, scalar,
                                    serial_task)
from kernel_ir.abi import adstack_allocas, kernel_abi
from kernel_ir.dtypes import f32, f64, i32, i64, u1, u32
from kernel_ir.interpreter import AdStackOverflowError
from kernel_ir.nodes import AdStackArg, Node, Task
from kernel_ir.ops import Op
from kernel_ir.verifier import verify_tasks


# -- IR helpers -------------------------------------------------------------------------------
def c(b, v, dt=i32):
    return b.const(v, dt)


def bin_(b, op, x, y):
    return b.binary(op, x, y)


def stack(b, dt, name):
    return b.emit(Op.ADSTACK_ALLOCA, dt, (), AdStackArg(name))


def push(b, s, v):
    b.emit(Op.ADSTACK_PUSH, None, (s, v), s.arg)


def pop(b, s):
    b.emit(Op.ADSTACK_POP, None, (s,), s.arg)


def top(b, s):
    return b.emit(Op.ADSTACK_LOAD_TOP, s.dtype, (s,), s.arg)


def top_adj(b, s):
    return b.emit(Op.ADSTACK_LOAD_TOP_ADJ, s.dtype, (s,), s.arg)


def acc_adj(b, s, v):
    b.emit(Op.ADSTACK_ACC_ADJ, None, (s, v), s.arg)


def zeros(*refs):
    return {key(r): np.zeros(r.shape, r.dtype.np) for r in refs}


def caps_for(tl, cap_by_name):
    """{ADSTACK_ALLOCA node: cap} from {stack name: cap} (names unique per test)."""
    return {a: cap_by_name[a.arg.name] for t in tl.tasks for a in adstack_allocas(t)}


def check_ad(tl, arrays, caps, scalars=(), interp_scalars=None, compare=None, **kw):
    verify_tasks(tl)
    got, status, launches = run_llvm_adstack(tl, arrays, scalars, caps, **kw)
    want = run_interp_adstack(tl, arrays, interp_scalars or scalars, caps)
    assert status.tolist() == [0, 0, 0, 0]
    if compare is None:
        assert_same(got, want)
    else:
        compare(got, want)
    return got, launches


# -- reverse-mode pattern: push in a loop, pop and accumulate adjoints in reverse -----------------
@pytest.mark.parametrize("dt", [f32, f64])
@pytest.mark.parametrize("steps", [0, 1, 7, 16])
def test_forward_push_reverse_pop_accumulate(dt, steps):
    """x_{t+1} = x_t*x_t*a + 0.25 over `steps` steps; reverse: g_t = g_{t+1} * 2*a*x_t, with the
    adjoint accumulated on the stack in two parts and read back with LOAD_TOP_ADJ."""
    OUT = field(0, dt, (2,))

    def body(b):
        s = stack(b, dt, "x")
        a = c(b, 0.75, dt)
        x = b.alloca(dt, "xv")
        b.store(x, c(b, 0.5, dt))
        with b.range_for(c(b, 0), c(b, steps)):
            xv = b.load(x)
            push(b, s, xv)
            b.store(x, bin_(b, Op.ADD, bin_(b, Op.MUL, bin_(b, Op.MUL, xv, xv), a), c(b, 0.25, dt)))
        b.global_store(OUT, [c(b, 0)], b.load(x))
        g = b.alloca(dt, "g")
        b.store(g, c(b, 1.0, dt))
        with b.range_for(c(b, 0), c(b, steps)):
            xt = top(b, s)
            gx = bin_(b, Op.MUL, b.load(g), xt)
            acc_adj(b, s, bin_(b, Op.MUL, gx, a))
            acc_adj(b, s, bin_(b, Op.MUL, gx, a))
            b.store(g, top_adj(b, s))
            pop(b, s)
        b.global_store(OUT, [c(b, 1)], b.load(g))

    tl = kernel("rev", serial_task(body))
    got, _ = check_ad(tl, zeros(OUT), caps_for(tl, {"x": steps}))
    if steps:
        assert got[key(OUT)][1] != 1.0


def test_nested_loops_and_while_carried_stack():
    """A stack used across nested loops, a WHILE with BREAK and a CONTINUE at the task level."""
    OUT = field(0, f64, (40,))

    def body(b, i):
        s = stack(b, f64, "s")
        n = bin_(b, Op.MOD, i, c(b, 5))
        with b.if_(bin_(b, Op.CMP_EQ, i, c(b, 13))) as (then, _):
            with then:
                b.continue_()
        with b.range_for(c(b, 0), n) as j:
            with b.range_for(c(b, 0), c(b, 2)) as k:
                push(b, s, b.cast(bin_(b, Op.ADD, bin_(b, Op.MUL, i, c(b, 10)),
                                       bin_(b, Op.ADD, j, k)), f64))
        acc = b.alloca(f64, "acc")
        cnt = b.alloca(i32, "cnt")
        with b.while_():
            with b.if_(bin_(b, Op.CMP_GE, b.load(cnt), bin_(b, Op.MUL, n, c(b, 2)))) as (then, _):
                with then:
                    b.break_()
            b.store(acc, bin_(b, Op.ADD, bin_(b, Op.MUL, b.load(acc), c(b, 0.5, f64)), top(b, s)))
            acc_adj(b, s, b.load(acc))
            b.store(acc, bin_(b, Op.SUB, b.load(acc), top_adj(b, s)))
            b.store(acc, bin_(b, Op.ADD, b.load(acc), top(b, s)))
            pop(b, s)
            b.store(cnt, bin_(b, Op.ADD, b.load(cnt), c(b, 1)))
        b.global_store(OUT, [i], b.load(acc))

    tl = kernel("nest", range_task(body, 0, 40))
    got, _ = check_ad(tl, zeros(OUT), caps_for(tl, {"s": 8}))
    assert got[key(OUT)].any()


# -- several stacks of every dtype in one task ---------------------------------------------------
DTYPES = (f32, f64, i32, i64, u32, u1)


def mixed_task(outs, k_max, overflow_every=0):
    """Range task: per iteration one stack per dtype (reset by ADSTACK_ALLOCA at the body start),
    K = 1 + i % k_max pushes of values derived from (i, t) — plus one extra push when
    `overflow_every` divides i — then a reverse loop folding the tops in LIFO order (so order
    matters), accumulating and reading back float adjoints, popping everything."""

    def body(b, i):
        st = {dt: stack(b, dt, dt.name) for dt in DTYPES}
        K = bin_(b, Op.ADD, bin_(b, Op.MOD, i, c(b, k_max)), c(b, 1))
        if overflow_every:
            extra = b.cast(bin_(b, Op.CMP_EQ, bin_(b, Op.MOD, i, c(b, overflow_every)), c(b, 0)),
                           i32)
            K = bin_(b, Op.ADD, K, extra)
        with b.range_for(c(b, 0), K) as t:
            v = bin_(b, Op.ADD, bin_(b, Op.MUL, i, c(b, 7)), t)
            push(b, st[f32], bin_(b, Op.MUL, b.cast(v, f32), c(b, 0.5, f32)))
            push(b, st[f64], bin_(b, Op.MUL, b.cast(v, f64), c(b, 0.25, f64)))
            push(b, st[i32], bin_(b, Op.MUL, v, c(b, 3)))
            push(b, st[i64], bin_(b, Op.MUL, b.cast(v, i64), c(b, 1_000_000_007, i64)))
            push(b, st[u32], bin_(b, Op.XOR, b.cast(v, u32), c(b, 0xF0000000, u32)))
            push(b, st[u1], bin_(b, Op.CMP_EQ, bin_(b, Op.MOD, v, c(b, 3)), c(b, 0)))
        acc = {dt: b.alloca(i32 if dt == u1 else dt, "acc" + dt.name) for dt in DTYPES}
        with b.range_for(c(b, 0), K):
            for dt in (f32, f64):
                a = acc[dt]
                x = bin_(b, Op.ADD, bin_(b, Op.MUL, b.load(a), c(b, 1.5, dt)), top(b, st[dt]))
                acc_adj(b, st[dt], x)
                acc_adj(b, st[dt], c(b, 0.125, dt))
                b.store(a, bin_(b, Op.SUB, x, top_adj(b, st[dt])))
            for dt in (i32, i64, u32):
                a = acc[dt]
                b.store(a, bin_(b, Op.ADD, bin_(b, Op.MUL, b.load(a), c(b, 31, dt)),
                                top(b, st[dt])))
            a = acc[u1]
            b.store(a, bin_(b, Op.ADD, bin_(b, Op.MUL, b.load(a), c(b, 2)),
                            b.cast(top(b, st[u1]), i32)))
            for dt in DTYPES:
                pop(b, st[dt])
        for dt, out in zip(DTYPES, outs):
            b.global_store(out, [i], b.load(acc[dt]))

    return body


def mixed_outs(n):
    return [field(k, i32 if dt == u1 else dt, (n,)) for k, dt in enumerate(DTYPES)]


def test_mixed_dtypes_serial_and_range():
    n = 64
    outs = mixed_outs(n)
    tl = kernel("mixed", range_task(mixed_task(outs, 9), 0, n))
    caps = caps_for(tl, {dt.name: 9 for dt in DTYPES})
    got, launches = check_ad(tl, zeros(*outs), caps)
    lay = launches[0].layout
    assert lay.kinds == ("float", "float", "int", "int", "int", "int")
    assert got[key(outs[5])].any() and got[key(outs[0])].any()


def test_capacity_exactly_reached_does_not_overflow():
    outs = mixed_outs(50)
    tl = kernel("exact", range_task(mixed_task(outs, 4), 0, 50))
    check_ad(tl, zeros(*outs), caps_for(tl, {dt.name: 4 for dt in DTYPES}))


def test_parallel_100k_per_iteration_stacks():
    """100k iterations on more workers than cores (rows = workers); the interpreter checks
    slices of the range (bounds are scalar arguments)."""
    n, k_max = 100_000, 6
    outs = mixed_outs(n)
    body = mixed_task(outs, k_max)
    tl = kernel("par", range_task(body, Node(Op.ARG, i32, (), 0), Node(Op.ARG, i32, (), 1)),
                args=(scalar("lo", i32), scalar("hi", i32)))
    caps = caps_for(tl, {dt.name: k_max for dt in DTYPES})
    rt = CpuRuntime(num_workers=7, parallel_min=1000)
    try:
        got, status, launches = run_llvm_adstack(tl, zeros(*outs), (0, n), caps, rt=rt)
    finally:
        rt.close()
    assert status.tolist() == [0, 0, 0, 0]
    lay = launches[0].layout
    w = launches[0].lanes  # an SPMD task's worker owns w rows, lane-interleaved
    assert launches[0].heap_int.data.size == 7 * w * lay.stride_int
    # the workers that took chunks used their own rows (which did is the pool's: chunks are
    # taken dynamically, `cpu_pool`; on a loaded machine one thread may take them all):
    # entries written; counts live in registers, so the heap's counter slots are never written
    hi = launches[0].heap_int.data.reshape(7, w * lay.stride_int)
    assert (hi[:, :8 * len(DTYPES)] == HEAP_FILL).all()
    used = (hi[:, 8 * len(DTYPES):] != HEAP_FILL).any(axis=1)
    assert used.any()
    hf = launches[0].heap_float.data.reshape(7, w * lay.stride_float)
    assert ((hf != HEAP_FILL).any(axis=1) == used).all()
    for lo, hi in ((0, 300), (14_280, 14_300), (57_140, 57_160), (n - 300, n)):
        want = run_interp_adstack(tl, zeros(*outs), (lo, hi), caps)
        for o in outs:
            np.testing.assert_array_equal(got[key(o)][lo:hi], want[key(o)][lo:hi],
                                          err_msg=f"{o!r} [{lo}, {hi})")


# -- overflow ------------------------------------------------------------------------------------
def test_overflow_serial_reports_and_keeps_stack():
    """Task 1, stack 1 (of three) overflows: status (1, 1, 1); the stack keeps its first `cap`
    entries; the neighbours are intact; no guard byte is touched."""
    K, CAP = 10, 4
    OUT = field(0, f32, (3, K))
    PRE = field(1, i32, (4,))

    def pre(b, i):
        b.global_store(PRE, [i], bin_(b, Op.MUL, i, i))

    def body(b):
        s0, s1, s2 = stack(b, f64, "a"), stack(b, f32, "b"), stack(b, i32, "c")
        with b.range_for(c(b, 0), c(b, K)) as t:
            with b.if_(bin_(b, Op.CMP_LT, t, c(b, 3))) as (then, _):
                with then:
                    push(b, s0, b.cast(t, f64))
                    push(b, s2, bin_(b, Op.ADD, t, c(b, 100)))
            push(b, s1, b.cast(bin_(b, Op.ADD, t, c(b, 10)), f32))
        with b.range_for(c(b, 0), c(b, K)) as j:
            acc_adj(b, s1, c(b, 1.0, f32))
            b.global_store(OUT, [c(b, 0), j], top(b, s1))
            b.global_store(OUT, [c(b, 1), j], top_adj(b, s1))
            b.global_store(OUT, [c(b, 2), j], bin_(b, Op.ADD, b.cast(top(b, s0), f32),
                                                  b.cast(top(b, s2), f32)))
            pop(b, s1)
            with b.if_(bin_(b, Op.CMP_LT, j, c(b, 2))) as (then, _):
                with then:
                    pop(b, s0)
                    pop(b, s2)

    tl = kernel("ovf", range_task(pre, 0, 4), serial_task(body))
    caps = caps_for(tl, {"a": 3, "b": CAP, "c": 3})
    with pytest.raises(AdStackOverflowError):
        run_interp_adstack(tl, zeros(OUT, PRE), (), caps)
    got, status, launches = run_llvm_adstack(tl, zeros(OUT, PRE), (), caps)
    assert status.tolist() == [1, 1, 1, 0]
    assert launches[0] is None
    assert got[key(PRE)].tolist() == [0, 1, 4, 9]
    out = got[key(OUT)]
    # stack b holds 10, 11, 12, 13; once empty, reads go to entry 0 (10) and its adjoint
    want_top = [13, 12, 11, 10] + [10] * (K - CAP)
    assert out[0].tolist() == want_top
    want_adj = [1, 1, 1, 1] + list(range(2, K - CAP + 2))
    assert out[1].tolist() == want_adj
    # stacks a / c: 0..2 and 100..102, popped twice then entry 0 stays on top
    assert out[2].tolist() == [2 + 102, 1 + 101] + [0 + 100] * (K - 2)


def test_overflow_parallel_first_error_wins_and_bounds():
    n, k_max = 100_000, 5
    outs = mixed_outs(n)
    tl = kernel("povf", serial_task(lambda b: None),
                range_task(mixed_task(outs, k_max, overflow_every=997), 0, n))
    caps = caps_for(tl, {dt.name: k_max for dt in DTYPES})
    rt = CpuRuntime(num_workers=5, parallel_min=1000)
    try:
        got, status, launches = run_llvm_adstack(tl, zeros(*outs), (), caps, rt=rt)
    finally:
        rt.close()
    # iterations with i % k_max == k_max - 1 and i % 997 == 0 overflow, on every stack
    assert status[0] == 1 and status[1] == 1 and 0 <= status[2] < len(DTYPES) and status[3] == 0
    # iterations that do not overflow are exact
    lo, hi = 0, 200
    tl_small = kernel("povf", serial_task(lambda b: None),
                      range_task(mixed_task(outs, k_max, overflow_every=997), lo, hi))
    want = run_interp_adstack(tl_small, zeros(*outs), (), caps_for(
        tl_small, {dt.name: k_max + 1 for dt in DTYPES}))
    for o in outs:
        np.testing.assert_array_equal(got[key(o)][lo:hi], want[key(o)][lo:hi])


def test_overflow_of_later_stack_index():
    """Only stack 2 of task 0 overflows (rows = 1, serial)."""
    OUT = field(0, i64, (2,))

    def body(b):
        s = [stack(b, dt, f"s{k}") for k, dt in enumerate((i64, f64, i64))]
        with b.range_for(c(b, 0), c(b, 5)) as t:
            for x in s:
                push(b, x, b.cast(t, x.dtype))
        b.global_store(OUT, [c(b, 0)], top(b, s[2]))
        b.global_store(OUT, [c(b, 1)], top(b, s[0]))

    tl = kernel("ovf2", serial_task(body))
    got, status, _ = run_llvm_adstack(tl, zeros(OUT), (), caps_for(
        tl, {"s0": 5, "s1": 5, "s2": 2}), rows=1)
    assert status.tolist() == [1, 0, 2, 0]
    assert got[key(OUT)].tolist() == [1, 4]


# -- empty stacks and capacity 0 -----------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
def test_empty_stack_reads_entry_zero(dt):
    OUT = field(0, f64, (8,))

    def body(b):
        s = stack(b, dt, "s")
        out = [0]

        def emit(v):
            b.global_store(OUT, [c(b, out[0])], b.cast(v, f64))
            out[0] += 1

        emit(top(b, s))                  # fresh heap: entry 0 is garbage, but no crash
        push(b, s, c(b, 5, dt))
        pop(b, s)
        pop(b, s)                        # pop on empty: count stays 0
        emit(top(b, s))                  # entry 0 retained: 5 (1 for u1)
        if dt.is_float:
            acc_adj(b, s, c(b, 2.5, dt))  # empty: accumulates into adjoint entry 0
            emit(top_adj(b, s))
        push(b, s, c(b, 7, dt))
        push(b, s, c(b, 0, dt))
        emit(top(b, s))
        pop(b, s)
        emit(top(b, s))
        if dt.is_float:
            emit(top_adj(b, s))          # PUSH zeroed the adjoint of entry 0

    tl = kernel("empty", serial_task(body))
    got, status, _ = run_llvm_adstack(tl, zeros(OUT), (), caps_for(tl, {"s": 3}))
    assert status.tolist() == [0, 0, 0, 0]
    v = got[key(OUT)].tolist()
    if dt.is_float:
        assert v[1:6] == [5, 2.5, 0, 7, 0]
    elif dt == u1:
        assert v[1:4] == [1, 0, 1]
    else:
        assert v[1:4] == [5, 0, 7]


def test_capacity_zero():
    """cap 0: LOAD_TOP / LOAD_TOP_ADJ read 0, ACC_ADJ and POP write nothing; PUSH overflows.
    The neighbouring float stack (cap 2) is intact and no heap byte of the cap-0 stacks (none
    exist) or outside the heaps is written."""
    OUT = field(0, f64, (8,))

    def body(b):
        z, w, zi = stack(b, f32, "z"), stack(b, f64, "w"), stack(b, u32, "zi")
        push(b, w, c(b, 3.0, f64))
        acc_adj(b, w, c(b, 0.5, f64))
        vals = [top(b, z), top_adj(b, z), top(b, zi)]
        acc_adj(b, z, c(b, 9.0, f32))
        pop(b, z)
        pop(b, zi)
        vals += [top_adj(b, z), top(b, w), top_adj(b, w)]
        for k, v in enumerate(vals):
            b.global_store(OUT, [c(b, k)], b.cast(v, f64))

    tl = kernel("cap0", serial_task(body))
    caps = caps_for(tl, {"z": 0, "w": 2, "zi": 0})
    got, status, launches = run_llvm_adstack(tl, zeros(OUT), (), caps)
    assert status.tolist() == [0, 0, 0, 0]
    assert got[key(OUT)].tolist()[:6] == [0, 0, 0, 0, 3.0, 0.5]
    lay = launches[0].layout
    assert lay.offsets[0] == lay.adjoint_offsets[0]  # the cap-0 float stack has no bytes
    assert lay.stride_int == 24  # three counts, no int entries
    hf = launches[0].heap_float.data.reshape(-1, lay.stride_float)
    # w's primal region = [0, 16), adjoint [16, 32): only entry 0 of each written
    assert (hf[0, 8:16] == HEAP_FILL).all() and (hf[0, 24:32] == HEAP_FILL).all()
    assert (hf[1:] == HEAP_FILL).all()


def test_capacity_zero_push_overflows_all_heaps_empty():
    OUT = field(0, i32, (2,))

    def body(b):
        s = stack(b, f32, "z")
        push(b, s, c(b, 1.0, f32))
        b.global_store(OUT, [c(b, 0)], b.cast(top(b, s), i32))

    tl = kernel("cap0p", serial_task(body))
    got, status, launches = run_llvm_adstack(tl, zeros(OUT), (), caps_for(tl, {"z": 0}))
    assert launches[0].heap_float.data.size == 0
    assert status.tolist() == [1, 0, 0, 0]
    assert got[key(OUT)].tolist() == [0, 0]


# -- ABI surface ---------------------------------------------------------------------------------
def test_tasks_without_adstacks_do_not_touch_extra_buffers():
    OUT = field(0, f32, (16,))

    def plain(b, i):
        b.global_store(OUT, [i], b.cast(i, f32))

    def with_stack(b, i):
        s = stack(b, f32, "s")
        push(b, s, b.global_load(OUT, [i]))
        b.global_store(OUT, [i], bin_(b, Op.MUL, top(b, s), c(b, 2.0, f32)))

    tl_plain = kernel("k", range_task(plain, 0, 16))
    tl = kernel("k", range_task(plain, 0, 16), range_task(with_stack, 0, 16))
    ir_plain = compile_tasks(tl_plain, kernel_abi(tl_plain)).llvm_ir
    ir_mixed = compile_tasks(tl, kernel_abi(tl)).llvm_ir
    fn0 = ir_mixed[ir_mixed.index("define void @\"spirad_k_0_t\""):ir_mixed.index("define void "
                                                                                 "@\"spirad_k_1_t\"")]
    assert fn0.strip() == ir_plain[ir_plain.index("define void"):].strip()
    assert "ad." not in fn0 and "ad.meta" in ir_mixed
    got, _ = check_ad(tl, zeros(OUT), caps_for(tl, {"s": 1}))
    assert got[key(OUT)].tolist() == [2.0 * k for k in range(16)]


@pytest.mark.parametrize("dt", [i32, u1])
def test_int_stack_load_top_adj_reads_zero(dt):
    """Reverse mode undoing a STORE to an int/bool local emits LOAD_TOP_ADJ on an int stack."""
    OUT = field(0, i32, (2,))

    def body(b):
        s = stack(b, dt, "s")
        push(b, s, c(b, 1, dt))
        b.global_store(OUT, [c(b, 0)], b.cast(top_adj(b, s), i32))
        pop(b, s)
        b.global_store(OUT, [c(b, 1)], b.cast(top_adj(b, s), i32))

    tl = kernel("iadj", serial_task(body))
    got, status, _ = run_llvm_adstack(tl, {key(OUT): np.full(2, 7, np.int32)}, (),
                                      caps_for(tl, {"s": 1}))
    assert got[key(OUT)].tolist() == [0, 0] and status.tolist() == [0, 0, 0, 0]


def test_primal_stacks_write_no_adjoints():
    """Float stacks with `adjoint_in_heap=False` (what reverse mode leaves: the top adjoint is a
    local) get primal regions only: pushes write nothing else, tops and pops work as usual."""
    OUT = field(0, f64, (64,))

    def body(b, i):
        sf = b.emit(Op.ADSTACK_ALLOCA, f32, (), AdStackArg("pf", adjoint_in_heap=False))
        si = stack(b, i32, "si")
        sd = b.emit(Op.ADSTACK_ALLOCA, f64, (), AdStackArg("pd", adjoint_in_heap=False))
        acc = b.alloca(f64, "acc")
        m = bin_(b, Op.MOD, i, c(b, 6))
        with b.range_for(c(b, 0), m) as j:
            ij = bin_(b, Op.ADD, bin_(b, Op.MUL, i, c(b, 3)), j)
            push(b, sf, bin_(b, Op.MUL, b.cast(ij, f32), c(b, 0.5, f32)))
            push(b, si, bin_(b, Op.SUB, ij, c(b, 2)))
            push(b, sd, b.unary(Op.SQRT, b.cast(ij, f64)))
        with b.range_for(c(b, 0), m):
            v = bin_(b, Op.ADD, b.cast(top(b, sf), f64), top(b, sd))
            v = bin_(b, Op.ADD, v, b.cast(top(b, si), f64))
            b.store(acc, bin_(b, Op.ADD, bin_(b, Op.MUL, b.load(acc), c(b, 0.75, f64)), v))
            for s in (sf, si, sd):
                pop(b, s)
        b.global_store(OUT, [i], b.load(acc))

    tl = kernel("primal", range_task(body, 0, 64))
    got, launches = check_ad(tl, zeros(OUT), caps_for(tl, {"pf": 5, "si": 6, "pd": 7}))
    lay = launches[0].layout
    assert lay.kinds == ("primal", "int", "primal")
    assert lay.stride_float == 24 + 56  # align8(5 * 4) + 7 * 8: no adjoint halves
    w = launches[0].lanes  # SPMD: a worker's w rows are lane-interleaved, offsets * w
    hf = launches[0].heap_float.data.reshape(-1, w * lay.stride_float)
    assert (hf[0] != HEAP_FILL).any() and launches[0].heap_float.guards_intact()
    assert (hf[:, 20 * w:24 * w] == HEAP_FILL).all()  # pf's alignment padding: never written
    for op in ("top_adj", "acc_adj"):
        def bad(b):
            s = b.emit(Op.ADSTACK_ALLOCA, f32, (), AdStackArg("p", adjoint_in_heap=False))
            push(b, s, c(b, 1.0, f32))
            top_adj(b, s) if op == "top_adj" else acc_adj(b, s, c(b, 1.0, f32))
        tl = kernel("bad", serial_task(bad))
        with pytest.raises(CodegenError, match="primal adstack"):
            compile_tasks(tl, kernel_abi(tl))


def test_int_stack_acc_adj_is_a_codegen_error():
    def body(b):
        s = stack(b, i32, "s")
        acc_adj(b, s, c(b, 1))

    tl = kernel("bad", serial_task(body))
    with pytest.raises(CodegenError, match="int adstack"):
        compile_tasks(tl, kernel_abi(tl))


@pytest.mark.parametrize("op", [Op.ADSTACK_PUSH, Op.ADSTACK_POP, Op.ADSTACK_LOAD_TOP,
                                Op.ADSTACK_LOAD_TOP_ADJ, Op.ADSTACK_ACC_ADJ], ids=lambda o: o.name)
def test_adstack_op_without_alloca_is_an_error(op):
    def body(b):
        b.emit(op, f32, (), AdStackArg("s"))

    tl = kernel("ad", serial_task(body))
    with pytest.raises(CodegenError, match="ADSTACK_ALLOCA"):
        compile_tasks(tl, kernel_abi(tl))


def test_meta_words_follow_layout():
    """The code reads strides/offsets/caps from meta, not from compile-time constants: the same
    compiled module runs with two different capacity sets."""
    OUT = field(0, f64, (4,))

    def body(b, i):
        s1, s2 = stack(b, i64, "p"), stack(b, f64, "q")
        with b.range_for(c(b, 0), c(b, 3)) as t:
            push(b, s1, b.cast(bin_(b, Op.ADD, i, t), i64))
            push(b, s2, b.cast(bin_(b, Op.MUL, i, t), f64))
        b.global_store(OUT, [i], bin_(b, Op.ADD, b.cast(top(b, s1), f64), top(b, s2)))

    tl = kernel("meta", range_task(body, 0, 4))
    loaded = compile_and_load(tl)
    for cp, cq in ((3, 3), (40, 17)):
        check_ad(tl, zeros(OUT), caps_for(tl, {"p": cp, "q": cq}), loaded=loaded)


def test_counts_are_function_locals_and_meta_is_read_once():
    """The entry counts live in entry-block allocas (registers after mem2reg), never in heap_int;
    meta words and heap row bases are loaded once, in the entry block."""
    OUT = field(0, f32, (16,))

    def body(b, i):
        s, t = stack(b, f32, "s"), stack(b, i32, "t")
        with b.range_for(c(b, 0), c(b, 4)) as j:
            push(b, s, b.cast(bin_(b, Op.ADD, i, j), f32))
            push(b, t, j)
        acc = b.alloca(f32, "acc")
        with b.range_for(c(b, 0), c(b, 4)):
            acc_adj(b, s, top(b, s))
            b.store(acc, bin_(b, Op.ADD, b.load(acc), bin_(b, Op.ADD, top_adj(b, s),
                                                              b.cast(top(b, t), f32))))
            pop(b, s)
            pop(b, t)
        b.global_store(OUT, [i], b.load(acc))

    tl = kernel("regs", range_task(body, 0, 16))
    loaded = compile_and_load(tl)
    _, prog, mod = loaded
    fn = prog.llvm_ir[prog.llvm_ir.index("define void"):]
    entry, rest = fn.split("\nstart:", 1)
    for k in range(2):
        assert f'%"ad.count{k}" = alloca i64' in entry
        # every use of the count is a plain load or store of the alloca: promotable by mem2reg
        for ln in fn.splitlines():
            if f'%"ad.count{k}"' in ln and "= alloca" not in ln:
                assert re.match(rf'\s*(%\S+ = load i64, (ptr|i64\*) %"ad.count{k}"|'
                                rf'store i64 \S+, (ptr|i64\*) %"ad.count{k}")', ln), ln
    # the ops read no launch buffer slot, meta word or heap base: all hoisted into the entry block
    for name in ('%"bufs"', '%"ad.meta"', '%"ad.heapi"', '%"ad.heapf"', '%"ad.stride'):
        assert name not in rest, name
    # the heap's counter slots are only ever read (as the cap == 0 dummy), never stored to
    assert not re.search(r'store [^\n]*%"ad\.slot', fn)
    # after O3 the counts are registers: the task function keeps no alloca
    opt = mod.optimized_ir
    task = opt[opt.index("define void"):]
    assert "alloca" not in task[:task.index("\n}")]
    got, _ = check_ad(tl, zeros(OUT), caps_for(tl, {"s": 4, "t": 4}), loaded=loaded)
    assert got[key(OUT)].any()
