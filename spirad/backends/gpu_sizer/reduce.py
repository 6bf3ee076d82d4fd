"""GPU sizer fast path: a `MaxOverRange` over one data read becomes one device min/max reduction.

The typical size expression of a loop whose trip count is read per element is

    max(v in [0, n): (steps[v] -+ 0) + 2)

`sizer_eval` interprets it record by record for every `v`: on lavapipe, which runs every branch
of the interpreter's op dispatch under a lane mask, that costs about half a microsecond per
element. But the body is a non-decreasing function `f` of the one value it reads, so the maximum
over the range is `f(max over the range of steps[v])`. For such a node (`find`) the device
computes the min, the max and a "bad value" flag of the read range (`sizer_minmax` and
`sizer_minmax_total` in `shaders/sizer_kernel.py`, launched by `runner.GpuSizer.reduce_ranges`;
one min / max record comes back per node), and the node is replaced by the constant `f(max)`.
This module is the pure part: which nodes qualify (`find`), how a range is cut into parts for
the device (`partition`), and the rewrite with the device's results (`rewrite`).

Exactness (the host evaluator and the GPU sizer must agree on every expression, errors
included). A node qualifies only when, after folding scalar arguments and shapes:

* `begin`, `end` and every index but one are constants; the remaining index is exactly the
  node's bound variable; all indices are in range for the read array (an out-of-range read
  is left to the interpreter, which reports it exactly);
* the body reads nothing else and is built from Const, Add, Sub (the read on the left), Max and
  Mul by a constant >= 0 — non-decreasing in the value read;
* the read range holds no value without a sizer int (NaN, inf, |x| >= 2**62: the flag), and no
  intermediate of `f` can leave [-MAX_ABS, MAX_ABS] for any value in [min, max] (interval
  arithmetic); otherwise the interpreter evaluates the node and reports the error.

An empty range is 0 without reading anything, as in every evaluator.
"""
from __future__ import annotations

from dataclasses import dataclass

import sizer as sz
import sizer.device_format as F

CHUNK = 4096         # elements per `sizer_minmax` invocation: far below lavapipe's loop cap
MAX_PARTS = 60000    # `sizer_minmax_total` loops over the parts: stay below the cap too


@dataclass(frozen=True)
class Reduction:
    """One qualifying MaxOverRange: the read's leaf key, its element range, and the body."""
    node: sz.MaxOverRange
    leaf_key: tuple
    first: int      # element offset of v = begin (leaf base included)
    stride: int     # elements between v and v + 1
    count: int      # end - begin (> 0)
    body: sz.SizeExpr
    read: sz.SizeExpr


def _read_of(body: sz.SizeExpr, var: int):
    """The single data read in `body`, if body is a non-decreasing function of it (see the
    module docstring); else None."""
    if isinstance(body, sz.Const):
        return None
    if isinstance(body, (sz.NdarrayRead, sz.FieldLoad)):
        bound = [k for k, i in enumerate(body.indices) if i == sz.BoundVariable(var)]
        others = [i for i in body.indices if not isinstance(i, sz.Const)]
        return body if len(bound) == 1 and len(others) == 1 else None
    if isinstance(body, (sz.Add, sz.Max)):
        a, b = body.a, body.b
        if isinstance(b, sz.Const):
            return _read_of(a, var)
        if isinstance(a, sz.Const):
            return _read_of(b, var)
        return None
    if isinstance(body, sz.Sub):
        return _read_of(body.a, var) if isinstance(body.b, sz.Const) else None
    if isinstance(body, sz.Mul):
        a, b = body.a, body.b
        if isinstance(b, sz.Const) and b.value >= 0:
            return _read_of(a, var)
        if isinstance(a, sz.Const) and a.value >= 0:
            return _read_of(b, var)
    return None


def _interval(e: sz.SizeExpr, read, lo: int, hi: int):
    """(low, high) of `e` for read values in [lo, hi]; None when an intermediate may overflow."""
    if e is read:
        r = (lo, hi)
    elif isinstance(e, sz.Const):
        r = (e.value, e.value)
    else:
        x, y = _interval(e.a, read, lo, hi), _interval(e.b, read, lo, hi)
        if x is None or y is None:
            return None
        if isinstance(e, sz.Add):
            r = (x[0] + y[0], x[1] + y[1])
        elif isinstance(e, sz.Sub):
            r = (max(x[0] - y[1], 0), max(x[1] - y[0], 0))
        elif isinstance(e, sz.Max):
            r = (max(x[0], y[0]), max(x[1], y[1]))
        else:  # Mul
            ps = [p * q for p in x for q in y]
            r = (min(ps), max(ps))
    return r if -sz.MAX_ABS <= r[0] and r[1] <= sz.MAX_ABS else None


def _substitute(e, read, value: int):
    if e is read:
        return sz.Const(value)
    kids = sz.expr.children(e)
    return sz.expr.replace_children(e, tuple(_substitute(k, read, value) for k in kids)) \
        if kids else e


def find(exprs, leaves: dict, scalars: dict, shapes: dict):
    """(folded expressions, the Reductions in them). `leaves` maps ('field', id) /
    ('ndarray', arg) to `device_program.Leaf`."""
    if not any(isinstance(n, sz.MaxOverRange) for e in exprs for n in sz.expr.walk(e)):
        return exprs, {}
    folded = []
    for e in exprs:
        try:
            folded.append(sz.fold_constants(e, scalar_args=scalars, ndarray_shapes=shapes))
        except sz.SizerError:
            folded.append(e)
    found = {}
    for e in folded:
        for n in sz.expr.walk(e):
            if not isinstance(n, sz.MaxOverRange) or n in found:
                continue
            if not (isinstance(n.begin, sz.Const) and isinstance(n.end, sz.Const)):
                continue
            read = _read_of(n.body, n.var)
            if read is None:
                continue
            key = ("field", read.field) if isinstance(read, sz.FieldLoad) else ("ndarray", read.arg)
            lf = leaves.get(key)
            b, end = n.begin.value, n.end.value
            if lf is None or len(lf.shape) != len(read.indices):
                continue
            if b >= end:
                found[n] = None  # empty: 0, nothing read
                continue
            strides, s = [], 1
            for ext in reversed(lf.shape):
                strides.append(s)
                s *= int(ext)
            strides.reverse()
            first, stride, ok = lf.base, 0, True
            for k, (i, ext) in enumerate(zip(read.indices, lf.shape)):
                if isinstance(i, sz.Const):
                    ok = ok and 0 <= i.value < ext
                    first += i.value * strides[k]
                else:
                    ok = ok and 0 <= b and end <= ext
                    first += b * strides[k]
                    stride = strides[k]
            if ok:
                found[n] = Reduction(n, key, first, stride, end - b, n.body, read)
    return folded, found


def device_dtype(red: Reduction, leaf, has_f64: bool):
    """The `F.DT_*` code `sizer_minmax` reads `red`'s leaf as, or None when the reduction cannot
    run on the device (the interpreter's limits apply; it may fall back to the host)."""
    dt = F.DTYPE_CODES.get(leaf.dtype.name)
    last = red.first + (red.count - 1) * red.stride
    if dt is None or dt == F.DT_F64 and not has_f64 or \
            (last + 1) * (2 if dt == F.DT_I64 else 1) >= 2**31:
        return None
    return dt


def partition(count: int) -> tuple:
    """(elements per `sizer_minmax` invocation, invocations) for a range of `count` elements."""
    chunk = max(CHUNK, -(-count // MAX_PARTS))
    return chunk, -(-count // chunk)


def rewrite(folded, found: dict, results: dict):
    """The expressions with every reduced node replaced by its value. `results`: Reduction ->
    (min, max, bad) from the device."""
    values = {}
    for n, red in found.items():
        if red is None:
            values[n] = sz.Const(0)
            continue
        mn, mx, bad = results[red]
        if bad or _interval(red.body, red.read, mn, mx) is None:
            continue  # the interpreter evaluates it and reports the error exactly
        values[n] = sz.Const(sz.eval_tree(_substitute(red.body, red.read, mx), sz.DictContext()))

    def go(e):
        if e in values:
            return values[e]
        kids = sz.expr.children(e)
        return sz.expr.replace_children(e, tuple(go(k) for k in kids)) if kids else e
    return [go(e) for e in folded]
