"""Whether a launch's ndarrays occupy disjoint memory: the alias partition a program is
specialised on (`Kernel._distinct_storages`, passes/independent_loops rule 5).

At compile time a kernel's ndarray arguments of one element type and rank may be one array
passed twice, so the pass that proves a serialised loop's iterations independent puts them in
one alias class, and a loop that writes one and reads another at other indices stays serial
(Genesis' narrow phase in ndarray mode writes an `[i_b]`-indexed i32 ndarray and reads others).
A launch knows better: every storage it binds (each ndarray argument's, its `.grad`'s and its
`.dual`'s) is a range of memory, and when no two ranges overlap, each argument is an alias
class of its own, as each field is. `disjoint` says so, conservatively: a storage whose memory
it cannot place (anything but host memory, a numpy array: GPU buffers, arena slices, another
library's device memory) makes the answer False, so is the same array twice, a gradient passed
as an argument beside its array, or two views of one user array (the whole storage counts, not
the elements a kernel reaches). Only the CPU backends' storages are host memory, and only the
CPU backend runs the pass (`driver.alias_specialised`).
"""
from __future__ import annotations

import numpy as np


def disjoint(arrays) -> bool:
    """Whether the storages of `arrays` (ndarrays), their `.grad`s and `.dual`s occupy pairwise
    disjoint host memory (False where one is not host memory: the module docstring)."""
    spans = []
    for a in arrays:
        for nd in (a, a.grad, a.dual):
            if nd is None:
                continue
            s = nd._buf
            if type(s) is not np.ndarray:
                return False
            lo = s.__array_interface__["data"][0]
            spans.append((lo, lo + max(s.nbytes, 1)))
    spans.sort()
    return all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))
