import time

import numpy as np
import pytest

import sizer.evaluate as evaluate_mod
from sizer import (Add, BoundVariable, Const, DictContext, FieldLoad, Max, MaxOverRange, Mul,
                   NdarrayRead, NdarrayShape, ScalarArg, SizerError, Sub, encode, eval_bytecode,
                   eval_fast, eval_tree)

j, k = BoundVariable(0), BoundVariable(1)


def all_evals(e, ctx):
    """Evaluate with every evaluator; check they agree; return the value."""
    a = eval_tree(e, ctx)
    assert eval_fast(e, ctx) == a
    assert eval_bytecode(encode([e], fold=False), ctx) == [a]
    assert eval_bytecode(encode([e]), ctx) == [a]
    return a


def all_raise(e, ctx, match=None):
    with pytest.raises(SizerError, match=match):
        eval_tree(e, ctx)
    with pytest.raises(SizerError, match=match):
        eval_fast(e, ctx)
    with pytest.raises(SizerError, match=match):
        eval_bytecode(encode([e], fold=False), ctx)


def test_basic_semantics():
    ctx = DictContext(scalars={0: 5, 1: -2.7}, ndarrays={0: np.array([3, -4, 9])})
    assert all_evals(Sub(Const(2), Const(5)), ctx) == 0          # clamped
    assert all_evals(Sub(Const(5), Const(2)), ctx) == 3
    assert all_evals(ScalarArg(1), ctx) == -2                    # truncation toward zero
    assert all_evals(Max(NdarrayRead(0, (Const(1),)), Const(-9)), ctx) == -4
    assert all_evals(MaxOverRange(0, Const(3), Const(1), Const(7)), ctx) == 0   # empty
    assert all_evals(MaxOverRange(0, Const(1), Const(3), NdarrayRead(0, (j,))), ctx) == 9
    # a nonempty range over negative values gives a negative maximum
    assert all_evals(MaxOverRange(0, Const(1), Const(2), NdarrayRead(0, (j,))), ctx) == -4
    assert all_evals(Mul(ScalarArg(0), NdarrayShape(0, 0)), ctx) == 15


def test_float_truncation():
    ctx = DictContext(fields={0: np.array([2.9, -2.9, 0.5], dtype=np.float32)})
    assert all_evals(FieldLoad(0, (Const(0),)), ctx) == 2
    assert all_evals(FieldLoad(0, (Const(1),)), ctx) == -2
    e = MaxOverRange(0, Const(0), Const(3), Mul(FieldLoad(0, (j,)), Const(10)))
    assert all_evals(e, ctx) == 20
    ctx = DictContext(fields={0: np.array([True, False])})
    assert all_evals(Add(FieldLoad(0, (Const(0),)), Const(1)), ctx) == 2


def test_triangular_loops_and_shadowing():
    a = np.array([5, 1, 7, 2])
    ctx = DictContext(ndarrays={0: a})
    # max over i < n, j <= i of a[j] * (i - j)
    e = MaxOverRange(0, Const(0), NdarrayShape(0, 0),
                     MaxOverRange(1, Const(0), Add(j, Const(1)),
                                  Mul(NdarrayRead(0, (k,)), Sub(j, k))))
    want = max(a[jj] * (i - jj) for i in range(4) for jj in range(i + 1))
    assert all_evals(e, ctx) == want
    shadow = MaxOverRange(0, Const(0), Const(3), MaxOverRange(0, Add(j, Const(5)), Const(7), j))
    assert all_evals(shadow, ctx) == 6


def test_out_of_range_reads_name_leaf_and_index():
    ctx = DictContext(ndarrays={0: np.arange(4)}, fields={2: np.zeros((2, 3))})
    all_raise(NdarrayRead(0, (Const(4),)), ctx, match=r"NdarrayRead\(arg 0\): index 4")
    all_raise(NdarrayRead(0, (Const(-1),)), ctx, match="index -1")
    all_raise(FieldLoad(2, (Const(1), Const(3))), ctx, match=r"FieldLoad\(field 2\).*index 3.*axis 1")
    all_raise(MaxOverRange(0, Const(0), Const(5), NdarrayRead(0, (j,))), ctx, match="index 4")
    all_raise(FieldLoad(2, (Const(0),)), ctx, match="rank")
    all_raise(FieldLoad(7, ()), ctx, match="unknown field 7")
    all_raise(NdarrayShape(0, 1), ctx, match="axis")
    all_raise(ScalarArg(0), ctx)
    # the body of an empty range is never evaluated
    assert all_evals(MaxOverRange(0, Const(9), Const(9), NdarrayRead(0, (Const(99),))), ctx) == 0


def test_overflow_and_non_finite():
    big = Const(2**61)
    ctx = DictContext(fields={0: np.array([np.nan, 1e30, 3.0]), 1: np.array([2**63 - 1])})
    all_raise(Add(big, big), ctx, match="overflow")
    all_raise(Mul(big, Const(2)), ctx, match="overflow")
    all_raise(Sub(big, Const(-(2**61))), ctx, match="overflow")
    all_raise(MaxOverRange(0, Const(0), Const(3), Mul(j, big)), ctx, match="overflow")
    all_raise(FieldLoad(0, (Const(0),)), ctx, match="non-finite")
    all_raise(FieldLoad(0, (Const(1),)), ctx, match="overflow")
    all_raise(FieldLoad(1, (Const(0),)), ctx, match="overflow")
    assert all_evals(Mul(Const(2**31), Const(2**30)), ctx) == 2**61


def test_multiple_roots_one_sweep():
    ctx = DictContext(scalars=[4], ndarrays={0: np.array([1, 8, 3])})
    roots = [Const(3), MaxOverRange(0, Const(0), NdarrayShape(0, 0), NdarrayRead(0, (j,))),
             Add(ScalarArg(0), Const(1))]
    assert eval_bytecode(encode(roots, fold=False), ctx) == [3, 8, 5]
    assert eval_bytecode(encode([]), ctx) == []


def test_fast_path_chunks(monkeypatch):
    """Small chunks exercise the chunked, batched code path."""
    monkeypatch.setattr(evaluate_mod, "CHUNK", 3)
    rng = np.random.default_rng(1)
    a = rng.integers(-50, 50, size=(6, 5))
    ctx = DictContext(ndarrays={0: a}, scalars=[6])
    e = MaxOverRange(0, Const(0), ScalarArg(0),
                     MaxOverRange(1, j, NdarrayShape(0, 1),
                                  Add(NdarrayRead(0, (j, k)), MaxOverRange(2, Const(0), k, BoundVariable(2)))))
    assert eval_fast(e, ctx) == eval_tree(e, ctx)


def test_fast_path_is_fast():
    a = np.random.default_rng(0).random(4_000_000) * 1000.0
    ctx = DictContext(ndarrays={0: a})
    e = MaxOverRange(0, Const(0), NdarrayShape(0, 0), NdarrayRead(0, (j,)))
    eval_fast(e, ctx)  # warm up
    t = time.perf_counter()
    got = eval_fast(e, ctx)
    dt = time.perf_counter() - t
    assert got == int(a.max())
    assert dt < 0.5, f"eval_fast took {dt:.3f}s for 4M elements"
    # a body independent of the var is evaluated once, not 4M times
    e2 = MaxOverRange(0, Const(0), NdarrayShape(0, 0), NdarrayRead(0, (Const(7),)))
    t = time.perf_counter()
    assert eval_fast(e2, ctx) == int(a[7])
    assert time.perf_counter() - t < 0.05
