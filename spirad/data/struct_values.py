"""Struct values as kernel arguments (`def k(p: Particle)` called with `Particle(m=1.0, ...)`):
each is a compile-time constant of the kernel, as a `template()` argument is.

Why constants: a struct value is a handful of numbers, and spirad's kernels bind scalar
arguments positionally; reading the members as constants keeps the kernel's signature what the
user wrote, at the price of one compiled program per distinct value (documented in
docs/coming_from_taichi.md: pass a changing value as separate scalar parameters, or in a
field). Struct values are mutable, so a launch takes a `Snapshot`: an immutable copy, one per
distinct value (cached by value), whose identity the launch plans may then trust.
"""
from __future__ import annotations

import numpy as np

from kernel_ir.errors import SpiradTypeError

from .struct import Struct, StructType


class Snapshot(Struct):
    """An immutable copy of a struct value (its members converted to the parameter's type);
    `key` is its value, the compile-cache key."""

    def __setattr__(self, name, value):
        raise SpiradTypeError("a struct value passed to a kernel is read-only inside the launch")


_SNAPSHOTS: dict = {}  # (id(struct type), value key) -> Snapshot


def _value_key(v):
    if isinstance(v, Struct):
        return tuple((m, _value_key(x)) for m, x in v.items())
    a = np.asarray(v)
    return (a.dtype.str, a.shape, tuple(a.reshape(-1).tolist()))


def snapshot(stype: StructType, v) -> Snapshot:
    """The Snapshot of value `v` (a struct value or a dict of members) as a `stype`."""
    given = v
    if isinstance(v, Struct):
        v = v.to_dict()
    if not isinstance(v, dict):
        raise SpiradTypeError(f"a {stype.name} struct value (or a dict of its members) is "
                              f"needed, got {type(v).__name__}")
    try:
        typed = stype(**v)
    except (TypeError, ValueError) as e:  # Taichi's text first, then which member and why
        raise SpiradTypeError(f"Argument {given!r} cannot be converted into required type "
                              f"{stype.name}: {e}") from None
    key = _value_key(typed)
    hit = _SNAPSHOTS.get((id(stype), key))
    if hit is not None and hit._stype is stype:
        return hit
    if len(_SNAPSHOTS) > 4096:
        _SNAPSHOTS.clear()
    s = Snapshot._typed(stype, dict(typed.items()))
    object.__setattr__(s, "key", key)
    _SNAPSHOTS[(id(stype), key)] = s
    return s


def snapshots(args, indices, params) -> tuple:
    """`args` with the arguments of the struct-typed parameters at `indices` replaced by their
    Snapshots."""
    out = list(args)
    for k in indices:
        if k < len(out):
            out[k] = snapshot(params[k][1], out[k])
    return tuple(out)
