"""Varying control flow on SPMD lanes (llvm_codegen/spmd_control.py): varying IFs, per-lane trip
counts, WHILE with BREAK / CONTINUE anywhere, top-level CONTINUE. Each kernel runs on lanes
(asserted, also from SPIRAD_DEBUG_CPU's output) and equals the scalar path (SPIRAD_CPU_SPMD=0) bit
for bit and the interpreter; N is not a multiple of the lane count (a masked tail).
"""
from __future__ import annotations

import numpy as np
import pytest

from kernel_ir.dtypes import f32, f64, i32, i64, u1
from kernel_ir.ops import Op
from llvm_codegen import spmd
from llvm_codegen.codegen import default_lanes
from tests.llvm_codegen.harness import codegen_options, compile_and_load, lane_widths, run_llvm
from tests.llvm_codegen.kit import field, kernel, range_task
from tests.llvm_codegen.test_llvm_spmd import (_arrays, _assert_all_equal, _both, _same_bits,
                                               check_both_paths)
from tests.support.random_kernels import generate

N = 1000 + 7
# lanes of a task with 32-bit varying values, with a 64-bit one: the target's defaults
# (codegen.default_lanes: two registers per 32-bit value) or SPIRAD_CPU_SPMD_LANES
W, W64 = lane_widths()


def c(b, v, dt=i32):
    return b.const(v, dt)


def bin_(b, op, x, y, dt=None):
    return b.emit(op, dt or x.dtype, (x, y))


def cmp(b, op, x, y):
    return b.emit(op, u1, (x, y))


def _on_lanes(monkeypatch, tl, arrays, scalars=(), ntasks=1):
    lanes, vec, scal, ref = _both(monkeypatch, tl, arrays, scalars)
    o = codegen_options()
    assert lanes == [o.lanes or default_lanes(spmd.analyze(t), o.vector_bits)
                     for t in tl.tasks] and len(lanes) == ntasks
    assert all(n in (W, W64) for n in lanes), lanes
    _assert_all_equal(vec, scal, ref)
    return vec


@pytest.mark.parametrize("dt", [f32, f64, i32, i64], ids=str)
def test_nested_varying_if_locals_divisions(monkeypatch, dt):
    """Nested varying IFs with locals stored on one side only (from uniform and varying values),
    integer division / modulo by a per-lane divisor that is 0 on lanes not taking the side, a
    uniform IF inside a varying one, and a global store of a uniform value under a varying IF."""
    A, B, OUT = field(0, dt, (N,)), field(1, dt, (N,)), field(2, dt, (N,))
    CNT, FLAG = field(3, i32, (N,)), field(4, i32, (1,))
    K = field(5, i32, ())

    def body(b, i):
        a, d = b.global_load(A, [i]), b.global_load(B, [i])
        v, n = b.alloca(dt, "v"), b.alloca(i32, "n")
        b.store(v, a)
        zero = c(b, 0, dt)
        with b.if_(cmp(b, Op.CMP_GT, a, zero)) as (t, e):
            with t:
                b.store(n, c(b, 1))                                 # uniform value, masked
                with b.if_(cmp(b, Op.CMP_NE, d, zero)) as (t2, e2):
                    with t2:
                        b.store(v, bin_(b, Op.FLOORDIV, a, d))      # d != 0 here only
                        b.store(v, bin_(b, Op.ADD, b.load(v), bin_(b, Op.MOD, a, d)))
                    with e2:
                        b.store(v, bin_(b, Op.MUL, a, c(b, 3, dt)))
                        b.global_store(FLAG, [c(b, 0)], c(b, 7))    # uniform store, masked
                with b.if_(cmp(b, Op.CMP_GT, b.global_load(K, []), c(b, 0))) as (t3, e3):
                    with t3:                                        # uniform IF: a branch
                        b.store(v, bin_(b, Op.SUB, b.load(v), c(b, 1, dt)))
            with e:
                b.store(n, bin_(b, Op.ADD, b.load(n), c(b, 2)))
                b.store(v, bin_(b, Op.DIV, d, bin_(b, Op.SUB, a, c(b, 1, dt))))  # a - 1 < 0 here
        b.global_store(OUT, [i], b.load(v))
        b.global_store(CNT, [i], b.load(n))

    tl = kernel(f"kif_{dt}", range_task(body, 0, N))
    arrays = _arrays(A, B, OUT, CNT, FLAG, seed=11)
    a = arrays[("field", 0, False)]
    a[::5] = 0
    arrays[("field", 1, False)][::3] = 0
    arrays[("field", 5, False)] = np.array(1, np.int32)
    if dt.is_float:  # exactly representable results: fdiv is the only rounding step
        arrays[("field", 0, False)] = np.round(a)
    got = _on_lanes(monkeypatch, tl, arrays)
    assert int(got[("field", 4, False)][0]) == 7


def test_varying_trip_counts_nested(monkeypatch):
    """for s in range(n[i]) (0 to 40 trips per lane) carrying a float local, with a nested
    uniform loop, a varying IF on the loop index and an atomic into a histogram."""
    X, NS, Y, T = field(0, f32, (N,)), field(1, i32, (N,)), field(2, f32, (N,)), field(3, i32, (N,))
    H = field(4, i32, (9,))

    def body(b, i):
        v, t = b.alloca(f32, "v"), b.alloca(i32, "t")
        b.store(v, b.global_load(X, [i]))
        with b.range_for(c(b, 0), b.global_load(NS, [i]), carried=(v, t)) as s:
            b.store(v, bin_(b, Op.ADD, bin_(b, Op.MUL, b.load(v), c(b, 0.97, f32)), c(b, 0.01, f32)))
            with b.range_for(c(b, 0), c(b, 2), carried=(t,)) as k:
                b.store(t, bin_(b, Op.ADD, b.load(t), bin_(b, Op.ADD, s, k)))
            with b.if_(cmp(b, Op.CMP_EQ, bin_(b, Op.MOD, s, c(b, 3)), c(b, 1))) as (th, _):
                with th:
                    b.store(v, bin_(b, Op.SUB, b.load(v), c(b, 0.5, f32)))
                    b.atomic_add(H, [bin_(b, Op.MOD, s, c(b, 9))], c(b, 1))
        b.global_store(Y, [i], b.load(v))
        b.global_store(T, [i], b.load(t))

    tl = kernel("kvt", range_task(body, 0, N))
    arrays = _arrays(X, Y, T, H)
    arrays[("field", 1, False)] = np.random.default_rng(2).integers(0, 41, N).astype(np.int32)
    got = _on_lanes(monkeypatch, tl, arrays)
    assert got[("field", 4, False)].sum() > 0


def test_varying_begin_and_end(monkeypatch):
    """for s in range(lo[i], hi) with a per-lane begin, empty on some lanes."""
    LO, Y = field(0, i32, (N,)), field(1, i64, (N,))

    def body(b, i):
        acc = b.alloca(i64, "acc")
        with b.range_for(b.global_load(LO, [i]), c(b, 20), carried=(acc,)) as s:
            b.store(acc, bin_(b, Op.ADD, bin_(b, Op.MUL, b.load(acc), c(b, 3, i64)),
                              b.emit(Op.CAST, i64, (s,))))
        b.global_store(Y, [i], b.load(acc))

    tl = kernel("kbe", range_task(body, 0, N))
    arrays = _arrays(Y)
    arrays[("field", 0, False)] = np.random.default_rng(4).integers(-5, 30, N).astype(np.int32)
    _on_lanes(monkeypatch, tl, arrays)


def test_while_break_continue_anywhere(monkeypatch):
    """Collatz-like WHILE: a head exit check, a CONTINUE in the middle (odd steps), a BREAK after
    statements with effects (a step cap), a store after the jumps; and a uniform RANGE_FOR with a
    varying BREAK (its index stays scalar)."""
    X, STEPS, LAST, FIRST = (field(k, i64, (N,)) for k in range(4))

    def body(b, i):
        x, steps = b.alloca(i64, "x"), b.alloca(i64, "steps")
        b.store(x, b.global_load(X, [i]))
        with b.while_(carried=(x, steps)):
            with b.if_(cmp(b, Op.CMP_LE, b.load(x), c(b, 1, i64))) as (th, _):
                with th:
                    b.break_()
            b.store(steps, bin_(b, Op.ADD, b.load(steps), c(b, 1, i64)))
            with b.if_(cmp(b, Op.CMP_EQ, bin_(b, Op.MOD, b.load(x), c(b, 2, i64)), c(b, 1, i64))) as (th, _):
                with th:
                    b.store(x, bin_(b, Op.ADD, bin_(b, Op.MUL, b.load(x), c(b, 3, i64)), c(b, 1, i64)))
                    b.continue_()
            b.store(x, bin_(b, Op.FLOORDIV, b.load(x), c(b, 2, i64)))
            with b.if_(cmp(b, Op.CMP_GE, b.load(steps), c(b, 60, i64))) as (th, _):
                with th:
                    b.break_()
            b.global_store(LAST, [i], b.load(x))
        b.global_store(STEPS, [i], b.load(steps))
        first = b.alloca(i64, "first")
        b.store(first, c(b, -1, i64))
        with b.range_for(c(b, 0), c(b, 50), carried=(first,)) as j:
            jj = b.emit(Op.CAST, i64, (j,))
            with b.if_(cmp(b, Op.CMP_EQ, bin_(b, Op.MOD, b.global_load(X, [i]), bin_(
                    b, Op.ADD, jj, c(b, 2, i64))), c(b, 0, i64))) as (th, _):
                with th:
                    b.store(first, jj)
                    b.break_()
        b.global_store(FIRST, [i], b.load(first))

    tl = kernel("kwh", range_task(body, 0, N))
    arrays = _arrays(STEPS, LAST, FIRST)
    arrays[("field", 0, False)] = np.random.default_rng(5).integers(1, 3000, N).astype(np.int64)
    _on_lanes(monkeypatch, tl, arrays)


def test_top_level_continue(monkeypatch):
    """A varying top-level CONTINUE ends some lanes' iterations (the stores after it skip
    them); a uniform one (a scalar argument) ends the whole lane group."""
    X, Y, Z = field(0, i32, (N,)), field(1, i32, (N,)), field(2, i32, (N,))
    K = field(3, i32, ())

    def body(b, i):
        x = b.global_load(X, [i])
        b.global_store(Y, [i], c(b, 1))
        with b.if_(cmp(b, Op.CMP_LT, x, c(b, 0))) as (th, _):
            with th:
                b.continue_()
        acc = b.alloca(i32, "acc")
        b.store(acc, x)
        with b.if_(cmp(b, Op.CMP_GT, b.global_load(K, []), c(b, 5))) as (th, _):
            with th:
                b.continue_()                                  # uniform
        b.store(acc, bin_(b, Op.MUL, b.load(acc), c(b, 3)))
        b.global_store(Y, [i], b.load(acc))
        with b.if_(cmp(b, Op.CMP_GT, x, c(b, 500))) as (th, _):
            with th:
                b.continue_()
        b.global_store(Z, [i], bin_(b, Op.ADD, b.load(acc), c(b, 1)))

    tl = kernel("ktc", range_task(body, 0, N))
    for k in (3, 9):
        arrays = _arrays(X, Y, Z, seed=k)
        arrays[("field", 3, False)] = np.array(k, np.int32)
        _on_lanes(monkeypatch, tl, arrays)


@pytest.mark.parametrize("dt", [i32, i64], ids=str)
def test_integer_pow_on_lanes(monkeypatch, dt):
    """a ** e with a per-lane exponent (0 to 40, wrapping): the vector helper loops until every
    lane's exponent ran out."""
    A, E, OUT = field(0, dt, (N,)), field(1, dt, (N,)), field(2, dt, (N,))

    def body(b, i):
        b.global_store(OUT, [i], bin_(b, Op.POW, b.global_load(A, [i]), b.global_load(E, [i])))

    tl = kernel(f"kpow_{dt}", range_task(body, 0, N))
    arrays = _arrays(A, OUT)
    arrays[("field", 1, False)] = np.random.default_rng(7).integers(0, 41, N).astype(dt.np)
    _on_lanes(monkeypatch, tl, arrays)


def test_debug_output_says_lanes(monkeypatch, capfd):
    X, NS, Y = field(0, f32, (N,)), field(1, i32, (N,)), field(2, f32, (N,))

    def body(b, i):
        v = b.alloca(f32, "v")
        with b.range_for(c(b, 0), b.global_load(NS, [i]), carried=(v,)):
            b.store(v, bin_(b, Op.ADD, b.load(v), b.global_load(X, [i])))
        b.global_store(Y, [i], b.load(v))

    tl = kernel("kdbg", range_task(body, 0, N))
    monkeypatch.setenv("SPIRAD_DEBUG_CPU", "1")
    arrays = _arrays(X, Y)
    arrays[("field", 1, False)] = np.arange(N, dtype=np.int32) % 13
    _on_lanes(monkeypatch, tl, arrays)
    err = capfd.readouterr().err
    assert f"spirad_kdbg_0_t: SPMD, {W} lanes" in err


# -- per-lane adstacks at the IR level -------------------------------------------------------
def _lane_stack_setup(dt, steps):
    from tests.llvm_codegen import test_llvm_spmd_adstack as t
    X, OUT, G = field(0, dt, (t.N,)), field(1, dt, (t.N,)), field(2, dt, (t.N,))
    I, BO, K = field(3, i32, (t.N,)), field(4, i32, (t.N,)), field(5, i32, (t.N,))
    tl = t._kernel(dt, X, OUT, G, I, BO, K, per_lane=True)
    ks = (np.arange(t.N) * 7) % (steps + 1)
    ks[:W] = 0  # a lane group without trips
    arrays = {("field", 0, False): np.linspace(-0.9, 0.9, t.N).astype(dt.np),
              **{(r.kind, r.key, r.grad): np.zeros(t.N, r.dtype.np) for r in (OUT, G, I, BO)},
              ("field", 5, False): ks.astype(np.int32)}
    return tl, arrays, int(ks.max())


@pytest.mark.parametrize("dt", [f32, f64], ids=str)
@pytest.mark.parametrize("steps", [0, 1, 9])
def test_per_lane_stacks_equal_scalar_and_interpreter(monkeypatch, dt, steps):
    """test_llvm_spmd_adstack's kernel with a per-lane trip count K[i]: heap-adjoint, primal,
    int and bool stacks get per-lane counts (scatter / gather),
    bit-equal to the scalar path and equal to the interpreter. The loop-bound stack, pushed
    outside the loop, keeps a scalar count with per-lane values (its top: the reverse loop's
    varying bound)."""
    from tests.llvm_codegen import test_llvm_spmd_adstack as t
    from tests.llvm_codegen.harness import run_interp_adstack
    tl, arrays, most = _lane_stack_setup(dt, steps)
    a = spmd.analyze(tl.tasks[0])
    assert sorted(s.arg.name for s in a.lane_stacks) == ["b", "k", "p", "x"]
    assert [s.arg.name for s in a.varying if s.op == Op.ADSTACK_ALLOCA and s not in a.lane_stacks
            ] == ["n"]
    caps = t._caps(tl, most, n_cap=1)
    lanes, (vec, vst, _), (scal, sst, _) = t._run_both(monkeypatch, tl, arrays, caps)
    assert lanes == [W64 if dt == f64 else W]
    assert vst.tolist() == sst.tolist() == [0, 0, 0, 0]
    want = run_interp_adstack(tl, arrays, (), caps)
    for k in want:
        assert _same_bits(vec[k], scal[k]), k
        np.testing.assert_allclose(vec[k], want[k], rtol=1e-6 if dt == f32 else 1e-14,
                                   err_msg=str(k))


@pytest.mark.parametrize("cap", [0, 3])
def test_per_lane_stack_overflow_same_status(monkeypatch, cap):
    """Up to 9 trips per lane with capacity `cap`: the same status words (code, task, stack)
    as the scalar path; nothing written outside the heaps (the harness' guard bytes); with
    cap 0 every read gives 0."""
    from tests.llvm_codegen import test_llvm_spmd_adstack as t
    tl, arrays, _ = _lane_stack_setup(f64, 9)
    caps = t._caps(tl, cap, n_cap=1)
    lanes, (vec, vst, _), (scal, sst, _) = t._run_both(monkeypatch, tl, arrays, caps)
    assert lanes == [W64]  # f64
    assert vst[0] == 1 and vst.tolist() == sst.tolist()
    assert _same_bits(vec[("field", 1, False)], scal[("field", 1, False)])  # the forward values


# -- the random forward corpus ----------------------------------------------------------------
SEEDS = range(300)


def _corpus_counts():
    """(range tasks, tasks on lanes, tasks on lanes with varying control, reasons of the rest,
    seeds with a varying-control task on lanes) over the corpus."""
    total = lanes = ctl = 0
    reasons, masked_seeds = set(), []
    for seed in SEEDS:
        hit = False
        for t in generate(seed).tl.tasks:
            if t.kind != "range":
                continue
            total += 1
            a = spmd.analyze(t)
            if not a.ok:
                reasons.add(a.reason)
                continue
            lanes += 1
            if a.ctl.masked or a.ctl.loops:
                ctl += 1
                hit = True
        if hit:
            masked_seeds.append(seed)
    return total, lanes, ctl, reasons, masked_seeds


TOTAL, ON_LANES, WITH_MASKS, REASONS, MASKED_SEEDS = _corpus_counts()


def test_most_corpus_tasks_qualify():
    """Seeds 0-299: 302 of 525 range tasks on lanes (before per-lane masks and the vector
    integer POW: 109); what stays scalar is a global written and accessed at other indices in
    the same task, nothing about control flow."""
    print(f"corpus: {ON_LANES}/{TOTAL} range tasks on lanes, {WITH_MASKS} with varying control")
    assert ON_LANES >= 300 and WITH_MASKS >= 60
    assert all("written and accessed at other indices" in r for r in REASONS), REASONS


@pytest.mark.parametrize("seed", MASKED_SEEDS)
def test_random_kernels_with_masks(monkeypatch, seed):
    """Corpus kernels with varying control on lanes: bit-equal to the scalar path unless a math
    function is involved (then within the corpus tolerance)."""
    check_both_paths(monkeypatch, seed)


def test_no_statement_runs_after_every_lane_left(monkeypatch):
    """for j in range(64): if j >= lim[i]: break; s += a[j] with a as long as the largest lim:
    once every lane of a group broke, the rest of the trip (the uniform load a[j], whose index
    is then past a's end) is skipped, as on the scalar path: a branch to the latch on the trip's
    lanes (llvm_codegen/spmd_control.refresh). Bit-equal to both references."""
    L = 40
    A, LIM, OUT = field(0, f32, (L,)), field(1, i32, (N,)), field(2, f32, (N,))

    def body(b, i):
        s = b.alloca(f32, "s")
        b.store(s, c(b, 0.0, f32))
        with b.range_for(c(b, 0), c(b, 64), carried=(s,)) as j:
            with b.if_(cmp(b, Op.CMP_GE, j, b.global_load(LIM, [i]))) as (th, _):
                with th:
                    b.break_()
            b.store(s, bin_(b, Op.ADD, b.load(s), b.global_load(A, [j])))
        b.global_store(OUT, [i], b.load(s))

    tl = kernel("kskip", range_task(body, 0, N))
    arrays = _arrays(A, OUT)
    arrays[("field", 1, False)] = np.random.default_rng(9).integers(0, L + 1, N).astype(np.int32)
    _on_lanes(monkeypatch, tl, arrays)
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "1")
    assert "vjump.rest" in compile_and_load(tl)[1].llvm_ir
