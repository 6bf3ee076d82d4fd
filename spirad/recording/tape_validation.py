"""Run-time state of `Tape(validation=True)` (Taichi's global data access rule check).

Per differentiated field: an i32 checkbit field of its full shape (set where a recorded kernel
read), and one slot in a shared `violations` counter (bumped where a plain store hit a set bit);
`passes/validation.instrument` writes the instrumented programs. The Tape clears both at entry
and checks the counters after every recorded launch, naming the kernel and the fields.
"""
from __future__ import annotations

import numpy as np

from kernel_ir.errors import SpiradDataAccessError
from kernel_ir.nodes import GlobalRef

from ..runtime import state as _state

MAX_SLOTS = 1024


class Validation:
    def __init__(self):
        from ..data.field import internal_field
        from kernel_ir import dtypes as T
        self.violations = internal_field(T.i32, (MAX_SLOTS,), "validation.violations")
        self.violations.fill(0)
        self.checkbits = {}   # primal field id -> checkbit Field
        self.slots = []       # slot -> primal Field

    def fields(self) -> tuple:
        return (self.violations,) + tuple(self.checkbits.values())

    def checkbit_of(self, ref: GlobalRef):
        """(checkbit ref, slot) for a differentiated user field's ref, else None."""
        from ..data.field import internal_field
        from kernel_ir import dtypes as T
        f = _state.current().field_map().get(ref.key)
        if f is None or f._primal is not None or not f.needs_grad or ref.grad:
            return None
        cb = self.checkbits.get(f.id)
        if cb is None:
            if len(self.slots) >= MAX_SLOTS:
                return None
            cb = self.checkbits[f.id] = internal_field(T.i32, f.full_shape, f.name + ".checkbit")
            cb.fill(0)
            self.slots.append(f)
        slot = self.slots.index(f)
        return GlobalRef("field", cb.id, T.i32, len(f.full_shape), f.full_shape, cb.name), slot

    def clear(self):
        for f in self.fields():
            f.fill(0)

    def check(self, kernel_name: str):
        counts = self.violations.to_numpy()
        hit = np.nonzero(counts)[0]
        if hit.size:
            self.violations.fill(0)
            names = ", ".join(f"{self.slots[k].name} ({counts[k]} element(s))" for k in hit)
            raise SpiradDataAccessError(
                f"Tape(validation=True): kernel {kernel_name} overwrote elements of {names} that "
                f"a kernel recorded earlier in this Tape (or this kernel itself) had read; the "
                f"adjoints re-read those values, so the gradients would be wrong (Taichi's global "
                f"data access rule). Write the new values to another field (or another time step "
                f"of a time-indexed field), or accumulate with +=")


def current() -> Validation:
    st = _state.current()
    if st.validation is None:
        st.validation = Validation()
    return st.validation
