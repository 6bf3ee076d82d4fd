"""Quantized fields in kernels: `x[i]` of a bit-packed field (spirad.data.quant) read, written
and atomically added to through its word field.

A read loads the word and decodes the member's bits; a write encodes and replaces them with one
atomic exchange on the member's bits (`GlobalRef.mask`: a compare-and-swap loop of the word in
the code generators), so concurrent writes to other members of the word are kept; `x[i] += v`
on ints and fixed point is an atomic wrapping add inside the bits (Taichi's
atomic_add_partial_bits). A quant.float has no atomic add in Taichi either: `+=` on it is a read,
an add and a write (Taichi demotes it so), not atomic against other threads. Encode / decode are
`spirad.data.quant_codec`'s, over `IRArith`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradTypeError
from kernel_ir.ops import Op

from ..data import quant_codec as C

_F32_MAX = 3.4028234663852886e38


class IRArith:
    """quant_codec's arithmetic object over IR nodes (see quant_codec: c, add, ..., clz)."""

    def __init__(self, v):
        self.v = v
        self.b = v.ctx.b

    def c(self, x, dt):
        if dt.kind == "u":
            x &= (1 << dt.bits) - 1
        return self.b.const(x, dt)

    def _bin(op):  # noqa: N805
        return lambda self, a, b: self.b.binary(op, a, b)

    add, sub, mul = _bin(Op.ADD), _bin(Op.SUB), _bin(Op.MUL)
    and_, or_, xor = _bin(Op.AND), _bin(Op.OR), _bin(Op.XOR)
    shl, shr = _bin(Op.SHL), _bin(Op.SHR)
    min, max = _bin(Op.MIN), _bin(Op.MAX)
    ne, eq, lt = _bin(Op.CMP_NE), _bin(Op.CMP_EQ), _bin(Op.CMP_LT)
    or_b = _bin(Op.OR)

    def sel(self, c, a, b):
        return self.b.select(c, a, b)

    def cast(self, x, dt):
        return x if x.dtype == dt else self.b.cast(x, dt)

    def clz(self, u):
        from .bits import clz32
        return clz32(self.v, u)

    def _f(self, x):
        return self.b.const(float(x), T.f32)

    def f32_bits(self, x):
        """The IEEE bits of f32 `x` by arithmetic (the IR has no bitcast): the exponent found
        by halving / doubling by powers of two, which is exact for normal numbers."""
        b, f = self.b, self._f
        neg = self.lt(x, f(0.0))
        a = b.select(neg, b.unary(Op.NEG, x), x)
        m, e = a, self.c(0, T.i32)
        for k in (64, 32, 16, 8, 4, 2, 1):  # a >= 2: m = a / 2**e in [1, 2)
            big = b.binary(Op.CMP_GE, m, f(2.0 ** k))
            m = b.select(big, self.mul(m, f(2.0 ** -k)), m)
            e = b.select(big, self.add(e, self.c(k, T.i32)), e)
        for k in (64, 32, 16, 8, 4, 2, 1):  # a < 1
            small = self.lt(m, f(2.0 ** (1 - k)))
            m = b.select(small, self.mul(m, f(2.0 ** k)), m)
            e = b.select(small, self.sub(e, self.c(k, T.i32)), e)
        normal = b.binary(Op.CMP_GE, a, f(2.0 ** -126))
        frac = b.select(normal, self.mul(self.sub(m, f(1.0)), f(2.0 ** 23)),
                        self.mul(self.mul(a, f(2.0 ** 126)), f(2.0 ** 23)))
        ebits = b.select(normal, self.cast(self.add(e, self.c(127, T.i32)), T.u32),
                         self.c(0, T.u32))
        inf = b.binary(Op.CMP_GT, a, f(_F32_MAX))
        ebits = b.select(inf, self.c(255, T.u32), ebits)
        frac = b.select(inf, f(0.0), frac)
        bits = self.or_(self.shl(ebits, self.c(23, T.u32)), self.cast(frac, T.u32))
        return self.or_(bits, b.select(neg, self.c(0x80000000, T.u32), self.c(0, T.u32)))

    def f32_from_bits(self, u):
        """The f32 with IEEE bits `u`, by arithmetic: (1 + frac / 2**23) * 2**(e - 127)."""
        b, f = self.b, self._f
        e = self.cast(self.and_(self.shr(u, self.c(23, T.u32)), self.c(0xFF, T.u32)), T.i32)
        frac = self.cast(self.cast(self.and_(u, self.c((1 << 23) - 1, T.u32)), T.i32), T.f32)
        d = self.sub(e, self.c(127, T.i32))
        up = self.max(d, self.c(0, T.i32))
        down = self.max(self.sub(self.c(0, T.i32), d), self.c(0, T.i32))
        p = f(1.0)
        for k in (64, 32, 16, 8, 4, 2, 1):
            on_up = self.ne(self.and_(up, self.c(k, T.i32)), self.c(0, T.i32))
            p = b.select(on_up, self.mul(p, f(2.0 ** k)), p)
            on_down = self.ne(self.and_(down, self.c(k, T.i32)), self.c(0, T.i32))
            p = b.select(on_down, self.mul(p, f(2.0 ** -k)), p)
        normal = self.mul(self.add(f(1.0), self.mul(frac, f(2.0 ** -23))), p)
        sub = self.mul(self.mul(frac, f(2.0 ** -126)), f(2.0 ** -23))
        val = b.select(self.eq(e, self.c(0, T.i32)), sub, normal)
        neg = self.ne(self.and_(u, self.c(0x80000000, T.u32)), self.c(0, T.u32))
        return b.select(neg, b.unary(Op.NEG, val), val)


@dataclass
class QuantElem:
    """`x[I]` of a quantized field in a kernel: the word's indices, the digits' bit offset
    (an int, or an i32 node inside a quant_array) and the field."""
    field: object
    widx: tuple
    bit: object
    local: object = None  # quant_array: the cell's position in its word (i32 node)


def quant_elem(v, f, idx, node) -> QuantElem:
    f._check()
    if len(idx) != len(f.shape):
        raise v.ctx.error(SpiradTypeError, f"field '{f.name}' has {len(f.shape)} dimension(s) "
                                           f"but is indexed with {len(idx)}", node)
    ix = v.indices(idx)
    b = v.ctx.b
    i32 = lambda x: x if not isinstance(x, int) else b.const(x, T.i32)  # noqa: E731
    widx, bit = f.locate(
        ix, None, lambda a, n: b.binary(Op.MOD, a, i32(n)),
        lambda a, n: b.binary(Op.FLOORDIV, a, i32(n)),
        lambda a, n: a * n if isinstance(a, int) else b.binary(Op.MUL, a, i32(n)),
        lambda a, c: c if a == 0 else b.binary(Op.ADD, i32(a), c), lambda x: x)
    return QuantElem(f, widx, bit)


def _word(v, qe):
    return v.ctx.b.global_load(qe.field.word.ref(), qe.widx)


def _shift(A, bit, wdt):
    return A.c(bit, wdt) if isinstance(bit, int) else A.cast(bit, wdt)


def load(v, qe):
    """The decoded value of `qe` (its field's compute type)."""
    A = IRArith(v)
    f, q = qe.field, qe.field.qtype
    wdt = f.word.dtype
    return _decode(A, f, _word(v, qe), qe.bit, wdt)


def _decode(A, f, w, bit, wdt):
    q = f.qtype
    digits = C.extract(A, w, _shift(A, bit, wdt), q.width,
                       q.signed and not isinstance(q, C.QuantFloat), wdt)
    if isinstance(q, C.QuantFloat):
        e = C.extract(A, w, A.c(f.exp_bit, wdt), q.exp, False, wdt)
        return C.decode(A, q, digits, e, shared=f.group is not None)
    return C.decode(A, q, digits)


def _put(A, parts, wdt):
    """(word value, mask) of the bit-fields `parts` [(bits u32, bit offset int, width)]."""
    val, mask = None, 0
    for bits, at, width in parts:
        x = A.shl(A.cast(bits, wdt), A.c(at, wdt))
        val = x if val is None else A.or_(val, x)
        mask |= ((1 << width) - 1) << at
    return val, mask


def _value(v, x, dt):
    return v.to_node(v.rvalue(x), dt)


def _at_each_offset(v, qe, emit):
    """`emit(bit)` with the digits' bit offset as an int: directly, or (a quant_array's cell
    chosen at run time) under one `if` per cell position of the word."""
    if isinstance(qe.bit, int):
        return emit(qe.bit)
    b, f = v.ctx.b, qe.field
    cells = 1
    for n in f.array_extent:
        cells *= n
    width = f.qtype.width
    for k in range(cells):
        hit = b.binary(Op.CMP_EQ, qe.bit, b.const(k * width, T.i32))
        with b.if_(hit) as (then, _):
            with then:
                emit(k * width)
    return None


def _activate(v, qe) -> None:
    """A write below a sparse SNode activates the cells of its word (frontend/sparse_ops)."""
    from .sparse_ops import activate_on_write
    activate_on_write(v, qe.field.word, qe.widx)


@dataclass
class QuantVecElem:
    """`x[I]` of a vector / matrix field of a quantized type: one QuantElem per component."""
    elems: tuple
    comp_shape: tuple


def quant_vec_elem(v, f, idx, node) -> QuantVecElem:
    return QuantVecElem(tuple(quant_elem(v, m, idx, node) for m in f.members), f.comp_shape)


def load_vec(v, qv):
    from .values import VecVal
    return VecVal(tuple(load(v, e) for e in qv.elems), qv.comp_shape)


def store_vec(v, qv, value) -> None:
    """`x[I] = vector`: component by component; components sharing an exponent in one write
    (their exponent is the largest of the new values', as Taichi's fused store)."""
    comps = v._comps_for(v.rvalue(value), qv.comp_shape)
    new = {e.field: c for e, c in zip(qv.elems, comps)}
    done = set()
    for e, c in zip(qv.elems, comps):
        if e.field in done:
            continue
        store(v, e, c, new)
        done.update(e.field.group or (e.field,))


def atomic_add_vec(v, qv, value):
    from .values import VecVal
    comps = v._comps_for(v.rvalue(value), qv.comp_shape)
    return VecVal(tuple(atomic_add(v, e, c) for e, c in zip(qv.elems, comps)), qv.comp_shape)


def _typed(v, f, value):
    q = f.qtype
    return _value(v, value, T.f32 if isinstance(q, C.QuantInt) and isinstance(value, float)
                  else f.dtype)


def store(v, qe, value, others=None) -> None:
    """`x[I] = value`: encode, then replace the member's bits atomically (`others`: new values
    of members sharing its exponent, written in the same store)."""
    A, b = IRArith(v), v.ctx.b
    _activate(v, qe)
    f, q = qe.field, qe.field.qtype
    wdt = f.word.dtype
    ref = f.word.ref()
    x = _typed(v, f, value)
    if f.group is not None:  # a shared exponent: every member re-encoded to the new exponent
        w = _word(v, qe)
        new = {g: _typed(v, g, c) for g, c in (others or {}).items() if g in f.group}
        new[f] = x
        vals = [new[g] if g in new else _decode(A, g, w, g.bit, wdt) for g in f.group]
        exp, digits = C.encode_shared(A, [g.qtype for g in f.group], vals)
        parts = [(exp, f.exp_bit, q.exp)] + [(d, g.bit, g.qtype.width)
                                              for g, d in zip(f.group, digits)]
        val, mask = _put(A, parts, wdt)
        b.atomic(Op.ATOMIC_XCHG, replace(ref, mask=mask), qe.widx, val)
        return

    def emit(bit):
        if isinstance(q, C.QuantFloat):
            digits, exp = C.encode(A, q, x)
            parts = [(exp, f.exp_bit, q.exp), (digits, bit, q.width)]
        else:
            parts = [(C.encode(A, q, x), bit, q.width)]
        val, mask = _put(A, parts, wdt)
        b.atomic(Op.ATOMIC_XCHG, replace(ref, mask=mask), qe.widx, val)
    _at_each_offset(v, qe, emit)


def _warn_float_add(v) -> None:
    """Taichi's warning: an atomic add on a quant.float is a plain read-modify-write."""
    loc = v.ctx.loc()
    if loc is None or v.ctx.frame.internal:
        return
    import warnings
    from kernel_ir.errors import SpiradWarning
    warnings.warn_explicit(SpiradWarning(
        "atomic add on a quant.float field is not atomic (as in Taichi): a read, an add and a "
        "write; iterations adding to the same element concurrently may lose updates"),
        SpiradWarning, loc.filename, loc.lineno)


def atomic_add(v, qe, value):
    """`x[I] += value` / `sd.atomic_add(x[I], value)`: ints and fixed point, an atomic wrapping
    add inside the member's bits; floats, a read, add and write. Returns the old value."""
    A, b = IRArith(v), v.ctx.b
    f, q = qe.field, qe.field.qtype
    wdt = f.word.dtype
    _activate(v, qe)
    if isinstance(q, C.QuantFloat):
        _warn_float_add(v)
        old = load(v, qe)
        store(v, qe, b.binary(Op.ADD, old, _value(v, value, old.dtype)))
        return old
    x = _value(v, value, f.dtype if isinstance(q, C.QuantFixed) else T.i32)
    slot = b.alloca(f.dtype, "quant_old")  # the old value, from whichever cell's branch ran

    def emit(bit):
        digits = C.encode(A, q, x) if isinstance(q, C.QuantFixed) else A.cast(x, T.u32)
        val, mask = _put(A, [(A.and_(A.cast(digits, T.u32), A.c((1 << q.width) - 1, T.u32))
                               if q.width < 32 else A.cast(digits, T.u32), bit, q.width)], wdt)
        word = b.atomic(Op.ATOMIC_ADD, replace(f.word.ref(), mask=mask), qe.widx, val)
        b.store(slot, A.cast(_decode(A, f, word, bit, wdt), f.dtype))
    _at_each_offset(v, qe, emit)
    return b.load(slot)
