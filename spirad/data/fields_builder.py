"""`sd.FieldsBuilder`: fields placed in a tree of their own, whose memory `destroy()` returns.

Taichi's API (`ti.FieldsBuilder`, the same object under the alias):

    fb = sd.FieldsBuilder()
    x = sd.field(sd.f32)
    fb.dense(sd.ij, (n, m)).place(x)      # also fb.place(s) for a 0-d field, fb.lazy_grad()
    tree = fb.finalize()                  # x's memory is allocated here; kernels may use x
    ...
    tree.destroy()                        # x's memory (device and host) is returned

Why: fields otherwise live as long as their `sd.init()` (docs/reliability.md): a program that
creates fields in a loop grows until the next `init()`. A tree is the unit Taichi frees.

How: a placed field records its `SNodeTree` (`Field._tree`; its `.grad` and `.dual` follow
it). Its memory is allocated at `finalize()` by the backend with the tree as a key
(`Backend.allocate_field(..., tree=)`): the SPIR-V backends give a tree root chunks of its own
(`backends/root_buffers.py`), the others a storage per field as for every field. `destroy()`
waits for the launched work, drops the fields' storages, lets the backend return the tree's
buffers (`Backend.release_tree`), takes the fields off the state's list (Tapes, `lazy_grad`)
and bumps the layout version, so every kernel is planned again at its next launch (their
programs and plans, which hold storages, are dropped at once so the memory goes now): one that
uses a destroyed field then raises a `SpiradRuntimeError` naming the field, as does any host
access (`x[0]`, `to_numpy`). A field placed on a builder that is not finalized is refused the
same way. Fields of a tree survive until `destroy()` or the next `sd.init()`, whichever is
first.
"""
from __future__ import annotations

import itertools
import warnings

from kernel_ir.errors import SpiradRuntimeError, SpiradTypeError

from ..runtime import guard as _guard
from ..runtime import state as _state
from .field import Field, SNode
from ..tracebacks import api_class

_tree_ids = itertools.count(1)  # tree 0 is the default root, as in Taichi


class SNodeTree:
    """The fields of one finalized `FieldsBuilder` (Taichi's `SNodeTree`): `.id`, `.destroy()`."""

    def __init__(self):
        self.id = next(_tree_ids)
        self.epoch = _state.current().epoch
        self.fields: list = []     # the user's fields placed on the builder, in placement order
        self.finalized = False
        self.destroyed = False

    def _owns(self) -> list:
        """Every field whose memory is the tree's: the placed fields and their enabled
        gradients and duals."""
        out = []
        for f in self.fields:
            out.append(f)
            out.extend(c for c in (f._grad, f._dual) if c is not None)
        return out

    def destroy(self) -> None:
        """Return the memory of every field of the tree; using one of them afterwards raises."""
        if self.destroyed:
            raise SpiradRuntimeError(f"SNode tree {self.id} has been destroyed")
        st = _state.current()
        if self.epoch != st.epoch:  # its memory went with its sd.init()
            self.destroyed = True
            return
        be = st.backend
        with _guard.launching():
            if be is not None:
                be.sync()  # launched work that uses the fields finishes first
            self.destroyed = True
            mine = {id(f) for f in self.fields}
            for f in self._owns():
                f._buf = None
            if be is not None:
                be.release_tree(self)
            st.fields[:] = [f for f in st.fields if id(f) not in mine]
            st.layout_version += 1  # every kernel is planned (and compiled) again ...
            for k in list(_state.kernels):
                k.forget()  # ... so their programs and plans, which hold storages, go now

    def __repr__(self) -> str:
        state = "destroyed" if self.destroyed else "finalized" if self.finalized else "open"
        return f"<spirad SNodeTree {self.id} {state}, {len(self.fields)} fields>"


class _BuilderNode(SNode):
    """An SNode of a FieldsBuilder: `dense` stays in the builder, `place` records the fields."""

    def __init__(self, builder: "FieldsBuilder", extents=(), sparse=(), parent=None):
        super().__init__(extents, sparse, parent)
        self._builder = builder

    def _child(self, extents) -> "_BuilderNode":
        return _BuilderNode(self._builder, extents, self.sparse, self)

    def place(self, *fields, needs_grad=False, offset=None) -> "_BuilderNode":
        b = self._builder
        b._check_open()
        tree = b._tree
        for f in fields:
            if not isinstance(f, Field):
                raise SpiradTypeError(f"place() expects fields, got {type(f).__name__}")
            owner = f._primal or f._dual_of or f
            if owner._tree is not None and owner._tree is not tree:
                raise SpiradRuntimeError(f"field {owner.name} is already placed in SNode tree "
                                         f"{owner._tree.id}")
        SNode.place(self, *fields, needs_grad=needs_grad, offset=offset)
        for f in fields:
            owner = f._primal or f._dual_of or f
            if owner._tree is None:
                owner._tree = tree
                tree.fields.append(owner)
                b.empty = False
        return self


@api_class
class FieldsBuilder:
    """Places fields in a tree of their own (Taichi's `ti.FieldsBuilder`): `dense(...).place(...)`
    as on `sd.root`, then `finalize()` gives the `SNodeTree` whose `destroy()` frees them."""

    def __init__(self):
        self._tree = SNodeTree()
        self._root = _BuilderNode(self)
        # plain attributes, as Taichi's: no field placed yet; `finalize()` was called (nothing
        # more may be placed)
        self.empty = True
        self.finalized = False

    def _check_open(self) -> None:
        if self._tree.finalized:
            raise SpiradRuntimeError("FieldsBuilder finalized")

    def dense(self, axes, shape) -> SNode:
        """A dense block of `shape` along `axes` in this builder's tree."""
        self._check_open()
        return self._root.dense(axes, shape)

    def place(self, *fields, needs_grad=False, offset=None) -> SNode:
        """Place 0-d fields (one element each) in this builder's tree."""
        return self._root.place(*fields, needs_grad=needs_grad, offset=offset)

    def pointer(self, *a, **k):
        """A `pointer` node in this builder's tree (as `root.pointer`; spirad.data.sparse_layout)."""
        self._check_open()
        return self._root.pointer(*a, **k)

    def bitmasked(self, *a, **k):
        """A `bitmasked` node in this builder's tree (as `root.bitmasked`; spirad.data.sparse_layout)."""
        self._check_open()
        return self._root.bitmasked(*a, **k)

    def dynamic(self, *a, **k):
        """A `dynamic` node in this builder's tree (as `root.dynamic`; spirad.data.sparse_layout)."""
        self._check_open()
        return self._root.dynamic(*a, **k)

    def quant_array(self, *a, **k):
        """A `quant_array` node in this builder's tree (as `root.quant_array`; spirad.data.quant)."""
        self._check_open()
        return self._root.quant_array(*a, **k)

    def lazy_grad(self) -> None:
        """Give every float field of the builder that has none a gradient."""
        self._check_open()
        for f in self._tree.fields:
            if f._grad is None and f.dtype.is_float:
                f._add_grad()

    def lazy_dual(self) -> None:
        """Give every float field of the builder that has none a forward-mode dual."""
        self._check_open()
        for f in self._tree.fields:
            if f._dual is None and f.dtype.is_float:
                f._add_dual()

    def deactivate_all(self) -> None:
        """Taichi deactivates sparse cells; a dense tree has none: nothing to do."""

    def finalize(self, raise_warning: bool = True) -> SNodeTree:
        """Allocate the tree's memory (zero-filled) and return it; the fields are usable from
        here on."""
        self._check_open()
        tree = self._tree
        if self.empty and raise_warning:
            warnings.warn("Finalizing an empty FieldsBuilder!", stacklevel=2)
        tree.finalized = self.finalized = True
        for f in tree._owns():
            f._storage()
        return tree

    def __repr__(self) -> str:
        return f"<spirad FieldsBuilder of {self._tree!r}>"
