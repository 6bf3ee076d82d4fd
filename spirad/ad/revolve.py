"""Binomial checkpointing schedules (Griewank's revolve): reverse `n` steps with `k` snapshots.

Reversing a chain of `n` steps needs, at step `i`, the state the forward pass had before it. With
memory for only `k` state snapshots the states are recomputed from stored ones. Griewank and
Walther ("Algorithm 799: revolve", ACM TOMS 2000) showed the fewest forward steps for that:

    P(n, k) = t*n - beta(k + 1, t - 1)   where  beta(k, t - 1) < n <= beta(k, t),
    beta(k, t) = C(k + t, k),

the number of steps `k` snapshots can reverse when no step runs forward more than `t` times
(besides the taped run right before its reversal). `schedule(n, k)` is our own construction of an
optimal schedule from that count: to reverse `l = end - start` steps with the state `start` held
and `s` snapshots in all, advance `j` steps to `m = start + j`, store `m`, reverse `[m, end)` with
`s - 1` snapshots, then restore `start` and reverse `[start, m)` with `s`. Its cost is
`j + P(l - j, s - 1) + P(j, s)`, and that equals `P(l, s)` exactly when the right part needs at
most `t` runs per step with `s - 1` snapshots and the left part at most `t - 1` with `s`:

    beta(s - 1, t - 1) <= l - j <= beta(s - 1, t)   and   beta(s, t - 2) <= j <= beta(s, t - 1)

(Pascal's rule makes the two costs add up to `t*l - beta(s + 1, t - 1)`; the bounds always leave
a `j`). `split` picks the smallest such `j` (n = 10,000, k = 32: 8,673 snapshot writes; the
largest would make 9,207). A right part of one step needs no snapshot: it is
reversed right after the advance. The tests check the count against `optimal_forward_steps`
(the closed form) and a brute-force minimisation for small `n, k`, and that no more than `k`
snapshots are ever held.

The schedule is a flat sequence of actions (generated lazily: `n` may be large, and the
generator holds O(k) pending work, no recursion):

    Advance(start, stop)  run steps start .. stop-1 forward (not taped); the state is then `stop`
    Takeshot(i, slot)     store the current state (before step i) in snapshot slot `slot`
    Restore(i, slot)      load slot `slot` (it holds the state before step i)
    Reverse(i)            the state is before step i: run step i taped, then its adjoint
    Free(slot)            slot `slot` is no longer needed

The first `Reverse` is of step n - 1; everything before it is the forward sweep. Slots are
numbered 0 .. k-1; slot 0 holds the initial state until the final `Free`.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import comb


@dataclass(frozen=True)
class Advance:
    start: int
    stop: int


@dataclass(frozen=True)
class Takeshot:
    index: int
    slot: int


@dataclass(frozen=True)
class Restore:
    index: int
    slot: int


@dataclass(frozen=True)
class Reverse:
    index: int


@dataclass(frozen=True)
class Free:
    slot: int


def beta(s: int, t: int) -> int:
    """C(s + t, s): the most steps `s` snapshots reverse with at most `t` forward runs per step
    (0 for t < 0)."""
    return comb(s + t, s) if t >= 0 else 0


def repetitions(l: int, s: int) -> int:
    """The smallest t with beta(s, t) >= l: how often the worst step runs forward (l >= 1)."""
    t = 0
    while beta(s, t) < l:
        t += 1
    return t


def optimal_forward_steps(n: int, k: int) -> int:
    """P(n, k): the fewest untaped forward steps that reverse `n` steps with `k` snapshots (the
    snapshot of the initial state counted), revolve's closed form. Each step also runs once
    taped, right before its adjoint; those `n` runs are not counted."""
    if n <= 1:
        return 0
    t = repetitions(n, k)
    return t * n - beta(k + 1, t - 1)


def split(l: int, s: int) -> int:
    """How far to advance before storing the next snapshot, reversing `l >= 2` steps with `s >= 1`
    snapshots (one of them holding the start): the smallest optimal `j` (module docstring)."""
    t = repetitions(l, s)
    lo = max(beta(s, t - 2), l - beta(s - 1, t), 1)
    hi = min(beta(s, t - 1), l - beta(s - 1, t - 1), l - 1)
    if lo > hi:
        raise RuntimeError(f"revolve: no optimal split for l={l}, s={s} (t={t}: [{lo}, {hi}])")
    return lo


def schedule(n: int, k: int):
    """The actions that run and reverse `n` steps with at most `k` snapshots (module docstring)."""
    if k < 1:
        raise ValueError("revolve needs at least one snapshot")
    if n <= 0:
        return
    free = list(range(k - 1, 0, -1))  # slot 0 holds the initial state
    yield Takeshot(0, 0)
    # pending work, popped last-first: ("rev", start, end, s, slot) reverses [start, end) after
    # restoring `start` from `slot`; ("free", slot) releases a slot
    pending = []
    start, end, s, slot = 0, n, k, 0
    while True:
        while end - start > 1:  # the state is before step `start`, held in `slot`
            j = split(end - start, s)
            m = start + j
            yield Advance(start, m)
            if end - m == 1:  # one step on the right: reverse it now, no snapshot
                yield Reverse(m)
                yield Restore(start, slot)
                end = m
                continue
            new = free.pop()
            yield Takeshot(m, new)
            pending.append(("rev", start, m, s, slot))
            pending.append(("free", new))
            start, s, slot = m, s - 1, new
        yield Reverse(start)
        while pending and pending[-1][0] == "free":
            free.append(pending[-1][1])
            yield Free(pending.pop()[1])
        if not pending:
            break
        _, start, end, s, slot = pending.pop()
        yield Restore(start, slot)
    yield Free(0)


def brute_force_forward_steps(n: int, k: int) -> int:
    """P(n, k) by minimising over every first split (tests; O(n^2 k))."""
    from functools import lru_cache

    @lru_cache(maxsize=None)
    def cost(l, s):
        if l <= 1:
            return 0
        if s == 1:
            return l * (l - 1) // 2
        return min(j + cost(l - j, s - 1) + cost(j, s) for j in range(1, l))
    return cost(n, k)
