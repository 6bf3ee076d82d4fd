"""`assert cond, "message"` in kernels, with Taichi's semantics: checked only under
`init(debug=True)` (otherwise compiled away), reported at the next sync or host read.

Each assert site gets a number; a failing thread records it in an internal i32 field
(`AssertState.flag`) with an atomic max, so the report does not depend on which thread ran
last, and an out-of-range vector index outranks the assert that then fails because of it.
`check(state)` — called by `sd.sync()` and host reads — reads the flag, clears it and raises `SpiradAssertionError` (an AssertionError) with the message
and the kernel source line of the failed assert. A message with run-time values
(`assert x[i] == 0, f"x[{i}] = {x[i]}"`) is written by the failing thread as a print record
(`printing.PrintFormat.assert_site`); the print flush, which runs first, keeps the text of the
first such record of each site for `check` instead of printing it.
"""
from __future__ import annotations

import numpy as np

from kernel_ir.errors import SpiradAssertionError
from kernel_ir.source import user_error


_FIRST = 1 << 24  # the flag bit of sites that outrank asserts (AssertState.record)


class AssertState:
    def __init__(self, field_factory):
        from kernel_ir import dtypes as T
        self.flag = field_factory(T.i32, (), "assert.flag")  # field.internal_field (no cycle)
        self.sites = [None]  # site number -> (message, SrcLoc, error class); 0 = no failure
        self.cleared = False

    def site(self, message, loc, error=SpiradAssertionError) -> int:
        """A new site; `error`: the exception class raised when it fails (an assert's, or
        SpiradDeviceError for a `while` past `init(max_while_iterations=)`)."""
        self.sites.append((message, loc, error))
        return len(self.sites) - 1


    def record(self, b, failed, site: int, first: bool = False, then=None) -> None:
        """Emit, into IRBuilder `b`: when u1 `failed` holds, record `site` in the flag with an
        atomic max (a write only: reverse mode has nothing to differentiate or replay). A
        `first` site (a check that guards the accesses after it: a vector index out of range)
        outranks the asserts, whose failure it may cause; among equals the later site wins."""
        from kernel_ir import dtypes as T
        from kernel_ir.ops import Op
        with b.if_(failed) as (block, _):
            with block:
                b.atomic(Op.ATOMIC_MAX, self.flag.ref(), (),
                         b.const(site | (_FIRST if first else 0), T.i32))
                if then is not None:  # the message's run-time values (frontend/formatting.py)
                    then()


def state_of(st, field_factory) -> AssertState:
    if st.asserts is None:
        st.asserts = AssertState(field_factory)
    return st.asserts


def check(st) -> None:
    """Raise the first recorded assert failure of `st`'s kernels, if any (after a sync)."""
    a = st.asserts
    if a is None or a.flag._buf is None or st.backend is None:
        return
    be = st.backend
    k = int(be.read(a.flag._storage(), 4).view(np.int32)[0]) & ~_FIRST
    texts = st.prints.assert_texts if st.prints is not None else {}
    if k:
        be.write(a.flag._storage(), np.zeros(1, np.int32))
        msg, loc, error = a.sites[k]
        msg = texts.get(k, msg)  # a message with run-time values, printed by the failing thread
        texts.clear()
        raise user_error(error, msg or "assertion failed", loc)
    texts.clear()
