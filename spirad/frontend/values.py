"""Values the frontend juggles while walking a kernel's AST.

IR nodes are scalars. Around them: `Slot` (a named local: one ALLOCA per component), `VecVal`
(a small vector/matrix, unrolled into scalar nodes), `GlobalElem` (an element of a field or
ndarray, readable and assignable), `NdarrayArg` (an ndarray kernel argument), `ShapeVal`
(`arr.shape`). Anything else is a plain Python object evaluated at compile time (numbers, fields,
modules, `@func`s, results of `static(...)`).
"""
from __future__ import annotations

from dataclasses import dataclass

from kernel_ir.dtypes import DType
from kernel_ir.nodes import GlobalRef, Node


@dataclass
class Slot:
    """A named local. `allocas` has one ALLOCA per component; `shape` is () for scalars."""
    allocas: tuple
    shape: tuple
    dtype: DType


@dataclass
class VecVal:
    """A vector (shape (n,)) or matrix (shape (n, m)) of scalar nodes, C order."""
    comps: tuple
    shape: tuple

    @property
    def dtype(self) -> DType:
        return self.comps[0].dtype


@dataclass
class StaticIndexVec(VecVal):
    """The index vector of `for I in sd.static(sd.grouped(sd.ndrange(...)))`: i32 constants, as
    Taichi's Python-scope Vector of ints: a vector in arithmetic and `I.cast(f32)`, and `I[d]` the
    Python int (it indexes Python lists, `sd.static(I[0] > 0)` decides at compile time)."""


@dataclass
class GlobalElem:
    """`arr[indices]` for a field or ndarray; `comp_shape` is the element's vector shape."""
    ref: GlobalRef
    indices: tuple
    comp_shape: tuple
    owner: object = None  # Field / NdarrayArg, for diagnostics


@dataclass
class NdarrayArg:
    arg_index: int
    dtype: DType
    ndim: int              # without component axes
    comp_shape: tuple
    needs_grad: bool
    name: str
    grad: bool = False
    dual: bool = False
    needs_dual: bool = False
    clamp: bool = False    # types.ndarray(boundary="clamp"): indices clamped into the shape
    # the storage order of the axes (Quadrants' `layout=`, spirad.data.ndarray), None: canonical;
    # the ref is the storage: accesses take the indices permuted (`stored`), `x.shape[k]` reads
    # the storage's axis of k (`axis`)
    order: tuple = None

    def ref(self) -> GlobalRef:
        return GlobalRef("ndarray", self.arg_index, self.dtype, self.ndim + len(self.comp_shape),
                         None, self.name, self.grad, self.dual)

    def axis(self, k: int) -> int:
        """The storage axis of canonical axis `k` (the launch binds the storage's extents)."""
        return k if self.order is None else self.order.index(k)

    def stored(self, indices: tuple) -> tuple:
        """Canonical `indices` in storage order: each index stays checked against its own axis
        (no address arithmetic), so bounds proofs and versioning see plain loop indices."""
        return indices if self.order is None else tuple(indices[a] for a in self.order)


@dataclass
class ShapeVal:
    """`arr.shape` of an ndarray argument (indexable by a static int) or of a field (a tuple)."""
    arr: NdarrayArg


@dataclass(frozen=True)
class StaticRange:
    """`static(range(...))` and friends: iterate at compile time."""
    values: tuple


def is_node(v) -> bool:
    return isinstance(v, Node)


@dataclass
class SlotView:
    """Components of a vector / matrix local picked by indices known only at run time, or by
    slices (`v[i]`, `m[i, j]`, `m[i, :]`, `v[1:3]`): `flat` holds, per component of the view
    (C order, `shape`), the position in `slot` as an int or an i32 node. Reading selects,
    writing stores into every position the index may name (`frontend.local_index`)."""
    slot: Slot
    flat: tuple
    shape: tuple

    @property
    def dtype(self) -> DType:
        return self.slot.dtype
