"""`sd.ad.checkpointed`: differentiate `n` repeated steps with memory for `k` state snapshots.

    with sd.ad.Tape(loss=loss):
        init()
        sd.ad.checkpointed(step, state=[x, v], steps=10_000, snapshots=32)
        compute_loss()

A taped simulation keeps every step's state (DiffTaichi indexes it by time step: `x[t, i]`), so
memory grows with the horizon. Here the state lives in fields / ndarrays of one step's size,
updated in place by `step(t)` (a Python function that launches kernels); `checkpointed` runs the
`n` steps and keeps at most `k` copies of the state (revolve's binomial schedule,
`spirad.ad.revolve`). When the Tape's backward pass reaches it, each step is reversed in turn: the
state before it is recomputed from the nearest snapshot, the step runs again recorded, and its
kernels' adjoints run in reverse order.

What the gradients are: those of a full Tape of the same launches in which every kernel's adjoint
sees the values its forward launch saw (as with time-indexed state). So the usual rules hold
exactly: `.grad` of the state flows back across steps, parameters the steps only read accumulate
their gradient over all steps, a store's adjoint zeroes `a.grad[I]`, an atomic add's leaves it.
Within a recorded step a later kernel may overwrite what an earlier one read (the force kernel
reads `x`, the update kernel writes it): before each launch the values it will overwrite that an
earlier kernel of the step read (`Compiled.reads` / `writes`) are copied, and put back between
the adjoints, so each adjoint replays with its launch's values. A custom-gradient function
(`grad_replaced`) called in a step is one entry; its gradient runs with the values it left.

The state is what a step reads that an earlier step wrote: `state=[...]` declares it (the
internal random-number launch counter is added, so recomputed steps draw the same numbers).
Fields a step writes before reading them in the same step (forces, scratch) are not state. During
the forward sweep every launch's reads are checked: a kernel that reads a field or ndarray that an
earlier step's kernels wrote, before any kernel of its own step wrote it, is refused with an error
at that read (what it reads would carry across steps without being stored). The check sees kernel
launches only: a step must not keep state in host writes (`fill`, `from_numpy`) or Python
variables, as the recomputation runs `step` again. Host writes in a step have no adjoint, as
under a Tape.

The reverse pass leaves every primal value as it found it: the values of everything the steps
write are copied at its start and put back at its end. Memory: `k` snapshots of the state, the
copies of one recorded step, and that final copy — O(k), not O(n). `CheckpointStats` reports the
snapshots held, the bytes and the forward steps run (`recomputed_steps`: revolve's minimum, plus
the few steps from the last snapshot to the last step, which the forward sweep ran untaped so the
loss could read the final state).

Copies stay on the device: a numpy copy where the backend computes in host memory (CPU), else a
spirad kernel that copies 32-bit words between buffers (`_copy_words`, queued like any launch).
"""
from __future__ import annotations

import contextlib
import inspect
import math
import numbers
from dataclasses import dataclass

import numpy as np

from kernel_ir.dtypes import i32
from kernel_ir.errors import SpiradAutodiffError, SpiradTypeError, SpiradValueError
from kernel_ir.nodes import walk
from kernel_ir.ops import Op
from kernel_ir.source import user_error

from ..runtime import guard as _guard
from . import revolve
from ..runtime import state as _state
from ..recording.custom_grad import _Replaced
from ..data.field import Field
from ..data.ndarray import Ndarray
from ..recording.tape import _ACTIVE, Tape
from ..types import ndarray as _nd_arg


@dataclass
class CheckpointStats:
    """What one `checkpointed` region did (`region.stats`)."""
    steps: int              # n
    snapshots: int          # k: the most snapshots it may hold
    forward_steps: int = 0  # runs of a step not taped: the forward sweep and the recomputation
    taped_steps: int = 0    # runs of a step recorded right before its adjoints
    max_held: int = 0       # most snapshots held at once (never above `snapshots`)
    snapshot_bytes: int = 0  # bytes of one snapshot (the declared state and the random counter)
    peak_bytes: int = 0     # most bytes of copies held at once: snapshots, a taped step's saved
                            # values and the final values put back after the reverse pass
    copies: int = 0         # array copies made (snapshots, restores, saved values)

    @property
    def recomputed_steps(self) -> int:
        """Forward steps run besides the first `n` (the cost of holding `k` snapshots)."""
        return self.forward_steps - self.steps


def checkpointed(step, state, steps, snapshots):
    """Run `step` `steps` times (`step(t)` for t = 0 .. steps-1, or `step()` if it takes no
    argument), differentiable with at most `snapshots` copies of `state` (a list of the fields /
    ndarrays that carry the simulation from one step to the next). Inside `sd.ad.Tape` it is
    one entry of the tape; outside one, seed the state's `.grad` and call `.grad()` on the
    returned region. Returns the `Checkpointed` region (its `stats`: `CheckpointStats`)."""
    tape = Tape.active
    if isinstance(tape, _StepRecorder):
        raise SpiradAutodiffError("sd.ad.checkpointed cannot be nested: a step of a checkpointed "
                                  "region called checkpointed() again; run the inner steps "
                                  "directly in the step")
    with _guard.LOCK:  # one region at a time per process (spirad.runtime.guard)
        region = Checkpointed(step, state, steps, snapshots)
        if tape is not None and not tape.suspended and not tape.replaying:
            tape.record(region, ())
        region._forward()
    return region


class Checkpointed:
    """One checkpointed run of `n` steps: its snapshots, the rest of its schedule, its stats."""

    def __init__(self, step, state, steps, snapshots):
        if not callable(step):
            raise SpiradTypeError(f"checkpointed: step must be a function that launches the "
                                  f"kernels of one step, got {type(step).__name__}")
        for name, v, least in (("steps", steps, 0), ("snapshots", snapshots, 1)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise SpiradTypeError(f"checkpointed: {name} must be an int, got {v!r}")
            if v < least:
                raise SpiradValueError(f"checkpointed: {name} must be at least {least}, got {v}")
        if isinstance(state, (Field, Ndarray)):
            state = [state]
        if not isinstance(state, (list, tuple)) or not state:
            raise SpiradTypeError("checkpointed: state must be a non-empty list of the fields / "
                                  "ndarrays a step reads that an earlier step wrote")
        st = _state.current()
        for a in state:
            if not isinstance(a, (Field, Ndarray)):
                raise SpiradTypeError(f"checkpointed: state entries must be fields or ndarrays, "
                                      f"got {type(a).__name__}")
            a._check_live()
        if len({id(a) for a in state}) != len(state):
            raise SpiradValueError("checkpointed: an array is listed twice in state")
        from ..frontend.rng import counter_field
        self.step = step
        self.n, self.k = int(steps), int(snapshots)
        self.epoch = st.epoch
        self._takes_index = _takes_index(step)
        self.rng = counter_field(st)  # recomputed steps must draw the same random numbers
        self.state = list(state) + [self.rng]
        self.state_ids = {id(a) for a in self.state}
        self._user = {id(f) for f in st.fields}
        self._tracked = {}       # id -> (array, tracked?)
        self.written = {}        # id -> array, every tracked array a step wrote (forward sweep)
        self.slots = {}          # slot -> (step index, _Saved)
        self.stats = CheckpointStats(self.n, self.k)
        self.mem = _Memory(self.stats)
        self.stats.snapshot_bytes = sum(_nbytes(a) for a in self.state)
        self._schedule = None
        self._done = False
        self._failed = False

    def __repr__(self):
        return f"<spirad checkpointed region: {self.n} steps, {self.k} snapshots>"

    # -- forward sweep ----------------------------------------------------------------------------
    def _forward(self):
        """Run all steps, storing the snapshots of revolve's forward sweep (checking the declared
        state); the state is then the final one."""
        if self.n == 0:
            return
        sched = revolve.schedule(self.n, self.k)
        rec = _StepRecorder(self, taped=False)
        try:
            with _active(rec):
                for action in sched:
                    if isinstance(action, revolve.Reverse):  # of step n-1: the backward pass's
                        break
                    if isinstance(action, revolve.Takeshot):
                        self._takeshot(action)
                    elif isinstance(action, revolve.Advance):
                        for i in range(action.start, action.stop):
                            self._observed(rec, i)
                    else:
                        raise RuntimeError(f"revolve: {action} in the forward sweep")
                self._observed(rec, self.n - 1)
        except BaseException:
            self._failed = True  # nothing to reverse: the snapshots go now
            self._release()
            raise
        self._schedule = sched
        if id(self.rng) not in self.written:  # no step draws random numbers: leave it out
            self.state.remove(self.rng)
            for _, saved in self.slots.values():
                saved.drop(self.rng)
            self.stats.snapshot_bytes -= _nbytes(self.rng)

    def _observed(self, rec, i):
        rec.step_index, rec.written_now = i, {}
        self._call(i)
        self.written.update(rec.written_now)
        self.stats.forward_steps += 1

    def observe(self, rec, plan):
        """A launch of the forward sweep: refuse a read of undeclared carried state."""
        c = plan.compiled
        for entry in c.reads:
            a = _array(entry, plan.args)
            if a is None or id(a) in self.state_ids or id(a) in rec.written_now:
                continue
            if id(a) in self.written:  # (only tracked arrays are listed there)
                raise _carried_error(c, entry, a, rec.step_index, self.step)
        for entry in c.writes:
            a = _array(entry, plan.args)
            if a is not None and self.tracked(a):
                rec.written_now[id(a)] = a

    def tracked(self, a) -> bool:
        """A user's array (not a print buffer or another internal field), or the rng counter."""
        hit = self._tracked.get(id(a))
        if hit is None or hit[0] is not a:
            hit = self._tracked[id(a)] = (a, isinstance(a, Ndarray) or a is self.rng or
                                          a._primal is not None or id(a) in self._user)
        return hit[1]

    # -- reverse pass -----------------------------------------------------------------------------
    def grad(self):
        """Reverse the steps (the Tape's backward pass calls this at the region's place): the
        gradients flow from the final state's `.grad` to the initial state's and accumulate in
        the parameters' `.grad`."""
        with _guard.LOCK:
            self._grad()

    def _grad(self):
        if self._failed:
            raise SpiradAutodiffError("this checkpointed region's forward pass failed: nothing to "
                                      "differentiate")
        if self._done:
            raise SpiradAutodiffError("this checkpointed region already ran its reverse pass; run "
                                      "sd.ad.checkpointed(...) again (in a new Tape) to "
                                      "differentiate it again")
        if _state.current().epoch != self.epoch:
            raise SpiradValueError("this checkpointed region belongs to a previous sd.init()")
        self._done = True
        if self.n == 0:
            return
        final = _Saved(self.mem, _unique(self.state + list(self.written.values())))
        try:
            with _active(None):
                _, (index, saved) = max(self.slots.items(), key=lambda kv: kv[1][0])
                self._restore(saved)
                self._advance(index, self.n - 1)
                self._reverse(self.n - 1)
                for action in self._schedule:
                    if isinstance(action, revolve.Advance):
                        self._advance(action.start, action.stop)
                    elif isinstance(action, revolve.Reverse):
                        self._reverse(action.index)
                    elif isinstance(action, revolve.Takeshot):
                        self._takeshot(action)
                    elif isinstance(action, revolve.Restore):
                        index, saved = self.slots[action.slot]
                        if index != action.index:
                            raise RuntimeError(f"revolve: slot {action.slot} holds {index}, not "
                                               f"{action.index}")
                        self._restore(saved)
                    else:
                        self.slots.pop(action.slot)[1].release()
            final.restore()
        finally:
            final.release()
            self._release()

    def _release(self):
        for _, saved in self.slots.values():
            saved.release()
        self.slots.clear()

    def _takeshot(self, action):
        if action.slot in self.slots or len(self.slots) >= self.k:
            raise RuntimeError(f"revolve: snapshot slot {action.slot} taken twice or more than "
                               f"{self.k} held")
        self.slots[action.slot] = (action.index, _Saved(self.mem, self.state))
        self.stats.max_held = max(self.stats.max_held, len(self.slots))

    def _restore(self, saved):
        saved.restore()

    def _advance(self, start, stop):
        for i in range(start, stop):
            self._call(i)
            self.stats.forward_steps += 1

    def _reverse(self, i):
        """Step i recorded, then the adjoints of its launches in reverse order, each after the
        values that later launches overwrote were put back."""
        rec = _StepRecorder(self, taped=True)
        try:
            with _active(rec):
                self._call(i)
            rec.flush()
            self.stats.taped_steps += 1
            for item in reversed(rec.log):
                if isinstance(item, _Saved):
                    item.restore()
                else:
                    entry, args = item
                    entry.grad(*args)
        finally:
            for item in rec.log:
                if isinstance(item, _Saved):
                    item.release()

    # -- grad_check -----------------------------------------------------------------------------
    def rerun(self, args):
        """Run the steps forward again, nothing stored (Tape(grad_check=...))."""
        with _guard.LOCK, _active(None):
            for i in range(self.n):
                self._call(i)

    def _call(self, i):
        if self._takes_index:
            self.step(i)
        else:
            self.step()


class _StepRecorder(Tape):
    """`Tape.active` while a checkpointed region runs a step. Forward sweep (`taped=False`):
    each launch's reads are checked (`Checkpointed.observe`). A recorded step (`taped=True`):
    the log lists, in launch order, the values a launch overwrites that an earlier entry of the
    step read (a `_Saved`, taken before it) and each entry to differentiate ((entry, args)); a
    `grad_replaced` call is logged after the launches it made, so its gradient sees its
    results, and as reading everything (its reads are unknown)."""

    def __init__(self, region, taped):
        super().__init__(loss=None, clear_gradients=False)
        self.region, self.taped = region, taped
        self.step_index = None
        self.written_now = {}  # forward sweep: id -> array written by this step so far
        self.log = []
        self.read_before = set()  # ids of arrays the logged entries read
        self.read_all = False     # a grad_replaced entry is logged: it may read anything
        self.pending = None       # (entry, args) of a grad_replaced call still running

    def launching(self, plan):
        region = self.region
        if not self.taped:
            region.observe(self, plan)
            return
        self.flush()
        c, args = plan.compiled, plan.args
        over = []
        for entry in c.writes:
            a = _array(entry, args)
            if a is not None and region.tracked(a) and (self.read_all or id(a) in self.read_before):
                over.append(a)
        if over:
            self.log.append(_Saved(region.mem, _unique(over)))
        if not self.suspended:  # a kernel recorded next: its adjoint replays these reads
            for entry in c.reads:
                a = _array(entry, args)
                if a is not None:
                    self.read_before.add(id(a))

    def record(self, entry, args):
        if self.suspended or not self.taped:
            return
        self.flush()
        if isinstance(entry, _Replaced):
            self.pending = (entry, args)
        else:
            self.log.append((entry, args))

    def flush(self):
        """Log a finished grad_replaced call."""
        if self.pending is not None and not self.suspended:
            self.log.append(self.pending)
            self.pending = None
            self.read_all = True


class _Saved:
    """Copies of some arrays' values (in buffers of `_Memory`), put back by `restore`."""

    def __init__(self, mem, arrays):
        self.mem = mem
        self.items = []  # (array, bytes, buffer, the array's copy end, the buffer's copy end)
        mem.sync()
        for a in arrays:
            n, end = mem.array_end(a)
            buf, buf_end = mem.take(n)
            mem.copy(end, buf_end)
            self.items.append((a, n, buf, end, buf_end))

    def restore(self):
        self.mem.sync()
        for a, _, _, end, buf_end in self.items:
            self.mem.copy(buf_end, end)
            a.generation += 1  # a write: sizing caches that read `a` must see it

    def drop(self, a):
        """Stop holding `a`'s copy."""
        keep = []
        for item in self.items:
            if item[0] is a:
                self.mem.give(item[1], item[2], item[4])
            else:
                keep.append(item)
        self.items = keep

    def release(self):
        for _, n, buf, _, buf_end in self.items:
            self.mem.give(n, buf, buf_end)
        self.items = []


class _Memory:
    """The buffers of one region (reused by size) and the copies between them and the arrays.
    A copy goes between two *ends*: on a backend that computes in host memory (CPU) a uint8
    numpy view of the storage (np.copyto), elsewhere (an i32 ndarray alias of the buffer that
    holds it, its first word there, its words): a field lives in a shared root buffer at an
    offset (`BackendBase.storage_parts`); the copy kernel is queued like any launch."""

    def __init__(self, stats):
        self.be = _state.backend()
        self.stats = stats
        self.free = {}      # nbytes -> [(storage, end)]
        self.held = 0
        self.host = self.be.host_storage(np.zeros(8, np.uint8)) is not None
        self.ends = {}      # id(array) -> (array, bytes, end)

    def sync(self):
        if self.host:
            self.be.sync()  # the views are read now; device copies are queued in order

    def array_end(self, a):
        hit = self.ends.get(id(a))
        if hit is None or hit[0] is not a or not self._current(hit[2], a._storage()):
            n = _nbytes(a)
            hit = self.ends[id(a)] = (a, n, self._end(a._storage(), n))
        return hit[1], hit[2]

    def _current(self, end, storage) -> bool:
        """Does `end` still alias the buffer holding `storage` (a root buffer may have grown)?"""
        return self.host or end[0]._storage() is self.be.storage_parts(storage)[0]

    def take(self, nbytes):
        pool = self.free.get(nbytes)
        if pool:
            buf, end = pool.pop()
        else:
            buf = self.be.allocate(nbytes)
            end = self._end(buf, nbytes)
        self.held += nbytes
        self.stats.peak_bytes = max(self.stats.peak_bytes, self.held)
        return buf, end

    def give(self, nbytes, buf, end):
        self.free.setdefault(nbytes, []).append((buf, end))
        self.held -= nbytes

    def _end(self, storage, nbytes):
        if self.host:
            return self.be.view(storage, np.uint8, (nbytes,))
        if nbytes % 4:
            raise RuntimeError(f"checkpoint: {nbytes} bytes is not a whole number of words")
        buf, off = self.be.storage_parts(storage)
        return Ndarray._alias(buf, i32, (max(buf.nbytes // 4, 1),)), off // 4, nbytes // 4

    def copy(self, src, dst):
        self.stats.copies += 1
        if self.host:
            np.copyto(dst, src)
        elif dst[2]:
            _copy_kernel()._run((src[0], dst[0], src[1], dst[1], dst[2]), 0)


def _copy_words(src: _nd_arg(dtype=i32, ndim=1), dst: _nd_arg(dtype=i32, ndim=1), s0: i32,
                d0: i32, n: i32):
    for w in range(n):
        dst[d0 + w] = src[s0 + w]


_COPY = []


def _copy_kernel():
    """The word-copy kernel (made on first use; compiled once per init and backend)."""
    if not _COPY:
        from ..kernel import kernel
        _COPY.append(kernel(_copy_words))
    return _COPY[0]


@contextlib.contextmanager
def _active(tape):
    """This thread's `Tape.active` is `tape` inside the block."""
    saved = Tape.active
    _ACTIVE.set(tape)
    try:
        yield
    finally:
        _ACTIVE.set(saved)


def _takes_index(step) -> bool:
    """Does `step` take the step index (one positional argument) or nothing?"""
    from ..kernel import BoundKernel, Kernel
    if isinstance(step, Kernel):
        return len(step._annotations()) == 1
    if isinstance(step, BoundKernel):  # obj.kernel: `self` comes first
        return len(step.kernel._annotations()) == 2
    try:
        sig = inspect.signature(step)
    except (TypeError, ValueError):
        return True
    try:
        sig.bind(0)
        return True
    except TypeError:
        pass
    try:
        sig.bind()
    except TypeError:
        raise SpiradTypeError(f"checkpointed: step {getattr(step, '__name__', step)!r} must take "
                              f"the step index or nothing") from None
    return False


def _array(entry, args):
    """The field / ndarray of a `Compiled.reads` / `writes` entry, None for a temporary."""
    kind = entry[0]
    if kind == "field":
        return entry[1]
    if kind == "ndarray":
        arr = args[entry[1]]
        which = entry[2]
        return arr if which is False else (arr.grad if which is True else arr.dual)
    return None


def _nbytes(a) -> int:
    return math.prod(a.full_shape) * a.dtype.nbytes


def _unique(arrays) -> list:
    return list({id(a): a for a in arrays}.values())


def _carried_error(c, entry, a, index, step):
    """The error for a read of an array an earlier step wrote: quotes the read in the kernel."""
    name = getattr(a, "name", "") or f"the ndarray of shape {a.shape}"
    loc = None
    for k, src in enumerate(c.bindings_src):
        if src == entry:
            buf = c.abi.bindings[k].buffer
            for t in c.tl.tasks:
                for n in walk(t.body):
                    if n.op in (Op.GLOBAL_LOAD, Op.ATOMIC_ADD) and n.arg.buffer == buf and n.loc:
                        loc = loc or n.loc
            break
    sname = getattr(step, "__name__", "step")
    return user_error(SpiradAutodiffError,
                      f"checkpointed: kernel {c.tl.name} (step {index} of {sname}) reads "
                      f"'{name}', which an earlier step wrote and this step has not written "
                      f"yet: its value carries from one step to the next, so a recomputed step "
                      f"would read a wrong one. Add it to state=[...] (it is then stored in every "
                      f"snapshot), or write it in each step before reading it", loc)
