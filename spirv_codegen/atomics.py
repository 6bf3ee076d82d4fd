"""ATOMIC_ADD lowering.

* ints (i32, u32; i64 with Int64Atomics): OpAtomicIAdd.
* f32 / f64 with the device's float-add atomics: OpAtomicFAddEXT (SPV_EXT_shader_atomic_float_add).
* f32 / f64 without: a compare-and-swap loop on the element's bit pattern. The binding is then
  declared as an array of same-width unsigned ints (storage kind 'bits', see `interface.py`) and
  every plain load/store of it bitcasts. f64 CAS needs Int64 + Int64Atomics.

All atomics use Device scope and relaxed semantics; each returns the old value. The CAS loop
counts its back-edges like any loop when a loop-iteration cap is set (see lower.py).
"""
from __future__ import annotations

from kernel_ir.dtypes import f32, f64, u1, u32

from .emitter import SCOPE_DEVICE, SEM_RELAXED, U64


def needs_cas(dt, caps) -> bool:
    if dt == f32:
        return not caps.has_atomic_float32_add
    if dt == f64:
        return not caps.has_atomic_float64_add
    return False


def check_supported(dt, caps) -> None:
    if dt.kind == "b":
        raise RuntimeError("atomic add on u1 is not supported")
    if needs_cas(dt, caps) and not getattr(caps, "profile").compare_exchange:
        raise RuntimeError(f"atomic add on {dt} needs a compare-and-swap loop, which the "
                           f"{caps.profile.name} profile forbids (the backend rejects it earlier)")
    if dt.bits == 64 and not caps.has_int64_atomics and (dt.kind != "f" or needs_cas(dt, caps)):
        raise RuntimeError(f"atomic add on {dt} needs shaderBufferInt64Atomics, which the device "
                           "lacks")


def atomic_add(L, ptr: int, v: int, dt) -> int:
    """Emit the atomic add of `v` at `ptr` (a StorageBuffer element pointer); returns old value.
    `L` is the TaskLowerer (for the emitter and loop bookkeeping)."""
    E, caps = L.E, L.caps
    check_supported(dt, caps)
    scope, sem = E.c(SCOPE_DEVICE, u32), E.c(SEM_RELAXED, u32)
    if dt.kind in "iu":
        if dt.bits == 64:
            E.m.capability("Int64Atomics")
        return E.op("OpAtomicIAdd", dt, ptr, scope, sem, v)
    if not needs_cas(dt, caps):
        E.m.extension("SPV_EXT_shader_atomic_float_add")
        E.m.capability("AtomicFloat32AddEXT" if dt == f32 else "AtomicFloat64AddEXT")
        return E.op("OpAtomicFAddEXT", dt, ptr, scope, sem, v)
    return _cas_loop(L, ptr, v, dt, scope, sem)


def _cas_loop(L, ptr, v, dt, scope, sem):
    E, fn = L.E, L.E.fn
    ut = u32 if dt.bits == 32 else U64
    if dt.bits == 64:
        E.m.capability("Int64Atomics")
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
    new = E.op("OpFAdd", dt, E.op("OpBitcast", dt, cur), v)
    fn.emit("OpAtomicCompareExchange", E.ty(ut), got, ptr, scope, sem, sem,
            E.op("OpBitcast", ut, new), cur)
    done = E.op("OpIEqual", u1, got, cur)
    fn.selection_merge(retry)
    fn.branch_cond(done, merge, retry)
    fn.begin(retry)
    L.count_back_edge(None)
    fn.branch(cont)
    fn.begin(cont)
    fn.branch(header)
    fn.begin(merge)
    return E.op("OpBitcast", dt, cur)
