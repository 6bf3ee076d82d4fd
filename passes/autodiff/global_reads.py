"""Global reads whose value the reverse walk needs, checked against the kernel's own writes.

The adjoint runs after the whole forward launch and re-reads globals for the primal values its
derivative rules need (`v = s[i]; y = x * v` needs `v`). If the forward launch wrote the element
*after* the read, the adjoint sees the new value and the gradient is silently wrong (a hazard
Taichi leaves silent); `check_overwritten_reads` reports it instead. A read is at risk when a
write to the same element can execute after it, in the forward program of any thread:

* a later task writes the same global;
* another iteration of this task's parallel loop writes it (unless some axis keeps every
  iteration to its own elements: `s[i]` vs `s[i]`, `pos[t + 1, i]` vs `pos[t, i]`);
* in the same thread, a write that follows the read in program order, or that shares an
  enclosing serial loop with it, may hit the element (`_later_in_thread`).

Writes that all precede the read (a loop that fills `a`, then a sibling loop that reads it) and
writes that a serial loop provably sends elsewhere later (`out[j] = out[j - 1] * x` in
`for j in range(...)`: iteration j writes j, later iterations write above j, the read was
j - 1) leave the read's value intact, so those shapes compile.
"""
from __future__ import annotations

from kernel_ir.errors import SpiradAutodiffError
from kernel_ir.source import user_error
from kernel_ir.nodes import Block, Node, walk
from kernel_ir.ops import ATOMICS, LEAVES, LOOPS, PURE, Op
from .index_forms import IndexForms


def check_overwritten_reads(body: Block, on_stack: set, needed: set, later_written, index=None,
                            rng=None):
    """Raise at the first read of a global that the reverse walk needs (`needed`, directly or
    through locals; `on_stack` slots keep their stored values for the reverse walk) and that a
    write of this task (or of a later one: `later_written(ref)`) may overwrite. `index` is the
    task's parallel index (None for a serial task), `rng` its constant range when known."""
    where = _Where(body)
    forms = IndexForms(body)
    writes: dict = {}
    for n in walk(body):
        if n.op == Op.GLOBAL_STORE or n.op in ATOMICS:
            writes.setdefault(_key(n.arg), []).append(n)
    many_threads = index is not None and not (rng is not None and rng[1] - rng[0] <= 1)

    def at_risk(r: Node) -> bool:
        if r.arg.kind == "temp":
            return False
        if later_written(r.arg):
            return True
        for w in writes.get(_key(r.arg), ()):
            ridx, widx = r.srcs, w.srcs[:-1]
            if many_threads and not _thread_disjoint(forms, ridx, widx, index, rng):
                return True
            if _later_in_thread(forms, where, r, w, index, rng):
                return True
        return False

    tainted = {}  # node or slot -> the value it got from an at-risk read (for the message)
    for n in walk(body):
        if n.op == Op.GLOBAL_LOAD and at_risk(n):
            tainted[n] = n
        elif n.op == Op.LOAD and n.srcs[0] in tainted:
            tainted[n] = tainted[n.srcs[0]]
        elif n.op == Op.STORE and n.srcs[1] in tainted:
            tainted[n.srcs[0]] = n.srcs[1]
            if n.srcs[0] in on_stack:
                _overwritten_error(n.srcs[1], n)
        elif n.op in PURE and n.op not in LEAVES and any(x in tainted for x in n.srcs):
            tainted[n] = next(tainted[x] for x in n.srcs if x in tainted)
        if n in tainted and n in needed:
            _overwritten_error(tainted[n], n)


def _key(ref):
    return (ref.kind, ref.key, ref.grad)


class _Where:
    """Program position and enclosing loops (outermost first) of every node of a task body."""

    def __init__(self, body: Block):
        self.pos: dict = {}
        self.loops: dict = {}
        self._visit(body, ())

    def _visit(self, block: Block, loops: tuple):
        for n in block.nodes:
            self.pos[n] = len(self.pos)
            self.loops[n] = loops
            inner = loops + (n,) if n.op in LOOPS else loops
            for b in n.blocks:
                self._visit(b, inner)


def _thread_disjoint(f: IndexForms, ridx, widx, index, rng) -> bool:
    """No *other* iteration of the parallel loop writes the element this one reads: some axis
    never coincides (different constants, `t` vs `t + 1` with `t` the same everywhere), holds the
    same injective expression of the parallel index on both sides, or reads a constant slot that
    `index + k` never reaches over the loop's range."""
    for a, b in zip(ridx, widx):
        if f.never_same(a, b):
            return True
        if f.same(a, b) and f.offset(a, index) is not None:
            return True
        if _never_reached(f, a, b, index, rng):
            return True
    return False


def _never_reached(f: IndexForms, a, b, index, rng) -> bool:
    """`a` is a constant that the write's `index + k` (`b`) never reaches over the range."""
    k = f.offset(b, index)
    a = f.resolve(a)
    return (a.op == Op.CONST and k is not None and rng is not None
            and not rng[0] + k <= int(a.arg) < rng[1] + k)


def _later_in_thread(f: IndexForms, where: _Where, r: Node, w: Node, index, rng) -> bool:
    """Can write `w` hit read `r`'s element after `r` ran, within one thread? Within a thread
    the parallel index is fixed, so `x` and `x + c` with `x` built from it never coincide."""
    ridx, widx = r.srcs, w.srcs[:-1]
    fixed = (index,) if index is not None else ()
    for a, b in zip(ridx, widx):
        if f.never_same(a, b, fixed) or _never_reached(f, a, b, index, rng):
            return False
    common = []
    for lr, lw in zip(where.loops[r], where.loops[w]):
        if lr is not lw:
            break
        common.append(lr)
    return _after(f, where, r, w, ridx, widx, common)


def _after(f, where, r, w, ridx, widx, common) -> bool:
    """`_later_in_thread` over the loops enclosing both accesses, outermost first. In an
    increasing serial loop over j, `w` at `j + c_w` and `r` at `j + c_r` with c_r < c_w never
    meet again after the read (every later write lands above it); with c_r == c_w only the
    read's own iteration is left to check, one loop further in."""
    if not common:
        return where.pos[w] > where.pos[r]
    loop = common[0]
    if loop.op == Op.RANGE_FOR:
        j = loop.arg.index
        same_iteration = False
        for a, b in zip(ridx, widx):
            cr, cw = f.offset(a, j), f.offset(b, j)
            if cr is None or cw is None:
                continue
            if cr < cw:
                return False
            if cr == cw:
                same_iteration = True
        if same_iteration:
            return _after(f, where, r, w, ridx, widx, common[1:])
    return True


def _overwritten_error(value, at):
    src = value
    seen = set()
    work = [value]
    while work:  # find the global read behind the value, for the message
        x = work.pop()
        if x in seen:
            continue
        seen.add(x)
        if x.op == Op.GLOBAL_LOAD:
            src = x
            break
        work.extend(x.srcs)
    name = src.arg.name if src.op == Op.GLOBAL_LOAD else "a global"
    raise user_error(SpiradAutodiffError,
                     f"this kernel reads '{name}' and also overwrites it; the adjoint runs after "
                     f"the forward launch and would differentiate with the overwritten value. "
                     f"Read the old values from a separate field (or copy them in an earlier "
                     f"kernel)", (src if src.op == Op.GLOBAL_LOAD else at).loc)
