"""`a and b` / `a or b` in kernels, with the values Taichi 1.7.4 gives (issue #35).

Taichi has two meanings, picked by `init(short_circuit_operators=...)`:

* False (the default): every operand is evaluated and combined with Taichi's `logical_and` /
  `logical_or`, which are the bitwise `&` / `|` of the operands (promoted to a common type):
  on booleans (comparisons, u1) the logical result, on other integers *not* Python's: `2 and 3`
  is 2, `5 or 2` is 7, and `2 and 1` is 0, so `if 2 and 1:` does not run its body. Literal
  operands fold the same way (`5 or 2` in a kernel is 7, as in Taichi). Taichi refuses float
  operands; so does spirad, naming the comparison to write instead.
* True: Python's meaning: `a and b` is `b if a else a`, `a or b` is `a if a else b`, and the
  right side runs only when it decides the value (built as one arm of a conditional,
  conditional.py), so `i < n and x[i] > 0` never reads `x[n]` (in Taichi neither). Taichi
  still runs the statements of a `ti.func` called in a right operand that is not needed (its
  side effects happen, only its value is dropped); spirad does not run it.

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
        return _python(v, node.values, is_and, is_compile_time)
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


def _python(v, exprs, is_and, is_compile_time):
    """Python's `and` / `or` over `exprs`: the first operand that decides (or the last), the
    rest built only where they are reached."""
    a = v.rvalue(v.build(exprs[0]))
    if len(exprs) == 1:
        return a
    if is_compile_time(a):
        if bool(a) != is_and:
            return a
        return _python(v, exprs[1:], is_and, is_compile_time)
    from .conditional import conditional_value
    rest = lambda: _python(v, exprs[1:], is_and, is_compile_time)  # noqa: E731
    return conditional_value(v, a, rest, lambda: a) if is_and else \
        conditional_value(v, a, lambda: a, rest)
