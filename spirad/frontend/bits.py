"""`sd.math.popcnt / clz / ffs` in kernels (Quadrants' bit counting): i32 results over the
unsigned bit pattern of i32 / u32 / i64 / u64 values. Built from shifts, masks, compares and
selects (SWAR population count, a binary search for the leading zeros), so every backend runs the
same code without new IR ops; 64-bit values are counted over their two 32-bit halves."""
from __future__ import annotations

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradTypeError
from kernel_ir.ops import Op


def _u32(v, x):
    return v.ctx.b.cast(x, T.u32)


def _c(v, k, dt=T.u32):
    return v.ctx.b.const(k, dt)


def _bin(v, op, a, b):
    return v.ctx.b.binary(op, a, b)


def _sel(v, c, a, b):
    return v.ctx.b.select(c, a, b)


def clz32(v, x):
    b = v.ctx.b
    x0 = _u32(v, x)
    x, n = x0, _c(v, 0, T.i32)
    for limit, shift in ((0x0000FFFF, 16), (0x00FFFFFF, 8), (0x0FFFFFFF, 4), (0x3FFFFFFF, 2)):
        c = _bin(v, Op.CMP_LE, x, _c(v, limit))
        n = _sel(v, c, _bin(v, Op.ADD, n, _c(v, shift, T.i32)), n)
        x = _sel(v, c, _bin(v, Op.SHL, x, _c(v, shift)), x)
    n = _sel(v, _bin(v, Op.CMP_LE, x, _c(v, 0x7FFFFFFF)), _bin(v, Op.ADD, n, _c(v, 1, T.i32)), n)
    return b.select(_bin(v, Op.CMP_EQ, x0, _c(v, 0)), _c(v, 32, T.i32), n)


def popcnt32(v, x):
    x = _u32(v, x)
    x = _bin(v, Op.SUB, x, _bin(v, Op.AND, _bin(v, Op.SHR, x, _c(v, 1)), _c(v, 0x55555555)))
    x = _bin(v, Op.ADD, _bin(v, Op.AND, x, _c(v, 0x33333333)),
             _bin(v, Op.AND, _bin(v, Op.SHR, x, _c(v, 2)), _c(v, 0x33333333)))
    x = _bin(v, Op.AND, _bin(v, Op.ADD, x, _bin(v, Op.SHR, x, _c(v, 4))), _c(v, 0x0F0F0F0F))
    return v.ctx.b.cast(_bin(v, Op.SHR, _bin(v, Op.MUL, x, _c(v, 0x01010101)), _c(v, 24)), T.i32)


def ffs32(v, x):
    x = _u32(v, x)
    low = _bin(v, Op.AND, x, _bin(v, Op.ADD, v.ctx.b.unary(Op.BIT_NOT, x), _c(v, 1)))
    pos = _bin(v, Op.SUB, _c(v, 32, T.i32), clz32(v, low))
    return _sel(v, _bin(v, Op.CMP_EQ, x, _c(v, 0)), _c(v, 0, T.i32), pos)


def _halves(v, x):
    u = v.ctx.b.cast(x, T.u64)
    lo = v.ctx.b.cast(_bin(v, Op.AND, u, v.ctx.b.const(0xFFFFFFFF, T.u64)), T.u32)
    hi = v.ctx.b.cast(_bin(v, Op.SHR, u, v.ctx.b.const(32, T.u64)), T.u32)
    return lo, hi


def _operand(v, args, node, name):
    if len(args) != 1:
        raise v.ctx.error(SpiradTypeError, f"{name}(x) takes one integer", node)
    x = v.to_node(args[0])
    if not x.dtype.is_int:
        raise v.ctx.error(SpiradTypeError, f"{name} needs an integer, got {x.dtype}", node)
    bits = x.dtype.bits
    if bits < 32:  # the 8- / 16-bit types: their bit pattern, zero-extended
        x = v.ctx.b.cast(v.ctx.b.cast(x, T.BY_NAME[f"u{bits}"]), T.u32)
    return x, bits


def h_popcnt(v, args, kw, node):
    x, _ = _operand(v, args, node, "popcnt")
    if x.dtype.bits == 64:
        lo, hi = _halves(v, x)
        return _bin(v, Op.ADD, popcnt32(v, lo), popcnt32(v, hi))
    return popcnt32(v, x)


def h_clz(v, args, kw, node):
    x, bits = _operand(v, args, node, "clz")
    if bits < 32:  # counted in the type's own width
        return _bin(v, Op.SUB, clz32(v, x), _c(v, 32 - bits, T.i32))
    if x.dtype.bits == 64:
        lo, hi = _halves(v, x)
        return _sel(v, _bin(v, Op.CMP_NE, hi, _c(v, 0)), clz32(v, hi),
                    _bin(v, Op.ADD, _c(v, 32, T.i32), clz32(v, lo)))
    return clz32(v, x)


def h_ffs(v, args, kw, node):
    x, _ = _operand(v, args, node, "ffs")
    if x.dtype.bits == 64:
        lo, hi = _halves(v, x)
        f_hi = ffs32(v, hi)
        high = _sel(v, _bin(v, Op.CMP_EQ, f_hi, _c(v, 0, T.i32)), _c(v, 0, T.i32),
                    _bin(v, Op.ADD, f_hi, _c(v, 32, T.i32)))
        return _sel(v, _bin(v, Op.CMP_NE, lo, _c(v, 0)), ffs32(v, lo), high)
    return ffs32(v, x)


def h_bit_shr(v, args, kw, node):
    """`sd.bit_shr(x, n)` (Taichi's): a logical right shift of x's bit pattern, x's type."""
    if len(args) != 2 or kw:
        raise v.ctx.error(SpiradTypeError, "bit_shr(x, n) takes two integers", node)
    x = v.to_node(v.rvalue(args[0]))
    if not x.dtype.is_int:
        raise v.ctx.error(SpiradTypeError, f"bit_shr needs an integer, got {x.dtype}", node)
    ut = T.BY_NAME[f"u{x.dtype.bits}"]
    n = v.to_node(v.rvalue(args[1]), ut)
    b = v.ctx.b
    return b.cast(_bin(v, Op.SHR, b.cast(x, ut) if x.dtype != ut else x,
                       b.cast(n, ut) if n.dtype != ut else n), x.dtype)


def h_bit_cast(v, args, kw, node):
    """`sd.bit_cast(x, dtype)` (Taichi's): x's bits read as `dtype` (the IR's BITCAST)."""
    from .. import bitops
    from .values import VecVal  # sd.bit_cast is spirad.lang's (Python scope)
    if len(args) != 2 or kw:
        raise v.ctx.error(SpiradTypeError, "bit_cast(x, dtype) takes a scalar and a dtype", node)
    a = v.rvalue(args[0])
    if isinstance(a, VecVal):
        raise v.ctx.error(SpiradTypeError, "bit_cast takes a scalar, got a vector / matrix "
                                           "(as Taichi: cast the components one by one)", node)
    x = v.to_node(a)
    dst = T.from_python(args[1], v.ctx.default_fp, v.ctx.default_ip)
    try:
        bitops.check_bit_cast(x.dtype, dst)
    except SpiradTypeError as e:
        raise v.ctx.error(SpiradTypeError, str(e), node) from None
    return x if x.dtype == dst else v.ctx.b.emit(Op.BITCAST, dst, (x,))


def handlers():
    from .. import bitops, lang
    return {bitops.popcnt: h_popcnt, bitops.clz: h_clz, bitops.ffs: h_ffs,
            bitops.bit_shr: h_bit_shr, lang.bit_cast: h_bit_cast}
