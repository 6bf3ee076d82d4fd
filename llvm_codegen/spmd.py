"""SPMD lowering of range tasks: W consecutive iterations in vector lanes.

A range task qualifies (`analyze`) unless it prints, has bounds checks, calls libm-only math on
varying values (SPIRAD_CPU_VECMATH=0), or touches a global it writes at more than one index tuple
or at one that is not consecutive (the order between lanes would then matter). Control flow may
differ per lane: IF conditions, loop bounds and exits that depend on the task index run under
per-lane masks (`spmd_control`); reverse-mode tasks get per-lane adstack entries, with per-lane
entry counts for stacks pushed under a partial mask (`spmd_adstack`); atomics run lane by lane.

Lowering: the task loop steps by W; the index is `<base, base+1, ...>` and the lanes past `end`
are masked off (`ctx.mask`). A node depending on the index (directly, through a local, through a
global read at a varying index, or through control flow that differs per lane) is *varying*
and lowered by the ordinary scalar rules with the context's register width set to W
(`FnContext.at_lanes`: its values are `<W x T>`); uniform nodes stay scalar and are broadcast where a varying node uses them. Global
reads and writes whose last index is the task index plus a uniform offset (others uniform) are
masked vector loads / stores; other varying accesses are masked gathers / scatters (inactive
lanes touch no memory; a scatter writes in lane order). Math ops call `vecmath`'s vector bodies
(or LLVM's vector intrinsics with SPIRAD_CPU_VECMATH=0 where an intrinsic exists); integer POW
a vector helper.

Everything else keeps the scalar path; `compile_tasks` records the choice per task
(`CpuTaskInfo.lanes`, and `SPIRAD_DEBUG_CPU=1` prints it with the reason).
"""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.mathfns import MATH
from kernel_ir.mathlib import FUNCTIONS as _ALGORITHMS
from kernel_ir.nodes import Node, walk
from kernel_ir.ops import ATOMICS, GLOBAL_ACCESS, Op
from kernel_ir.ownership import private_buffers

from . import math_policy
from .context import FnContext
from .freeze import freeze
from .lltypes import I32, I64, PTR, elem_info, mem_type, scalar_reg_type
from .lower_memory import (atomic_update, axis_extent, from_memory, index64, linear_index,
                           oob_checked, oob_helper, rmw_op, to_memory)
from .lower_ops import convert
from .spmd_adstack import LANE_STACK_RULES, SPMD_ADSTACK_RULES, masked
from .spmd_adstack import setup_lane_counts  # noqa: F401  (codegen calls spmd.setup_lane_counts)
from .spmd_control import CONTROL_RULES, LOCAL_RULES, Control, Frame, any_lane, control, refresh
from .splat import splat, zeros
from .target import INTRINSIC_MATH

_REFUSED = {Op.PRINT: "print", Op.CALL: "a CALL region"}
_STACK_WRITES = (Op.ADSTACK_PUSH, Op.ADSTACK_ACC_ADJ)  # a varying value makes the stack varying
_STACK_OPS = (Op.ADSTACK_PUSH, Op.ADSTACK_POP, Op.ADSTACK_ACC_ADJ)
# the math ops vecmath has a vector body for: the functions of `kernel_ir.mathfns` that are not
# expanded and have a `kernel_ir.mathlib` algorithm, pow and atan2
_MATH_NAME = {**{fn.op: fn.name for fn in MATH
                 if fn.lowering != "expanded" and fn.name in _ALGORITHMS},
              Op.POW: "pow", Op.ATAN2: "atan2"}
# of them, the plain libm calls (no LLVM vector intrinsic: `target.INTRINSIC_MATH`)
_LIBM_RULE_OPS = {op: name for op, name in _MATH_NAME.items() if name not in INTRINSIC_MATH}


class Analysis:
    def __init__(self, ok, reason, varying=frozenset(), affine=frozenset(), own=frozenset(),
                 ctl=None, lane_stacks=frozenset(), sincos=frozenset(), used=frozenset()):
        self.ok, self.reason, self.varying, self.affine = ok, reason, varying, affine
        self.own = own  # ATOMIC_ADDs whose lane elements no other iteration touches
        self.ctl = ctl or Control()  # varying control flow (spmd_control)
        self.lane_stacks = lane_stacks  # ADSTACK_ALLOCAs pushed / popped under a partial mask
        self.sincos = sincos  # values whose sin and cos the task both takes (reverse passes)
        self.used = used  # nodes some node reads (an ATOMIC_ADD outside it: old value unused)


def analyze(task, bounds_check: bool = False, vecmath: str = "auto") -> Analysis:
    """Whether `task` can run in lanes, and which nodes are varying / affine in the index
    (`vecmath`: the CodegenOptions switch, which decides whether libm-only math refuses)."""
    if task.kind != "range":
        return Analysis(False, "serial task")
    if bounds_check:
        return Analysis(False, "bounds checks")
    nodes = list(walk(task.body))
    for n in nodes:
        if n.op in _REFUSED:
            return Analysis(False, _REFUSED[n.op])
    # atomics are never uniform: each iteration's add happens, once per lane
    varying = {task.index} | {n for n in nodes if n.op in ATOMICS}
    lane_stacks = set()
    while True:  # locals / stacks made varying can make conditions varying, and back
        ctl = control(task, varying)
        if not _propagate(nodes, varying, lane_stacks, ctl):
            break
    for n in nodes:
        if n in varying and n.op in _MATH_NAME and n.srcs[0].dtype.is_float:
            name = _MATH_NAME[n.op]
            if math_policy.mode(name, n.srcs[0].dtype.name, vecmath) == "libm" and \
                    n.op in _LIBM_RULE_OPS:
                return Analysis(False, f"{name} on lanes without vecmath")
    affine = _affine(task, nodes, varying)
    private = private_buffers(task)
    used = frozenset(s for m in nodes for s in m.srcs)
    why = _memory_hazard(nodes, affine, varying, private)
    if why:
        return Analysis(False, why)
    return Analysis(True, "", frozenset(varying), frozenset(affine),
                    _own_atomics(nodes, affine, varying, private), ctl, frozenset(lane_stacks),
                    _sincos_pairs(nodes, varying), used)


def _propagate(nodes, varying, lane_stacks, ctl) -> bool:
    """One fixpoint over values, locals and stacks given the control flow `ctl`; True when
    anything became varying."""
    grew = False
    changed = True
    while changed:  # locals can carry a varying value back to an earlier load
        changed = False
        for n in nodes:
            if n in varying:
                continue
            masked = n in ctl.masked
            if n.op == Op.STORE:  # a blend under a partial mask: the slot differs per lane
                if (n.srcs[1] in varying or masked) and n.srcs[0] not in varying:
                    varying.add(n.srcs[0])
                    changed = True
                continue
            if n.op in _STACK_OPS:
                st = n.srcs[0]
                if masked and n.op != Op.ADSTACK_ACC_ADJ and st not in lane_stacks:
                    lane_stacks.add(st)  # per-lane entry counts
                    changed = True
                writes = n.op in _STACK_WRITES and n.srcs[1] in varying
                if (writes or masked or st in lane_stacks) and st not in varying:
                    varying.add(st)  # the stack (its ALLOCA node) holds per-lane values
                    changed = True
                continue
            if n.op == Op.RANGE_FOR:
                if any(s in varying for s in n.srcs) and n.arg.index not in varying:
                    varying.add(n.arg.index)  # a per-lane loop index
                    changed = True
                continue
            if n.op in (Op.IF, Op.WHILE, Op.GLOBAL_STORE, Op.ADSTACK_POP):
                continue
            if any(s in varying for s in n.srcs):
                varying.add(n)
                changed = True
        grew |= changed
    return grew


def _sincos_pairs(nodes, varying):
    """Varying values with both a SIN and a COS (the reverse pass of sin(v) takes cos(v))."""
    of = {Op.SIN: set(), Op.COS: set()}
    for n in nodes:
        if n.op in of and n in varying:
            of[n.op].add(n.srcs[0])
    return frozenset(of[Op.SIN] & of[Op.COS])


def _own_atomics(nodes, affine, varying, private):
    """ATOMIC_ADDs at a consecutive index tuple through which alone the task touches their
    global (`x.grad[i] += ...` in an adjoint), or on an iteration-private global
    (`kernel_ir.ownership`): each element belongs to one iteration, so a masked vector
    read-add-write of the lanes is the same as per-lane atomics."""
    tuples = {}
    for n in nodes:
        if n.op in GLOBAL_ACCESS:
            idx = tuple(n.srcs) if n.op == Op.GLOBAL_LOAD else tuple(n.srcs[:-1])
            tuples.setdefault(n.arg.buffer, set()).add(idx)
    def own(n):
        if n.arg.buffer in private:
            return True
        ts = tuples[n.arg.buffer]
        if len(ts) == 1 and consecutive(affine, varying, n.srcs[:-1]):
            return True
        rows = {_row(t) for t in ts}  # components of the lane's own element (`v[i] += ...`)
        return len(rows) == 1 and consecutive(affine, varying, next(iter(rows)))
    return frozenset(n for n in nodes if n.op == Op.ATOMIC_ADD and own(n))


def _affine(task, nodes, varying):
    """Nodes equal to the task index plus a uniform integer (lane k = lane 0 + k)."""
    affine = {task.index}
    for n in nodes:
        if n.op in (Op.ADD, Op.SUB) and n.dtype.kind in ("i", "u"):
            a, b = n.srcs
            if a in affine and b not in varying or n.op == Op.ADD and b in affine and a not in varying:
                affine.add(n)
        elif n.op == Op.CAST and n.srcs[0] in affine and n.dtype.kind in ("i", "u") \
                and n.dtype.bits >= n.srcs[0].dtype.bits:
            affine.add(n)
    return affine


def consecutive(affine, varying, index_nodes) -> bool:
    """Lane k's element is lane 0's + k: the last index affine, the others uniform."""
    return bool(index_nodes) and index_nodes[-1] in affine and not any(
        s in varying for s in index_nodes[:-1])


def _memory_hazard(nodes, affine, varying, private):
    """Why the lanes could see each other's writes, or "": a written global that is also read
    or written at another index tuple must be iteration-private (`kernel_ir.ownership`:
    `F[f + 1, p] = F[f, p]`, an ndrange's `g[f, i, j]`) or be touched through one row
    consecutive over the lanes (`x[i][0]`, `x[i][1]`)."""
    reads, writes = {}, {}
    for n in nodes:
        if n.op == Op.GLOBAL_LOAD:
            reads.setdefault(n.arg.buffer, set()).add(tuple(n.srcs))
        elif n.op == Op.GLOBAL_STORE or n.op in ATOMICS:
            writes.setdefault(n.arg.buffer, set()).add(tuple(n.srcs[:-1]))
    for buf, w in writes.items():
        if buf in private:
            continue
        both = w | reads.get(buf, set())
        if buf in reads or len(w) > 1:
            rows = {_row(t) for t in both}  # x[i][0] and x[i][1]: one row, lane i's own
            if len(rows) != 1 or not consecutive(affine, varying, next(iter(rows))):
                return f"global {buf} written and accessed at other indices in the same task"
    return ""


def _row(index: tuple) -> tuple:
    """An element's index without its trailing constant indices (the components of a vector /
    matrix element): accesses with one row, consecutive over the lanes, stay in each lane's own
    elements whatever their components."""
    k = len(index)
    while k > 1 and index[k - 1].op == Op.CONST:
        k -= 1
    return index[:k]


# -- lowering ---------------------------------------------------------------------------------
class SpmdContext(FnContext):
    """FnContext lowering varying nodes `width` lanes wide (`at_lanes`), uniform ones scalar."""

    def setup_spmd(self, width: int, analysis: Analysis):
        self.width = width
        self.one_path_checks = False  # `checked_access`: gathers / scatters on one side
        self.scoped_locals = False  # `spmd_scoped_locals`: an ALLOCA zeroes every lane
        self.narrow_elements = False  # `_narrow_elements`: i32 element indices where they fit
        self.blend_free = frozenset()  # `spmd_scoped_locals.blend_free_stores`
        self.varying = analysis.varying
        self.affine = analysis.affine
        self.own_atomics = analysis.own
        self.sincos_args = analysis.sincos
        self.used = analysis.used
        self.vloops = analysis.ctl.loops
        self.lane_stacks = analysis.lane_stacks
        self.top_masked = analysis.ctl.top
        self.mask = None     # <W x i1>: the lanes active at this point
        self.masked = False  # the mask may be partial (varying control): stores blend
        self.frames = []     # per enclosing loop: a spmd_control.Frame (varying) or None
        self.top_frame = None
        self._vector_node = False

    def value(self, n: Node):
        v = super().value(n)
        if self._vector_node and n not in self.varying and v.type != PTR \
                and not isinstance(v.type, ir.VectorType):
            return self.broadcast(v)
        return v

    def broadcast(self, v):
        if isinstance(v, ir.Constant):
            return splat(v, self.width)
        vt = ir.VectorType(v.type, self.width)
        undef = ir.Constant(vt, ir.Undefined)
        x = self.b.insert_element(undef, v, ir.Constant(I32, 0))
        return self.b.shuffle_vector(x, undef, zeros(ir.VectorType(I32, self.width)))

    def lower_block(self, block):
        for n in block.nodes:
            self.current = n
            always = _ALWAYS_RULES.get(n.op)
            if always is not None:  # control flow and stack counts: the rule picks its lanes
                v = always(self, n)
                if v is not None:
                    self.env[n] = v
                refresh(self)
                continue
            vec = n in self.varying or (n.op == Op.STORE and n.srcs[0] in self.varying) or (
                n.op == Op.GLOBAL_STORE and (self.masked or any(
                    s in self.varying for s in n.srcs))) or (
                n.op in _STACK_WRITES and n.srcs[0] in self.varying)
            if n.op == Op.STORE and self.masked and not vec:
                raise RuntimeError(f"SPMD lowering: a masked STORE to uniform local {n.srcs[0]!r}")
            rule = _SPMD_RULES.get(n.op) if vec else None
            outer = self._vector_node
            self._vector_node = vec
            try:
                with self.at_lanes(self.width if vec else 1):
                    if rule is not None:
                        v = rule(self, n)
                    else:
                        v = self.table[n.op](self, n)
            finally:
                self._vector_node = outer
            if v is not None:
                self.env[n] = v


def _lane_consts(w, dt):
    t = scalar_reg_type(dt)
    return ir.Constant(ir.VectorType(t, w), [ir.Constant(t, k) for k in range(w)])


def lower_task(ctx: SpmdContext, task, begin, end):
    """The chunked task loop: `for base in range(begin, end, W)` with masked lanes.

    A task without loops or stacks (a map such as axpy: memory-bound, where masked loads and
    stores cost: AVX-512 masked stores ran the 16M axpy at 6.5 ms against 4.1 ms unmasked on
    this Zen 4) gets its body twice: full lane groups under an all-true mask (plain vector
    loads / stores) up to the last multiple of W, then the masked tail group. Tasks with loops
    keep one masked body (their memory ops are a small part; the body would double compile
    time)."""
    if _split_tail(task):
        b, w = ctx.b, ctx.width
        dt = task.index.dtype
        t = scalar_reg_type(dt)
        gt = b.icmp_signed if dt.kind == "i" else b.icmp_unsigned
        n = b.select(gt(">", end, begin), b.sub(end, begin), ir.Constant(t, 0))
        split = b.add(begin, b.and_(n, ir.Constant(t, -w)), name="spmd.split")  # whole groups
        _group_loop(ctx, task, begin, split, full=True)
        _group_loop(ctx, task, split, end, full=False)
    else:
        _group_loop(ctx, task, begin, end, full=False)


def _split_tail(task) -> bool:
    return not any(n.op in (Op.RANGE_FOR, Op.WHILE) or n.op.name.startswith("ADSTACK")
                   for n in walk(task.body))


def _group_loop(ctx: SpmdContext, task, begin, end, full: bool):
    """`for base in range(begin, end, W)`; `full`: every group is whole (all-true mask)."""
    b, w = ctx.b, ctx.width
    dt = task.index.dtype
    t = scalar_reg_type(dt)
    pre = b.block
    head, body, exit_ = ctx.block("spmd.group"), ctx.block("spmd.body"), ctx.block("spmd.exit")
    b.branch(head)
    b.position_at_end(head)
    base = b.phi(t, name="spmd.base")
    signed = dt.kind == "i"
    cmp = b.icmp_signed if signed else b.icmp_unsigned
    b.cbranch(cmp("<", base, end), body, exit_)
    b.position_at_end(body)
    idx = b.add(ctx.broadcast(base), _lane_consts(w, dt), name="spmd.index")
    ctx.mask = splat(ir.Constant(ir.IntType(1), 1), w) if full else \
        cmp("<", idx, ctx.broadcast(end))
    ctx.env[task.index] = idx
    latch = ctx.block("spmd.latch")
    ctx.top_continue = latch  # a uniform top-level CONTINUE: the whole lane group is done
    if ctx.top_masked:  # a varying one clears lanes from the group's iteration mask
        ctx.top_frame = Frame(None, ctx.hoisted_alloca(ir.VectorType(ir.IntType(1), w), "spmd.iter"))
        b.store(ctx.mask, ctx.top_frame.iter_ptr)
        ctx.masked = True
    ctx.lower_block(task.body)
    ctx.close_into(latch)
    b.position_at_end(latch)
    # base + W can pass `end` (and wrap only past 2**31 - W, beyond any launch range)
    nxt = b.add(base, ir.Constant(t, w), name="spmd.next")
    b.branch(head)
    base.add_incoming(begin, pre)
    base.add_incoming(nxt, latch)
    b.position_at_end(exit_)


def _lin_scalar(ctx, ref, vals, dts):
    return linear_index(ctx, ref, vals, dts)


def _lane(ctx, v, k):
    if isinstance(v.type, ir.VectorType):
        return ctx.b.extract_element(v, ir.Constant(I32, k))
    return v


def _spmd_global_load(ctx: SpmdContext, n):
    ref, w, b = n.arg, ctx.width, ctx.b
    mt = mem_type(ref.dtype)
    def emit(m, free):
        if consecutive(ctx.affine, ctx.varying, n.srcs):
            return masked(ctx, "load", mt, [_first_lane_ptr(ctx, ref, n.srcs, free), m])
        # a gather: inactive lanes read nothing
        return masked(ctx, "gather", mt, [_lane_ptrs(ctx, ref, n.srcs, free), m])
    v = checked_access(ctx, n, n.srcs, emit)
    return convert(ctx, from_memory(b, v, ref.dtype), ref.dtype, n.dtype)


def lane_ok(ctx: SpmdContext, n, index_nodes):
    """(mask, inbounds): the lanes access `n` may touch — the active lanes, less those whose
    index fails the default bounds check (`lower_memory.oob_checked`), which are reported
    (STATUS_OUT_OF_BOUNDS, in a cold branch) and touch no memory — and whether the element
    pointers may be `inbounds` GEPs (False when checked: a failing lane's pointer is never
    dereferenced but must not be poison)."""
    if not oob_checked(ctx, n, index_nodes):
        return ctx.mask, True
    b, ref = ctx.b, n.arg
    ok, _ = _lanes_in_range(ctx, ref, index_nodes)
    m = b.and_(ctx.mask, ok)
    bad = b.xor(m, ctx.mask)
    fail, done = ctx.block("oob.fail"), ctx.block("oob.done")
    b.cbranch(any_lane(ctx, bad), fail, done).set_weights([1, 1 << 20])
    b.position_at_end(fail)
    b.call(oob_helper(ctx), [ctx.status_ptr(), ir.Constant(I32, ctx.task_index),
                             ir.Constant(I32, ctx.abi.binding_index(ref))])
    b.branch(done)
    b.position_at_end(done)
    return m, False


def _lanes_in_range(ctx: SpmdContext, ref, index_nodes):
    """(ok, extents): the lane mask of the lanes whose indices are all within their axes
    (unsigned compare: a negative index is out of range), and each axis' extent."""
    b, ok, exts = ctx.b, None, []
    for axis, s in enumerate(index_nodes):
        v = index64(b, ctx.env[s], s.dtype)
        ext = axis_extent(ctx, ref, axis)
        exts.append(ext)
        if isinstance(v.type, ir.VectorType):
            ext = ctx.broadcast(ext)
        o = b.icmp_unsigned("<", v, ext)
        if not isinstance(o.type, ir.VectorType):
            o = ctx.broadcast(o)
        ok = o if ok is None else b.and_(ok, o)
    return ok, exts


def checked_access(ctx: SpmdContext, n, index_nodes, emit):
    """`emit(mask, inbounds)` -> value or None, under the default bounds check. The common
    side runs `emit` with the group's own mask (an all-true constant in whole groups, so plain
    vector loads and stores stay); the other side checks lane by lane, reports a failing active
    lane (cold) and runs `emit` with the failing lanes masked off. A consecutive access takes
    the common side on one scalar test (lane 0's indices and the last lane's last index in
    range); a gather / scatter when no active lane fails. In a heavy lane task
    (`SpmdContext.one_path_checks`: `Task.lanes`, Genesis' narrow phase) a gather / scatter is
    emitted once instead, as `lane_ok` does (the active lanes less the failing ones: the same
    lanes touched, the same values): the two sides doubled the checked code of Genesis'
    narrow phase (1,308 checked accesses), which compiled in 57.5 s of CPU against 52.7 with
    one side, its launch no slower (docs/performance.md, glbuild). Other tasks keep both sides."""
    if not oob_checked(ctx, n, index_nodes):
        return emit(ctx.mask, True)
    if ctx.one_path_checks and not consecutive(ctx.affine, ctx.varying, index_nodes):
        return emit(*lane_ok(ctx, n, index_nodes))
    b, ref, w = ctx.b, n.arg, ctx.width
    ok, exts = _lanes_in_range(ctx, ref, index_nodes)
    fast, slow, done = ctx.block("oob.ok"), ctx.block("oob.check"), ctx.block("oob.done")
    if consecutive(ctx.affine, ctx.varying, index_nodes):
        first = [index64(b, _lane(ctx, ctx.env[s], 0), s.dtype) for s in index_nodes]
        quick = None
        for axis, (v, ext) in enumerate(zip(first, exts)):
            o = b.icmp_unsigned("<", v, ext)
            if axis == len(first) - 1:
                o = b.and_(o, b.icmp_unsigned("<", b.add(v, ir.Constant(I64, w - 1)), ext))
            quick = o if quick is None else b.and_(quick, o)
        b.cbranch(quick, fast, slow).set_weights([1 << 20, 1])
    else:
        bad = b.xor(b.and_(ctx.mask, ok), ctx.mask)
        b.cbranch(any_lane(ctx, bad), slow, fast).set_weights([1, 1 << 20])
    b.position_at_end(fast)
    v1 = emit(ctx.mask, True)
    end1 = b.block
    b.branch(done)
    b.position_at_end(slow)
    m = b.and_(ctx.mask, ok)
    report, go = ctx.block("oob.fail"), ctx.block("oob.masked")
    b.cbranch(any_lane(ctx, b.xor(m, ctx.mask)), report, go).set_weights([1, 1 << 20])
    b.position_at_end(report)
    b.call(oob_helper(ctx), [ctx.status_ptr(), ir.Constant(I32, ctx.task_index),
                             ir.Constant(I32, ctx.abi.binding_index(ref))])
    b.branch(go)
    b.position_at_end(go)
    v2 = emit(m, False)
    end2 = b.block
    b.branch(done)
    b.position_at_end(done)
    if v1 is None:
        return None
    phi = b.phi(v1.type)
    phi.add_incoming(v1, end1)
    phi.add_incoming(v2, end2)
    return phi


def _first_lane_ptr(ctx, ref, index_nodes, inbounds=True):
    """Lane 0's element of a consecutive access (lane k's is k elements further)."""
    vals = [_lane(ctx, ctx.env[s], 0) for s in index_nodes]
    return ctx.b.gep(ctx.buffer_ptr(ref),
                     [_lin_scalar(ctx, ref, vals, [s.dtype for s in index_nodes])],
                     inbounds=inbounds, source_etype=mem_type(ref.dtype))


def _spmd_global_store(ctx: SpmdContext, n):
    ref, w, b = n.arg, ctx.width, ctx.b
    mt = mem_type(ref.dtype)
    v = to_memory(b, convert(ctx, ctx.value(n.srcs[-1]), n.srcs[-1].dtype, ref.dtype), ref.dtype)
    idx = n.srcs[:-1]
    def emit(m, free):
        if consecutive(ctx.affine, ctx.varying, idx):
            masked(ctx, "store", mt, [v, _first_lane_ptr(ctx, ref, idx, free), m])
        else:  # a scatter: lanes writing one element write in lane order (the scalar path's), the last wins
            masked(ctx, "scatter", mt, [v, _lane_ptrs(ctx, ref, idx, free), m])
    checked_access(ctx, n, idx, emit)
    return None


def _lane_ptrs(ctx: SpmdContext, ref, index_nodes, inbounds=True):
    """`<W x ptr>`: each lane's element of `ref` at the index tuple (uniform indices
    broadcast), for gathers and scatters."""
    b, w = ctx.b, ctx.width
    narrow = _narrow_elements(ctx, ref, index_nodes)
    lin = None
    for axis, s in enumerate(index_nodes):
        v = ctx.env[s]
        if not isinstance(v.type, ir.VectorType):
            v = ctx.broadcast(v)
        if narrow:  # i32 lanes: the extents as i32 constants, no widening
            ext = ir.Constant(I32, int(ref.shape[axis]))
        else:
            v, ext = index64(b, v, s.dtype), axis_extent(ctx, ref, axis)
        lin = v if axis == 0 else b.add(b.mul(lin, ctx.broadcast(ext)), v)
    if lin is None:  # a 0-d global: every lane's element is the one element
        lin = ctx.broadcast(ir.Constant(I64, 0))
    p = b.gep(ctx.buffer_ptr(ref), [lin], inbounds=inbounds, source_etype=mem_type(ref.dtype))
    p.type = ir.VectorType(PTR, w)  # llvmlite types a vector GEP as one pointer
    return p


def _narrow_elements(ctx: SpmdContext, ref, index_nodes) -> bool:
    """Whether `_lane_ptrs` computes the element index in `<W x i32>` instead of `<W x i64>`
    (`SpmdContext.narrow_elements`: heavy lane tasks, `Task.lanes`): for a field (static shape)
    of fewer than 2**31 elements indexed by i32 values. A lane whose indices are in range has
    every partial index `(i0 * e1 + i1) * e2 + ...` at most the last element's, below 2**31, so
    nothing wraps and the GEP (which sign-extends its index) addresses the element the i64 code
    did. A lane out of range touches no memory: the bounds check masks it off (its pointer is a
    plain GEP, never poison: `add` / `mul` carry no overflow flags); unchecked, an access out of
    range is undefined either way (in i32 it may wrap to another element instead of leaving the
    buffer). Why: Genesis' narrow-phase lane task did this arithmetic in `<32 x i64>`, four
    registers a vector; in i32 its machine code takes ~0.6 s of CPU less (7.5 -> 6.9 s; the task
    ~14.75 -> 14.2 s), the same buffers after (docs/performance.md, glbuild2)."""
    if not ctx.narrow_elements or ref.shape is None or not index_nodes:
        return False
    n = 1
    for e in ref.shape:
        n *= int(e)
    return n < 2**31 and all(s.dtype.kind == "i" and s.dtype.bits == 32 for s in index_nodes)


def _spmd_atomic_add(ctx: SpmdContext, n):
    """Lane by lane in lane order (the scalar path's), each active lane an atomic
    read-modify-write of its element; the result holds each active lane's old value."""
    ref, w, b = n.arg, ctx.width, ctx.b
    dt = ref.dtype
    op = rmw_op(n.op, dt)
    v = convert(ctx, ctx.value(n.srcs[-1]), n.srcs[-1].dtype, dt)
    idx = n.srcs[:-1]
    mt = mem_type(dt)
    if n.op == Op.ATOMIC_ADD and n in ctx.own_atomics and not ref.mask:
        return _own_atomic_add(ctx, n, v, op)
    if n.op == Op.ATOMIC_ADD and not any(s in ctx.varying for s in idx) and n not in ctx.used \
            and not ref.mask:  # a bit-field: lane by lane, each a masked compare-and-swap
        return _one_target_atomic_add(ctx, n, v, op)
    m, free = lane_ok(ctx, n, idx)
    res = zeros(ir.VectorType(mt, w))
    for k in range(w):
        on, after = ctx.block("spmd.atom"), ctx.block("spmd.atom.next")
        pre = b.block
        b.cbranch(b.extract_element(m, ir.Constant(I32, k)), on, after)
        b.position_at_end(on)
        vals = [_lane(ctx, ctx.env[s], k) for s in idx]
        lin = _lin_scalar(ctx, ref, vals, [s.dtype for s in idx]) if idx else ir.Constant(I64, 0)
        p = b.gep(ctx.buffer_ptr(ref), [lin], inbounds=True, source_etype=mt)
        lane_v = to_memory(b, b.extract_element(v, ir.Constant(I32, k)), dt)
        old = atomic_update(ctx, op, p, lane_v, dt, ctx.lib.target.ordering(), ref.mask)
        got = b.insert_element(res, old, ir.Constant(I32, k))
        on_end = b.block
        b.branch(after)
        b.position_at_end(after)
        phi = b.phi(res.type)
        phi.add_incoming(got, on_end)
        phi.add_incoming(res, pre)
        res = phi
    return convert(ctx, from_memory(b, res, dt), dt, n.dtype)


def _one_target_atomic_add(ctx: SpmdContext, n, v, op):
    """Every lane adds to one element (`loss[None] += ...`) and nobody reads the old values:
    the active lanes are reduced in registers first, then one atomic. Integers: a sum (or an
    OR for bools) and one atomic add. Floats: a compare-and-swap loop whose new value is the
    ordered reduction `((old + v0) + v1) + ...` (llvm.vector.reduce.fadd without reassoc;
    inactive lanes add -0.0, which changes nothing), the same additions in the same order as
    the scalar path's per-lane atomics within one lane group."""
    ref, w, b = n.arg, ctx.width, ctx.b
    dt, mt = ref.dtype, mem_type(ref.dtype)
    vt = ir.VectorType(mt, w)
    idx = n.srcs[:-1]
    m, free = lane_ok(ctx, n, idx)
    lin = _lin_scalar(ctx, ref, [ctx.env[s] for s in idx], [s.dtype for s in idx]) \
        if idx else ir.Constant(I64, 0)
    p = b.gep(ctx.buffer_ptr(ref), [lin], inbounds=free, source_etype=mt)
    order = ctx.lib.target.ordering()
    on, done = ctx.block("spmd.atom1"), ctx.block("spmd.atom1.done")
    b.cbranch(any_lane(ctx, m), on, done)
    b.position_at_end(on)
    sfx, align = elem_info(mt)
    if dt.is_float:
        vm = b.select(m, v, splat(ir.Constant(mt, -0.0), w))
        it = ir.IntType(dt.bits)  # the float's own width: half's CAS is on 16 bits
        pi = b.bitcast(p, it.as_pointer())
        red = ctx.lib.declare(f"llvm.vector.reduce.fadd.v{w}{sfx}", mt, [mt, vt])
        start = b.load_atomic(pi, order, align, typ=it)
        head = ctx.block("spmd.atom1.cas")
        pre = b.block
        b.branch(head)
        b.position_at_end(head)
        cur = b.phi(it)
        cur.add_incoming(start, pre)
        new = b.bitcast(b.call(red, [b.bitcast(cur, mt), vm]), it)
        pair = b.cmpxchg(pi, cur, new, order, order)
        cur.add_incoming(b.extract_value(pair, 0), head)
        b.cbranch(b.extract_value(pair, 1), done, head)
    else:
        vm = b.select(m, to_memory(b, v, dt), zeros(vt))
        kind = "or" if dt.is_bool else "add"
        red = ctx.lib.declare(f"llvm.vector.reduce.{kind}.v{w}{sfx}", mt, [vt])
        b.atomic_rmw(op, p, b.call(red, [vm]), order)
        b.branch(done)
    b.position_at_end(done)
    return None


def _own_atomic_add(ctx: SpmdContext, n, v, op):
    """Masked vector load, add, masked store: no other iteration touches these elements (a
    gather and a scatter for a component of each lane's own vector element)."""
    ref, w, b = n.arg, ctx.width, ctx.b
    dt, mt = ref.dtype, mem_type(ref.dtype)
    add = {"fadd": b.fadd, "add": b.add, "or": b.or_}[op]
    idx = n.srcs[:-1]
    def emit(m, free):
        if not consecutive(ctx.affine, ctx.varying, idx):
            ptrs = _lane_ptrs(ctx, ref, idx, free)
            old = masked(ctx, "gather", mt, [ptrs, m])
            masked(ctx, "scatter", mt, [add(old, to_memory(b, v, dt)), ptrs, m])
            return old
        p = _first_lane_ptr(ctx, ref, idx, free)
        old = masked(ctx, "load", mt, [p, m])
        masked(ctx, "store", mt, [add(old, to_memory(b, v, dt)), p, m])
        return old
    old = checked_access(ctx, n, idx, emit)
    return convert(ctx, from_memory(b, old, dt), dt, n.dtype)


def _spmd_math(ctx: SpmdContext, n):
    """A math op on lanes: vecmath's vector body (vector intrinsics in libm mode)."""
    from . import vecmath
    dt = n.srcs[0].dtype
    name = _MATH_NAME[n.op]
    if dt.is_float and math_policy.mode(name, dt.name, ctx.options.vecmath) != "libm":
        args = [ctx.value(s) for s in n.srcs]
        if n.op in (Op.SIN, Op.COS) and n.srcs[0] in ctx.sincos_args:  # one shared body
            return vecmath.emit_sincos(ctx.b, name, args[0], ctx.reg_type(dt))
        return vecmath.emit(ctx.b, name, args, ctx.reg_type(dt))
    return ctx.table[n.op](ctx, n)  # the scalar rule at this width (integer POW: ipow_helper)


_SPMD_RULES = {Op.GLOBAL_LOAD: _spmd_global_load, Op.GLOBAL_STORE: _spmd_global_store,
               **{op: _spmd_atomic_add for op in ATOMICS}}
_SPMD_RULES.update({op: _spmd_math for op in _MATH_NAME})
_SPMD_RULES.update(SPMD_ADSTACK_RULES)
_SPMD_RULES.update(LOCAL_RULES)
_ALWAYS_RULES = {**CONTROL_RULES, **LANE_STACK_RULES}
