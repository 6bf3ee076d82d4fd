"""lavapipe's loop cap in the SPIR-V lowering: a mixin of `lower.TaskLowerer`.

With `caps.loop_iteration_cap` set, a per-invocation counter counts loop *header visits* (user loops
and CAS loops alike): +1 on entering a loop, +1 on every path to its continue target. A back-edge
taken when the visits so far already reach the cap, while the loop would go on (RANGE_FOR: next
index < end; WHILE and CAS: always), writes STATUS_LOOP_CAP and returns instead. This mirrors
llvmpipe: its limiter drops by one at the end of every pass through a loop body (the final,
exiting pass included) and the loop ends once it reaches 0, so visit number `cap` is the last
one that may be followed by another (measured here: a 300 x 300 nested loop stops after 65,101
inner trips = 217 outer trips of 302 visits each). The check sits before the branch to the
continue target because a continue construct may not return. An innermost RANGE_FOR (no nested
loop, no BREAK, no CAS atomic inside) is counted in bulk instead: one check at entry of the
verdict the per-iteration checks would reach, and one counter update (`count_loop_in_bulk`), so
simple loops pay nothing per iteration. Limitation: llvmpipe runs
invocations in SIMD lanes, so lanes that diverge into *different* loops share one limiter; the
per-invocation count cannot see that (keep heavy loops uniform across a workgroup).
"""
from __future__ import annotations

from kernel_ir.abi import STATUS_LOOP_CAP
from kernel_ir.dtypes import u1, u32
from kernel_ir.nodes import Block, walk
from kernel_ir.ops import ATOMICS, Op

from . import atomics

COUNTED = object()  # `loops` entry of a loop whose visits `count_loop_in_bulk` counted


def bulk_countable(body: Block, caps) -> bool:
    """Can a RANGE_FOR with this body be counted at entry? Only when every pass through it
    reaches the back-edge once and adds no visits of its own: no nested loop, no BREAK (it
    targets this loop then) and no atomic that lowers to a compare-and-swap loop."""
    for n in walk(body):
        if n.op in (Op.RANGE_FOR, Op.WHILE, Op.BREAK):
            return False
        if n.op in ATOMICS and (n.arg.mask or atomics.needs_cas(n.arg.dtype, caps, n.op)):
            return False
    return True


class LoopCap:
    """Needs from the lowerer: E, io, caps, task_index, before_return(); `counter` is the
    invocation's visit counter (None without a cap)."""

    def _bump(self) -> int | None:
        if self.counter is None:
            return None
        E = self.E
        cnt = E.op("OpIAdd", u32, E.op("OpLoad", u32, self.counter), E.c(1, u32))
        E.emit("OpStore", self.counter, cnt)
        return cnt

    def count_loop_entry(self) -> None:
        """With a loop cap: count the first header visit of a loop (always allowed)."""
        self._bump()

    def count_back_edge(self, would_continue) -> None:
        """With a loop cap: count the header visit this back-edge leads to; if the visits so far
        already reach the cap while the loop would go on (`would_continue()` -> bool id, None =
        always), write STATUS_LOOP_CAP and return. Emitted before the branch to the continue
        target (a continue construct may not return), so each path to it counts exactly once."""
        if self.counter is None:
            return
        E = self.E
        cnt = E.op("OpLoad", u32, self.counter)
        over = E.op("OpUGreaterThanEqual", u1, cnt, E.c(self.caps.loop_iteration_cap, u32))
        if would_continue is not None:
            over = E.band(over, would_continue())
        self._stop_if_over_cap(over)
        self._bump()

    def _stop_if_over_cap(self, over: int) -> None:
        """`if over: write STATUS_LOOP_CAP and return`; code after it runs when not over."""
        fn = self.E.fn
        err, ok = fn.label(), fn.label()
        fn.selection_merge(ok)
        fn.branch_cond(over, err, ok)
        fn.begin(err)
        self.before_return()
        self.io.write_error_and_return(STATUS_LOOP_CAP, self.task_index)
        fn.begin(ok)

    def count_loop_in_bulk(self, begin: int, end: int, dt) -> None:
        """With a loop cap, for a RANGE_FOR that `_bulk_countable` accepts: count all its header
        visits at entry. With T = max(end - begin, 0) trips, counting per iteration would stop it
        at a back-edge iff T >= 2 and visits + T - 1 >= cap; check that once (STATUS_LOOP_CAP,
        return) and advance the counter by the 1 + T visits the loop makes."""
        E = self.E
        more = E.op("OpSGreaterThan" if dt.kind == "i" else "OpUGreaterThan", u1, end, begin)
        diff = E.op("OpISub", dt, end, begin)
        if dt.bits == 64:  # clamp: the cap is far below 2**32
            big = E.c(0xFFFFFFFF, dt)
            diff = E.op("OpUConvert", u32, E.sel(E.op("OpUGreaterThan", u1, diff, big), big,
                                                 diff, dt))
        elif dt != u32:
            diff = E.op("OpBitcast", u32, diff)
        trips = E.sel(more, diff, E.c(0, u32), u32)
        cap = E.c(self.caps.loop_iteration_cap, u32)
        seen = E.op("OpLoad", u32, self.counter)
        room = E.sel(E.op("OpUGreaterThanEqual", u1, seen, cap), E.c(0, u32),
                     E.op("OpISub", u32, cap, seen), u32)
        over = E.band(E.op("OpUGreaterThanEqual", u1, trips, E.c(2, u32)),
                      E.op("OpUGreaterThanEqual", u1, E.op("OpISub", u32, trips, E.c(1, u32)),
                           room))
        self._stop_if_over_cap(over)
        E.emit("OpStore", self.counter,
               E.op("OpIAdd", u32, E.op("OpIAdd", u32, seen, E.c(1, u32)), trips))
