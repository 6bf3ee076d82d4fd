"""`sd.frexp(x)` in kernels (Taichi's `ti.frexp`): x = mantissa * 2 ** exponent with
0.5 <= |mantissa| < 1. The IR has no bit cast, so the exponent is found by a binary search with
comparisons against powers of two and the mantissa scaled by them: every product is by a power of
two, hence exact, on every backend alike; the mantissa's derivative (2 ** -exponent) follows from
the same products. Zero gives (0, 0); inf and NaN give (x, 0)."""
from __future__ import annotations

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradTypeError
from kernel_ir.ops import Op

from .value_ops import is_py_scalar
from .values import VecVal

# shifts of the binary search: down to bring |x| below 2, up (the largest twice, for subnormal
# inputs) to bring it to 1 or more; each list covers the exponent range of its type
_DOWN = {32: (64, 32, 16, 8, 4, 2, 1), 64: (512, 256, 128, 64, 32, 16, 8, 4, 2, 1)}
_UP = {32: (64,) + _DOWN[32], 64: (512,) + _DOWN[64]}


def h_frexp(v, args, kw, node):
    """(mantissa, exponent i32) of a float scalar (f16 through f32)."""
    if len(args) != 1 or kw:
        raise v.ctx.error(SpiradTypeError, "frexp(x) takes one float", node)
    val = v.rvalue(args[0])
    if is_py_scalar(val):
        val = float(val)  # a Python number: a default_fp value, as Taichi types the literal
    x = v.to_node(val) if not isinstance(val, VecVal) else None
    if x is None or not x.dtype.is_float:
        what = "a vector / matrix" if x is None else x.dtype
        raise v.ctx.error(SpiradTypeError, f"frexp needs a float scalar, got {what}", node)
    b = v.ctx.b
    dt = T.f64 if x.dtype == T.f64 else T.f32
    xf = b.cast(x, dt) if x.dtype != dt else x
    c = lambda k: b.const(k, dt)  # noqa: E731
    ci = lambda k: b.const(k, T.i32)  # noqa: E731
    m, e = b.unary(Op.ABS, xf), ci(0)
    for s in _DOWN[dt.bits]:
        big = b.binary(Op.CMP_GE, m, c(2.0 ** s))
        m = b.select(big, b.binary(Op.MUL, m, c(2.0 ** -s)), m)
        e = b.select(big, b.binary(Op.ADD, e, ci(s)), e)
    for s in _UP[dt.bits]:
        small = b.binary(Op.CMP_LT, m, c(2.0 ** (1 - s)))
        m = b.select(small, b.binary(Op.MUL, m, c(2.0 ** s)), m)
        e = b.select(small, b.binary(Op.SUB, e, ci(s)), e)
    m = b.binary(Op.MUL, m, c(0.5))  # [1, 2) -> [0.5, 1)
    e = b.binary(Op.ADD, e, ci(1))
    m = b.select(b.binary(Op.CMP_LT, xf, c(0.0)), b.unary(Op.NEG, m), m)
    ax = b.unary(Op.ABS, xf)
    special = b.binary(Op.OR, b.binary(Op.CMP_EQ, xf, c(0.0)),
                       b.unary(Op.NOT, b.binary(Op.CMP_LT, ax, c(float("inf")))))  # 0, inf, NaN
    m = b.select(special, xf, m)
    e = b.select(special, ci(0), e)
    return (b.cast(m, x.dtype) if x.dtype != dt else m), e


def handlers():
    from .. import lang
    return {lang.frexp: h_frexp}
