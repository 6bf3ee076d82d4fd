"""Quadrants' `ndrange(*dims, axes=perm)`: the iteration nesting order, outermost first.

`axes` is a permutation of the ndrange's canonical axes: `axes=(1, 0)` runs axis 1 outermost
and axis 0 innermost, while the loop targets stay bound to the canonical axes
(`for i, j in ndrange(M, N, axes=(1, 0))`: i still runs over M, j over N; only the visit order
changes, j slowest). It matters to speed where it walks a tensor stored in that order (Genesis'
environment-first `layout=(1, 0)` tensors on the CPU) and to results where the body carries
state from one iteration to the next (a serialised loop, a nested one, `static` unrolling,
Python scope). Quadrants 1.3.3's `lang/_ndrange.py` holds the reference texts and semantics.

`check` validates the keyword and gives `None` for `None` and the identity, so those loops
compile exactly as they did before `axes=` existed; `physical` and `canonical` convert a list
between canonical order and nesting order; `iterate` is the Python-scope (and `static`) order.
It sits with the data layouts (the permutation of a `layout=` tensor, read the same way) below
the language layer, so that `sd.ndrange` (spirad.lang) and the loop builder (spirad.frontend)
share it without an import cycle.
"""
from __future__ import annotations

import itertools
import numbers

from kernel_ir.errors import SpiradSyntaxError, SpiradTypeError


def check(axes, n: int):
    """`axes` as a tuple of ints (a permutation of range(n) other than the identity), or None.
    Quadrants' errors and texts: a length mismatch and a non-permutation are syntax errors, an
    entry that is not an int (bool included: `True` as an axis is a foot-gun) a type error."""
    if axes is None:
        return None
    try:
        axes_t = tuple(axes)
    except TypeError:
        raise SpiradTypeError(f"qd.ndrange(axes={axes!r}) must be a tuple of Python ints, "
                              f"a permutation of range({n})") from None
    if len(axes_t) != n:
        raise SpiradSyntaxError(f"qd.ndrange(axes={axes_t!r}) has {len(axes_t)} entries but "
                                f"ndrange was called with {n} dimension argument(s); they must match")
    for e in axes_t:
        if isinstance(e, bool) or not isinstance(e, numbers.Integral):
            raise SpiradTypeError(f"qd.ndrange(axes={axes_t!r}) entries must be Python ints; "
                                  f"got {type(e).__name__} ({e!r})")
    axes_t = tuple(int(e) for e in axes_t)
    if sorted(axes_t) != list(range(n)):
        raise SpiradSyntaxError(f"qd.ndrange(axes={axes_t!r}) is not a permutation of range({n})")
    return None if axes_t == tuple(range(n)) else axes_t


def physical(items, axes):
    """Canonical-order `items` (one per axis) in nesting order, outermost first."""
    return list(items) if axes is None else [items[c] for c in axes]


def canonical(items, axes):
    """Nesting-order `items` (one per level) back in canonical order: level p is axis axes[p]."""
    if axes is None:
        return list(items)
    out = [None] * len(axes)
    for p, c in enumerate(axes):
        out[c] = items[p]
    return out


def iterate(ranges, axes):
    """The index tuples of the product of `ranges` (canonical order), visited in `axes` order."""
    for t in itertools.product(*physical(ranges, axes)):
        yield tuple(canonical(t, axes))
