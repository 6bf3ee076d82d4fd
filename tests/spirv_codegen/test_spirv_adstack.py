"""ADSTACK_* lowering (the Adstack ABI of kernel_ir/abi.py) on Vulkan vs the interpreter.

Every module is validated; the driver tests run with the validation layer (zero messages) and the
runtime-side helpers of `spv_harness` (`AdStackHeaps`, `adstack_dispatches`). Heaps are filled
with a pattern and padded with guard words, and `_check_untouched` verifies that the shader wrote
no word outside the [0, cap) entries (primal + adjoint) of each row: the entry counts live in
Function variables, so the int heap's counter slots are never written either.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import spv_harness as H
from spv_kit import (ArgSpec, IRBuilder, Op, Task, TaskList, f32, f64, i32, i64, index_node, nd,
                     range_task, u1, u32)
from kernel_ir.abi import PUSH_CONSTANT_FORMAT, STATUS_ADSTACK_OVERFLOW, kernel_abi
from kernel_ir.nodes import AdStackArg
from spirv_codegen import SpirvCaps, compile_tasks, disassemble, validate

driver = [pytest.mark.vulkan_driver, pytest.mark.xdist_group("spirv_vulkan")]

LAVAPIPE = SpirvCaps(True, True, True, True, False, 65535)
NO_I64 = SpirvCaps(True, False, False, False, False, 65535)
FILL = 0xA5A5A5A5
GUARD = 64


# -- IR helpers ------------------------------------------------------------------------------
def c(b, v, dt=i32):
    return b.const(v, dt)


def stack(b, dt, name):
    return b.emit(Op.ADSTACK_ALLOCA, dt, (), AdStackArg(name))


def push(b, s, v):
    return b.emit(Op.ADSTACK_PUSH, None, (s, v))


def pop(b, s):
    return b.emit(Op.ADSTACK_POP, None, (s,))


def top(b, s):
    return b.emit(Op.ADSTACK_LOAD_TOP, s.dtype, (s,))


def top_adj(b, s):
    return b.emit(Op.ADSTACK_LOAD_TOP_ADJ, s.dtype, (s,))


def acc_adj(b, s, v):
    return b.emit(Op.ADSTACK_ACC_ADJ, None, (s, v))


def fl(b, x, dt=f32):
    return b.cast(x, dt)


# -- kernels ---------------------------------------------------------------------------------
def push_pop_loops(n=200, kmax=9, seed=0):
    """Per i: push x[i] values in a RANGE_FOR, then a WHILE pops them all while accumulating
    adjoints; a second stack re-allocated inside the outer loop checks ALLOCA resets."""
    X, OUT = nd(0, i32, name="x"), nd(1, f32, name="out")
    b = IRBuilder()
    i = index_node()
    s = stack(b, f32, "s")
    acc = b.alloca(f32, "acc")
    cnt = b.alloca(i32, "cnt")
    m = b.global_load(X, [i])
    with b.range_for(c(b, 0), m) as j:
        push(b, s, b.binary(Op.MUL, fl(b, b.binary(Op.ADD, b.binary(Op.MUL, i, c(b, 7)), j)),
                            b.const(0.5, f32)))
        # an inner stack, re-allocated per j: push j+3 values, pop two, sum the top
        t = stack(b, i32, "t")
        with b.range_for(c(b, 0), b.binary(Op.ADD, j, c(b, 3))) as q:
            push(b, t, b.binary(Op.ADD, q, i))
        pop(b, t)
        pop(b, t)
        b.store(cnt, b.binary(Op.ADD, b.load(cnt), top(b, t)))
    b.store(cnt, b.binary(Op.ADD, b.load(cnt), c(b, 0)))
    k = b.alloca(i32, "k")
    with b.while_():
        with b.if_(b.binary(Op.CMP_GE, b.load(k), m)) as (then, _):
            with then:
                b.break_()
        v = top(b, s)
        acc_adj(b, s, b.binary(Op.MUL, v, b.const(2.0, f32)))
        acc_adj(b, s, b.const(1.0, f32))
        a = top_adj(b, s)
        kk = b.load(k)
        b.store(acc, b.binary(Op.ADD, b.load(acc),
                              b.binary(Op.MUL, a, fl(b, b.binary(Op.ADD, kk, c(b, 1))))))
        pop(b, s)
        b.store(k, b.binary(Op.ADD, kk, c(b, 1)))
    b.global_store(OUT, [i], b.binary(Op.ADD, b.load(acc), fl(b, b.load(cnt))))
    tl = TaskList("push_pop", (ArgSpec("x", "ndarray", i32, 1), ArgSpec("out", "ndarray", f32, 1)),
                  (range_task(b.finish(), i, n_ref_arg=0, name="push_pop"),))
    x = np.random.RandomState(seed).randint(0, kmax + 1, n).astype(np.int32)
    return tl, {("ndarray", 0, False): x, ("ndarray", 1, False): np.zeros(n, np.float32)}, \
        [None, None], [kmax, kmax + 2]


def mixed_dtypes(n=300, kmax=6, seed=1):
    """Six stacks (f32, i32, f64, u1, i64, u32) pushed together and popped in reverse."""
    X = nd(0, i32, name="x")
    OF, OI = nd(1, f64, name="of"), nd(2, i64, name="oi")
    b = IRBuilder()
    i = index_node()
    sf = stack(b, f32, "sf")
    si = stack(b, i32, "si")
    sd = stack(b, f64, "sd")
    sb = stack(b, u1, "sb")
    sl = stack(b, i64, "sl")
    su = stack(b, u32, "su")
    m = b.global_load(X, [i])
    of, oi = b.alloca(f64, "of"), b.alloca(i64, "oi")
    with b.range_for(c(b, 0), m) as j:
        ij = b.binary(Op.ADD, i, j)
        push(b, sf, b.binary(Op.MUL, fl(b, ij), b.const(0.25, f32)))
        push(b, si, b.binary(Op.SUB, b.binary(Op.MUL, i, j), c(b, 3)))
        push(b, sd, b.unary(Op.SQRT, fl(b, b.binary(Op.ADD, ij, c(b, 1)), f64)))
        push(b, sb, b.binary(Op.CMP_EQ, b.binary(Op.MOD, j, c(b, 2)), c(b, 0)))
        push(b, sl, b.binary(Op.ADD, b.binary(Op.SHL, b.cast(i, i64), b.const(33, i64)),
                             b.cast(j, i64)))
        push(b, su, b.binary(Op.XOR, b.cast(ij, u32), b.const(0x80000001, u32)))
    with b.range_for(c(b, 0), m) as j:
        acc_adj(b, sd, b.const(0.125, f64))
        acc_adj(b, sf, top(b, sf))
        d = b.binary(Op.MUL, fl(b, top(b, sf), f64), top(b, sd))
        d = b.binary(Op.ADD, d, b.binary(Op.ADD, top_adj(b, sd), fl(b, top_adj(b, sf), f64)))
        b.store(of, b.binary(Op.ADD, b.binary(Op.MUL, b.load(of), b.const(0.5, f64)), d))
        v = b.binary(Op.ADD, top(b, sl), b.cast(top(b, si), i64))
        v = b.binary(Op.ADD, v, b.select(top(b, sb), b.const(1000, i64), b.const(0, i64)))
        v = b.binary(Op.ADD, v, b.cast(top(b, su), i64))
        v = b.binary(Op.ADD, v, b.cast(top_adj(b, si), i64))  # int stack: always 0
        v = b.binary(Op.ADD, v, b.select(top_adj(b, sb), b.const(7, i64), b.const(0, i64)))
        b.store(oi, b.binary(Op.ADD, b.binary(Op.MUL, b.load(oi), b.const(3, i64)), v))
        for s in (sf, si, sd, sb, sl, su):
            pop(b, s)
    b.global_store(OF, [i], b.load(of))
    b.global_store(OI, [i], b.load(oi))
    args = (ArgSpec("x", "ndarray", i32, 1), ArgSpec("of", "ndarray", f64, 1),
            ArgSpec("oi", "ndarray", i64, 1))
    tl = TaskList("mixed", args, (range_task(b.finish(), i, n_ref_arg=0, name="mixed"),))
    x = np.random.RandomState(seed).randint(0, kmax + 1, n).astype(np.int32)
    arrays = {("ndarray", 0, False): x, ("ndarray", 1, False): np.zeros(n),
              ("ndarray", 2, False): np.zeros(n, np.int64)}
    # deliberately different capacities (exact, larger, odd) to exercise the layout
    return tl, arrays, [None] * 3, [kmax, kmax + 3, kmax, kmax + 1, kmax + 2, kmax]


def overflow_kernel(n=500, cap=3, seed=2):
    """Task 0 (no adstack) doubles x; task 1 pushes x[i] entries to stack 0 (cap big enough) and
    stack 1 (cap `cap`), then pops what it can and writes the sum of the tops."""
    X, Y, OUT = nd(0, i32, name="x"), nd(1, i32, name="y"), nd(2, f32, name="out")
    b0 = IRBuilder()
    i0 = index_node()
    b0.global_store(Y, [i0], b0.binary(Op.MUL, b0.global_load(X, [i0]), c(b0, 2)))
    t0 = range_task(b0.finish(), i0, n_ref_arg=0, name="double")
    b = IRBuilder()
    i = index_node()
    a = stack(b, f32, "a")
    s = stack(b, f32, "s")
    acc = b.alloca(f32, "acc")
    m = b.global_load(X, [i])
    with b.range_for(c(b, 0), m) as j:
        v = fl(b, b.binary(Op.ADD, b.binary(Op.MUL, i, c(b, 10)), j))
        push(b, a, v)
        push(b, s, v)
    with b.range_for(c(b, 0), m) as j:
        acc_adj(b, s, b.const(1.0, f32))
        b.store(acc, b.binary(Op.ADD, b.load(acc),
                              b.binary(Op.ADD, b.binary(Op.ADD, top(b, a), top(b, s)),
                                       top_adj(b, s))))
        pop(b, a)
        pop(b, s)
    b.global_store(OUT, [i], b.load(acc))
    t1 = range_task(b.finish(), i, n_ref_arg=0, name="pushes")
    args = (ArgSpec("x", "ndarray", i32, 1), ArgSpec("y", "ndarray", i32, 1),
            ArgSpec("out", "ndarray", f32, 1))
    tl = TaskList("overflow", args, (t0, t1))
    x = np.random.RandomState(seed).randint(0, cap + 1, n).astype(np.int32)
    x[n // 2] = cap + 2  # exactly one iteration overflows
    arrays = {("ndarray", 0, False): x, ("ndarray", 1, False): np.zeros(n, np.int32),
              ("ndarray", 2, False): np.zeros(n, np.float32)}
    return tl, arrays, [None] * 3, {1: [cap + 2, cap]}


def serial_overflow_f64():
    """Serial task, third stack (f64, cap 2) overflows; the others stay within capacity."""
    OUT = nd(0, f64, name="out")
    b = IRBuilder()
    s0 = stack(b, i32, "s0")
    s1 = stack(b, f32, "s1")
    s2 = stack(b, f64, "s2")
    push(b, s0, c(b, 5))
    push(b, s1, b.const(1.5, f32))
    for k in range(4):
        push(b, s2, b.const(10.0 + k, f64))
    b.global_store(OUT, [c(b, 0)], top(b, s2))  # the last successful push: 11
    pop(b, s2)
    b.global_store(OUT, [c(b, 1)], top(b, s2))  # 10
    b.global_store(OUT, [c(b, 2)], fl(b, top(b, s0), f64))
    tl = TaskList("serial_overflow", (ArgSpec("out", "ndarray", f64, 1),),
                  (Task("serial", b.finish(), name="serial_overflow"),))
    return tl, {("ndarray", 0, False): np.zeros(3)}, [None], [1, 1, 2]


def empty_top(n=100):
    """LOAD_TOP on empty stacks reads entry 0 (stale after push/pop); POP of an empty stack is a
    no-op; ACC_ADJ on an empty stack accumulates into entry 0's adjoint."""
    OUT = nd(0, f32, ndim=2, name="out")
    b = IRBuilder()
    i = index_node()
    s = stack(b, f32, "s")
    q = stack(b, i32, "q")
    w = stack(b, f32, "w")  # never pushed: entry 0 holds whatever the heap held (zeros)
    fi = fl(b, i)
    push(b, s, b.binary(Op.ADD, fi, b.const(0.5, f32)))
    acc_adj(b, s, b.const(2.0, f32))
    pop(b, s)
    pop(b, s)  # empty: no-op
    col = [top(b, s), top_adj(b, s)]          # stale entry 0: i + 0.5, adjoint 2
    acc_adj(b, s, b.const(3.0, f32))
    col.append(top_adj(b, s))                 # 5
    push(b, s, b.binary(Op.MUL, fi, b.const(2.0, f32)))
    col += [top(b, s), top_adj(b, s)]         # 2i, 0 (the push zeroed the adjoint)
    pop(b, q)
    push(b, q, b.binary(Op.ADD, i, c(b, 7)))
    push(b, q, b.binary(Op.ADD, i, c(b, 8)))
    pop(b, q)
    pop(b, q)
    pop(b, q)
    col.append(fl(b, top(b, q)))              # stale entry 0: i + 7
    col += [top(b, w), top_adj(b, w)]         # 0, 0 (zeroed heap)
    for k, v in enumerate(col):
        b.global_store(OUT, [i, c(b, k)], v)
    tl = TaskList("empty_top", (ArgSpec("out", "ndarray", f32, 2),),
                  (range_task(b.finish(), i, n_ref_arg=0, name="empty_top"),))
    x = np.arange(n, dtype=np.float32)
    want = np.stack([x + 0.5, np.full(n, 2.0), np.full(n, 5.0), 2 * x, np.zeros(n), x + 7,
                     np.zeros(n), np.zeros(n)], axis=1).astype(np.float32)
    return tl, {("ndarray", 0, False): np.zeros((n, len(col)), np.float32)}, [None], \
        [2, 2, 1], want


def cap_zero(n=130, with_push=False):
    """Stacks of capacity 0: loads give 0, ACC_ADJ / POP do nothing; a PUSH overflows."""
    OUT = nd(0, f64, ndim=2, name="out")
    b = IRBuilder()
    i = index_node()
    ok = stack(b, f32, "ok")
    z = stack(b, f64, "z")
    zi = stack(b, i32, "zi")
    push(b, ok, fl(b, i))
    acc_adj(b, z, b.const(4.0, f64))
    pop(b, z)
    pop(b, zi)
    if with_push:
        push(b, zi, i)
    col = [top(b, z), top_adj(b, z), fl(b, top(b, zi), f64), fl(b, top(b, ok), f64)]
    for k, v in enumerate(col):
        b.global_store(OUT, [i, c(b, k)], v)
    tl = TaskList("cap_zero", (ArgSpec("out", "ndarray", f64, 2),),
                  (range_task(b.finish(), i, n_ref_arg=0, name="cap_zero"),))
    want = np.zeros((n, 4))
    want[:, 3] = np.arange(n)
    return tl, {("ndarray", 0, False): np.zeros((n, 4))}, [None], [1, 0, 0], want


def primal_stacks(n=300, kmax=7, seed=3):
    """Float stacks without heap adjoints (`adjoint_in_heap=False`, layout kind 'primal', as
    reverse mode leaves them) next to an int stack: pushes write only primal entries, so the
    float row is primal regions only; pops and tops behave as on any stack."""
    X, OUT = nd(0, i32, name="x"), nd(1, f64, name="out")
    b = IRBuilder()
    i = index_node()
    sf = b.emit(Op.ADSTACK_ALLOCA, f32, (), AdStackArg("pf", adjoint_in_heap=False))
    si = stack(b, i32, "si")
    sd = b.emit(Op.ADSTACK_ALLOCA, f64, (), AdStackArg("pd", adjoint_in_heap=False))
    acc = b.alloca(f64, "acc")
    m = b.global_load(X, [i])
    with b.range_for(c(b, 0), m) as j:
        ij = b.binary(Op.ADD, b.binary(Op.MUL, i, c(b, 3)), j)
        push(b, sf, b.binary(Op.MUL, fl(b, ij), b.const(0.5, f32)))
        push(b, si, b.binary(Op.SUB, ij, c(b, 2)))
        push(b, sd, b.unary(Op.SQRT, fl(b, b.binary(Op.ADD, ij, c(b, 1)), f64)))
    with b.range_for(c(b, 0), m) as j:
        v = b.binary(Op.ADD, fl(b, top(b, sf), f64), top(b, sd))
        v = b.binary(Op.ADD, v, fl(b, top(b, si), f64))
        b.store(acc, b.binary(Op.ADD, b.binary(Op.MUL, b.load(acc), b.const(0.75, f64)), v))
        for s in (sf, si, sd):
            pop(b, s)
    b.global_store(OUT, [i], b.load(acc))
    args = (ArgSpec("x", "ndarray", i32, 1), ArgSpec("out", "ndarray", f64, 1))
    tl = TaskList("primal", args, (range_task(b.finish(), i, n_ref_arg=0, name="primal"),))
    x = np.random.RandomState(seed).randint(0, kmax + 1, n).astype(np.int32)
    return tl, {("ndarray", 0, False): x, ("ndarray", 1, False): np.zeros(n)}, [None] * 2, \
        [kmax, kmax + 1, kmax + 2]


def golden_kernel():
    """Small kernel for the golden disassembly: one f32 and one i32 stack, every op once."""
    X, OUT = nd(0, f32, name="x"), nd(1, f32, name="out")
    b = IRBuilder()
    i = index_node()
    s = stack(b, f32, "s")
    t = stack(b, i32, "t")
    v = b.global_load(X, [i])
    push(b, s, v)
    push(b, t, i)
    acc_adj(b, s, top(b, s))
    r = b.binary(Op.ADD, top_adj(b, s), fl(b, top(b, t)))
    pop(b, s)
    pop(b, t)
    b.global_store(OUT, [i], r)
    return TaskList("adstack_small", (ArgSpec("x", "ndarray", f32, 1),
                                      ArgSpec("out", "ndarray", f32, 1)),
                    (range_task(b.finish(), i, n_ref_arg=0, name="adstack_small"),))


# -- guard / layout checks -------------------------------------------------------------------
def _writable(snap, stack_dtypes):
    """Masks of the heap words a launch may write (entries [0, cap); not the counter slots)."""
    L = snap.layout
    mf = np.zeros(snap.heap_float.size, bool)
    mi = np.zeros(snap.heap_int.size, bool)
    for row in range(snap.rows):
        bi, bf = row * L.stride_int // 4, row * L.stride_float // 4
        for k, dt in enumerate(stack_dtypes):
            nw = L.max_sizes[k] * dt.nbytes // 4
            if dt.is_float:
                mf[bf + L.offsets[k] // 4: bf + L.offsets[k] // 4 + nw] = True
                if L.kinds[k] == "float":  # 'primal' stacks have no adjoint entries
                    mf[bf + L.adjoint_offsets[k] // 4: bf + L.adjoint_offsets[k] // 4 + nw] = True
            else:
                mi[bi + L.offsets[k] // 4: bi + L.offsets[k] // 4 + nw] = True
    return mf, mi


def _check_untouched(snap, stack_dtypes, fill=FILL, guard=GUARD):
    fb, ib = snap.layout.heap_bytes(snap.rows)
    assert snap.heap_float.size == max(fb // 4 + guard, 1)
    assert snap.heap_int.size == max(ib // 4 + guard, 1)
    mf, mi = _writable(snap, stack_dtypes)
    for name, words, mask in (("float", snap.heap_float, mf), ("int", snap.heap_int, mi)):
        bad = np.nonzero((words != fill) & ~mask)[0]
        assert bad.size == 0, f"heap_{name}: words {bad[:10].tolist()} written outside the ABI"
    # and the guard tails in particular
    assert (snap.heap_float[fb // 4:] == fill).all() and (snap.heap_int[ib // 4:] == fill).all()


def _counter_slots(snap, k):
    """(low, high) words of stack k's (unused) int-heap counter slot for every row."""
    w = snap.heap_int[: snap.rows * snap.layout.stride_int // 4].reshape(snap.rows, -1)
    return w[:, 2 * k], w[:, 2 * k + 1]


def _run_both(vk, build, rows=None, **kw):
    tl, arrays, scalars, caps = build(**kw)
    want = H.run_reference(tl, arrays, scalars, caps)
    got = H.run_vulkan(vk, tl, arrays, scalars, capacities=caps, rows=rows, guard_words=GUARD,
                       heap_fill=FILL)
    return tl, got, want


# -- compile-only tests ----------------------------------------------------------------------
ALL_BUILDERS = {"push_pop": push_pop_loops, "mixed": mixed_dtypes, "overflow": overflow_kernel,
                "serial_overflow": serial_overflow_f64, "empty_top": empty_top,
                "cap_zero": cap_zero, "primal": primal_stacks,
                "golden": lambda: (golden_kernel(),)}


@pytest.mark.parametrize("name", list(ALL_BUILDERS))
@pytest.mark.parametrize("caps", [LAVAPIPE, SpirvCaps(True, True, False, False, False, None)],
                         ids=["lavapipe", "nocap"])
def test_modules_validate(name, caps):
    tl = ALL_BUILDERS[name]()[0]
    abi = kernel_abi(tl)
    for st in compile_tasks(tl, abi, caps):
        validate(st.words)


def test_bindings_and_names():
    tl = overflow_kernel()[0]
    abi = kernel_abi(tl)
    n = len(abi.bindings)
    plain, ad = compile_tasks(tl, abi, LAVAPIPE)
    assert plain.adstacks == () and plain.num_bindings == 2 + n
    assert ad.adstacks == (f32, f32) and ad.num_bindings == 2 + n + 3
    text = disassemble(ad.words)
    binding = dict(re.findall(r"OpDecorate %(\w+) Binding (\d+)", text))
    assert binding["AdStackMeta"] == str(2 + n)
    assert binding["AdStackHeapFloat"] == str(3 + n)
    assert "AdStackHeapInt" not in binding  # float stacks only: the counts are not in the heap
    assert binding["status"] == "1"
    assert "AdStack" not in disassemble(plain.words)
    tl = golden_kernel()
    n = len(kernel_abi(tl).bindings)
    (ad,) = compile_tasks(tl, kernel_abi(tl), LAVAPIPE)
    binding = dict(re.findall(r"OpDecorate %(\w+) Binding (\d+)", disassemble(ad.words)))
    assert binding["AdStackHeapInt"] == str(4 + n)  # the i32 stack's entries


@pytest.mark.parametrize("name", ["push_pop", "mixed", "overflow", "serial_overflow",
                                  "empty_top", "cap_zero", "golden"])
def test_counts_are_function_variables_and_meta_is_read_once(name):
    """Each stack's count is a Function-storage u32 variable (no heap access for it); every
    AdStackMeta word is loaded once, in the entry block."""
    tl = ALL_BUILDERS[name]()[0]
    for st in compile_tasks(tl, kernel_abi(tl), LAVAPIPE):
        if not st.adstacks:
            continue
        text = disassemble(st.words)
        fn = text[text.index("OpFunction "):]
        blocks = re.split(r"\n\s*%\w+ = OpLabel", fn)
        entry, body = blocks[1], "\n".join(blocks[2:])
        counts = re.findall(r"%(\w+) = OpVariable %_ptr_Function_uint Function %uint_0", entry)
        assert len([c for c in counts if c.endswith("_count")]) == len(st.adstacks)
        meta = re.findall(r"OpAccessChain %\w+ %AdStackMeta %int_0 %(\w+)", text)
        assert len(meta) == len(set(meta)), "a meta word is loaded twice"
        assert "%AdStackMeta" not in body
        # int-heap accesses come from int stacks' entries only
        if all(dt.is_float for dt in st.adstacks):
            assert "AdStackHeapInt" not in text


def test_no_int64_for_non_i64_stacks():
    """Counters stay 32-bit: f32/f64/i32/u32/u1 stacks need no Int64 capability."""
    for name in ("push_pop", "golden", "overflow", "serial_overflow", "empty_top", "cap_zero"):
        tl = ALL_BUILDERS[name]()[0]
        for st in compile_tasks(tl, kernel_abi(tl), NO_I64):
            validate(st.words)
            assert "OpCapability Int64" not in disassemble(st.words), name


def test_f64_stack_needs_float64():
    tl = serial_overflow_f64()[0]
    with pytest.raises(RuntimeError, match="f64"):
        compile_tasks(tl, kernel_abi(tl), SpirvCaps(False, False, False, False, False, None))


def test_adjoints_of_int_stacks():
    """LOAD_TOP_ADJ on an int stack is the constant 0 (no heap access); ACC_ADJ is rejected."""
    b = IRBuilder()
    s = stack(b, u1, "s")
    push(b, s, b.const(True, u1))
    top_adj(b, s)
    tl = TaskList("ok", (), (Task("serial", b.finish()),))
    (st,) = compile_tasks(tl, kernel_abi(tl), LAVAPIPE)
    validate(st.words)
    assert "AdStackHeapFloat" not in disassemble(st.words)
    b = IRBuilder()
    s = stack(b, i32, "s")
    push(b, s, c(b, 1))
    acc_adj(b, s, c(b, 1))
    tl = TaskList("bad", (), (Task("serial", b.finish()),))
    with pytest.raises(RuntimeError, match="int stack"):
        compile_tasks(tl, kernel_abi(tl), LAVAPIPE)


def test_primal_stacks_compile():
    """Layout kinds reach the runtime; a primal stack's PUSH writes one heap word per f32 entry
    (no adjoint zeroing), and adjoint ops on it are internal errors."""
    tl = primal_stacks()[0]
    (st,) = compile_tasks(tl, kernel_abi(tl), LAVAPIPE)
    assert st.adstacks == (f32, i32, f64) and st.adstack_kinds == ("primal", "int", "primal")
    for op in ("top_adj", "acc_adj"):
        b = IRBuilder()
        s = b.emit(Op.ADSTACK_ALLOCA, f32, (), AdStackArg("p", adjoint_in_heap=False))
        push(b, s, b.const(1.0, f32))
        top_adj(b, s) if op == "top_adj" else acc_adj(b, s, b.const(1.0, f32))
        tl = TaskList("bad", (), (Task("serial", b.finish()),))
        with pytest.raises(RuntimeError, match="adjoints live in a local"):
            compile_tasks(tl, kernel_abi(tl), LAVAPIPE)


def test_adstack_dispatches_chunks():
    d = H.adstack_dispatches(5, 10_005, 256, (65535,) * 3, 64)
    assert len(d) == 40
    import struct
    spans = [struct.unpack(PUSH_CONSTANT_FORMAT, pc)[:2] for _, pc in d]
    assert spans[0] == (5, 261) and spans[-1] == (9989, 10_005)
    assert all(hi - lo <= 256 for lo, hi in spans)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert H.adstack_dispatches(3, 3, 256, (65535,) * 3, 64) == []


# -- driver tests ----------------------------------------------------------------------------
@pytest.mark.parametrize("n,rows", [(200, None), (200, 64), (10_007, 256)])
@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_push_pop_loops(vk, n, rows):
    tl, got, want = _run_both(vk, push_pop_loops, rows=rows, n=n)
    assert (got.status == 0).all()
    H.assert_close(got.arrays, want)
    snap = got.adstack[0]
    assert snap.rows == (rows or n)
    _check_untouched(snap, (f32, i32))
    # the counts are Function variables: the heap's counter slots keep the fill pattern
    for k in range(2):
        lo, hi = _counter_slots(snap, k)
        assert (lo == FILL).all() and (hi == FILL).all()


@pytest.mark.parametrize("n,rows", [(300, None), (12_345, 256)])
@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_mixed_dtypes(vk, n, rows):
    tl, got, want = _run_both(vk, mixed_dtypes, rows=rows, n=n)
    assert (got.status == 0).all()
    H.assert_close(got.arrays, want)
    _check_untouched(got.adstack[0], (f32, i32, f64, u1, i64, u32))


@pytest.mark.parametrize("n,rows", [(300, None), (5_000, 256)])
@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_primal_stacks(vk, n, rows):
    tl, got, want = _run_both(vk, primal_stacks, rows=rows, n=n)
    assert (got.status == 0).all()
    H.assert_close(got.arrays, want)
    snap = got.adstack[0]
    assert snap.layout.kinds == ("primal", "int", "primal")
    assert snap.layout.stride_float == 8 * 4 + 9 * 8  # align8(7 * 4) + 9 * 8: no adjoint halves
    _check_untouched(snap, (f32, i32, f64))


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_overflow_status_and_guards(vk):
    tl, arrays, scalars, caps = overflow_kernel()
    got = H.run_vulkan(vk, tl, arrays, scalars, capacities=caps, rows=128, guard_words=GUARD,
                       heap_fill=FILL)
    assert got.status[:3].tolist() == [STATUS_ADSTACK_OVERFLOW, 1, 1]
    assert got.status[3] == 0
    x = arrays[("ndarray", 0, False)]
    # iterations within capacity agree with an unbounded reference run
    want = H.run_reference(tl, arrays, scalars, {1: [None, None]})
    okay = x <= caps[1][1]
    np.testing.assert_array_equal(got.arrays[("ndarray", 1, False)], want[("ndarray", 1, False)])
    np.testing.assert_allclose(got.arrays[("ndarray", 2, False)][okay],
                               want[("ndarray", 2, False)][okay], rtol=1e-6)
    # the overflowing iteration: pushes past cap were skipped; tops address entry count-1 >= 0
    assert np.isfinite(got.arrays[("ndarray", 2, False)]).all()
    snap = got.adstack[1]
    _check_untouched(snap, (f32, f32))
    assert 0 not in got.adstack  # task 0 has no adstack buffers


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_serial_overflow_f64(vk):
    tl, arrays, scalars, caps = serial_overflow_f64()
    got = H.run_vulkan(vk, tl, arrays, scalars, capacities=caps, guard_words=GUARD,
                       heap_fill=FILL)
    assert got.status[:3].tolist() == [STATUS_ADSTACK_OVERFLOW, 0, 2]
    np.testing.assert_array_equal(got.arrays[("ndarray", 0, False)], [11.0, 10.0, 5.0])
    snap = got.adstack[0]
    assert snap.rows == 1
    _check_untouched(snap, (i32, f32, f64))
    assert all((w == FILL).all() for k in range(3) for w in _counter_slots(snap, k))
    with pytest.raises(Exception, match="overflow"):
        H.run_reference(tl, arrays, scalars, caps)


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_empty_stack_load_top(vk):
    tl, arrays, scalars, caps, want = empty_top()
    got = H.run_vulkan(vk, tl, arrays, scalars, capacities=caps, rows=64, guard_words=GUARD)
    assert (got.status == 0).all()
    np.testing.assert_array_equal(got.arrays[("ndarray", 0, False)], want)
    snap = got.adstack[0]
    _check_untouched(snap, (f32, i32, f32), fill=0)  # counter slots included: never written


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_cap_zero(vk):
    tl, arrays, scalars, caps, want = cap_zero()
    got = H.run_vulkan(vk, tl, arrays, scalars, capacities=caps, rows=100, guard_words=GUARD,
                       heap_fill=FILL)
    assert (got.status == 0).all()
    np.testing.assert_array_equal(got.arrays[("ndarray", 0, False)], want)
    snap = got.adstack[0]
    _check_untouched(snap, (f32, f64, i32))
    assert snap.layout.max_sizes == (1, 0, 0)


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
def test_cap_zero_push_overflows(vk):
    tl, arrays, scalars, caps, want = cap_zero(with_push=True)
    got = H.run_vulkan(vk, tl, arrays, scalars, capacities=caps, rows=100, guard_words=GUARD,
                       heap_fill=FILL)
    assert got.status[:3].tolist() == [STATUS_ADSTACK_OVERFLOW, 0, 2]
    np.testing.assert_array_equal(got.arrays[("ndarray", 0, False)], want)
    _check_untouched(got.adstack[0], (f32, f64, i32))
