"""Bounds checks of the SPIR-V lowering (`compile_tasks(..., bounds_check=True)`; the Vulkan and
Metal backends pass `sd.init(debug=True)`): a mixin of `lower.TaskLowerer`.

Each index of a global access is compared unsigned (negative values fail)
with its axis extent: the field's static `GlobalRef.shape`, the ndarray's extent from the argument
buffer, 1 for a shapeless temp; 64-bit indices are compared in 64 bits, narrower ones as i32. The
access sits in the taken side of a selection on the result; the other side writes
STATUS_INDEX_OUT_OF_RANGE with the words `kernel_ir.abi.StatusWord` lists.
With the default `bounds_check=False` no check code is emitted (the module is unchanged).

The default checks (`compile_tasks(..., oob_check=True)`: every SPIR-V backend without
`debug=True`, unless `init(check_bounds=False)`): the same test and skip for every access that
`kernel_ir.index_range` does not prove in range, but a failure only stores its binding k + 1 in
one Function variable (`oob_k`), and the flush writes STATUS_OUT_OF_BOUNDS (task, binding).

The first failure of an invocation goes into Function variables (cheap: drivers keep them in
registers, and a check's failure path stays a few stores); `_bc_flush`, emitted before every
OpReturn of the entry point (`TaskLowerer.before_return`), writes it to the status words once.
"""
from __future__ import annotations

from kernel_ir.abi import STATUS_INDEX_OUT_OF_RANGE, STATUS_OUT_OF_BOUNDS
from kernel_ir.dtypes import i32, u1, u32

from .lower_math import lower_cast


class BoundsChecks:
    """Needs from the lowerer: E, m, io, abi, task_index, bounds_check, sites, v(),
    _linear(), _extents(); sets `_bc`."""

    def _access(self, n, idx_nodes, access):
        """`access(linear index id)` -> value id or None; behind a bounds check when enabled
        (the status words in the module docstring). Returns the value (0 where it failed)."""
        ref = n.arg
        lin = self._linear(ref, idx_nodes)
        cheap = not self.bounds_check and self.oob_check and n not in self.oob_safe
        if not (self.bounds_check or cheap) or not idx_nodes:
            return access(lin)
        E, fn = self.E, self.E.fn
        oks, info = [], []
        for s, ext in zip(idx_nodes, self._extents(ref)):
            dt, x = s.dtype, self.v(s)
            if dt.bits == 64:
                oks.append(E.op("OpULessThan", u1, x, lower_cast(E, ext, i32, dt)))
            else:
                x = lower_cast(E, x, dt, i32)
                oks.append(E.op("OpULessThan", u1, x, ext))
            info.append((dt, x, ext))
        ok = oks[0]
        for o in oks[1:]:
            ok = E.band(ok, o)

        def fail():
            if cheap:
                E.emit("OpStore", self._oob_k, E.c(self.abi.binding_index(ref) + 1, u32))
                return
            axis = E.c(len(info) - 1, u32)
            lo, hi, ext = self._bc_words(*info[-1])
            for a in range(len(info) - 2, -1, -1):  # the first failing axis
                alo, ahi, aext = self._bc_words(*info[a])
                axis = E.sel(oks[a], axis, E.c(a, u32), u32)
                lo = E.sel(oks[a], lo, alo, u32)
                hi = E.sel(oks[a], hi, ahi, u32)
                ext = E.sel(oks[a], ext, aext, u32)
            self._bc_record(self.abi.binding_index(ref), lo, axis, ext, hi, self.sites.get(n, 0))
        (v, body_end), (_, fail_end) = fn.if_else(ok, lambda: access(lin), fail)
        if v is None:
            return None
        return E.op("OpPhi", n.arg.dtype, v, body_end, E.c(0, n.arg.dtype), fail_end)

    _BC_VARS = ("site1", "k", "lo", "axis", "ext", "hi")

    def _bc_setup(self) -> None:
        E, fn = self.E, self.E.fn
        self._bc = {}
        for name in self._BC_VARS:
            self._bc[name] = fn.variable(E.ty(u32), E.c(0, u32))
            self.m.name(self._bc[name], "bc_" + name)

    def _oob_setup(self) -> None:
        """The default checks' Function variable: 0, or the failing binding + 1."""
        E = self.E
        self._oob_k = E.fn.variable(E.ty(u32), E.c(0, u32))
        self.m.name(self._oob_k, "oob_k")

    def _oob_flush(self) -> None:
        E, fn = self.E, self.E.fn
        k1 = E.op("OpLoad", u32, self._oob_k)
        failed = E.op("OpINotEqual", u1, k1, E.c(0, u32))
        wr, merge = fn.label(), fn.label()
        fn.selection_merge(merge)
        fn.branch_cond(failed, wr, merge)
        fn.begin(wr)
        self.io.write_error_words(STATUS_OUT_OF_BOUNDS, [E.c(self.task_index, u32),
                                                         E.op("OpISub", u32, k1, E.c(1, u32))])
        fn.branch(merge)
        fn.begin(merge)

    def _bc_words(self, dt, x, ext):
        """(lo, hi, extent) u32 words of index `x` (its dtype if 64-bit, else as i32)."""
        E = self.E
        if dt.bits == 64:
            lo = lower_cast(E, x, dt, u32)
            hi = lower_cast(E, E.op("OpShiftRightLogical", dt, x, E.c(32, dt)), dt, u32)
        else:
            lo = E.op("OpBitcast", u32, x)
            hi = (E.op("OpBitcast", u32, E.op("OpShiftRightArithmetic", i32, x, E.c(31, i32)))
                  if dt.kind == "i" else E.c(0, u32))
        return lo, hi, E.op("OpBitcast", u32, ext)

    def _bc_record(self, k, lo, axis, ext, hi, site) -> None:
        E, fn = self.E, self.E.fn
        v = self._bc
        first = E.op("OpIEqual", u1, E.op("OpLoad", u32, v["site1"]), E.c(0, u32))
        rec, merge = fn.label(), fn.label()
        fn.selection_merge(merge)
        fn.branch_cond(first, rec, merge)
        fn.begin(rec)
        for name, val in (("site1", E.c(site + 1, u32)), ("k", E.c(k, u32)), ("lo", lo),
                          ("axis", axis), ("ext", ext), ("hi", hi)):
            E.emit("OpStore", v[name], val)
        fn.branch(merge)
        fn.begin(merge)

    def _bc_flush(self) -> None:
        """Before an OpReturn of the entry point: write a recorded bounds failure (if any)."""
        if self._oob_k is not None:
            self._oob_flush()
        if self._bc is None:
            return
        E, fn = self.E, self.E.fn
        v = self._bc
        site1 = E.op("OpLoad", u32, v["site1"])
        failed = E.op("OpINotEqual", u1, site1, E.c(0, u32))
        wr, merge = fn.label(), fn.label()
        fn.selection_merge(merge)
        fn.branch_cond(failed, wr, merge)
        fn.begin(wr)
        words = [E.c(self.task_index, u32)]
        words += [E.op("OpLoad", u32, v[name]) for name in ("k", "lo", "axis", "ext", "hi")]
        words.append(E.op("OpISub", u32, site1, E.c(1, u32)))
        self.io.write_error_words(STATUS_INDEX_OUT_OF_RANGE, words)
        fn.branch(merge)
        fn.begin(merge)
