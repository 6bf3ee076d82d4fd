"""Forward-mode autodiff (IR -> IR): every float value carries a tangent next to its primal.

    forward_mode(task_list, dual_of) -> task_list computing primals *and* tangents

Taichi's `ti.ad.FwdMode`: a kernel launched inside `sd.ad.FwdMode(...)` runs this program, which
does everything the forward kernel does and also propagates the duals (Jacobian-vector products)
of the fields / ndarrays that have one. Forward mode needs no adstack and no reverse walk: a value
and its tangent are computed together, so loops of any shape (run-time trip counts, `while`,
`break` / `continue`, `if`) keep their structure unchanged and the tangent of a loop-carried
local is carried by the loop like the local itself.

Per node (the tangent of a node is None where it is zero: integers, constants, values no dual
reaches, so most of a kernel gets no extra code):

* pure float op:      its `JVP_RULES` entry over the sources' tangents
* ALLOCA (float):     a tangent slot next to it (zeroed where it executes, like the slot);
  LOAD / STORE:       read / write the tangent slot too (a store of a value without a tangent
                      stores 0); a loop that carries a slot also carries its tangent slot
* x[I] (read):        x.dual[I] if x has a dual (`dual_of`), else no tangent
* x[I] = v:           also x.dual[I] = tangent of v (0 if none): a store overwrites the dual too
* x[I] += v:          also x.dual[I] += tangent of v (atomically, like the primal)
* kernel temporaries: a float temporary gets a dual temporary (values handed between tasks)

Control flow, indices, conditions and loop bounds use primal values only (their derivative is 0
almost everywhere), as in Taichi.
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.builder import IRBuilder
from kernel_ir.errors import SpiradAutodiffError
from kernel_ir.nodes import GlobalRef, Node, Task, TaskList
from kernel_ir.ops import ATOMICS, LEAVES, PURE, Op
from kernel_ir.rewrite import Splice, keep, rebuild
from kernel_ir.source import user_error

from kernel_ir.builder import Emit

from .derivatives import JVP_RULES

_PLAIN = {Op.IF, Op.BREAK, Op.CONTINUE}


class _Tangents:
    """Rebuilds one task body with tangents (`run`); `dual_of(ref)` -> dual GlobalRef or None."""

    def __init__(self, dual_of):
        self.dual_of = dual_of
        self.tan = {}    # old node -> its tangent (a new node); absent: zero
        self.slot = {}   # old float ALLOCA -> its tangent ALLOCA

    def run(self, body):
        return rebuild(body, self.visit)

    def zero(self, dtype, loc, out):
        z = Node(Op.CONST, dtype, (), 0.0, (), loc)
        out.append(z)
        return z

    def visit(self, n, srcs, blocks, arg, env):
        op = n.op
        if op in (Op.RANGE_FOR, Op.WHILE):
            extra = tuple(self.slot[c] for c in n.arg.carried if c in self.slot)
            if extra:
                arg = replace(arg, carried=arg.carried + extra)
            return keep(n, srcs, blocks, arg, env)
        new = keep(n, srcs, blocks, arg, env)
        if op in _PLAIN or op in LEAVES:
            return new
        out = [new]
        handler = _HANDLERS.get(op)
        if handler is not None:
            handler(self, n, new, srcs, out)
        elif op in PURE:
            self.pure(n, new, srcs, out)
        else:
            raise RuntimeError(f"forward_mode: unexpected {op.name} (adstack ops never reach it)")
        return Splice(out, new) if len(out) > 1 else new

    # -- values ----------------------------------------------------------------------------------
    def pure(self, n, new, srcs, out):
        if n.dtype is None or not n.dtype.is_float:
            return
        ts = [self.tan.get(s) for s in n.srcs]
        if all(t is None for t in ts):
            return
        rule = JVP_RULES.get(n.op)
        if rule is None:
            raise user_error(SpiradAutodiffError, f"operation {n.op.name.lower()} is not "
                             f"differentiable in forward mode (no derivative rule)", n.loc)
        b = IRBuilder()
        b.loc = n.loc
        t = rule(Emit(b), srcs, ts, new)
        out.extend(b.finish().nodes)
        if t is not None:
            self.tan[n] = t

    # -- locals ----------------------------------------------------------------------------------
    def alloca(self, n, new, srcs, out):
        if n.dtype.is_float:
            ts = Node(Op.ALLOCA, n.dtype, (), (n.arg or "v") + ".dual", (), n.loc)
            self.slot[n] = ts
            out.append(ts)

    def load(self, n, new, srcs, out):
        ts = self.slot.get(n.srcs[0])
        if ts is not None:
            t = Node(Op.LOAD, n.dtype, (ts,), None, (), n.loc)
            self.tan[n] = t
            out.append(t)

    def store(self, n, new, srcs, out):
        ts = self.slot.get(n.srcs[0])
        if ts is not None:
            t = self.tan.get(n.srcs[1]) or self.zero(ts.dtype, n.loc, out)
            out.append(Node(Op.STORE, None, (ts, t), None, (), n.loc))

    # -- globals ---------------------------------------------------------------------------------
    def global_load(self, n, new, srcs, out):
        d = self.dual_of(n.arg) if n.dtype.is_float else None
        if d is not None:
            t = Node(Op.GLOBAL_LOAD, d.dtype, srcs, d, (), n.loc)
            self.tan[n] = t
            out.append(t)

    def global_store(self, n, new, srcs, out):
        d = self.dual_of(n.arg) if n.srcs[-1].dtype.is_float else None
        if d is not None:
            t = self.tan.get(n.srcs[-1]) or self.zero(d.dtype, n.loc, out)
            out.append(Node(Op.GLOBAL_STORE, None, srcs[:-1] + (t,), d, (), n.loc))

    def atomic_add(self, n, new, srcs, out):
        d = self.dual_of(n.arg) if n.dtype.is_float else None
        if d is None:
            return
        tv = self.tan.get(n.srcs[-1])
        if tv is not None:  # the old value's tangent is the old dual, returned by its atomic
            t = Node(Op.ATOMIC_ADD, d.dtype, srcs[:-1] + (tv,), d, (), n.loc)
        else:
            t = Node(Op.GLOBAL_LOAD, d.dtype, srcs[:-1], d, (), n.loc)
        self.tan[n] = t
        out.append(t)


    def other_atomic(self, n, new, srcs, out):
        if n.dtype.is_float and self.dual_of(n.arg) is not None:
            raise user_error(SpiradAutodiffError, f"forward mode through {n.op.name.lower()} on a "
                             f"field with a dual is not supported (only atomic_add / +=)", n.loc)


_HANDLERS = {Op.ALLOCA: _Tangents.alloca, Op.LOAD: _Tangents.load, Op.STORE: _Tangents.store,
             Op.GLOBAL_LOAD: _Tangents.global_load, Op.GLOBAL_STORE: _Tangents.global_store,
             **{op: _Tangents.other_atomic for op in ATOMICS}, Op.ATOMIC_ADD: _Tangents.atomic_add}


def forward_mode(tl: TaskList, dual_of) -> TaskList:
    """The forward-mode program of a forward task list. `dual_of(ref)`: the GlobalRef of a
    field's / ndarray's dual, or None (it has none: its reads have zero tangents and stores to
    it drop theirs). Float kernel temporaries get dual temporaries here."""
    temp_duals = {}
    for r in tl.temps:
        if r.dtype.is_float:
            k = len(tl.temps) + len(temp_duals)
            temp_duals[r.key] = GlobalRef("temp", k, r.dtype, 1, (1,), r.name + ".dual")

    def dual(ref):
        if ref.kind == "temp":
            return temp_duals.get(ref.key) if not ref.grad else None
        return dual_of(ref)

    tasks = tuple(Task(t.kind, _Tangents(dual).run(t.body), t.index, t.begin, t.end,
                       t.name + "_fwd", t.loc) for t in tl.tasks)
    return TaskList(tl.name + "_fwd", tl.args, tasks, tl.temps + tuple(temp_duals.values()))
