"""Offloading: split a kernel's top level into tasks.

Each top-level parallel RANGE_FOR becomes a 'range' task; the statements between them become
'serial' one-thread tasks. Values crossing task boundaries are handled here:

* a top-level local stored exactly once, at top level, with a value computed only from constants,
  scalar arguments and ndarray shapes (`n = x.shape[0]`, `s = 2.0`) is *forwarded*: every read is
  replaced by a copy of that expression, in whatever task reads it;
* any other top-level local read or written by more than one task becomes a kernel temporary
  (a one-element global, GlobalRef kind 'temp'), zeroed where the local was declared;
* a parallel loop may not assign to a local declared outside it (a data race): compile error;
* a parallel loop's bounds are expressions over constants, scalar arguments, ndarray shapes,
  field / ndarray elements and top-level locals (`range(n[None])`, `range(a[0], b[0])`,
  `m = n[None]` ... `range(m)`): a local that is not forwarded becomes a kernel temporary the
  bound reads. Bounds that read globals are evaluated when the task starts, after the earlier
  tasks (`backends/range_bounds`); the loop's body may not write what they read (compile
  error). Anything else in a bound is a compile error naming the loop.
"""
from __future__ import annotations

from kernel_ir.errors import SpiradSyntaxError
from kernel_ir.source import user_error
from kernel_ir.dtypes import i32
from kernel_ir.nodes import Block, GlobalRef, KernelIR, Node, Task, TaskList, walk
from kernel_ir.ops import ATOMICS, LEAVES, PURE, Op
from kernel_ir.rewrite import Splice, expr_nodes, keep, rebuild

_HOST_LEAVES = {Op.CONST, Op.ARG, Op.NDARRAY_SHAPE}


class _Forwarding:
    def __init__(self, body: Block):
        self.top_allocas = {n for n in body.nodes if n.op == Op.ALLOCA}
        stores: dict = {}
        top_stores = {}
        for n in walk(body):
            if n.op == Op.STORE:
                stores[n.srcs[0]] = stores.get(n.srcs[0], 0) + 1
        for n in body.nodes:
            if n.op == Op.STORE:
                top_stores[n.srcs[0]] = n.srcs[1]
        self.value = {}
        for slot in self.top_allocas:
            if stores.get(slot) == 1 and slot in top_stores:
                self.value[slot] = top_stores[slot]
        self.value = {s: v for s, v in self.value.items() if self.closed(v)}

    def bound_ok(self, n: Node, depth=0) -> bool:
        """Can a parallel loop's bound be `n`? (`closed`, or reads of globals and of top-level
        locals, through pure ops.)"""
        if depth > 200:
            return False
        if self.closed(n):
            return True
        if n.op == Op.LOAD:
            return n.srcs[0] in self.top_allocas
        if n.op == Op.GLOBAL_LOAD or (n.op in PURE and n.op not in LEAVES):
            return all(self.bound_ok(s, depth + 1) for s in n.srcs)
        return False

    def bound_slots(self, n: Node, out: set) -> set:
        """The non-forwarded top-level slots a bound reads."""
        if n.op == Op.LOAD and n.srcs[0] not in self.value:
            out.add(n.srcs[0])
        elif n.op != Op.LOAD:
            for s in n.srcs:
                self.bound_slots(s, out)
        return out

    def clone_bound(self, n: Node, temps, memo) -> Node:
        """A fresh copy of a bound for the task: forwarded locals inlined, the others read from
        their kernel temporaries."""
        if n in memo:
            return memo[n]
        if self.closed(n):
            c = self.clone(n, {})
        elif n.op == Op.LOAD:
            zero = Node(Op.CONST, i32, (), 0, (), n.loc)
            c = Node(Op.GLOBAL_LOAD, n.dtype, (zero,), temps[n.srcs[0]], (), n.loc)
        else:
            c = Node(n.op, n.dtype, tuple(self.clone_bound(s, temps, memo) for s in n.srcs),
                     n.arg, (), n.loc)
        memo[n] = c
        return c

    def closed(self, n: Node, depth=0) -> bool:
        if depth > 200:
            return False
        if n.op in _HOST_LEAVES:
            return True
        if n.op == Op.LOAD:
            v = self.value.get(n.srcs[0])
            return v is not None and self.closed(v, depth + 1)
        if n.op in PURE and n.op not in LEAVES:
            return all(self.closed(s, depth + 1) for s in n.srcs)
        return False

    def clone(self, n: Node, memo) -> Node:
        if n in memo:
            return memo[n]
        if n.op == Op.LOAD:
            c = self.clone(self.value[n.srcs[0]], memo)
        else:
            c = Node(n.op, n.dtype, tuple(self.clone(s, memo) for s in n.srcs), n.arg, (), n.loc)
        memo[n] = c
        return c


def forwarding(body: Block) -> _Forwarding:
    """The forwardable top-level locals of `body` (`_Forwarding`): its `closed(n)` says whether
    an expression is the same wherever a task evaluates it (passes/independent_loops)."""
    return _Forwarding(body)


def offload(k: KernelIR) -> TaskList:
    fw = _Forwarding(k.body)
    segments: list = []
    for n in k.body.nodes:
        if n.op == Op.RANGE_FOR and n.arg.parallel:
            segments.append(("range", [n]))
        elif segments and segments[-1][0] == "serial":
            segments[-1][1].append(n)
        else:
            segments.append(("serial", [n]))
    seg_of = {}
    for si, (_, nodes) in enumerate(segments):
        for n in nodes:
            seg_of[n] = si

    # which top-level slots are touched by which segments (a parallel loop's bounds included)
    touched: dict = {}
    shared: dict = {}  # STORE in a parallel loop to a top-level slot -> its rewrite (_shared_updates)
    for si, (kind, nodes) in enumerate(segments):
        if kind == "range":
            for bnd in nodes[0].srcs:
                if not fw.bound_ok(bnd):
                    raise user_error(SpiradSyntaxError, "the range of the outermost (parallel) loop "
                                     "must be computed from constants, scalar arguments, ndarray "
                                     "shapes, field / ndarray elements and local variables; compute "
                                     "this bound into a local first, or make this loop serial by "
                                     "nesting it in `for _ in range(1):`", nodes[0].loc)
                for slot in fw.bound_slots(bnd, set()):
                    touched.setdefault(slot, set()).add(si)
            for n in walk(nodes[0].blocks[0]):  # bound arithmetic the body reuses (ndrange)
                for x in n.srcs:
                    if x.op != Op.ALLOCA and seg_of.get(x, si) != si and fw.bound_ok(x):
                        for slot in fw.bound_slots(x, set()):
                            touched.setdefault(slot, set()).add(si)
        for n in walk(Block(tuple(nodes))):
            if n.op in (Op.LOAD, Op.STORE) and n.srcs[0] in fw.top_allocas:
                touched.setdefault(n.srcs[0], set()).add(si)
        if kind == "range":
            shared.update(_shared_updates(nodes[0], fw.top_allocas))
    temps = {}
    for slot, segs in touched.items():
        if slot in fw.value:
            continue
        if len(segs | {seg_of[slot]}) > 1:
            temps[slot] = GlobalRef("temp", len(temps), slot.dtype, 1, (1,), slot.arg or f"t{len(temps)}")

    tasks = []
    for si, (kind, nodes) in enumerate(segments):
        memo: dict = {}
        prologue: list = []

        def visit(n, srcs, blocks, arg, env, si=si, memo=memo, prologue=prologue):
            if n.op == Op.LOAD and n.srcs[0] in fw.value:
                c = fw.clone(n, {})  # fresh copy per read: it must dominate only this use
                return Splice(expr_nodes(c), c)
            slot = n.srcs[0] if n.op in (Op.LOAD, Op.STORE) else (n if n.op == Op.ALLOCA else None)
            if slot is not None and slot in temps:
                ref = temps[slot]
                zero = Node(Op.CONST, i32, (), 0, (), n.loc)
                how = shared.get(n)
                if how is not None and how[0] not in ("store", "masked"):  # `s += v`: an atomic
                    atomic_op, operand, old_load = how
                    neg = isinstance(operand, tuple)
                    operand = operand[1] if neg else operand
                    val = srcs[1].srcs[n.srcs[1].srcs.index(operand)]  # rebuilt `v`
                    pre = [zero]
                    if neg:  # `s -= v`: add -v
                        val = Node(Op.NEG, val.dtype, (val,), None, (), n.loc)
                        pre.append(val)
                    atomic = Node(atomic_op, slot.dtype, (zero, val), ref, (), n.loc)
                    if old_load is not None:  # `m = sd.atomic_add(s, 1)`: m is the atomic's result
                        env[old_load] = atomic
                    return Splice(pre + [atomic])
                if how is not None and how[0] == "masked":  # `v[i] = c`: only where i names it
                    sel = srcs[1]
                    if sel.op != Op.SELECT:
                        raise RuntimeError(f"offload: masked store of {slot!r} lost its select")
                    z0 = Node(Op.CONST, i32, (), 0, (), n.loc)
                    then = Block((z0, Node(Op.GLOBAL_STORE, None, (z0, sel.srcs[1]), ref, (),
                                           n.loc)))
                    return Splice([Node(Op.IF, None, (sel.srcs[0],), None, (then, Block(())),
                                        n.loc)])
                if n.op == Op.ALLOCA:
                    z = Node(Op.CONST, slot.dtype, (), 0, (), n.loc)
                    return Splice([zero, z, Node(Op.GLOBAL_STORE, None, (zero, z), ref, (), n.loc)])
                if n.op == Op.LOAD:
                    ld = Node(Op.GLOBAL_LOAD, slot.dtype, (zero,), ref, (), n.loc)
                    return Splice([zero, ld], ld)
                return Splice([zero, Node(Op.GLOBAL_STORE, None, (zero, srcs[1]), ref, (), n.loc)])
            return keep(n, srcs, blocks, arg, env)

        memo_seen: set = set()
        env = {}
        bound_memo: dict = {}
        # foreign SSA references (loop-bound arithmetic emitted before a parallel loop)
        for n in walk(Block(tuple(nodes))):
            for s in n.srcs:
                if s.op == Op.ALLOCA:
                    continue  # slots: forwarded or turned into temps by `visit`
                if s in seg_of and seg_of[s] != si and s not in env:
                    if fw.closed(s):
                        c = fw.clone(s, memo)
                    elif kind == "range" and fw.bound_ok(s):  # re-read (the loop may not write it)
                        c = fw.clone_bound(s, temps, bound_memo)
                    else:
                        raise RuntimeError(f"offload: task {si} uses a non-forwardable value {s!r} of another task")
                    for x in expr_nodes(c):
                        if x not in memo_seen:
                            memo_seen.add(x)
                            prologue.append(x)
                    env[s] = c
        if kind == "range":
            loop = nodes[0]
            bounds = [fw.clone_bound(bnd, temps, {}) for bnd in loop.srcs]
            _check_bound_writes(loop, bounds + prologue)
            body = rebuild(loop.blocks[0], visit, env)
            body = Block(tuple(prologue) + body.nodes)
            tasks.append(Task("range", body, loop.arg.index, bounds[0], bounds[1], f"{k.name}_t{si}",
                              loop.loc, serialised=loop.arg.serialised,
                              lanes=loop.arg.lanes))
        else:
            body = rebuild(Block(tuple(nodes)), visit, env)
            body = Block(tuple(prologue) + body.nodes)
            tasks.append(Task("serial", body, None, None, None, f"{k.name}_t{si}", nodes[0].loc))
    return TaskList(k.name, k.args, tuple(tasks), tuple(temps.values()))


def _check_bound_writes(loop: Node, bounds) -> None:
    """A bound read from a global is evaluated once, when the task starts: the loop may not
    write that global (its iterations would see different bounds on different backends)."""
    read = {x.arg.buffer: x.arg for b in bounds for x in expr_nodes(b) if x.op == Op.GLOBAL_LOAD}
    if not read:
        return
    for n in walk(loop.blocks[0]):
        if (n.op == Op.GLOBAL_STORE or n.op in ATOMICS) and n.arg.buffer in read:
            raise user_error(SpiradSyntaxError, f"this parallel loop writes '{n.arg.name}', which "
                             f"its range reads; the range is read once when the loop starts. "
                             f"Copy the bound into a local before the loop, or write it in "
                             f"another kernel", n.loc)


_COMBINE_ATOMIC = {Op.ADD: Op.ATOMIC_ADD, Op.MIN: Op.ATOMIC_MIN, Op.MAX: Op.ATOMIC_MAX,
                   Op.AND: Op.ATOMIC_AND, Op.OR: Op.ATOMIC_OR, Op.XOR: Op.ATOMIC_XOR,
                   Op.MUL: Op.ATOMIC_MUL}  # `s *= v` / atomic_mul(s, v): Taichi's atomic_mul


def _shared_updates(loop: Node, top_allocas) -> dict:
    """The parallel loop's stores to top-level locals, each as Quadrants runs it without a race:
    {STORE: (atomic op, operand, old-value load)} for `s = s <op> v` (`+=`, `|=`, `min` ...: an
    atomic on the kernel temporary; the load is not None where the old value is used after the
    update too, as `m = sd.atomic_add(s, 1)` uses it: those uses read the atomic's result),
    {STORE: ("store", None)} for a value every iteration computes alike (constants, scalar
    arguments), {STORE: ("masked", None)} for `v[i] = c` (`_masked_old`). The loop may read such
    a local only inside those updates (a masked one anywhere). Anything else races: a compile
    error naming the store. A loop of one iteration (`for _ in range(1):`, constant bounds) has
    nothing to race with: its stores stay plain."""
    if len(loop.srcs) == 2 and all(b.op == Op.CONST for b in loop.srcs) \
            and loop.srcs[1].arg - loop.srcs[0].arg <= 1:
        return {}
    out, update_loads, masked = {}, set(), set()
    stores, loads = [], []
    for n in walk(loop.blocks[0]):
        if n.op == Op.STORE and n.srcs[0] in top_allocas:
            stores.append(n)
        elif n.op == Op.LOAD and n.srcs[0] in top_allocas:
            loads.append(n)
    uses: dict = {}
    for n in walk(loop.blocks[0]):
        for x in n.srcs:
            uses[x] = uses.get(x, 0) + 1
    for st in stores:
        slot, v = st.srcs
        name = slot.arg or "a local"
        how = None
        if v.op in _COMBINE_ATOMIC or v.op == Op.SUB:
            mine = [x for x in v.srcs if x.op == Op.LOAD and x.srcs[0] is slot and
                    (uses.get(x) == 1 or _old_value_after(loop, x, st, v))]
            if mine and (v.op != Op.SUB or v.srcs[0] is mine[0]):
                other = v.srcs[1] if v.srcs[0] is mine[0] else v.srcs[0]
                if not _reads(other, slot):
                    old = mine[0] if uses.get(mine[0]) != 1 else None
                    how = (Op.ATOMIC_ADD, ("neg", other), old) if v.op == Op.SUB else \
                        (_COMBINE_ATOMIC[v.op], other, old)
                    update_loads.add(mine[0])
        if how is None and _uniform(v):
            how = ("store", None)
        if how is None and v.op == Op.SELECT and _index_hit(v.srcs[0]) and \
                _masked_old(v.srcs[2], slot):
            how = ("masked", None)  # a component picked by a run-time index: `tmp[i] = c`
            masked.add(slot)
        if how is None:
            raise user_error(SpiradSyntaxError, f"the parallel loop assigns to '{name}', which is "
                             f"declared outside it: iterations would race. Update it with `+=`, "
                             f"`|=`, `&=`, `^=`, `{name} = max({name}, v)` / min (atomic), assign "
                             f"it a value the same in every iteration, declare it inside the "
                             f"loop, or accumulate into a field", st.loc)
        out[st] = how
    for ld in loads:
        if ld.srcs[0] in masked:  # read from the kernel temporary, as Taichi reads its own
            continue
        if ld not in update_loads and ld.srcs[0] in {st.srcs[0] for st in out}:
            name = ld.srcs[0].arg or "a local"
            raise user_error(SpiradSyntaxError, f"the parallel loop reads '{name}', which it also "
                             f"updates and which is declared outside it: iterations would race. "
                             f"Read it after the loop", ld.loc)
    return out


def _index_hit(c: Node) -> bool:
    """`k == p` with p a constant: how the frontend tests which component a run-time index names
    (a plain `s = select(c, v, s)` of the user's stays a race)."""
    return c.op == Op.CMP_EQ and c.srcs[1].op == Op.CONST


def _masked_old(n: Node, slot, depth=0) -> bool:
    """Whether `n` is the slot's own value in a store `slot = select(hit, c, n)`: its load, or the
    value of an earlier such store (forwarded). The frontend writes a component picked by a
    run-time index that way (frontend/local_index.py); in the parallel loop the store becomes
    `if hit: temporary = c`, so iterations that write different components do not race (as in
    Taichi, where the local is a global temporary; the same component from two iterations is
    the program's race)."""
    if depth > 64:
        return False
    if n.op == Op.LOAD:
        return n.srcs[0] is slot
    return n.op == Op.SELECT and _masked_old(n.srcs[2], slot, depth + 1)


def _old_value_after(loop: Node, load: Node, st: Node, v: Node) -> bool:
    """Whether `load` (the old value of an update `st` = STORE(slot, v)) is, apart from `v`,
    used only after the update: load and store in one block, nothing between them but `v` (and
    its operand) reading the load. The atomic that replaces the store then gives those later
    uses the old value (every later use is dominated by the store's position)."""
    def blocks(b):
        yield b
        for n in b.nodes:
            for sub in n.blocks:
                yield from blocks(sub)
    for b in blocks(loop.blocks[0]):
        ids = [id(n) for n in b.nodes]
        if id(load) in ids and id(st) in ids:
            i, j = ids.index(id(load)), ids.index(id(st))
            between = [n for n in b.nodes[i + 1:j] if n is not v]
            return i < j and not any(load in x.srcs for n in between
                                     for x in walk(Block((n,))))
    return False


def _reads(n: Node, slot) -> bool:
    """Whether expression `n` loads `slot`: an iterative walk over the expression DAG, each
    node once (a vector argument indexed at run time is a select chain as long as the vector,
    1,024 deep in Taichi's `test_arg_4k`)."""
    seen, todo = set(), [n]
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.op == Op.LOAD:
            if x.srcs[0] is slot:
                return True
            continue
        todo.extend(x.srcs)
    return False


def _uniform(n: Node, depth=0) -> bool:
    """The same value in every iteration: constants, scalar arguments, ndarray shapes."""
    if depth > 200:
        return False
    if n.op in _HOST_LEAVES:
        return True
    return n.op in PURE and n.op not in LEAVES and all(_uniform(s, depth + 1) for s in n.srcs)
