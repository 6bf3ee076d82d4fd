"""Size expressions (``SizeExpr``): the capacity of an adstack, or the trip
count of a parallel loop, as a function of launch-time data.

Nodes are immutable (frozen dataclasses, hashable, compared structurally).

Semantics (every evaluator in this package, and the GPU sizer shader, agree):

* All values are integers in ``[-MAX_ABS, MAX_ABS]`` (``MAX_ABS = 2**62 - 1``,
  see :mod:`sizer.errors`); a value outside that range raises ``SizerError``.
* ``Const(v)`` is ``v``.
* ``FieldLoad(field, indices)`` reads element ``indices`` of field ``field``
  (a field id).  ``NdarrayRead(arg, indices)`` reads element ``indices`` of
  the ndarray passed as kernel argument ``arg``.  The number of indices must
  equal the array's rank; every index must satisfy ``0 <= i < shape[axis]``
  (no negative wrap-around); otherwise ``SizerError`` names the leaf and the
  index.  **A value read from a float field / ndarray is truncated toward
  zero** (like Python's ``int(x)``: ``2.9 -> 2``, ``-2.9 -> -2``); NaN or
  infinity raises ``SizerError``.  Booleans read as 0 / 1.
* ``NdarrayShape(arg, axis)`` is ``shape[axis]`` of ndarray argument ``arg``;
  ``ScalarArg(arg)`` is the integer value of scalar kernel argument ``arg``
  (a float scalar is truncated toward zero as above).
* ``Add(a, b) = a + b``; ``Sub(a, b) = max(a - b, 0)`` (clamped at 0);
  ``Mul(a, b) = a * b``; ``Max(a, b) = max(a, b)``.
* ``MaxOverRange(var, begin, end, body)``: ``begin`` and ``end`` are evaluated
  once; if ``begin >= end`` the result is 0 and ``body`` is *not* evaluated;
  otherwise the result is ``max(body[var := v] for v in range(begin, end))``
  (which may be negative if every body value is).  The inner binding of a
  var id shadows an outer binding of the same id.
* ``BoundVariable(var)`` is the current value of the innermost enclosing
  ``MaxOverRange`` binding ``var``; a free occurrence is malformed.
* Every operand of every node is evaluated (no short-circuit), except the
  body of an empty ``MaxOverRange``; so whether an evaluation raises does not
  depend on the evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .errors import MAX_ABS, SizerError

__all__ = [
    "SizeExpr", "Const", "FieldLoad", "NdarrayRead", "NdarrayShape", "ScalarArg",
    "Add", "Sub", "Mul", "Max", "MaxOverRange", "BoundVariable",
    "Leaves", "leaves", "free_vars", "is_closed", "has_device_leaves", "to_str",
    "children", "walk", "as_expr",
]

_I32_MAX = (1 << 31) - 1


def _check_id(node: str, name: str, value) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise SizerError(f"{node}.{name} must be an int, got {value!r}")
    value = value.__index__()
    if not 0 <= value <= _I32_MAX:
        raise SizerError(f"{node}.{name} must be in [0, 2**31-1], got {value}")
    return value


class SizeExpr:
    """Base class of every size-expression node."""

    __slots__ = ()

    def __str__(self) -> str:
        return to_str(self)


def as_expr(x) -> SizeExpr:
    """Coerce an int (or numpy integer) to ``Const``; pass a ``SizeExpr``."""
    if isinstance(x, SizeExpr):
        return x
    return Const(x)


def _check_child(node: str, name: str, value) -> None:
    if not isinstance(value, SizeExpr):
        raise SizerError(f"{node}.{name} must be a SizeExpr, got {value!r}")


@dataclass(frozen=True, slots=True)
class Const(SizeExpr):
    value: int

    def __post_init__(self):
        v = self.value
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise SizerError(f"Const.value must be an int, got {v!r}")
        v = v.__index__()
        object.__setattr__(self, "value", v)
        if not -MAX_ABS <= v <= MAX_ABS:
            raise SizerError(f"Const {v} is outside the sizer range [-2**62+1, 2**62-1]")


def _check_indices(node: str, indices) -> tuple:
    if not isinstance(indices, tuple):
        raise SizerError(f"{node}.indices must be a tuple of SizeExpr, got {indices!r}")
    for k, ix in enumerate(indices):
        _check_child(node, f"indices[{k}]", ix)
    return indices


@dataclass(frozen=True, slots=True)
class FieldLoad(SizeExpr):
    field: int
    indices: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "field", _check_id("FieldLoad", "field", self.field))
        _check_indices("FieldLoad", self.indices)


@dataclass(frozen=True, slots=True)
class NdarrayRead(SizeExpr):
    arg: int
    indices: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "arg", _check_id("NdarrayRead", "arg", self.arg))
        _check_indices("NdarrayRead", self.indices)


@dataclass(frozen=True, slots=True)
class NdarrayShape(SizeExpr):
    arg: int
    axis: int

    def __post_init__(self):
        object.__setattr__(self, "arg", _check_id("NdarrayShape", "arg", self.arg))
        object.__setattr__(self, "axis", _check_id("NdarrayShape", "axis", self.axis))


@dataclass(frozen=True, slots=True)
class ScalarArg(SizeExpr):
    arg: int

    def __post_init__(self):
        object.__setattr__(self, "arg", _check_id("ScalarArg", "arg", self.arg))


@dataclass(frozen=True, slots=True)
class _Binary(SizeExpr):
    a: SizeExpr
    b: SizeExpr

    def __post_init__(self):
        _check_child(type(self).__name__, "a", self.a)
        _check_child(type(self).__name__, "b", self.b)


@dataclass(frozen=True, slots=True)
class Add(_Binary):
    pass


@dataclass(frozen=True, slots=True)
class Sub(_Binary):
    """``max(a - b, 0)``."""


@dataclass(frozen=True, slots=True)
class Mul(_Binary):
    pass


@dataclass(frozen=True, slots=True)
class Max(_Binary):
    pass


@dataclass(frozen=True, slots=True)
class MaxOverRange(SizeExpr):
    """``max(body for var in range(begin, end))``, 0 when the range is empty."""
    var: int
    begin: SizeExpr
    end: SizeExpr
    body: SizeExpr

    def __post_init__(self):
        object.__setattr__(self, "var", _check_id("MaxOverRange", "var", self.var))
        _check_child("MaxOverRange", "begin", self.begin)
        _check_child("MaxOverRange", "end", self.end)
        _check_child("MaxOverRange", "body", self.body)


@dataclass(frozen=True, slots=True)
class BoundVariable(SizeExpr):
    var: int

    def __post_init__(self):
        object.__setattr__(self, "var", _check_id("BoundVariable", "var", self.var))


# --------------------------------------------------------------------------
# Traversal helpers


def children(e: SizeExpr) -> tuple:
    """Operands of ``e`` in evaluation (and bytecode) order."""
    if isinstance(e, _Binary):
        return (e.a, e.b)
    if isinstance(e, (FieldLoad, NdarrayRead)):
        return e.indices
    if isinstance(e, MaxOverRange):
        return (e.begin, e.end, e.body)
    if isinstance(e, (Const, NdarrayShape, ScalarArg, BoundVariable)):
        return ()
    raise SizerError(f"not a SizeExpr node: {e!r}")


def walk(e: SizeExpr) -> Iterator[SizeExpr]:
    """Every node of ``e`` (pre-order, iterative)."""
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))


@dataclass(frozen=True)
class Leaves:
    """The data a size expression reads, for cache invalidation.

    ``fields``: field ids read by ``FieldLoad``; ``ndarrays``: ndarray
    argument indices whose *data* is read (``NdarrayRead``); ``shapes``:
    ndarray argument indices whose *shape* is read (``NdarrayShape``);
    ``scalars``: scalar argument indices (``ScalarArg``).
    """
    fields: frozenset = frozenset()
    ndarrays: frozenset = frozenset()
    shapes: frozenset = frozenset()
    scalars: frozenset = frozenset()

    def __or__(self, other: "Leaves") -> "Leaves":
        return Leaves(self.fields | other.fields, self.ndarrays | other.ndarrays,
                      self.shapes | other.shapes, self.scalars | other.scalars)

    def is_empty(self) -> bool:
        return not (self.fields or self.ndarrays or self.shapes or self.scalars)


def leaves(*exprs: SizeExpr) -> Leaves:
    """Union of the leaves read by the given expressions."""
    f, n, s, a = set(), set(), set(), set()
    for e in exprs:
        for x in walk(e):
            if isinstance(x, FieldLoad):
                f.add(x.field)
            elif isinstance(x, NdarrayRead):
                n.add(x.arg)
            elif isinstance(x, NdarrayShape):
                s.add(x.arg)
            elif isinstance(x, ScalarArg):
                a.add(x.arg)
    return Leaves(frozenset(f), frozenset(n), frozenset(s), frozenset(a))


def free_vars(e: SizeExpr) -> frozenset:
    """Var ids of ``BoundVariable`` nodes not bound by an enclosing
    ``MaxOverRange`` inside ``e``."""
    out: set = set()
    # explicit stack of (node, bound-set) to avoid deep recursion
    stack = [(e, frozenset())]
    while stack:
        n, bound = stack.pop()
        if isinstance(n, BoundVariable):
            if n.var not in bound:
                out.add(n.var)
        elif isinstance(n, MaxOverRange):
            stack.append((n.begin, bound))
            stack.append((n.end, bound))
            stack.append((n.body, bound | {n.var}))
        else:
            for c in children(n):
                stack.append((c, bound))
    return frozenset(out)


def has_device_leaves(e: SizeExpr) -> bool:
    """True iff ``e`` reads device-resident data (``FieldLoad`` /
    ``NdarrayRead``); otherwise it can be evaluated on the host from the scalar
    arguments and ndarray shapes alone."""
    return any(isinstance(x, (FieldLoad, NdarrayRead)) for x in walk(e))


def is_closed(e: SizeExpr) -> bool:
    """True iff ``e`` is a constant: it reads no data leaf (no ``FieldLoad``,
    ``NdarrayRead``, ``NdarrayShape`` or ``ScalarArg``) and has no free
    bound variable."""
    if free_vars(e):
        return False
    return not any(isinstance(x, (FieldLoad, NdarrayRead, NdarrayShape, ScalarArg))
                   for x in walk(e))


def to_str(e: SizeExpr) -> str:
    """Readable one-line rendering, e.g.
    ``max(j in [0, shape(arg0, 0)): arr0[j] * 2)``.

    ``fieldK[...]`` is a FieldLoad of field id K, ``argK[...]`` an NdarrayRead
    of argument K, ``shape(argK, a)`` an NdarrayShape, ``scalarK`` a ScalarArg,
    ``vK`` a bound variable; ``(a -+ b)`` is the clamped ``max(a - b, 0)``.
    """
    if isinstance(e, Const):
        return str(e.value)
    if isinstance(e, FieldLoad):
        return f"field{e.field}[{', '.join(to_str(i) for i in e.indices)}]"
    if isinstance(e, NdarrayRead):
        return f"arg{e.arg}[{', '.join(to_str(i) for i in e.indices)}]"
    if isinstance(e, NdarrayShape):
        return f"shape(arg{e.arg}, {e.axis})"
    if isinstance(e, ScalarArg):
        return f"scalar{e.arg}"
    if isinstance(e, BoundVariable):
        return f"v{e.var}"
    if isinstance(e, Add):
        return f"({to_str(e.a)} + {to_str(e.b)})"
    if isinstance(e, Sub):
        return f"({to_str(e.a)} -+ {to_str(e.b)})"
    if isinstance(e, Mul):
        return f"({to_str(e.a)} * {to_str(e.b)})"
    if isinstance(e, Max):
        return f"max({to_str(e.a)}, {to_str(e.b)})"
    if isinstance(e, MaxOverRange):
        return (f"max(v{e.var} in [{to_str(e.begin)}, {to_str(e.end)}): "
                f"{to_str(e.body)})")
    raise SizerError(f"not a SizeExpr node: {e!r}")


def replace_children(e: SizeExpr, new: tuple) -> SizeExpr:
    """``e`` with its operands (in ``children`` order) replaced by ``new``."""
    if isinstance(e, _Binary):
        return type(e)(new[0], new[1])
    if isinstance(e, FieldLoad):
        return FieldLoad(e.field, tuple(new))
    if isinstance(e, NdarrayRead):
        return NdarrayRead(e.arg, tuple(new))
    if isinstance(e, MaxOverRange):
        return MaxOverRange(e.var, new[0], new[1], new[2])
    return e

