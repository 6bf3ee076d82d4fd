"""Write generations, bumped lazily: what a launch may write is marked, not counted.

A field's or ndarray's `generation` changes whenever something may have written it (a host
write, a launch whose program writes it); the adstack sizing cache keys its entries on the
generations of what the sized loops read (architecture §4), and that is the one reader. A
Genesis step launches six kernels that each may write 20 to 42 fields: bumping each object's
counter at every launch was ~1.5 µs of a launch's ~10 µs of host work, for a number nobody reads
in a forward-only run.

So a launch records only *which* objects it may have written: its plan's `bumps` tuple (one per
plan, shared by the plans `rebind` makes) goes into `PENDING`, one dict store keyed by the
tuple's identity. Reading a generation (`_HostArray.generation`) first flushes `PENDING`: every
object in it gets +1, once, however many launches marked it since the last read. A reader thus
sees a different generation after any launch that may have written the object since its last
read (what the sizing cache needs: its keys compare generations for equality), never the same
one; the count is no longer the number of launches.

`PENDING` holds the objects strongly, so it must not outlive their users: `note_plan` flushes
it whenever a new launch plan is made. A program launched with ever new arrays (create, launch,
drop: tests/language/test_ndarray_churn.py) thus keeps at most the last plan's objects alive, and
the memory of dropped arrays is returned as before; the launches that made marking worth it, the
same plan again and again (a simulation step), make no new plans and never flush here."""
from __future__ import annotations

PENDING: dict = {}  # id(bumps) -> bumps: launched since the last flush


def mark(bumps: tuple) -> None:
    """A launch may have written every object of `bumps` (`launch._bump`)."""
    if bumps:
        PENDING[id(bumps)] = bumps


def flush() -> None:
    """Every object marked since the last flush: its generation + 1 (before a generation is
    read)."""
    while PENDING:
        # `popitem` empties the dict one entry at a time: a thread that marks meanwhile adds
        # to the same dict, which this loop then also flushes
        _, bumps = PENDING.popitem()
        for o in bumps:
            o._generation += 1


def note_plan() -> None:
    """A new launch plan was made: the objects marked so far are counted and let go (a dropped
    array must not be kept alive by the marks of its last launch)."""
    if PENDING:
        flush()
