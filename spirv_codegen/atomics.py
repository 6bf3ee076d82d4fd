"""Atomic read-modify-write lowering (ATOMIC_ADD / MIN / MAX / AND / OR / XOR / XCHG / MUL).

* ints (i32, u32; i64 with Int64Atomics): one native instruction (OpAtomicIAdd, OpAtomicSMin /
  UMin, SMax / UMax, And, Or, Xor, Exchange).
* u1 (stored as 0/1 u32 words): AND / OR / XOR / XCHG on the word, the result `!= 0`.
* f32 / f64 add with the device's float-add atomics: OpAtomicFAddEXT
  (SPV_EXT_shader_atomic_float_add).
* MUL (Taichi's atomic_mul) has no SPIR-V instruction: a compare-and-swap loop, on ints in the
  binding's own storage type, on floats as below (profiles without compare-and-swap refuse it).
* every other float atomic (add without the extension, min / max, exchange, mul): on the element's bit
  pattern. The binding is then declared as an array of same-width unsigned ints (storage kind
  'bits', see `interface.py`) and every plain load/store of it bitcasts. Exchange is one
  OpAtomicExchange of the bits; add / min / max are a compare-and-swap loop whose new value is
  the float op (min / max NaN-ignoring, as `lower_math`'s). f64 needs Int64 + Int64Atomics.
* f32 min / max under a profile without compare-and-swap (Metal: naga rejects
  OpAtomicCompareExchange): two integer atomics on the bit pattern (`float_min_max_by_sign`),
  for root-placed fields only (they need a second, i32 view of the same bytes).
* the 8- and 16-bit types (SPIR-V atomics take 32- and 64-bit operands only): a task that
  updates such a ref atomically reads and writes all of it through the 32-bit words holding its
  elements (storage kind 'words', see `interface.py`): a load extracts the element's bits, and
  every store and atomic is a compare-and-swap loop on its word that replaces only those bits
  (`word_rmw`), so neighbours written by other invocations are never lost.

* an atomic on a bit-field of an unsigned word (`GlobalRef.mask`: a quantized type's member,
  spirad.data.quant): a compare-and-swap loop on the word that replaces only the masked bits
  (`masked_rmw`), so members of one word written by other invocations are never lost.

All atomics use Device scope and relaxed semantics; each returns the old value. The CAS loop
counts its back-edges like any loop when a loop-iteration cap is set (see lower.py).
"""
from __future__ import annotations

from kernel_ir.dtypes import BY_NAME, f32, f64, i32, u1, u32
from kernel_ir.ops import ATOMIC_COMBINE, Op

from .emitter import SCOPE_DEVICE, SEM_RELAXED, U64

_INT_OPS = {Op.ATOMIC_ADD: ("OpAtomicIAdd", "OpAtomicIAdd"),
            Op.ATOMIC_MIN: ("OpAtomicSMin", "OpAtomicUMin"),
            Op.ATOMIC_MAX: ("OpAtomicSMax", "OpAtomicUMax"),
            Op.ATOMIC_AND: ("OpAtomicAnd", "OpAtomicAnd"), Op.ATOMIC_OR: ("OpAtomicOr", "OpAtomicOr"),
            Op.ATOMIC_XOR: ("OpAtomicXor", "OpAtomicXor"),
            Op.ATOMIC_XCHG: ("OpAtomicExchange", "OpAtomicExchange")}


def needs_cas(dt, caps, op=Op.ATOMIC_ADD) -> bool:
    """Does this float atomic run as a compare-and-swap loop?"""
    if dt.kind != "f" or op == Op.ATOMIC_XCHG:
        return False
    if op != Op.ATOMIC_ADD:
        return True
    if dt == f32:
        return not caps.has_atomic_float32_add
    if dt == f64:
        return not caps.has_atomic_float64_add
    return False


def by_sign(dt, caps, op) -> bool:
    """Is this an f32 atomic min / max the profile cannot run as a compare-and-swap loop (done
    by `float_min_max_by_sign` instead)?"""
    return dt == f32 and op in (Op.ATOMIC_MIN, Op.ATOMIC_MAX) and \
        not caps.profile.compare_exchange


def needs_bits(dt, caps, op=Op.ATOMIC_ADD) -> bool:
    """Does the binding need the 'bits' storage kind for this atomic?"""
    return dt.kind == "f" and (op == Op.ATOMIC_XCHG or needs_cas(dt, caps, op))


def check_supported(op, dt, caps) -> None:
    name = op.name.lower()
    if op == Op.ATOMIC_MUL and not caps.profile.compare_exchange:
        raise RuntimeError(f"{name} needs a compare-and-swap loop, which the {caps.profile.name} "
                           f"profile forbids (the backend rejects it earlier)")
    if dt.kind == "b" and op not in (Op.ATOMIC_AND, Op.ATOMIC_OR, Op.ATOMIC_XOR, Op.ATOMIC_XCHG):
        raise RuntimeError(f"{name} on u1 is not supported")
    if needs_cas(dt, caps, op) and not caps.profile.compare_exchange:
        raise RuntimeError(f"{name} on {dt} needs a compare-and-swap loop, which the "
                           f"{caps.profile.name} profile forbids (the backend rejects it earlier)")
    if dt.bits == 64 and not caps.has_int64_atomics and (dt.kind != "f" or needs_bits(dt, caps, op)):
        raise RuntimeError(f"{name} on {dt} needs shaderBufferInt64Atomics, which the device "
                           "lacks")


def atomic_add(L, ptr: int, v: int, dt) -> int:
    return atomic_rmw(L, Op.ATOMIC_ADD, ptr, v, dt)


def atomic_rmw(L, op, ptr: int, v: int, dt, storage=None) -> int:
    """Emit atomic `op` of `v` at `ptr` (a StorageBuffer element pointer of the binding's
    storage type `storage`, default `dt`); returns the old value as `dt`. An int in a root view
    of unsigned words (`buffers.view_dtype`) is bitcast in and out, the opcode chosen by `dt`'s
    signedness. `L` is the TaskLowerer (for the emitter and loop bookkeeping)."""
    E, caps = L.E, L.caps
    check_supported(op, dt, caps)
    scope, sem = E.c(SCOPE_DEVICE, u32), E.c(SEM_RELAXED, u32)
    if dt.kind in "iu":
        if dt.bits == 64:
            E.m.capability("Int64Atomics")
        st = dt if storage is None else storage
        if op == Op.ATOMIC_MUL:  # no OpAtomicIMul
            return _combine_by_cas(L, Op.MUL, ptr, v, dt, st)
        if st != dt:
            old = E.op(_INT_OPS[op][dt.kind == "u"], st, ptr, scope, sem, E.op("OpBitcast", st, v))
            return E.op("OpBitcast", dt, old)
        return E.op(_INT_OPS[op][dt.kind == "u"], dt, ptr, scope, sem, v)
    if dt.kind == "b":
        one, zero = E.c(1, u32), E.c(0, u32)
        old = E.op(_INT_OPS[op][1], u32, ptr, scope, sem, E.sel(v, one, zero, u32))
        return E.op("OpINotEqual", u1, old, zero)
    if op == Op.ATOMIC_ADD and not needs_cas(dt, caps):
        E.m.extension("SPV_EXT_shader_atomic_float_add")
        E.m.capability("AtomicFloat32AddEXT" if dt == f32 else "AtomicFloat64AddEXT")
        return E.op("OpAtomicFAddEXT", dt, ptr, scope, sem, v)
    ut = u32 if dt.bits == 32 else U64
    if dt.bits == 64:
        E.m.capability("Int64Atomics")
    if op == Op.ATOMIC_XCHG:
        old = E.op("OpAtomicExchange", ut, ptr, scope, sem, E.op("OpBitcast", ut, v))
        return E.op("OpBitcast", dt, old)
    return _combine_by_cas(L, ATOMIC_COMBINE[op], ptr, v, dt, ut)


def _combine_by_cas(L, comb, ptr: int, v: int, dt, ut) -> int:
    """`*ptr = comb(*ptr, v)` by compare-and-swap on the element as `ut` (its storage type: a
    float's bits, or the unsigned view of an int); returns the old value as `dt`."""
    from .lower_math import lower_binary
    E = L.E

    def cast(t, x, xt):
        return x if t == xt else E.op("OpBitcast", t, x)

    def new_bits(cur):
        return cast(ut, lower_binary(E, comb, dt, cast(dt, cur, ut), v), dt)
    return cast(dt, _cas_loop(L, ptr, ut, new_bits), ut)


def masked_rmw(L, op, ptr: int, v: int, dt, mask: int) -> int:
    """ATOMIC_XCHG (set) or ATOMIC_ADD (wrapping add) of `v` on the bits `mask` of the unsigned
    word (`dt`: u32, or u64 with Int64Atomics) at `ptr`: a compare-and-swap loop that keeps the
    other bits. Returns the old word."""
    if op not in (Op.ATOMIC_XCHG, Op.ATOMIC_ADD) or dt.kind != "u":
        raise RuntimeError(f"{op.name.lower()} on a bit-field of {dt} is not a quantized-type "
                           f"access (only exchange and add on unsigned words)")
    if not L.caps.profile.compare_exchange:
        raise RuntimeError("a bit-field store needs a compare-and-swap loop, which the "
                           f"{L.caps.profile.name} profile forbids (the backend rejects it earlier)")
    E = L.E
    if dt.bits == 64:
        E.m.capability("Int64Atomics")
    keep = E.c(~mask & ((1 << dt.bits) - 1), dt)
    bits = E.c(mask, dt)

    def new_bits(cur):
        new = v if op == Op.ATOMIC_XCHG else E.op("OpIAdd", dt, cur, v)
        return E.op("OpBitwiseOr", dt, E.op("OpBitwiseAnd", dt, cur, keep),
                    E.op("OpBitwiseAnd", dt, new, bits))
    return _cas_loop(L, ptr, dt, new_bits)


def word_extract(E, word: int, shift: int, dt) -> int:
    """The 8- / 16-bit element of type `dt` at bit `shift` of the u32 `word`."""
    low = E.op("OpShiftRightLogical", u32, word, shift)
    if dt.kind == "f":  # f16: no 16-bit ints needed
        return E.f16_from_word(low)
    small = BY_NAME[f"u{dt.bits}"]
    bits = E.op("OpUConvert", small, low)
    return bits if dt == small else E.op("OpBitcast", dt, bits)


def word_rmw(L, op, ptr: int, shift: int, v: int, dt) -> int:
    """Atomic `op` (an ATOMIC_* op, or None: a plain store of `v`) on the 8- / 16-bit element of
    type `dt` at bit `shift` of the u32 word at `ptr`: a compare-and-swap loop on the word that
    replaces only the element's bits. Returns the old element."""
    from .lower_math import lower_binary
    E = L.E
    keep = E.op("OpNot", u32, E.op("OpShiftLeftLogical", u32, E.c((1 << dt.bits) - 1, u32), shift))

    def new_bits(cur):
        new = v
        if op is not None and op != Op.ATOMIC_XCHG:
            new = lower_binary(E, ATOMIC_COMBINE[op], dt, word_extract(E, cur, shift, dt), v)
        if dt.kind == "f":  # f16
            new = E.f16_to_word(new)
        else:
            if dt.kind == "i":
                new = E.op("OpBitcast", BY_NAME[f"u{dt.bits}"], new)
            new = E.op("OpUConvert", u32, new)
        placed = E.op("OpShiftLeftLogical", u32, new, shift)
        return E.op("OpBitwiseOr", u32, E.op("OpBitwiseAnd", u32, cur, keep), placed)
    return word_extract(E, _cas_loop(L, ptr, u32, new_bits), shift, dt)


def _cas_loop(L, ptr, ut, new_bits):
    """Compare-and-swap the `ut` word at `ptr` with `new_bits(current word)` until no other
    invocation changed it in between; returns the word it replaced."""
    E, fn = L.E, L.E.fn
    scope, sem = E.c(SCOPE_DEVICE, u32), E.c(SEM_RELAXED, u32)
    first = E.op("OpAtomicLoad", ut, ptr, scope, sem)
    pre = fn.current.label
    header, body, retry, cont, merge = (fn.label() for _ in range(5))
    got = E.m.id()
    L.count_loop_entry()
    fn.branch(header)
    fn.begin(header)
    cur = E.op("OpPhi", ut, first, pre, got, cont)
    fn.loop_merge(merge, cont)
    fn.branch(body)
    fn.begin(body)
    fn.emit("OpAtomicCompareExchange", E.ty(ut), got, ptr, scope, sem, sem, new_bits(cur), cur)
    done = E.op("OpIEqual", u1, got, cur)
    fn.selection_merge(retry)
    fn.branch_cond(done, merge, retry)
    fn.begin(retry)
    L.count_back_edge(None)
    fn.branch(cont)
    fn.begin(cont)
    fn.branch(header)
    fn.begin(merge)
    return cur


def float_min_max_by_sign(L, op, ptr_u: int, ptr_i: int, v: int) -> int:
    """f32 atomic max / min of `v` without a compare-and-swap loop; `ptr_u` / `ptr_i`: the element
    through a u32 and an i32 view of the same bytes (naga takes an atomic's signedness from its
    pointer). Ordered as floats, non-negative bit patterns compare as signed ints, and negative
    ones (sign bit set) in reverse as unsigned ints, below every non-negative one. So a max of a
    `v` with the sign bit clear is a signed max of the bits, of a negative `v` an unsigned min
    (a stored non-negative value is a smaller unsigned int and stays); min the other way round
    (`_by_sign`). NaN-ignoring, as the compare-and-swap loop: a NaN `v` changes nothing; a NaN
    stored (which the integer orders would keep) is replaced by an exchange, and whatever value
    that exchange displaced (another thread's, stored since the NaN was read) is merged back by
    the same min / max: they are idempotent and commutative, so the final value is the min /
    max of every non-NaN operand. Returns the old value as f32."""
    E, fn = L.E, L.E.fn
    scope, sem = E.c(SCOPE_DEVICE, u32), E.c(SEM_RELAXED, u32)
    bits = E.op("OpBitcast", u32, v)
    cur = E.op("OpAtomicLoad", u32, ptr_u, scope, sem)
    replace = E.op("OpLogicalAnd", u1, E.op("OpIsNan", u1, E.op("OpBitcast", f32, cur)),
                   E.op("OpLogicalNot", u1, E.op("OpIsNan", u1, v)))
    fix, usual, merge = fn.label(), fn.label(), fn.label()
    fn.selection_merge(merge)
    fn.branch_cond(replace, fix, usual)
    fn.begin(fix)
    displaced = E.op("OpAtomicExchange", u32, ptr_u, scope, sem, bits)
    _by_sign(E, op, ptr_u, ptr_i, displaced)  # a NaN displaced: the identities, a no-op
    fix_end = fn.current.label
    fn.branch(merge)
    fn.begin(usual)
    old = _by_sign(E, op, ptr_u, ptr_i, bits)
    usual_end = fn.current.label
    fn.branch(merge)
    fn.begin(merge)
    return E.op("OpBitcast", f32, E.op("OpPhi", u32, displaced, fix_end, old, usual_end))


def _by_sign(E, op, ptr_u: int, ptr_i: int, bits: int) -> int:
    """The two integer atomics of an f32 max / min of the float with bit pattern `bits`: the one
    that does not apply (and both, for a NaN) gets its identity operand (signed max: INT_MIN,
    unsigned min: 0xFFFFFFFF, ...), so there is no branch. Returns the old bits: the applying
    atomic's."""
    scope, sem = E.c(SCOPE_DEVICE, u32), E.c(SEM_RELAXED, u32)
    nan = E.op("OpIsNan", u1, E.op("OpBitcast", f32, bits))
    neg = E.op("OpINotEqual", u1, E.op("OpShiftRightLogical", u32, bits, E.c(31, u32)),
               E.c(0, u32))
    use_u = E.op("OpLogicalAnd", u1, neg, E.op("OpLogicalNot", u1, nan))
    use_i = E.op("OpLogicalAnd", u1, E.op("OpLogicalNot", u1, neg),
                 E.op("OpLogicalNot", u1, nan))
    if op == Op.ATOMIC_MAX:
        i_op, i_id, u_op, u_id = "OpAtomicSMax", -(1 << 31), "OpAtomicUMin", 0xFFFFFFFF
    else:
        i_op, i_id, u_op, u_id = "OpAtomicSMin", (1 << 31) - 1, "OpAtomicUMax", 0
    old_i = E.op(i_op, i32, ptr_i, scope, sem,
                 E.sel(use_i, E.op("OpBitcast", i32, bits), E.c(i_id, i32), i32))
    old_u = E.op(u_op, u32, ptr_u, scope, sem, E.sel(use_u, bits, E.c(u_id, u32), u32))
    return E.sel(use_i, E.op("OpBitcast", u32, old_i), old_u, u32)
