"""`a and b` / `a or b` in kernels, with the values Taichi 1.7.4 gives (issue #35, #36).

Taichi has two meanings, picked by `init(short_circuit_operators=...)`:

* True (Taichi's default, Quadrants' and spirad's: `_SpecialConfig` in Taichi's misc.py):
  Python's meaning: `a and b` is `b if a else a`, `a or b` is `a if a else b`, and the
  right side runs only when it decides the value (built as one arm of a conditional,
  conditional.py), so `i < n and x[i] > 0` never reads `x[n]` (in Taichi neither). Taichi
  still runs the statements of a `ti.func` called in a right operand that is not needed (its
  side effects happen, only its value is dropped); spirad does not run it. Float kernel
  values are refused (Taichi's `&&` / `||` take integers); vectors combine element-wise into
  1 / 0 (`[2, 0] and [5, 4]` is `[1, 0]`), every operand evaluated, as in Taichi.
* False: every operand is evaluated and combined with the bitwise `&` / `|` of the operands
  (promoted to a common type): on booleans (comparisons, u1) the logical result, on other
  integers *not* Python's: `2 and 3` is 2, `5 or 2` is 7, and `2 and 1` is 0, so
  `if 2 and 1:` does not run its body. Literal operands fold the same way (`5 or 2` in a
  kernel is 7, as in Taichi). Taichi refuses float operands; so does spirad, naming the
  comparison to write instead.

Operands known at compile time keep Python's short-circuit where a Python bool or a non-number
(None, a tuple, a dtype) decides (`a is None or a[0] > 0`: spirad / Quadrants patterns), and
everything inside `sd.static(...)` is plain Python (Taichi's `ti.static(0 or 3 or 5)` is 3).
One difference is left: a compile-time `True` decides `True or x` as in Python (1) where Taichi
gives `1 | x`; the two agree whenever x is a boolean.
"""
from __future__ import annotations

import ast
import numbers
import operator

from kernel_ir.errors import SpiradTypeError
from kernel_ir.ops import Op

from .value_ops import is_py_scalar
from .values import VecVal


def build_boolop(v, node, is_compile_time):
    """The value of the BoolOp `node` (`v`: the expression visitor)."""
    is_and = isinstance(node.op, ast.And)
    if v.ctx.static_depth or v.ctx.state.options.short_circuit_operators:
        return _python(v, node.values, is_and, is_compile_time, node)
    word = "and" if is_and else "or"
    vals, x = [], None
    for expr in node.values:
        x = v.rvalue(v.build(expr))
        known = all(is_compile_time(y) for y in vals)
        if is_compile_time(x) and not is_py_scalar(x):  # None, a tuple, a dtype, an object
            if not known:
                raise v.ctx.error(SpiradTypeError, f"`{word}` of a kernel value and a "
                                                   f"compile-time {type(x).__name__}", node)
            if bool(x) != is_and:
                return x  # it decides, as in Python
            continue      # Python drops an operand that does not decide
        if any(is_compile_time(y) and not is_py_scalar(y) for y in vals):
            raise v.ctx.error(SpiradTypeError, f"`{word}` of a compile-time object and a "
                                               f"kernel value", node)
        vals.append(x)
        if isinstance(x, bool) and known and bool(x) != is_and:
            break  # a compile-time bool decides (`a is None or a[0] > 0`); & / | agree below
    if not vals:
        return x
    if len(vals) == 1:
        return vals[0]
    for y in vals:
        if _is_float(y):
            raise v.ctx.error(SpiradTypeError, f"`{word}` on a float operand: Taichi's `and` / "
                                               f"`or` are the bitwise `&` / `|` of integers and "
                                               f"refuse floats; compare (`x != 0`), or use "
                                               f"init(short_circuit_operators=True) for "
                                               f"Python's meaning", node)
    op, fold = (Op.AND, operator.and_) if is_and else (Op.OR, operator.or_)
    acc = vals[0]
    for y in vals[1:]:
        acc = fold(acc, y) if is_py_scalar(acc) and is_py_scalar(y) else v.binop(op, acc, y)
    return acc


def _is_float(x) -> bool:
    if isinstance(x, VecVal):
        return any(_is_float(c) for c in x.comps)
    if is_py_scalar(x):
        return not isinstance(x, numbers.Integral)
    return x.dtype.is_float


def _python(v, exprs, is_and, is_compile_time, node=None):
    """Python's `and` / `or` over `exprs`: the first operand that decides (or the last), the
    rest built only where they are reached. As in Taichi, kernel floats are refused and vectors
    combine element-wise into 0 / 1 (`_vectors`)."""
    node = node or exprs[0]
    a = v.rvalue(v.build(exprs[0]))
    if len(exprs) == 1:
        if not is_compile_time(a):
            _refuse_float(v, a, is_and, node)
        return a
    if is_compile_time(a):
        if bool(a) != is_and:
            return a
        return _python(v, exprs[1:], is_and, is_compile_time, node)
    _refuse_float(v, a, is_and, node)
    if isinstance(a, VecVal):
        return _vectors(v, [a] + [v.rvalue(v.build(e)) for e in exprs[1:]], is_and, node)
    from .conditional import conditional_value
    rest = lambda: _python(v, exprs[1:], is_and, is_compile_time, node)  # noqa: E731
    return conditional_value(v, a, rest, lambda: a) if is_and else \
        conditional_value(v, a, lambda: a, rest)


def _refuse_float(v, x, is_and, node):
    """Taichi 1.7.4 refuses `and` / `or` of a float kernel value (its `&&` / `||` take
    integers and booleans): compare first."""
    if _is_float(x):
        sym = "&&" if is_and else "||"
        raise v.ctx.error(SpiradTypeError, f"unsupported operand type(s) for '{sym}': `and` / "
                                           f"`or` of a float; compare first (`x != 0`)", node)


def _vectors(v, vals, is_and, node):
    """`a and b` / `a or b` with a vector operand: Taichi's element-wise logical value, 1 where
    every (any) operand's component is nonzero and 0 elsewhere, all operands evaluated."""
    from kernel_ir import dtypes as T
    shape = next(x.shape for x in vals if isinstance(x, VecVal))
    for x in vals:
        _refuse_float(v, x, is_and, node)
        if isinstance(x, VecVal) and x.shape != shape:
            raise v.ctx.error(SpiradTypeError, f"`and` / `or` of vectors of different shapes "
                                               f"{shape} and {x.shape}", node)
    n = len(next(x for x in vals if isinstance(x, VecVal)).comps)
    comps = []
    for k in range(n):
        acc = None
        for x in vals:
            c = v.to_cond(x.comps[k] if isinstance(x, VecVal) else x)
            acc = c if acc is None else v.ctx.b.binary(Op.AND if is_and else Op.OR, acc, c)
        comps.append(v.ctx.b.cast(acc, T.i32))
    return VecVal(tuple(comps), shape)
