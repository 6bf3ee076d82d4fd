"""``simplify``: algebraic clean-up of size expressions.

Contract: whenever the original expression evaluates without error, the
simplified one evaluates to the same value on the same inputs.  ``simplify``
never introduces an error, but it may *remove* one: ``x * 0 -> 0`` drops the
reads of ``x``, so an out-of-range read inside ``x`` no longer raises.  A fold
that would overflow is left unfolded, so the overflow still happens at
evaluation time.

Rules (applied bottom-up, to a fixed point per node):

* constant folding of ``Add``/``Sub``/``Mul``/``Max`` of two ``Const``;
* ``x + 0 -> x``, ``0 + x -> x``, ``x * 1 -> x``, ``1 * x -> x``,
  ``x * 0 -> 0``, ``0 * x -> 0``, ``Max(x, x) -> x``, ``Sub(x, x) -> 0``;
* because values may be negative (a read can return -3), rules that are only
  valid for non-negative ``x`` use a conservative lower-bound analysis:
  ``Sub(x, 0) -> x`` and ``Max(x, c) -> x`` (``c <= lb(x)``) need
  ``lb(x) >= 0`` resp. ``lb(x) >= c``; ``Sub(c, x) -> 0`` needs ``lb(x) >= c``;
* constants are re-associated: ``(x + c1) + c2 -> x + (c1 + c2)``,
  ``Max(Max(x, c1), c2) -> Max(x, max(c1, c2))``;
* ``MaxOverRange`` with constant ``begin >= end`` -> ``0``;
* ``MaxOverRange`` whose body does not use its var: **if the range is known
  to be non-empty** (``begin`` is a ``Const`` b and the lower bound of ``end``
  exceeds b) it becomes ``body``; otherwise it is **kept unchanged**, because
  an empty range yields 0, not ``body``, and no grammar form expresses
  "body if end > begin else 0" more simply.  Every evaluator handles a
  var-independent body in O(1) anyway (the body is evaluated once).
"""

from __future__ import annotations

from .errors import MAX_ABS
from .expr import (Add, BoundVariable, Const, Max, MaxOverRange, Mul,
                   NdarrayShape, ScalarArg, SizeExpr, Sub, children,
                   free_vars, replace_children)

__all__ = ["simplify", "lower_bound"]


def lower_bound(e: SizeExpr):
    """A proven lower bound of ``e``'s value (an int), or ``None`` if unknown."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, (NdarrayShape, Sub)):
        return 0
    if isinstance(e, Add):
        la, lb = lower_bound(e.a), lower_bound(e.b)
        return None if la is None or lb is None else la + lb
    if isinstance(e, Mul):
        la, lb = lower_bound(e.a), lower_bound(e.b)
        if la is not None and lb is not None and la >= 0 and lb >= 0:
            return la * lb
        return None
    if isinstance(e, Max):
        bounds = [b for b in (lower_bound(e.a), lower_bound(e.b)) if b is not None]
        return max(bounds) if bounds else None
    if isinstance(e, MaxOverRange):
        lb = lower_bound(e.body)
        return None if lb is None else min(lb, 0)
    return None  # FieldLoad, NdarrayRead, ScalarArg, BoundVariable


def _fits(v: int) -> bool:
    return -MAX_ABS <= v <= MAX_ABS


def _const(v: int, fallback: SizeExpr) -> SizeExpr:
    return Const(v) if _fits(v) else fallback


def _is(e: SizeExpr, v: int) -> bool:
    return isinstance(e, Const) and e.value == v


def _nonneg(e: SizeExpr) -> bool:
    lb = lower_bound(e)
    return lb is not None and lb >= 0


def _rule(e: SizeExpr) -> SizeExpr:
    """One rewrite at the root of ``e`` (children already simplified)."""
    if isinstance(e, Add):
        a, b = e.a, e.b
        if isinstance(a, Const) and isinstance(b, Const):
            return _const(a.value + b.value, e)
        if _is(b, 0):
            return a
        if _is(a, 0):
            return b
        if isinstance(a, Const):  # canonical: constant on the right
            return Add(b, a)
        if isinstance(b, Const) and isinstance(a, Add) and isinstance(a.b, Const):
            s = a.b.value + b.value
            if _fits(s):
                return Add(a.a, Const(s))
        return e
    if isinstance(e, Sub):
        a, b = e.a, e.b
        if isinstance(a, Const) and isinstance(b, Const):
            return _const(max(a.value - b.value, 0), e)
        if a == b:
            return Const(0)
        if _is(b, 0) and _nonneg(a):
            return a
        if isinstance(a, Const):
            lb = lower_bound(b)
            if lb is not None and lb >= a.value:
                return Const(0)
        return e
    if isinstance(e, Mul):
        a, b = e.a, e.b
        if isinstance(a, Const) and isinstance(b, Const):
            return _const(a.value * b.value, e)
        if _is(a, 0) or _is(b, 0):
            return Const(0)
        if _is(b, 1):
            return a
        if _is(a, 1):
            return b
        if isinstance(a, Const):
            return Mul(b, a)
        return e
    if isinstance(e, Max):
        a, b = e.a, e.b
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(max(a.value, b.value))
        if a == b:
            return a
        if isinstance(a, Const):
            return Max(b, a)
        if isinstance(b, Const):
            lb = lower_bound(a)
            if lb is not None and lb >= b.value:
                return a
            if isinstance(a, Max) and isinstance(a.b, Const):
                return Max(a.a, Const(max(a.b.value, b.value)))
        return e
    if isinstance(e, MaxOverRange):
        if isinstance(e.begin, Const) and isinstance(e.end, Const) \
                and e.begin.value >= e.end.value:
            return Const(0)
        if e.var not in free_vars(e.body) and isinstance(e.begin, Const):
            lb = lower_bound(e.end)
            if lb is not None and lb > e.begin.value:
                return e.body
        return e
    return e


def simplify(e: SizeExpr) -> SizeExpr:
    """Simplified, value-preserving form of ``e`` (see module docstring)."""
    if isinstance(e, (Const, NdarrayShape, ScalarArg, BoundVariable)):
        return e
    new = tuple(simplify(c) for c in children(e))
    cur = replace_children(e, new)
    for _ in range(8):  # each rule shrinks or canonicalises; a few rounds suffice
        nxt = _rule(cur)
        if nxt is cur or nxt == cur:
            return cur
        if type(nxt) is not type(cur) or children(nxt) != children(cur):
            # re-simplify children when a rule re-associated them
            if isinstance(nxt, (Add, Sub, Mul, Max, MaxOverRange)):
                nxt = replace_children(nxt, tuple(simplify(c) for c in children(nxt)))
        cur = nxt
    return cur
