"""Local matrices indexed at run time kept as arrays in memory (CPU scalar tasks).

The frontend unrolls a local vector / matrix into one ALLOCA per component
(`spirad/frontend/local_index.py`): a read at a run-time position `f` is a select chain
`f == p0 ? load(c0) : f == p1 ? load(c1) : ... : load(c_last)`, a write of `v` stores
`f == p ? v : load(c_p)` into every candidate component. Lowered as it is, LLVM promotes every
component to an SSA value: a matrix of 5x3 floats written at a run-time row inside a loop is 15
loop-carried values, each write 15 selects, each read a chain, and in a large serial task the
values live across the loop are spilled and copied between spill slots at every iteration
(Genesis' `_func_multicontact_gather`, docs/performance.md: "The narrow phase at the instruction
level"). Taichi and Quadrants keep such a local as an array in memory and index it.

This module does the same at code generation, for the patterns the frontend emits, without
changing the kernel IR (so the interpreter, SPIR-V, the passes and reverse mode see what they
saw):

* **groups**: the ALLOCAs that the patterns below name at positions `p` become the elements
  `p` of one `alloca [P + 1 x T]` (element P: a scratch element for writes that hit nothing);
  each ALLOCA still re-zeroes its own element where it executes, and every other LOAD / STORE
  of it goes to that element: the same memory operations on another address;
* **reads**: a select chain whose compared positions form an arithmetic progression
  `s, s + d, ..., s + (m - 1) d`, all its loads in the same block as the chain with no STORE and
  no nested block between the first load and the chain's top, is lowered as
  `valid ? arr[f] : <the chain's last load>` with `valid` = `f - s < m d` (unsigned) and
  `(f - s) % d == 0`: the chain picks the component at position `f` when `f` is a compared
  position, else its last load; nothing wrote the components between those loads and the top,
  so `arr[f]` holds what the chain's load of it held;
* **writes**: a run of consecutive STOREs `c_p = (f == p ? v : load(c_p))` of distinct
  components with the same `f` and `v`, nothing between them but the next member's own
  operands (its CONST, CMP_EQ, LOAD, SELECT), positions an arithmetic progression, is lowered
  as one `arr[valid ? f : P] = v` at the run's last STORE: at most one member stores `v`
  (positions are distinct), every other member stores back what it loaded, and the only nodes
  that read memory inside the run are the members' loads of their own components, which no
  earlier member wrote.

A group whose patterns disagree (one ALLOCA at two positions, two at one position, mixed
dtypes, booleans) is left as it was, and so is every pattern that does not match exactly:
those are lowered node by node as before. Only scalar CPU task functions without adstacks use
this (`plan`); the SPMD lowering, GPU kernels and the checked copies (`cold_copy`: their
function has no plan and lowers its nodes as before, reading and writing the caller's slots by
value) do not. Loads and stores are of the same values in the same order, so results are
bit-identical; only where the values live changes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from llvmlite import ir

from kernel_ir.ops import Op

from .lltypes import I32, I64, PTR

_ADSTACK = frozenset(op for op in Op if op.name.startswith("ADSTACK"))


@dataclass
class Chain:
    f: object          # the i32 position node
    start: int         # s
    step: int          # d
    count: int         # m (compared positions)
    last_load: object  # the chain's final LOAD node (its value when f is not compared)
    group: int


@dataclass
class Run:
    f: object
    value: object      # v
    start: int
    step: int
    count: int
    group: int
    last: object       # the run's last STORE node


@dataclass
class Plan:
    position: dict = field(default_factory=dict)   # ALLOCA node -> (group, position)
    size: dict = field(default_factory=dict)       # group -> P (array of P + 1 elements)
    reads: dict = field(default_factory=dict)      # chain top SELECT node -> Chain
    skip: set = field(default_factory=set)         # STORE nodes folded into a run's last one
    writes: dict = field(default_factory=dict)     # a run's last STORE node -> Run
    arrays: dict = field(default_factory=dict)     # group -> LLVM alloca (lowering)

    def __bool__(self):
        return bool(self.reads or self.writes)


def _compare(n):
    """(f, p) of `CMP_EQ(f, CONST p)` with f a 32-bit integer node, else None."""
    if n.op != Op.CMP_EQ or len(n.srcs) != 2:
        return None
    f, c = n.srcs
    if c.op != Op.CONST or f.dtype is None or not f.dtype.is_int or f.dtype.bits != 32:
        return None
    if not isinstance(c.arg, int) or isinstance(c.arg, bool):
        return None
    return f, int(c.arg)


def _local_load(n):
    """The ALLOCA a LOAD node reads, else None."""
    if n.op == Op.LOAD and n.srcs and n.srcs[0].op == Op.ALLOCA:
        return n.srcs[0]
    return None


def _progression(ps):
    """(start, step, count) when the positions `ps` (in any order, distinct) are an arithmetic
    progression of non-negative ints, else None."""
    if not ps or len(set(ps)) != len(ps) or min(ps) < 0:
        return None
    s = sorted(ps)
    d = s[1] - s[0] if len(s) > 1 else 1
    if d <= 0 or any(b - a != d for a, b in zip(s, s[1:])):
        return None
    return s[0], d, len(s)


def _element(n):
    """(f, p, value, alloca, load, select) of a chain element `SELECT(CMP_EQ(f, p), LOAD(a),
    rest)` (value: the rest), else None."""
    if n.op != Op.SELECT or len(n.srcs) != 3:
        return None
    fp = _compare(n.srcs[0])
    a = _local_load(n.srcs[1])
    if fp is None or a is None:
        return None
    return fp[0], fp[1], n.srcs[2], a


def _member(n):
    """(f, p, v, alloca, cmp, load, select) of a write member `STORE(a, SELECT(CMP_EQ(f, p), v,
    LOAD(a)))`, else None."""
    if n.op != Op.STORE or len(n.srcs) != 2 or n.srcs[0].op != Op.ALLOCA:
        return None
    a, sel = n.srcs
    if sel.op != Op.SELECT or len(sel.srcs) != 3:
        return None
    fp = _compare(sel.srcs[0])
    if fp is None or _local_load(sel.srcs[2]) is not a:
        return None
    return fp[0], fp[1], sel.srcs[1], a, sel.srcs[0], sel.srcs[2], sel


def _chains(block, index, found):
    """Read chains of `block` whose loads and selects are all in it, with no STORE or nested
    block between the first load and the top."""
    elems = {n: e for n in block.nodes if (e := _element(n)) is not None}
    inner = {e[2] for n, e in elems.items() if e[2] in elems and elems[e[2]][0] is e[0]}
    for top in elems:
        if top in inner:
            continue
        f = elems[top][0]
        pairs, loads, x = [], [], top
        while x in elems and elems[x][0] is f:
            _, p, rest, a = elems[x]
            pairs.append((p, a))
            loads.append(x.srcs[1])
            x = rest
        last = x
        if len(pairs) < 2 or _local_load(last) is None:
            continue
        loads.append(last)
        if any(index.get(ld, (None,))[0] is not block for ld in loads):
            continue
        lo = min(index[ld][1] for ld in loads)
        hi = index[top][1]
        if any(n.op == Op.STORE or n.blocks for n in block.nodes[lo:hi]):
            continue
        prog = _progression([p for p, _ in pairs])
        if prog is None:
            continue
        found.append(("read", top, f, prog, last, pairs))


def _runs(block, found):
    """Write runs of `block` (module docstring)."""
    nodes = block.nodes
    k = 0
    while k < len(nodes):
        m = _member(nodes[k])
        if m is None:
            k += 1
            continue
        f, v = m[0], m[2]
        members, end = [(k, m)], k
        j = k + 1
        while j < len(nodes):
            # the next member, with only its own operands between
            nxt = next((t for t in range(j, min(j + 8, len(nodes))) if nodes[t].op == Op.STORE),
                       None)
            if nxt is None:
                break
            mm = _member(nodes[nxt])
            if mm is None or mm[0] is not f or mm[2] is not v:
                break
            own = {mm[4], mm[5], mm[6], mm[4].srcs[1]}
            if any(nodes[t] not in own for t in range(j, nxt)):
                break
            members.append((nxt, mm))
            end = nxt
            j = nxt + 1
        k = end + 1
        allocas = [mm[3] for _, mm in members]
        if len(members) < 2 or len(set(map(id, allocas))) != len(allocas):
            continue
        prog = _progression([mm[1] for _, mm in members])
        if prog is None:
            continue
        found.append(("write", [nodes[t] for t, _ in members], f, prog, v,
                      [(mm[1], mm[3]) for _, mm in members]))


def plan(task) -> Plan:
    """The groups, reads and writes of a scalar CPU task (an empty plan where there are none or
    where the task has adstacks)."""
    out = Plan()
    index, blocks = {}, []
    stack = [task.body]
    while stack:
        block = stack.pop()
        chained = False
        for i, n in enumerate(block.nodes):
            index[n] = (block, i)
            op = n.op
            if op in _ADSTACK:
                return out
            if op is Op.SELECT and n.srcs and n.srcs[0].op is Op.CMP_EQ:
                chained = True
            if n.blocks:
                stack.extend(n.blocks)
        if chained:
            blocks.append(block)
    found = []
    for b in blocks:
        _chains(b, index, found)
        _runs(b, found)
    # groups: union of the ALLOCAs each pattern names
    parent = {}

    def root(a):
        while parent.setdefault(a, a) is not a:
            a = parent[a]
        return a
    for pat in found:
        allocas = [a for _, a in pat[5]]
        for a in allocas[1:]:
            ra, rb = root(allocas[0]), root(a)
            if ra is not rb:
                parent[rb] = ra
    at, bad = {}, set()
    for pat in found:
        for p, a in pat[5]:
            g = root(a)
            if at.setdefault(a, p) != p:
                bad.add(g)
    members = {}
    for a, p in at.items():
        members.setdefault(root(a), []).append((p, a))
    ids = {}
    for g, ms in members.items():
        dts = {a.dtype for _, a in ms}
        if g in bad or len({p for p, _ in ms}) != len(ms) or len(dts) != 1 or \
                next(iter(dts)).is_bool:
            continue
        gid = ids[g] = len(ids)
        out.size[gid] = max(p for p, _ in ms) + 1
        for p, a in ms:
            out.position[a] = (gid, p)
    for pat in found:
        g = root(pat[5][0][1])
        if g not in ids:
            continue
        s, d, m = pat[3]
        if pat[0] == "read":
            out.reads[pat[1]] = Chain(pat[2], s, d, m, pat[4], ids[g])
        else:
            stores = pat[1]
            out.skip.update(stores[:-1])
            out.writes[stores[-1]] = Run(pat[2], pat[4], s, d, m, ids[g], stores[-1])
    return out


# -- lowering ---------------------------------------------------------------------------------
def handles(ctx, n) -> bool:
    p = ctx.local_arrays
    return n in p.position or n in p.reads or n in p.writes or n in p.skip


def lower(ctx, n):
    """Lower `n`, one of the plan's nodes (`handles`)."""
    p = ctx.local_arrays
    if n in p.skip:
        return None
    if n in p.position:
        gid, pos = p.position[n]
        ptr = _element_ptr(ctx, gid, ir.Constant(I64, pos), ctx.entry_b)
        ctx.b.store(ctx.const(n.dtype, 0), ptr)  # ALLOCA re-zeroes its slot (lower_memory)
        return ptr
    if n in p.reads:
        c = p.reads[n]
        ok = _valid(ctx, c)
        b = ctx.b
        f = ctx.value(c.f)
        idx = b.select(ok, f, ir.Constant(I32, c.start))
        v = b.load(_element_ptr(ctx, c.group, b.sext(idx, I64), b), typ=ctx.reg_type(n.dtype))
        return b.select(ok, v, ctx.value(c.last_load))
    r = p.writes[n]
    ok = _valid(ctx, r)
    b = ctx.b
    idx = b.select(ok, ctx.value(r.f), ir.Constant(I32, p.size[r.group]))
    b.store(ctx.value(n.srcs[1].srcs[1]), _element_ptr(ctx, r.group, b.sext(idx, I64), b))
    return None


def _valid(ctx, c) -> ir.Value:
    """`f - s < m d` (unsigned) and `(f - s) % d == 0`."""
    b = ctx.b
    k = b.sub(ctx.value(c.f), ir.Constant(I32, c.start))
    ok = b.icmp_unsigned("<", k, ir.Constant(I32, c.step * c.count))
    if c.step > 1:
        ok = b.and_(ok, b.icmp_unsigned("==", b.urem(k, ir.Constant(I32, c.step)),
                                        ir.Constant(I32, 0)))
    return ok


def _element_ptr(ctx, gid, idx, builder) -> ir.Value:
    p = ctx.local_arrays
    arr = p.arrays.get(gid)
    if arr is None:
        from .lltypes import reg_type
        pos = next(a for a, (g, _) in p.position.items() if g == gid)
        t = ir.ArrayType(reg_type(pos.dtype), p.size[gid] + 1)
        arr = ctx.hoisted_alloca(t, name=f"local.array{gid}")
        arr.type = PTR  # an opaque pointer: its GEPs are too (lower_memory's buffers)
        p.arrays[gid] = (arr, t)
    arr, t = p.arrays[gid]
    return builder.gep(arr, [ir.Constant(I64, 0), idx], inbounds=True, source_etype=t)
