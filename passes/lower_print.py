"""Lower PRINT nodes to ordinary global accesses into the print buffers (IR -> IR).

    lower_prints(kernel_ir, print_buffer) -> kernel_ir without PRINT

Each PRINT becomes (the record layout is `spirad.printing`'s, carried by the print buffer passed
in: RECORDS, DROPPED, CURSOR, CAPACITY, area):

    h = atomic_add(ints[0], header words)                 # claim the header
    f = atomic_add(ints[1], f32 count)                    # claim f32 value words (if any)
    d = atomic_add(ints[2], f64 count)                    # claim f64 value words (if any)
    if h + header words <= capacity:
        ints[RECORDS + h ...] = format id, f, d, int words
    else:
        atomic_add(ints[DROPPED], 1)                      # a record that did not fit
    if f + f32 count <= capacity: floats[f ...] = f32 values
    if d + f64 count <= capacity: doubles[d ...] = f64 values

Only loads, stores, integer atomic adds, casts and shifts: every backend runs it as it is. Runs
before offloading (the records are ordinary writes to internal fields from then on; reverse
mode's replay drops them like every primal write, forward mode keeps them).
"""
from __future__ import annotations

from kernel_ir.builder import IRBuilder
from kernel_ir.dtypes import i32
from kernel_ir.nodes import KernelIR, walk
from kernel_ir.ops import Op
from kernel_ir.rewrite import Splice, keep, rebuild


def lower_prints(k: KernelIR, buf) -> KernelIR:
    """`buf`: the state's `spirad.printing.PrintBuffer` (its fields and record layout)."""
    if not any(n.op == Op.PRINT for n in walk(k.body)):
        return k

    def visit(n, srcs, blocks, arg, env):
        if n.op != Op.PRINT:
            return keep(n, srcs, blocks, arg, env)
        b = IRBuilder()
        b.loc = n.loc
        _emit_record(b, buf, n.arg, srcs)
        return Splice(list(b.finish().nodes))

    return KernelIR(k.name, k.args, rebuild(k.body, visit), k.loc)


def _c(b, v, dt=i32):
    return b.const(v, dt)


def _claim(b, buf, ints, area: str, count: int):
    """(offset claimed in `area`, its 'fits' condition)."""
    off = b.atomic_add(ints, [_c(b, buf.CURSOR[area])], _c(b, count))
    ok = b.binary(Op.CMP_LE, off, _c(b, buf.CAPACITY[area] - count))
    return off, ok


def _emit_record(b: IRBuilder, buf, fid: int, values):
    ints = buf.ref("ints")
    by_area = {"ints": [], "floats": [], "doubles": []}
    for v in values:
        by_area[buf.area(v.dtype)].append(v)
    extra = [a for a in ("floats", "doubles") if by_area[a]]
    words = []
    for v in by_area["ints"]:
        if v.dtype.bits == 64:
            words.append(b.cast(v, i32))   # low word (integer casts wrap)
            words.append(b.cast(b.binary(Op.SHR, v, _c(b, 32, v.dtype)), i32))
        else:
            words.append(b.cast(v, i32))
    header = 1 + len(extra) + len(words)
    h, ok = _claim(b, buf, ints, "ints", header)
    offs = {a: _claim(b, buf, ints, a, len(by_area[a])) for a in extra}
    with b.if_(ok) as (then, otherwise):
        with then:
            base = b.binary(Op.ADD, h, _c(b, buf.RECORDS))
            row = [_c(b, fid)] + [offs[a][0] for a in extra] + words
            for j, w in enumerate(row):
                b.global_store(ints, [b.binary(Op.ADD, base, _c(b, j)) if j else base], w)
        with otherwise:  # the record does not fit: count it (the host says how many)
            b.atomic_add(ints, [_c(b, buf.DROPPED)], _c(b, 1))
    for a in extra:
        ref = buf.ref(a)
        off, fits = offs[a]
        with b.if_(fits) as (then, _):
            with then:
                for j, v in enumerate(by_area[a]):
                    v = v if v.dtype == ref.dtype else b.cast(v, ref.dtype)  # f16: exact
                    b.global_store(ref, [b.binary(Op.ADD, off, _c(b, j)) if j else off], v)

