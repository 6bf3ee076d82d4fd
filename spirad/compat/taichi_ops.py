"""`taichi.lang.ops`: Taichi's operator functions (`ops.add(a, b)`, `ops.logical_not(x)`,
`ops.abs(x)`, `ops.atomic_add(x, v)`, ...), which Taichi's programs and tests call in Python
scope and in kernels.

Each is a plain Python function over spirad's own operators and builtins, so one definition
serves both scopes: in Python scope it runs on numbers and vector values, in a kernel spirad
inlines it as it inlines any plain Python function a kernel calls.
"""
from __future__ import annotations

import spirad as _sd


def add(a, b):
    """a + b."""
    return a + b


def sub(a, b):
    """a - b."""
    return a - b


def mul(a, b):
    """a * b."""
    return a * b


def truediv(a, b):
    """a / b."""
    return a / b


def floordiv(a, b):
    """a // b."""
    return a // b


def mod(a, b):
    """a % b."""
    return a % b


def pow(a, b):  # noqa: A001 - Taichi's name
    """a ** b."""
    return a ** b


def neg(a):
    """-a."""
    return -a


def bit_not(a):
    """~a."""
    return ~a


def bit_and(a, b):
    """a & b."""
    return a & b


def bit_or(a, b):
    """a | b."""
    return a | b


def bit_xor(a, b):
    """a ^ b."""
    return a ^ b


def bit_shl(a, b):
    """a << b."""
    return a << b


def bit_sar(a, b):
    """a >> b."""
    return a >> b


def cmp_eq(a, b):
    """a == b."""
    return a == b


def cmp_ne(a, b):
    """a != b."""
    return a != b


def cmp_lt(a, b):
    """a < b."""
    return a < b


def cmp_le(a, b):
    """a <= b."""
    return a <= b


def cmp_gt(a, b):
    """a > b."""
    return a > b


def cmp_ge(a, b):
    """a >= b."""
    return a >= b


def logical_not(a):
    """Whether a is zero (component-wise)."""
    return a == 0


def logical_and(a, b):
    """Whether a and b are both non-zero (component-wise)."""
    return (a != 0) & (b != 0)


def logical_or(a, b):
    """Whether a or b is non-zero (component-wise)."""
    return (a != 0) | (b != 0)


abs = _sd.abs  # noqa: A001 - Taichi's name
max_impl, min_impl = _sd.max, _sd.min
atomic_add, atomic_sub, atomic_mul = _sd.atomic_add, _sd.atomic_sub, _sd.atomic_mul
atomic_min, atomic_max = _sd.atomic_min, _sd.atomic_max
atomic_and, atomic_or, atomic_xor = _sd.atomic_and, _sd.atomic_or, _sd.atomic_xor
sqrt, exp, log, sin, cos, tan, tanh = _sd.sqrt, _sd.exp, _sd.log, _sd.sin, _sd.cos, _sd.tan, _sd.tanh
floor, ceil, round, select = _sd.floor, _sd.ceil, _sd.round, _sd.select  # noqa: A001

for _fn in list(globals().values()):  # inlined by kernels like a user's function (spirad.func)
    if callable(_fn) and getattr(_fn, "__module__", None) == __name__:
        _fn._kernel_inline = True
del _fn
