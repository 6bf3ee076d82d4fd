"""Which globals a range task touches only at elements that belong to one iteration.

A buffer is *iteration-private* in a range task when no two iterations name one element of it:
some axes of every access tuple (load, store, atomic) hold the same expression of the task
index, and those expressions together determine the index. Recognised forms (each plus a
uniform offset — a constant, a scalar argument, an ndarray shape or integer arithmetic of them):
the index itself (`x[i]`, `F[f + 1, p]`), and the mixed-radix digits `ndrange` loops produce
(`i % n`, `(i // n) % m`, ..., the last quotient). The other axes may hold anything, even
values loaded from memory: two elements that differ in one axis are different elements (indices
are in range; an index out of range is undefined, and reported under `debug=True`).

    for p in range(n):              # every access of F names axis 1 by `p`: F is private
        F[f + 1, p] = F[f, p] * 2
        g[base(p)] += 1             # g: `base(p)` is data, not a form above: shared

Why it matters (Taichi's `demote_atomics`): an atomic on a private element has no other writer,
so it can be a plain read-modify-write (`passes/demote_atomics`; DiffTaichi's adjoint kernels
accumulate dozens of `x.grad[f, p] += ...` per iteration, each a locked compare-and-swap loop
on the CPU); and SIMD lanes of one task cannot interfere through a private buffer, whatever
order the lanes run their statements in (`llvm_codegen/spmd`).
"""
from __future__ import annotations

from .nodes import Node, walk
from .ops import GLOBAL_ACCESS, Op

_ARITH = (Op.ADD, Op.SUB, Op.MUL, Op.FLOORDIV, Op.MOD)
_UNIFORM_LEAVES = (Op.CONST, Op.ARG, Op.NDARRAY_SHAPE)


def private_buffers(task) -> frozenset:
    """The `GlobalRef.buffer`s of a range task that are iteration-private (see the module);
    a serial task has one iteration, and an ordered range task (`Task.ordered`) runs one
    iteration at a time, so every buffer they touch is private."""
    accesses: dict = {}
    for n in walk(task.body):
        if n.op in GLOBAL_ACCESS:
            idx = n.srcs if n.op == Op.GLOBAL_LOAD else n.srcs[:-1]
            accesses.setdefault(n.arg.buffer, []).append(idx)
    if task.kind != "range" or task.ordered:
        return frozenset(accesses)
    keys: dict = {}
    return frozenset(buf for buf, tuples in accesses.items()
                     if _private(tuples, task.index, keys))


def uniform_key(n: Node, index: Node, memo: dict):
    """A structural key of `n` when it is a uniform integer expression (the same value in every
    iteration of the task: constants, scalar arguments, ndarray extents and integer arithmetic
    of them; equal keys, equal values), else None. `memo` caches keys across calls."""
    k = _key(n, index, memo)
    return None if k is None or _depends(k) else k


def _private(tuples, index: Node, memo: dict) -> bool:
    ndim = len(tuples[0])
    if any(len(t) != ndim for t in tuples):
        return False
    digits = set()
    for axis in range(ndim):
        k = _key(tuples[0][axis], index, memo)
        if k is None or not _depends(k):
            continue
        if all(_key(t[axis], index, memo) == k for t in tuples[1:]):
            d = _digit(k)
            if d is not None:
                digits.add(d)
    return _covers(digits)


def _key(n: Node, index: Node, memo: dict):
    """A structural key of an integer expression of the task index and uniform leaves (equal
    keys: equal values in every iteration), or None."""
    if n in memo:
        return memo[n]
    if n is index:
        k = ("i",)
    elif n.op in _UNIFORM_LEAVES:
        k = (n.op.name, n.dtype, n.arg)
    elif n.op in _ARITH and n.dtype is not None and n.dtype.kind in ("i", "u"):
        a, b = (_key(s, index, memo) for s in n.srcs)
        k = None if a is None or b is None else (n.op.name, n.dtype, a, b)
    elif n.op == Op.CAST and n.dtype.kind in ("i", "u") and n.srcs[0].dtype.kind in ("i", "u") \
            and n.dtype.bits >= n.srcs[0].dtype.bits:  # widening: the value is unchanged
        a = _key(n.srcs[0], index, memo)
        k = None if a is None else a
    else:
        k = None
    memo[n] = k
    return k


def _depends(k) -> bool:
    return k == ("i",) or (isinstance(k, tuple) and any(isinstance(x, tuple) and _depends(x)
                                                        for x in k))


def _digit(k):
    """`(divisors, modulus)` when k's value is `(i // d1 // d2 ...) % m + uniform` (modulus None:
    no `%`), else None."""
    if k == ("i",):
        return ((), None)
    op = k[0]
    if op == "ADD":
        a, b = k[2], k[3]
        if not _depends(b):
            return _digit(a)
        return _digit(b) if not _depends(a) else None
    if op == "SUB" and not _depends(k[3]):
        return _digit(k[2])
    if op in ("FLOORDIV", "MOD") and not _depends(k[3]):
        d = _digit(k[2])
        if d is None or d[1] is not None:
            return None
        return (d[0] + (k[3],), None) if op == "FLOORDIV" else (d[0], k[3])
    return None


def _covers(digits) -> bool:
    """The digits determine the index: `i % m1`, `(i // m1) % m2`, ..., `i // m1 // ... // mk`
    (or `i` itself)."""
    divs = ()
    while True:
        mods = [m for d, m in digits if d == divs]
        if not mods:
            return False
        if None in mods:
            return True
        divs = divs + (mods[0],)
