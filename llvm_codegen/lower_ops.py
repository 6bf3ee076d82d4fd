"""Pure ops (constants, unary, binary, compare, select, cast) as tables keyed by (op, dtype kind).

Dtype kinds are `DType.kind`: 'f' float, 'i' signed int, 'u' unsigned int, 'b' bool (u1).
Each rule is `rule(ctx, a[, b], dt) -> ir.Value`. Semantics follow `kernel_ir.interpreter`:

* ints wrap; DIV truncates, FLOORDIV / MOD floor like Python. Division by zero is undefined in
  the IR; here it is made harmless (divisor 0 is replaced by 1, so it never traps), as is
  INT_MIN / -1 (wraps like the interpreter);
* shifts by >= the width give what Python gives after wrapping (0, or the sign for SHR);
* float MIN / MAX are `minnum` / `maxnum` (fmin / fmax); comparisons are ordered except NE;
* CAST float -> int truncates toward zero (saturating through i64, then wrapping to the width;
  NaN and +-inf give 0); x -> u1 is `x != 0`.

Math functions are libm / LLVM intrinsic calls tagged with `vecmath` vector variants, or
inlined `vecmath` bodies, per `math_policy` (SPIRAD_CPU_VECMATH; rules in `lower_math`). No fast-math flags anywhere: + - * / match numpy bit for bit (no FMA contraction either).
"""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.dtypes import DType, i64, u1
from kernel_ir.interpreter import cast_value
from kernel_ir.mathfns import MATH
from kernel_ir.ops import Op

from .context import CodegenError, FnContext
from .lltypes import I1, const, reg_type, scalar_reg_type
from .lower_math import vm_rule as _vm

INT = ("i", "u")


def _z(ctx, dt, v):
    return ctx.const(dt, v)


# -- unary ------------------------------------------------------------------------------------
def _intrinsic1(name):
    return lambda ctx, a, dt: ctx.b.call(ctx.intrinsic(name, dt, 1), [a])


def _math1(name):
    """A math function: an intrinsic or libm call on the CPU, the device library on a GPU."""
    return lambda ctx, a, dt: ctx.b.call(ctx.math_fn(name, dt, 1), [a])


def _rsqrt(ctx, a, dt):
    s = ctx.b.call(ctx.intrinsic("sqrt", dt, 1), [a])
    return ctx.b.fdiv(_z(ctx, dt, 1.0), s)


def _iabs(ctx, a, dt):
    return ctx.b.call(ctx.intrinsic("abs", dt, 1, extra=[I1]), [a, ir.Constant(I1, 0)])


def _ident(ctx, a, dt):
    return a


def _math_rule(fn):
    """The rule of a math function of `kernel_ir.mathfns` ("native" and "mathlib" alike here): a
    libm / intrinsic / device-library call, vecmath's body on SIMD lanes; sqrt and rsqrt ours."""
    if fn.op == Op.SQRT:
        return _intrinsic1("sqrt")
    if fn.op == Op.RSQRT:
        return _rsqrt
    return _vm(fn.name, _math1(fn.name))


UNARY = {
    (Op.NEG, "f"): lambda ctx, a, dt: ctx.b.fneg(a),
    (Op.NEG, "i"): lambda ctx, a, dt: ctx.b.neg(a),
    (Op.NEG, "u"): lambda ctx, a, dt: ctx.b.neg(a),
    (Op.NEG, "b"): _ident,  # bool(-x) == x
    (Op.ABS, "f"): _intrinsic1("fabs"),
    (Op.ABS, "i"): _iabs,
    (Op.ABS, "u"): _ident,
    (Op.ABS, "b"): _ident,
    (Op.FLOOR, "f"): _intrinsic1("floor"),
    **{(fn.op, "f"): _math_rule(fn) for fn in MATH if fn.lowering != "expanded"},
    **{(Op.STOP_GRAD, k): _ident for k in "fiub"},  # a value: derivatives only differ
}
for _k in ("i", "u", "b"):
    UNARY[(Op.NOT, _k)] = UNARY[(Op.BIT_NOT, _k)] = lambda ctx, a, dt: ctx.b.not_(a)


# -- binary -----------------------------------------------------------------------------------
def _safe_divisor(ctx, b, dt):
    """(divisor with 0 and -1 replaced by 1, is_minus_one) for signed; (b or 1, None) unsigned."""
    bb = ctx.b
    zero = bb.icmp_unsigned("==", b, _z(ctx, dt, 0))
    if dt.kind == "u":
        return bb.select(zero, _z(ctx, dt, 1), b), None
    m1 = bb.icmp_signed("==", b, _z(ctx, dt, -1))
    return bb.select(bb.or_(zero, m1), _z(ctx, dt, 1), b), m1


def _idiv(ctx, a, b, dt):
    d, m1 = _safe_divisor(ctx, b, dt)
    if m1 is None:
        return ctx.b.udiv(a, d)
    return ctx.b.select(m1, ctx.b.neg(a), ctx.b.sdiv(a, d))


def _ifloordiv(ctx, a, b, dt):
    bb = ctx.b
    d, m1 = _safe_divisor(ctx, b, dt)
    if m1 is None:
        return bb.udiv(a, d)
    q, r = bb.sdiv(a, d), bb.srem(a, d)
    # Python floors: step down when the remainder is nonzero and its sign differs from b's
    adjust = bb.and_(bb.icmp_signed("!=", r, _z(ctx, dt, 0)),
                     bb.icmp_signed("<", bb.xor(r, d), _z(ctx, dt, 0)))
    q = bb.sub(q, bb.zext(adjust, q.type))
    return bb.select(m1, bb.neg(a), q)


def _imod(ctx, a, b, dt):
    bb = ctx.b
    d, m1 = _safe_divisor(ctx, b, dt)
    if m1 is None:
        return bb.urem(a, d)
    r = bb.srem(a, d)  # d == 1 when b == -1, so r == 0 as Python gives
    adjust = bb.and_(bb.icmp_signed("!=", r, _z(ctx, dt, 0)),
                     bb.icmp_signed("<", bb.xor(r, d), _z(ctx, dt, 0)))
    return bb.select(adjust, bb.add(r, d), r)


def _ffloordiv(ctx, a, b, dt):
    return ctx.b.call(ctx.intrinsic("floor", dt, 1), [ctx.b.fdiv(a, b)])


def _fmod(ctx, a, b, dt):
    bb = ctx.b
    q = bb.call(ctx.intrinsic("floor", dt, 1), [bb.fdiv(a, b)])
    return bb.fsub(a, bb.fmul(q, b))


def _fpow(ctx, a, b, dt):
    return ctx.b.call(ctx.math_fn("pow", dt, 2), [a, b])


def _atan2(ctx, a, b, dt):
    return ctx.b.call(ctx.math_fn("atan2", dt, 2), [a, b])


def _ipow(ctx, a, b, dt):
    return ctx.b.call(ipow_helper(ctx.lib, dt, ctx.lanes), [a, b])


def _bpow(ctx, a, b, dt):  # bool(a ** b): 1 when b == 0, else a
    return ctx.b.or_(a, ctx.b.not_(b))


def ipow_helper(lib, dt: DType, w: int = 1) -> ir.Function:
    """`spirad.ipow.<iN>(a, e)`: wrapping a**e by squaring (e treated as unsigned); for w > 1
    `spirad.ipow.v<W>i<N>` on lanes, looping while any lane's exponent is non-zero (a lane
    whose exponent ran out keeps its product, so every lane gets the scalar helper's bits)."""
    t = reg_type(dt, w)
    name = f"spirad.ipow.{t}" if w == 1 else f"spirad.ipow.v{w}i{t.element.width}"
    if lib.has(name):
        return lib.declare(name, t, [t, t])
    fn = lib.declare(name, t, [t, t])
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    base, exp = fn.args
    entry, head, body, done = (fn.append_basic_block(n) for n in ("entry", "head", "body", "done"))
    b = ir.IRBuilder(entry)
    b.branch(head)
    b.position_at_end(head)
    acc, x, e = b.phi(t, "acc"), b.phi(t, "x"), b.phi(t, "e")
    live = b.icmp_unsigned("!=", e, const(dt, 0, w))
    if w > 1:
        live = b.call(lib.declare(f"llvm.vector.reduce.or.v{w}i1", I1, [live.type]), [live])
    b.cbranch(live, body, done)
    b.position_at_end(body)
    one = const(dt, 1, w)
    odd = b.trunc(e, reg_type(u1, w))
    acc2 = b.select(odd, b.mul(acc, x), acc)
    x2, e2 = b.mul(x, x), b.lshr(e, one)
    b.branch(head)
    acc.add_incoming(one, entry); acc.add_incoming(acc2, body)
    x.add_incoming(base, entry); x.add_incoming(x2, body)
    e.add_incoming(exp, entry); e.add_incoming(e2, body)
    b.position_at_end(done)
    b.ret(acc)
    return fn


def _shl(ctx, a, b, dt):
    bb, w = ctx.b, dt.bits
    big = bb.icmp_unsigned(">=", b, _z(ctx, dt, w))
    return bb.select(big, _z(ctx, dt, 0), bb.shl(a, bb.and_(b, _z(ctx, dt, w - 1))))


def _shr(ctx, a, b, dt):
    bb, w = ctx.b, dt.bits
    if dt.kind == "i":  # arithmetic: shifting by >= width leaves the sign
        amt = bb.select(bb.icmp_unsigned(">=", b, _z(ctx, dt, w)), _z(ctx, dt, w - 1), b)
        return bb.ashr(a, amt)
    big = bb.icmp_unsigned(">=", b, _z(ctx, dt, w))
    return bb.select(big, _z(ctx, dt, 0), bb.lshr(a, bb.and_(b, _z(ctx, dt, w - 1))))


def _intrinsic2(name):
    return lambda ctx, a, b, dt: ctx.b.call(ctx.intrinsic(name, dt, 2), [a, b])


def _m(method):
    return lambda ctx, a, b, dt: getattr(ctx.b, method)(a, b)


BINARY = {
    (Op.ADD, "f"): _m("fadd"), (Op.SUB, "f"): _m("fsub"), (Op.MUL, "f"): _m("fmul"),
    (Op.DIV, "f"): _m("fdiv"), (Op.FLOORDIV, "f"): _ffloordiv, (Op.MOD, "f"): _fmod,
    (Op.POW, "f"): _vm("pow", _fpow), (Op.ATAN2, "f"): _vm("atan2", _atan2),
    (Op.MIN, "f"): _intrinsic2("minnum"), (Op.MAX, "f"): _intrinsic2("maxnum"),
    (Op.MIN, "i"): _intrinsic2("smin"), (Op.MAX, "i"): _intrinsic2("smax"),
    (Op.MIN, "u"): _intrinsic2("umin"), (Op.MAX, "u"): _intrinsic2("umax"),
    # bools: bool(a+b) == a|b, bool(a-b) == a^b, bool(a*b) == a&b
    (Op.ADD, "b"): _m("or_"), (Op.SUB, "b"): _m("xor"), (Op.MUL, "b"): _m("and_"),
    (Op.MIN, "b"): _m("and_"), (Op.MAX, "b"): _m("or_"), (Op.POW, "b"): _bpow,
}
for _k in INT:
    BINARY.update({
        (Op.ADD, _k): _m("add"), (Op.SUB, _k): _m("sub"), (Op.MUL, _k): _m("mul"),
        (Op.DIV, _k): _idiv, (Op.FLOORDIV, _k): _ifloordiv, (Op.MOD, _k): _imod,
        (Op.POW, _k): _ipow, (Op.SHL, _k): _shl, (Op.SHR, _k): _shr,
    })
for _k in ("i", "u", "b"):
    BINARY.update({(Op.AND, _k): _m("and_"), (Op.OR, _k): _m("or_"), (Op.XOR, _k): _m("xor")})

_CMP = {Op.CMP_LT: "<", Op.CMP_LE: "<=", Op.CMP_GT: ">", Op.CMP_GE: ">=", Op.CMP_EQ: "==",
        Op.CMP_NE: "!="}
for _op, _sym in _CMP.items():
    # floats: ordered compares (false on NaN) except NE, which is true on NaN like Python
    _fcmp = (lambda s: (lambda ctx, a, b, dt: ctx.b.fcmp_unordered(s, a, b)) if s == "!=" else
             (lambda ctx, a, b, dt: ctx.b.fcmp_ordered(s, a, b)))(_sym)
    BINARY[(_op, "f")] = _fcmp
    BINARY[(_op, "i")] = (lambda s: lambda ctx, a, b, dt: ctx.b.icmp_signed(s, a, b))(_sym)
    BINARY[(_op, "u")] = BINARY[(_op, "b")] = (
        lambda s: lambda ctx, a, b, dt: ctx.b.icmp_unsigned(s, a, b))(_sym)


# -- casts ------------------------------------------------------------------------------------
def convert(ctx: FnContext, v: ir.Value, src: DType, dst: DType) -> ir.Value:
    """CAST semantics of the interpreter, from a `src` value to `dst`."""
    if src == dst:
        return v
    return _CAST[(src.kind, dst.kind)](ctx, v, src, dst)


def _int_resize(ctx, v, src, dst):
    sw, dw = scalar_reg_type(src).width, scalar_reg_type(dst).width
    if sw == dw:
        return v
    if sw > dw:
        return ctx.b.trunc(v, ctx.reg_type(dst))
    return (ctx.b.sext if src.kind == "i" else ctx.b.zext)(v, ctx.reg_type(dst))


def _float_to_int(ctx, v, src, dst):
    bb = ctx.b
    sat = ctx.lib.declare(f"llvm.fptosi.sat.{ctx.suffix(i64)}.{ctx.suffix(src)}",
                          ctx.reg_type(i64), [v.type])
    x = bb.call(sat, [v])  # NaN -> 0; finite values below 2**63 exact
    fabs = bb.call(ctx.intrinsic("fabs", src, 1), [v])
    x = bb.select(bb.fcmp_ordered("==", fabs, ctx.const(src, float("inf"))), ctx.const(i64, 0), x)
    return _int_resize(ctx, x, i64, dst)


def _to_bool_float(ctx, v, src, dst):  # bool(nan) is True
    return ctx.b.fcmp_unordered("!=", v, ctx.const(src, 0.0))


def _to_bool_int(ctx, v, src, dst):
    return ctx.b.icmp_unsigned("!=", v, ctx.const(src, 0))


def _float_resize(ctx, v, src, dst):
    return (ctx.b.fpext if dst.bits > src.bits else ctx.b.fptrunc)(v, ctx.reg_type(dst))


_CAST = {
    ("f", "f"): _float_resize,
    ("f", "i"): _float_to_int, ("f", "u"): _float_to_int, ("f", "b"): _to_bool_float,
    ("i", "f"): lambda ctx, v, s, d: ctx.b.sitofp(v, ctx.reg_type(d)),
    ("u", "f"): lambda ctx, v, s, d: ctx.b.uitofp(v, ctx.reg_type(d)),
    ("b", "f"): lambda ctx, v, s, d: ctx.b.uitofp(v, ctx.reg_type(d)),
    ("b", "i"): lambda ctx, v, s, d: ctx.b.zext(v, ctx.reg_type(d)),
    ("b", "u"): lambda ctx, v, s, d: ctx.b.zext(v, ctx.reg_type(d)),
    ("i", "b"): _to_bool_int, ("u", "b"): _to_bool_int,
}
for _s in INT:
    for _d in INT:
        _CAST[(_s, _d)] = _int_resize


# -- node rules -------------------------------------------------------------------------------
def _unary(ctx: FnContext, n):
    dt = n.dtype
    rule = UNARY.get((n.op, dt.kind))
    if rule is None:
        raise CodegenError(f"LLVM codegen: {n.op.name} on {dt} is not supported")
    return rule(ctx, ctx.value(n.srcs[0]), dt)


def _binary(ctx: FnContext, n):
    dt = n.srcs[0].dtype
    rule = BINARY.get((n.op, dt.kind))
    if rule is None:
        raise CodegenError(f"LLVM codegen: {n.op.name} on {dt} is not supported")
    return rule(ctx, ctx.value(n.srcs[0]), ctx.value(n.srcs[1]), dt)


def _const(ctx, n):
    return ctx.const(n.dtype, cast_value(n.arg, n.dtype))


def _cast(ctx, n):
    return convert(ctx, ctx.value(n.srcs[0]), n.srcs[0].dtype, n.dtype)


def _bitcast(ctx, n):
    return ctx.b.bitcast(ctx.value(n.srcs[0]), ctx.reg_type(n.dtype))


def _select(ctx, n):
    c, a, b = (ctx.value(s) for s in n.srcs)
    return ctx.b.select(c, a, b)


LOWER_OPS = {Op.CONST: _const, Op.CAST: _cast, Op.BITCAST: _bitcast, Op.SELECT: _select}
LOWER_OPS.update({op: _unary for op, _ in UNARY})
LOWER_OPS.update({op: _binary for op, _ in BINARY})
