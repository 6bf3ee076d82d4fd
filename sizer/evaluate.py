"""Three evaluators of size expressions; they agree on every input.

* ``eval_tree(e, ctx)`` -- the reference: a direct recursive reading of the
  semantics in :mod:`sizer.expr`.  Slow (a Python loop per range value).
* ``eval_bytecode(code, ctx)`` (in :mod:`sizer.interpret`) -- a non-recursive
  interpreter of the bytecode of :mod:`sizer.bytecode`, written the way the GPU
  sizer shader is.
* ``eval_fast(e, ctx)`` -- the host fast path: ``MaxOverRange`` evaluates its
  body over a whole array of var values at once with numpy (a batch of
  environments), chunked so memory stays bounded.  A body that does not use
  its var is evaluated once, not once per value.

"Agree" includes errors: each evaluator evaluates exactly the same set of
(node, bound-variable assignment) pairs, so one raises ``SizerError`` iff the
others do (messages may differ).
"""

from __future__ import annotations

import math

import numpy as np

from .errors import MAX_ABS, SizerError, check_range
from .expr import (Add, BoundVariable, Const, FieldLoad, Max, MaxOverRange, Mul,
                   NdarrayRead, NdarrayShape, ScalarArg, SizeExpr, Sub, free_vars)

__all__ = ["eval_tree", "eval_fast", "to_int", "CHUNK"]

#: Maximum number of (row, var value) pairs ``eval_fast`` materialises at once.
CHUNK = 1 << 18
_SENTINEL = np.iinfo(np.int64).min


# --------------------------------------------------------------------------
# Value conversion (shared by all evaluators)


def to_int(x, what: str) -> int:
    """Convert a leaf value to a sizer int: bools -> 0/1, floats truncated
    toward zero (NaN / inf raise), range-checked."""
    if isinstance(x, np.ndarray):
        if x.size != 1:
            raise SizerError(f"{what}: expected a scalar, got an array of shape {x.shape}")
        x = x.reshape(()).item()
    elif isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, int):
        return check_range(x, what)
    if isinstance(x, float):
        if not math.isfinite(x):
            raise SizerError(f"{what}: non-finite value {x}")
        if abs(x) >= float(1 << 62):
            raise SizerError(f"size expression overflow in {what}: {x}")
        return int(x)  # truncates toward zero
    raise SizerError(f"{what}: unsupported value {x!r}")


def _to_int_array(x, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind == "b":
        return a.astype(np.int64)
    if a.dtype.kind == "f":
        if a.size:
            lo, hi = float(a.min()), float(a.max())  # NaN propagates through min/max
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise SizerError(f"{what}: non-finite value")
            if max(-lo, hi) >= float(1 << 62):
                raise SizerError(f"size expression overflow in {what}")
        return np.trunc(a).astype(np.int64)
    if a.dtype.kind == "u":
        if a.size and int(a.max()) > MAX_ABS:
            raise SizerError(f"size expression overflow in {what}")
        return a.astype(np.int64)
    if a.dtype.kind == "i":
        a = a.astype(np.int64, copy=False)
        _check_arr(a, what)
        return a
    raise SizerError(f"{what}: unsupported dtype {a.dtype}")


def _check_arr(a: np.ndarray, what: str) -> np.ndarray:
    if a.size and (a.max() > MAX_ABS or a.min() < -MAX_ABS):
        raise SizerError(f"size expression overflow in {what}")
    return a


# --------------------------------------------------------------------------
# Reference tree evaluator


def _binary(op: type, x: int, y: int) -> int:
    if op is Add:
        return check_range(x + y, "Add")
    if op is Sub:
        return check_range(max(x - y, 0), "Sub")
    if op is Mul:
        return check_range(x * y, "Mul")
    return max(x, y)


def eval_tree(e: SizeExpr, ctx, env: dict | None = None) -> int:
    """Reference evaluator (recursive).  ``env`` maps var ids to values."""
    env = {} if env is None else env
    t = type(e)
    if t is Const:
        return e.value
    if t in (Add, Sub, Mul, Max):
        return _binary(t, eval_tree(e.a, ctx, env), eval_tree(e.b, ctx, env))
    if t is BoundVariable:
        if e.var not in env:
            raise SizerError(f"BoundVariable({e.var}) is not bound by an enclosing MaxOverRange")
        return env[e.var]
    if t is ScalarArg:
        return to_int(ctx.scalar_arg(e.arg), f"ScalarArg({e.arg})")
    if t is NdarrayShape:
        return to_int(ctx.ndarray_shape(e.arg, e.axis), f"NdarrayShape({e.arg}, {e.axis})")
    if t is FieldLoad:
        idx = tuple(eval_tree(i, ctx, env) for i in e.indices)
        return to_int(ctx.field_read(e.field, idx), f"FieldLoad({e.field}, {idx})")
    if t is NdarrayRead:
        idx = tuple(eval_tree(i, ctx, env) for i in e.indices)
        return to_int(ctx.ndarray_read(e.arg, idx), f"NdarrayRead({e.arg}, {idx})")
    if t is MaxOverRange:
        b = eval_tree(e.begin, ctx, env)
        n = eval_tree(e.end, ctx, env)
        if b >= n:
            return 0
        inner = dict(env)
        best = None
        for v in range(b, n):
            inner[e.var] = v
            x = eval_tree(e.body, ctx, inner)
            best = x if best is None else max(best, x)
        return best
    raise SizerError(f"not a SizeExpr node: {e!r}")


# --------------------------------------------------------------------------
# Vectorised host evaluator

# A value in eval_fast is a Python int (same for every row of the batch) or a
# 1-D int64 array with one entry per row.


def _arr(x, n: int) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    return np.full(n, x, dtype=np.int64)


def _fast_binary(op: type, x, y):
    xs, ys = isinstance(x, np.ndarray), isinstance(y, np.ndarray)
    if not xs and not ys:
        return _binary(op, x, y)
    if op is Max:
        return np.maximum(x, y)
    if op is Add:
        return _check_arr(np.add(x, y), "Add")
    if op is Sub:
        return _check_arr(np.maximum(np.subtract(x, y), 0), "Sub")
    # Mul: refuse anything whose exact product leaves the range
    ax = (int(np.abs(x).max()) if x.size else 0) if xs else abs(x)
    ay = (int(np.abs(y).max()) if y.size else 0) if ys else abs(y)
    if ax * ay > MAX_ABS:
        xa, ya = np.broadcast_arrays(np.asarray(x, np.int64), np.asarray(y, np.int64))
        nz = ya != 0
        if np.any(np.abs(xa[nz]) > MAX_ABS // np.abs(ya[nz])):
            raise SizerError("size expression overflow in Mul")
    return np.multiply(x, y)


class _Fast:
    def __init__(self, ctx):
        self.ctx = ctx
        self.uses_var: dict = {}  # id(MaxOverRange) -> body uses its var

    def body_uses_var(self, e: MaxOverRange) -> bool:
        k = id(e)
        r = self.uses_var.get(k)
        if r is None:
            r = self.uses_var[k] = e.var in free_vars(e.body)
        return r

    def ev(self, e: SizeExpr, env: dict, n: int):
        t = type(e)
        if t is Const:
            return e.value
        if t in (Add, Sub, Mul, Max):
            return _fast_binary(t, self.ev(e.a, env, n), self.ev(e.b, env, n))
        if t is BoundVariable:
            if e.var not in env:
                raise SizerError(f"BoundVariable({e.var}) is not bound by an enclosing "
                                 f"MaxOverRange")
            return env[e.var]
        if t is ScalarArg:
            return to_int(self.ctx.scalar_arg(e.arg), f"ScalarArg({e.arg})")
        if t is NdarrayShape:
            return to_int(self.ctx.ndarray_shape(e.arg, e.axis),
                          f"NdarrayShape({e.arg}, {e.axis})")
        if t is FieldLoad or t is NdarrayRead:
            idx = tuple(self.ev(i, env, n) for i in e.indices)
            if t is FieldLoad:
                what = f"FieldLoad({e.field})"
                raw = lambda ix: self.ctx.field_read(e.field, ix)  # noqa: E731
            else:
                what = f"NdarrayRead({e.arg})"
                raw = lambda ix: self.ctx.ndarray_read(e.arg, ix)  # noqa: E731
            if not any(isinstance(i, np.ndarray) for i in idx):
                return to_int(raw(idx), f"{what[:-1]}, {idx})")
            return _to_int_array(raw(idx), what)
        if t is MaxOverRange:
            return self.max_over_range(e, env, n)
        raise SizerError(f"not a SizeExpr node: {e!r}")

    def max_over_range(self, e: MaxOverRange, env: dict, n: int):
        begin = self.ev(e.begin, env, n)
        end = self.ev(e.end, env, n)
        if not self.body_uses_var(e):
            return self._independent(e, begin, end, env, n)
        batched = any(isinstance(v, np.ndarray) for v in env.values()) \
            or isinstance(begin, np.ndarray) or isinstance(end, np.ndarray)
        if not batched:
            return self._single_row(e, begin, end, env)
        b = _arr(begin, n)
        counts = np.maximum(_arr(end, n) - b, 0)
        cum = np.cumsum(counts)
        total = int(cum[-1]) if n else 0
        starts = cum - counts
        acc = np.full(n, _SENTINEL, dtype=np.int64)
        for s in range(0, total, CHUNK):
            idx = np.arange(s, min(s + CHUNK, total), dtype=np.int64)
            rows = np.searchsorted(cum, idx, side="right")
            sub = {k: (v[rows] if isinstance(v, np.ndarray) else v) for k, v in env.items()}
            sub[e.var] = b[rows] + (idx - starts[rows])
            body = _arr(self.ev(e.body, sub, idx.size), idx.size)
            cuts = np.flatnonzero(rows[1:] != rows[:-1]) + 1
            cuts = np.concatenate(([0], cuts))
            seg = np.maximum.reduceat(body, cuts)
            urows = rows[cuts]
            acc[urows] = np.maximum(acc[urows], seg)
        return np.where(counts > 0, acc, 0)

    def _single_row(self, e: MaxOverRange, begin: int, end: int, env: dict):
        if begin >= end:
            return 0
        best = _SENTINEL
        sub = dict(env)
        for s in range(begin, end, CHUNK):
            v = np.arange(s, min(s + CHUNK, end), dtype=np.int64)
            sub[e.var] = v
            body = self.ev(e.body, sub, v.size)
            m = int(body.max()) if isinstance(body, np.ndarray) else body
            best = max(best, m)
        return best

    def _independent(self, e: MaxOverRange, begin, end, env: dict, n: int):
        if not isinstance(begin, np.ndarray) and not isinstance(end, np.ndarray):
            return self.ev(e.body, env, n) if begin < end else 0
        nonempty = _arr(begin, n) < _arr(end, n)
        if nonempty.all():
            return self.ev(e.body, env, n)
        rows = np.flatnonzero(nonempty)
        out = np.zeros(n, dtype=np.int64)
        if rows.size:
            sub = {k: (v[rows] if isinstance(v, np.ndarray) else v) for k, v in env.items()}
            out[rows] = self.ev(e.body, sub, rows.size)
        return out


def eval_fast(e: SizeExpr, ctx) -> int:
    """Vectorised host evaluation of one expression; returns an int."""
    r = _Fast(ctx).ev(e, {}, 1)
    if isinstance(r, np.ndarray):  # pragma: no cover - top level is scalar
        raise RuntimeError("eval_fast: top-level value is unexpectedly batched")
    return int(r)
