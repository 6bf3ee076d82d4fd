"""Scattered atomic adds split over every CPU worker without atomics: per-worker copies.

DiffTaichi's adjoints add into neighbours (`p.grad[a, y - 1, x] += ...` in `smoke_taichi`), and
P2G adds into the grid cells around a particle (`grid[f, base + offset] += w`): targets two
iterations share, so a split launch needs atomics (a locked compare-and-swap loop per float add),
and the one-thread variant (`passes/demote_atomics.one_thread_variant`: plain read-modify-writes)
runs on one core only (`work_estimate`). Privatisation splits such a task over every
worker without atomics: its *privatised variant* (`privatised_variant`) adds into a second
binding of each scattered-into buffer (`copy_ref`: the buffer's *copy slot*, past the kernel's
own buffers and the extra LLVM ones: `CopyABI`) with plain read-modify-writes, and reads and
writes the buffer itself as before. Worker 0's copy slot points at the real buffer, worker
w > 0's at its own zeroed copy of the part of the buffer the adds touch (the *slab*); after the
launch the copies are added into the real slab and zeroed again (`PrivateCopies`). The result is
the same sum of the same terms; the float summation order differs, as it does between atomics.
A launch that is not split points every copy slot at the real buffer: the variant is then the
one-thread variant (it replaces it, so nothing more is compiled).

The slab of a buffer is fixed by its leading axes that every add of the buffer indexes with one
uniform expression (a constant, a scalar argument, an ndarray extent, integer arithmetic of
them: `p.grad[a, ...]` with `a = k + t * 10`, `grid_v_in[f, ...]`); the copy holds the rest
(`smoke_taichi`: 128 x 128 f32 = 64 KiB; `diffmpm_simple`'s grid: 120 x 120 x 2 f32). The
expressions are evaluated on the host at each launch (memoised per argument buffer). Valid
(`scatter_slabs`) when:

* every atomic of the task is on an iteration-private buffer (`kernel_ir.ownership`: its
  demotion holds however the range is split) or is such an add: ATOMIC_ADD of the buffer's own
  type (not bool), its returned old value unused;
* every other access (load, store) of such a buffer names another slab: one of the leading axes
  holds a uniform expression whose value, checked at each launch, differs from the slab's
  (`smoke_taichi`'s `compute_p` adjoint reads and clears `p.grad[a + 1, y, x]` next to its
  adds into `p.grad[a, ...]`); a launch where it does not runs the usual way;
* the task has a one-thread variant (no bounds checks: `backends/cpu`). Adstacks are fine: each
  worker pushes into its own heap rows whichever code runs (`smoke_taichi`'s adjoints keep the
  neighbour indices of their inner loops on adstacks).

A worker's copy slot points `offset` bytes before its copy (the slab's first element lands at
the copy's start); only the adds use that slot, and they stay in the slab while their indices
are in range (an index outside its axis is undefined, as everywhere; `debug=True` checks them
and compiles no variants). A launch that passes one ndarray for a scattered-into argument and
another argument runs the usual way (`backends/cpu`: the other uses would not see the adds).

When (`worth`), with `own` / `alone` the estimated work of one iteration in the task's own code /
its one-thread variant (`work_estimate.costs`), n iterations, W workers and E elements in all
slabs: privatise when the launch would otherwise take `alone * n` (one core) or `own * n / W`
(its own code split, where it would be split) and privatising, `alone * n / W` plus the copies'
merge and zeroing (`MERGE_WORK * E * (W - 1)`), saves at least `SPLIT_WORK` (a split's pool
dispatch); and never when one worker's copies would pass `COPY_BYTES` (4 MiB: the copies stay
in cache and their merge stays small next to the work).
"""
from __future__ import annotations

import threading

import numpy as np

from dataclasses import replace

from kernel_ir.abi import LLVM_EXTRA_BUFFERS
from kernel_ir.interpreter import Memory, eval_expr
from kernel_ir.nodes import Node, walk
from kernel_ir.ops import ATOMICS, GLOBAL_ACCESS, Op
from kernel_ir.ownership import private_buffers, uniform_key
from kernel_ir.rewrite import keep, rebuild

from passes.demote_atomics import one_thread_variant, plain_atomic
from .work_estimate import SPLIT_WORK

COPY_BYTES = 4 << 20     # at most this many bytes of copies per worker
MERGE_WORK = 16          # work units (work_estimate) to add one copied element back and zero it
MERGE_SPLIT_BYTES = 1 << 20  # merge bytes from which the merge itself is split over the workers
_ALIGN = 64
_MEMO = 4096             # argument buffers remembered per task


def scatter_slabs(task) -> dict | None:
    """{buffer: (prefix, others)} for the shared buffers range task `task` adds into, where
    `prefix` are the index nodes of the slab's leading axes and `others` the index tuples of the
    buffer's other accesses, each axis below len(prefix) a uniform node or None; None when the
    task cannot be privatised (see the module: an atomic of another form, another access that
    cannot name another slab, no shared adds at all)."""
    if task.kind != "range":
        return None
    private = private_buffers(task)
    used = {id(s) for n in walk(task.body) for s in n.srcs}
    adds, others = {}, {}
    for n in walk(task.body):
        if n.op not in GLOBAL_ACCESS or n.arg.buffer in private:
            continue
        idx = n.srcs if n.op == Op.GLOBAL_LOAD else n.srcs[:-1]
        if n.op in ATOMICS:
            if n.op != Op.ATOMIC_ADD or not plain_atomic(n) or id(n) in used:
                return None
            adds.setdefault(n.arg.buffer, []).append(idx)
        else:
            others.setdefault(n.arg.buffer, []).append(idx)
    if not adds:
        return None
    memo: dict = {}
    out = {}
    for buf, tuples in adds.items():
        prefix = []
        for axis in range(len(tuples[0])):
            k = uniform_key(tuples[0][axis], task.index, memo)
            if k is None or any(uniform_key(t[axis], task.index, memo) != k for t in tuples[1:]):
                break
            prefix.append(tuples[0][axis])
        rest = []
        for t in others.get(buf, ()):
            axes = tuple(t[a] if uniform_key(t[a], task.index, memo) is not None else None
                         for a in range(len(prefix)))
            if all(a is None for a in axes):
                return None  # never provably another slab
            rest.append(axes)
        out[buf] = (tuple(prefix), tuple(rest))
    return out


def copy_ref(ref):
    """The GlobalRef of `ref`'s copy slot: the same element layout (kind, key, shape), another
    buffer (`.buffer` names no buffer of any kernel; `CopyABI` binds it)."""
    return replace(ref, grad=("copy", ref.buffer[2]), dual=False, name=ref.name + "(copy)")


def is_copy(ref) -> bool:
    return isinstance(ref.grad, tuple)


def privatised_variant(task, slabs: dict):
    """The one-thread variant (`passes/demote_atomics`) of `task` with its adds into the buffers
    of `slabs` (`scatter_slabs`) going to their copy slots."""
    def visit(n, srcs, blocks, arg, env):
        if n.op == Op.ATOMIC_ADD and arg.buffer in slabs:
            return Node(n.op, n.dtype, srcs, copy_ref(arg), blocks, n.loc)
        return keep(n, srcs, blocks, arg, env)

    return one_thread_variant(replace(task, body=rebuild(task.body, visit)))


class CopyABI:
    """`abi` for compiling privatised variants: the copy slot of `bindings[copies[j]]` is buffer
    `len(bindings) + len(LLVM_EXTRA_BUFFERS) + j` of the task functions."""

    def __init__(self, abi, copies: tuple):
        self._abi = abi
        self._slots = {abi.bindings[k].buffer: j for j, k in enumerate(copies)}

    def binding_index(self, ref) -> int:
        if is_copy(ref):
            return copy_slot(self._abi, self._slots[ref.buffer[:2] + (ref.grad[1],)])
        return self._abi.binding_index(ref)

    def __getattr__(self, name):
        return getattr(self._abi, name)


def copy_slot(abi, j: int) -> int:
    """The buffer index of copy slot `j` in the task functions' buffer table."""
    return len(abi.bindings) + len(LLVM_EXTRA_BUFFERS) + j


def worth(n: int, own: float, alone: float, split_own: bool, elements: int,
          workers: int) -> bool:
    """Is a privatised launch of `n` iterations cheaper (module: When)?"""
    now = own * n / workers if split_own else alone * n
    return now - (alone * n / workers + MERGE_WORK * elements * (workers - 1)) >= SPLIT_WORK


class TaskScatter:
    """One task's privatisation: its slabs per launch (`slabs`) and its cost estimates
    (`own`, `alone`: work_estimate.costs)."""

    def __init__(self, tl, abi, slabs: dict, copies: tuple, own: float, alone: float):
        self.tl, self.abi, self.own, self.alone = tl, abi, own, alone
        targets = []
        for buf, (prefix, rest) in slabs.items():
            k = next(i for i, r in enumerate(abi.bindings) if r.buffer == buf)
            targets.append((k, copy_slot(abi, copies.index(k)), abi.bindings[k], prefix, rest))
        self.targets = tuple(targets)
        self.memo: dict = {}

    def slabs(self, argbuf):
        """((binding, copy slot, byte offset, element count, numpy dtype), ...) of this
        launch, or None where the slabs cannot be privatised: an index outside its axis,
        another access in a slab, a host error evaluating the indices. Memoised on the argument
        bytes (they alone decide: the indices read no memory)."""
        key = bytes(argbuf)
        hit = self.memo.get(key, False)
        if hit is not False:
            return hit
        if len(self.memo) >= _MEMO:
            self.memo.clear()
        self.memo[key] = out = self._evaluate(key)
        return out

    def _evaluate(self, argbuf: bytes):
        # scalars and ndarray extents; no buffer is read (placeholders of the ndarrays' shapes)
        mem = Memory.from_args(self.abi, self.tl.args, argbuf, None, refs=())
        out = []
        try:
            for k, slot, ref, prefix, rest in self.targets:
                shape = ref.shape if ref.kind == "field" else \
                    _ndarray_shape(mem, ref) if ref.kind == "ndarray" else (1,)
                at = [int(eval_expr(x, mem)) for x in prefix]
                if any(not 0 <= v < s for v, s in zip(at, shape)):
                    return None
                for axes in rest:
                    if all(x is None or int(eval_expr(x, mem)) == v for x, v in zip(axes, at)):
                        return None
                inner = int(np.prod(shape[len(prefix):], dtype=np.int64))
                flat = int(np.ravel_multi_index(at, shape[:len(prefix)])) if prefix else 0
                dt = np.dtype(ref.dtype.np)
                out.append((k, slot, flat * inner * dt.itemsize, inner, dt))
        except (ArithmeticError, ValueError, OverflowError):  # e.g. `// 0` on the host
            return None
        return tuple(out)


class PrivateCopies:
    """The workers' copies (worker w > 0 owns row w - 1; all zero between launches) and one
    privatised launch (`run`)."""

    def __init__(self, rt):
        self.rt = rt
        self.rows: list = []
        self.lock = threading.Lock()  # one privatised launch at a time uses the copies
        self.launches = 0  # privatised launches so far (tests read it)

    def fits(self, slabs) -> int:
        """The bytes of one worker's copies of `slabs`, or 0 when past COPY_BYTES."""
        total = sum(_aligned(c * dt.itemsize) for *_, c, dt in slabs)
        return total if total <= COPY_BYTES else 0

    def run(self, fn, bufs, args, begin: int, end: int, slabs, memory, nbytes: int) -> None:
        """Run privatised variant `fn` over [begin, end) on every worker, worker 0 with `bufs`
        (copy slots at the real buffers), worker w > 0 with the copy slots of `slabs` at its
        copies; then add the copies into `memory(binding)` (the real buffers, numpy uint8) and
        zero them."""
        workers = self.rt.num_workers
        with self.lock:
            while len(self.rows) < workers - 1:
                self.rows.append(np.zeros(0, np.uint8))
            for w in range(workers - 1):
                if self.rows[w].nbytes < nbytes:
                    self.rows[w] = np.zeros(nbytes, np.uint8)
            self.launches += 1
            tables = [bufs]
            for row in self.rows[:workers - 1]:
                table = type(bufs).from_buffer_copy(bufs)
                base, at = row.__array_interface__["data"][0], 0
                for _, slot, off, count, dt in slabs:
                    table[slot] = base + at - off  # the slab's first element lands at `at`
                    at += _aligned(count * dt.itemsize)
                tables.append(table)
            try:
                self.rt.run_slots(fn, tables, args, begin, end)
            finally:  # also after an interrupt: the copies are zero again
                self._merge(slabs, memory, nbytes)

    def _merge(self, slabs, memory, nbytes: int) -> None:
        parts = []
        at = 0
        for k, _, off, count, dt in slabs:
            real = memory(k)[off:off + count * dt.itemsize].view(dt)
            copies = [row[at:at + count * dt.itemsize].view(dt)
                      for row in self.rows[:self.rt.num_workers - 1]]
            parts.append((real, copies))
            at += _aligned(count * dt.itemsize)
        pieces = self.rt.num_workers if nbytes >= MERGE_SPLIT_BYTES else 1

        def merge(p):
            for real, copies in parts:
                step = -(-len(real) // pieces)
                r = real[p * step:(p + 1) * step]
                for c in copies:
                    c = c[p * step:(p + 1) * step]
                    np.add(r, c, out=r)
                    c.fill(0)

        self.rt.run_calls([lambda p=p: merge(p) for p in range(pieces)])


def _aligned(nbytes: int) -> int:
    return -(-nbytes // _ALIGN) * _ALIGN


def _ndarray_shape(mem, ref) -> tuple:
    """An ndarray's extents in this launch; a 0-d ndarray (`f[None]`) has none in the argument
    buffer, so no placeholder either."""
    return mem.arrays[("ndarray", ref.key, False)].shape if ref.ndim else ()
