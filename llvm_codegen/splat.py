"""Vector constants with every lane equal, written `<W x T> splat (T v)` in the IR text.

Why: llvmlite prints a vector constant element by element, so a 16- or 32-lane kernel's IR text
(and the time to format and re-parse it) grew with the lane count: kernel b's gradient module
was ~110 kB at 16 lanes, mostly repeated constants. LLVM's parser reads the `splat` form (the
optimizer prints it too); the value is the same constant.
"""
from __future__ import annotations

from llvmlite import ir


class SplatConstant(ir.Constant):
    def __init__(self, vt: ir.VectorType, elem: ir.Constant):
        self.type = vt  # (not ir.Constant.__init__: it would wrap every lane again)
        self.constant = [elem] * vt.count
        self.elem = elem

    def _get_reference(self):
        e = self.elem
        if e.constant is None or (not isinstance(e.type, ir.FloatType | ir.DoubleType)
                                  and e.constant == 0):
            return "zeroinitializer"
        return f"splat ({e.type} {e.get_reference()})"


def splat(elem: ir.Constant, w: int) -> ir.Constant:
    """`elem` itself for w == 1, else the W-lane constant of it."""
    return elem if w == 1 else SplatConstant(ir.VectorType(elem.type, w), elem)


class _Zero(ir.Constant):
    def __init__(self, vt: ir.VectorType):
        super().__init__(vt, None)

    def _get_reference(self):
        return "zeroinitializer"


def zeros(vt: ir.VectorType) -> ir.Constant:
    """The all-zero vector, written `zeroinitializer` (llvmlite spells out every lane)."""
    return _Zero(vt)
