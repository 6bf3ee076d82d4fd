"""Which of a launch's ndarray storages share memory: the alias partition a program is
specialised on (`Kernel._alias_partition`, passes/independent_loops rule 5).

At compile time a kernel's ndarray arguments of one element type and rank may be one array
passed twice, so the pass that proves a serialised loop's iterations independent puts them in
one alias class, and a loop that writes one and reads another at other indices stays serial
(Genesis' narrow phase in ndarray mode writes an `[i_b]`-indexed i32 ndarray and reads others).
A launch knows better: every buffer it binds (each ndarray argument's storage, its `.grad`'s
and its `.dual`'s) is a range of memory. `alias_groups` gives the groups of buffers whose
ranges overlap (connected through overlaps: one array passed twice, as Genesis passes a
dataclass member both inside its dataclass and beside it; a gradient passed beside its array);
every buffer outside them is an alias class of its own, as each field is. Conservative: the whole
storage counts (not the elements a kernel reaches), and a storage it cannot place in memory
(anything but host memory, a numpy array: GPU buffers, arena slices, another library's device
memory) gives None, the generic partition. Only the CPU backends' storages are host memory, and
only the CPU backend runs the pass (`driver.alias_specialised`).
"""
from __future__ import annotations

from operator import itemgetter

import numpy as np

_SPAN = itemgetter(0, 1)


def alias_groups(arrays):
    """The buffers of `arrays` ((argument index, ndarray) pairs) that share memory, as a sorted
    tuple of groups, each a sorted tuple of two or more buffers named as `GlobalRef.buffer`
    names them (("ndarray", index, False | True (its grad) | "dual")): () where every storage
    is disjoint; None where one is not host memory (the module docstring)."""
    spans = []
    for i, a in arrays:
        for which, nd in ((False, a), (True, a.grad), ("dual", a.dual)):
            if nd is None:
                continue
            sp = nd._span
            if sp is None:
                sp = nd._span = _span(nd._buf)
            if sp is False:
                return None
            spans.append((sp[0], sp[1], ("ndarray", i, which)))
    spans.sort(key=_SPAN)
    groups, cur, end = [], [], None
    for lo, hi, buf in spans:
        if cur and lo < end:  # overlaps the group so far
            cur.append(buf)
            end = max(end, hi)
            continue
        if len(cur) > 1:
            groups.append(tuple(sorted(cur, key=repr)))
        cur, end = [buf], hi
    if len(cur) > 1:
        groups.append(tuple(sorted(cur, key=repr)))
    return tuple(sorted(groups, key=repr))


def _span(s):
    """(first, last + 1) address of storage `s` in host memory, or False where it is not host
    memory (only a numpy array is)."""
    if type(s) is not np.ndarray:
        return False
    lo = s.__array_interface__["data"][0]
    return lo, lo + max(s.nbytes, 1)
