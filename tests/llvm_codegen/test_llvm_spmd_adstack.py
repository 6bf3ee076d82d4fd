"""Adstacks of range tasks in SPMD lanes (llvm_codegen/spmd_adstack.py) at the IR level: the
lane path and the scalar path (SPIRAD_CPU_SPMD=1 / 0) give the same bits and the interpreter's
values for varying float stacks with heap adjoints (PUSH, ACC_ADJ, LOAD_TOP_ADJ, POP), primal
stacks, int and bool stacks, a uniform stack feeding a loop bound, cap == 0; overflow reports
the same status words (and writes nothing past the lane-interleaved heap rows: the harness'
guards)."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_ir.abi import adstack_allocas
from kernel_ir.dtypes import f32, f64, i32, u1
from kernel_ir.nodes import AdStackArg
from kernel_ir.ops import Op
from tests.llvm_codegen.harness import (compile_and_load, lane_widths, run_interp_adstack,
                                       run_llvm_adstack)
from tests.llvm_codegen.kit import field, key, kernel, range_task

N = 200 + 5  # full lane groups and a masked tail
# lanes of a task with 32-bit varying values, with a 64-bit one: the target's defaults
# (codegen.default_lanes: two registers per 32-bit value) or SPIRAD_CPU_SPMD_LANES
W, W64 = lane_widths()


def _stack(b, dt, name, heap_adjoints=True):
    return b.emit(Op.ADSTACK_ALLOCA, dt, (), AdStackArg(name, adjoint_in_heap=heap_adjoints))


def _op(b, op, s, v=None):
    srcs = (s,) if v is None else (s, v)
    dt = s.dtype if op in (Op.ADSTACK_LOAD_TOP, Op.ADSTACK_LOAD_TOP_ADJ) else None
    return b.emit(op, dt, srcs, s.arg)


def _kernel(dt, X, OUT, G, I, BO, K, per_lane=False):
    """Forward x <- x*x*a + 0.25 per lane, pushing x (heap adjoints), x*2 (primal kind), the
    trip count (uniform, read back as the reverse loop's bound), i*7+j (int), (i+j)%3 == 0 (bool);
    reverse: adjoints accumulated on the stack in two parts and read back. `per_lane`: the trip
    count is K[i] (every stack then has per-lane counts: test_llvm_spmd_masks)."""
    def body(b, i):
        sx, sp = _stack(b, dt, "x"), _stack(b, dt, "p", heap_adjoints=False)
        sn, si, sb = _stack(b, i32, "n"), _stack(b, i32, "k"), _stack(b, u1, "b")
        a = b.const(0.75, dt)
        x = b.alloca(dt, "xv")
        b.store(x, b.global_load(X, [i]))
        steps = b.global_load(K, [i] if per_lane else [])
        _op(b, Op.ADSTACK_PUSH, sn, steps)
        with b.range_for(b.const(0, i32), steps) as j:
            xv = b.load(x)
            _op(b, Op.ADSTACK_PUSH, sx, xv)
            _op(b, Op.ADSTACK_PUSH, sp, b.binary(Op.MUL, xv, b.const(2.0, dt)))
            _op(b, Op.ADSTACK_PUSH, si, b.binary(Op.ADD, b.binary(Op.MUL, i, b.const(7, i32)), j))
            _op(b, Op.ADSTACK_PUSH, sb, b.emit(Op.CMP_EQ, u1, (b.binary(
                Op.MOD, b.binary(Op.ADD, i, j), b.const(3, i32)), b.const(0, i32))))
            b.store(x, b.binary(Op.ADD, b.binary(Op.MUL, b.binary(Op.MUL, xv, xv), a),
                                b.const(0.25, dt)))
        b.global_store(OUT, [i], b.load(x))
        g = b.alloca(dt, "g")
        b.store(g, b.const(1.0, dt))
        cnt = b.alloca(i32, "cnt")
        b.store(cnt, b.const(0, i32))
        ones = b.alloca(i32, "ones")
        b.store(ones, b.const(0, i32))
        with b.range_for(b.const(0, i32), _op(b, Op.ADSTACK_LOAD_TOP, sn)):
            gx = b.binary(Op.MUL, b.load(g), _op(b, Op.ADSTACK_LOAD_TOP, sx))
            _op(b, Op.ADSTACK_ACC_ADJ, sx, b.binary(Op.MUL, gx, a))
            _op(b, Op.ADSTACK_ACC_ADJ, sx, b.binary(Op.MUL, gx, a))
            b.store(g, b.binary(Op.ADD, _op(b, Op.ADSTACK_LOAD_TOP_ADJ, sx),
                                b.binary(Op.MUL, _op(b, Op.ADSTACK_LOAD_TOP, sp),
                                         b.const(0.0625, dt))))
            b.store(cnt, b.binary(Op.ADD, b.load(cnt), _op(b, Op.ADSTACK_LOAD_TOP, si)))
            b.store(ones, b.binary(Op.ADD, b.load(ones), b.emit(
                Op.CAST, i32, (_op(b, Op.ADSTACK_LOAD_TOP, sb),))))
            for s in (sx, sp, si, sb):
                _op(b, Op.ADSTACK_POP, s)
        b.global_store(G, [i], b.load(g))
        b.global_store(I, [i], b.load(cnt))
        b.global_store(BO, [i], b.load(ones))
    return kernel(f"spmd_ad_{dt}{'_lanes' * per_lane}", range_task(body, 0, N))


def _setup(dt, steps):
    X, OUT, G = field(0, dt, (N,)), field(1, dt, (N,)), field(2, dt, (N,))
    I, BO, K = field(3, i32, (N,)), field(4, i32, (N,)), field(5, i32, ())
    tl = _kernel(dt, X, OUT, G, I, BO, K)
    arrays = {key(X): np.linspace(-0.9, 0.9, N).astype(dt.np),
              **{key(r): np.zeros(N, r.dtype.np) for r in (OUT, G, I, BO)},
              key(K): np.array(steps, np.int32)}
    return tl, arrays


def _run_both(monkeypatch, tl, arrays, caps):
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "1")
    loaded = compile_and_load(tl)
    lanes = [t.lanes for t in loaded[1].tasks]
    vec = run_llvm_adstack(tl, arrays, (), caps, loaded=loaded)
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "0")
    scal = run_llvm_adstack(tl, arrays, (), caps)
    return lanes, vec, scal


def _caps(tl, cap, n_cap=None):
    return {a: (n_cap if a.arg.name == "n" and n_cap is not None else cap)
            for t in tl.tasks for a in adstack_allocas(t)}


def _same_bits(a, b):
    return np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                          np.ascontiguousarray(b).view(np.uint8))


@pytest.mark.parametrize("dt", [f32, f64], ids=str)
@pytest.mark.parametrize("steps", [0, 1, 9])
def test_lanes_equal_scalar_and_interpreter(monkeypatch, dt, steps):
    tl, arrays = _setup(dt, steps)
    caps = _caps(tl, steps, n_cap=1)
    lanes, (vec, vst, _), (scal, sst, _) = _run_both(monkeypatch, tl, arrays, caps)
    assert lanes == [W64 if dt == f64 else W]
    assert vst.tolist() == sst.tolist() == [0, 0, 0, 0]
    want = run_interp_adstack(tl, arrays, (), caps)
    for k in want:
        assert _same_bits(vec[k], scal[k]), k
        np.testing.assert_allclose(vec[k], want[k], rtol=1e-6 if dt == f32 else 1e-14, err_msg=str(k))
    if steps:
        assert vec[("field", 3, False)].any() and vec[("field", 4, False)].any()


def test_cap_zero_reads_zero(monkeypatch):
    """steps = 0 with every capacity 0: the reverse loop runs 0 times, LOAD_TOP of the empty
    loop-bound stack (cap 0) reads 0 on lanes as on the scalar path."""
    tl, arrays = _setup(f32, 0)
    caps = _caps(tl, 0, n_cap=1)
    caps = {a: 0 for a in caps}
    lanes, (vec, vst, _), (scal, sst, _) = _run_both(monkeypatch, tl, arrays, caps)
    assert lanes == [W]
    assert vst.tolist() == sst.tolist()
    for k in vec:
        assert _same_bits(vec[k], scal[k]), k


@pytest.mark.parametrize("cap", [0, 3])
def test_overflow_same_status(monkeypatch, cap):
    """9 trips with capacity `cap`: the lane path records the same overflow (code, task, stack)
    as the scalar path; nothing is written outside the heaps (the harness' guard bytes)."""
    tl, arrays = _setup(f64, 9)
    caps = _caps(tl, cap, n_cap=1)
    lanes, (vec, vst, _), (scal, sst, _) = _run_both(monkeypatch, tl, arrays, caps)
    assert lanes == [W64]  # f64
    assert vst[0] == 1 and vst.tolist() == sst.tolist()
    assert _same_bits(vec[("field", 1, False)], scal[("field", 1, False)])  # the forward values
