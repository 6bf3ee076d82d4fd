"""Errors and the integer value range shared by every sizer evaluator.

Every value a size expression produces -- leaves, intermediate results and
roots -- is an integer ``v`` with ``-MAX_ABS <= v <= MAX_ABS`` where
``MAX_ABS = 2**62 - 1``.  A value outside that range is an *overflow*: every
evaluator (tree, bytecode, vectorised, and the GPU shader) reports it, never
wraps.  The bound is chosen so that ``a + b`` and ``a - b`` of two in-range
values never overflow an int64 before the range check runs.
"""

from __future__ import annotations

MAX_ABS = (1 << 62) - 1


class SizerError(Exception):
    """Malformed sizer input: a bad expression or bytecode, an unknown leaf,
    an out-of-range read, a non-finite value, or an overflowing size."""


def check_range(value: int, what: str) -> int:
    """Return ``value`` if it lies in the sizer value range, else raise."""
    if value > MAX_ABS or value < -MAX_ABS:
        raise SizerError(f"size expression overflow in {what}: {value} is outside "
                         f"[-2**62+1, 2**62-1]")
    return value
