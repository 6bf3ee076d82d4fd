"""A vector / matrix field's components as fields of their own: Taichi's
`v.get_scalar_field(i, j)`, placing components on different SNodes, and
`v._get_dynamic_index_stride()`.

Why: in Taichi a matrix field is a list of scalar fields, one per component, that a program may
place apart (`root.dense(i, 8).place(v.get_scalar_field(0))`, the next component elsewhere);
Taichi then checks at the next launch that every component got the same shape, and computes
the byte stride between consecutive components (`_get_dynamic_index_stride`, the stride its
code generator uses for `v[i][j]` with a run-time `j`; None where none exists). spirad keeps
the whole matrix field in one storage of its own (spirad.data.snode_layout): the components'
values live there, components apart (Taichi's `Layout.SOA`), laid out by the node the first
component is placed on. So values read by index are Taichi's whatever nodes the components are
placed on, as long as their indices run over the same space. What spirad cannot store in one
storage is refused where the field is used: components below different sparse nodes (each
would activate on its own). The stride is Taichi's number about Taichi's bytes
(spirad.data.snode_bytes), computed with Taichi's algorithm over the components' SNode paths
(taichi-dev/taichi#3810): it says what Taichi's memory looks like, no spirad address uses it.
"""
from __future__ import annotations

import math

from kernel_ir.errors import SpiradRuntimeError, SpiradTypeError, SpiradValueError
from ..runtime.program_hooks import LAUNCH_CHECKS


class ComponentField:
    """One component of a vector / matrix field as a scalar field (`v.get_scalar_field(i, j)`):
    place it (`root.dense(...).place(c)`), read its shape and SNode, read and write its
    elements from Python (they are `v[I][i, j]`)."""

    def __init__(self, owner, comp: int, indices: tuple):
        self._owner = owner
        self._comp = comp        # C-order number of the component in owner.comp_shape
        self._indices = indices  # (i,) for a vector, (i, j) for a matrix
        self.dtype = owner.dtype
        self.comp_shape = ()
        self.name = f"{owner.name}{list(indices)}"

    @property
    def _name(self) -> str:
        return self.name

    def _node(self):
        """The SNode this component is placed on (None: not placed apart)."""
        members = self._owner._members
        return members[self._comp][0] if members and self._comp in members else None

    @property
    def shape(self):
        node = self._node()
        if node is not None:
            return node.shape
        return None if self._owner._members else self._owner.shape

    @property
    def snode(self):
        """The SNode of this component's cells (Taichi's place node of the scalar field)."""
        node = self._node()
        if node is None:
            return self._owner.snode
        return _place_node(self._owner, self._comp, self.name)

    def parent(self, n: int = 1):
        return self.snode.parent(n)

    def __getitem__(self, key):
        return self._owner[key][self._indices].item()

    def __setitem__(self, key, value) -> None:
        self._owner[key][self._indices] = value  # the element writes through (HostElement)

    def to_numpy(self):
        full = self._owner.to_numpy()
        return full[(...,) + self._indices]

    def __repr__(self):
        return f"<spirad field {self.name} (a component of {self._owner.name}) {self.dtype}>"


def component(f, indices) -> ComponentField:
    """`f.get_scalar_field(*indices)`: one index for a vector field, one or two for a matrix
    field (Taichi's: a second index of 0 when left out)."""
    if not f.comp_shape:
        raise SpiradTypeError(f"field {f.name} is a scalar field; get_scalar_field(i, j) "
                              f"takes a component of a vector / matrix field")
    if len(indices) not in (1, 2) or not all(isinstance(k, int) for k in indices):
        raise SpiradTypeError(f"get_scalar_field takes one or two int indices, got {indices}")
    n = f.comp_shape[0]
    m = f.comp_shape[1] if len(f.comp_shape) > 1 else 1
    i, j = indices[0], (indices[1] if len(indices) > 1 else 0)
    if not (0 <= i < n and 0 <= j < m):
        raise SpiradValueError(f"get_scalar_field{tuple(indices)}: field {f.name} has "
                               f"{n} x {m} components")
    cache = f.__dict__.setdefault("_components", {})
    key = i * m + j
    if key not in cache:
        cache[key] = ComponentField(f, key, (i, j) if len(f.comp_shape) > 1 else (i,))
    return cache[key]


def place_component(node, c: ComponentField, order: int):
    """`node.place(c)`: record where component `c` lives. Returns the owning field when `c` is
    its first component placed (the caller places that field on `node`, components apart),
    else None."""
    owner = c._owner
    if owner._members is None:
        if owner.shape is not None:
            raise SpiradValueError(f"field {owner.name} is already placed (or has a shape); "
                                   f"its components cannot be placed apart")
        owner._members = {}
    if c._comp in owner._members:
        raise SpiradValueError(f"component {c.name} is already placed")
    first = not owner._members
    owner._members[c._comp] = (node, order)
    if first:
        owner._soa = True
        return owner
    return None


def check_components(f) -> None:
    """Where `f` is used: every component placed, all of one shape, below the same sparse
    nodes (module doc). Raises otherwise."""
    check_placed(f)
    check_shapes(f)
    members = f._members
    first = members[0][0].sparse
    for node, _ in members.values():
        if len(node.sparse) != len(first) or any(a is not b for a, b in zip(node.sparse, first)):
            from kernel_ir.errors import SpiradNotSupportedError
            raise SpiradNotSupportedError(
                f"field {f.name}: its components are placed below different sparse SNodes; "
                f"spirad stores a vector / matrix field in one storage, activated as one: "
                f"place its components below the same sparse node (or use separate fields)")


def check_placed(f) -> None:
    """Every component of `f` placed (once one is placed apart)."""
    members = f._members
    count = math.prod(f.comp_shape)
    if len(members) != count:
        missing = [str(list(_indices(f, k))) for k in range(count) if k not in members]
        raise SpiradRuntimeError(f"field {f.name}: components {', '.join(missing)} are not "
                                 f"placed; place each one (root.dense(...).place("
                                 f"{f.name}.get_scalar_field(i, j)))")


def check_shapes(f) -> None:
    """Taichi's launch check: the components of a matrix field placed apart have one shape."""
    shapes = [node.shape for node, _ in f._members.values()]
    if any(s != shapes[0] for s in shapes):
        raise SpiradRuntimeError(f"Members of the following field have different shapes "
                                 f"{shapes}: field {f.name}; place every component "
                                 f"(get_scalar_field) on nodes of the same shape")


def check_all_shapes(fields) -> None:
    """The launch check over every field (spirad.runtime.program_hooks)."""
    for f in fields:
        if getattr(f, "_members", None):
            check_shapes(f)


LAUNCH_CHECKS.append(check_all_shapes)


def _indices(f, k: int) -> tuple:
    return divmod(k, f.comp_shape[1]) if len(f.comp_shape) > 1 else (k,)


def _place_node(f, k: int, name: str):
    """Taichi's place node of component `k` of `f`, placed apart: a child of its node."""
    node = f._members[k][0]
    cells = type(node)(node.extents, node.sparse, node)
    cells._name = name
    cells._field = f
    cells._member = k
    return cells


def _path_from_root(node) -> list:
    path = []
    while node is not None:
        path.append(node)
        node = node._parent
    return path[::-1]


def dynamic_index_stride(f):
    """Taichi's `v._get_dynamic_index_stride()`: the bytes between consecutive components in
    Taichi's memory, or None where they are not evenly spaced (module doc)."""
    count = math.prod(f.comp_shape) if f.comp_shape else 1
    if count == 1:
        return 0
    if getattr(f, "_quant", False) or getattr(f, "_quant_vector", False):
        return None  # Taichi's: quantized components have no byte stride
    if not f._members:  # placed whole: Taichi places the components together in one cell
        if f._soa:      # ... or, components apart, one dense block each, one after another
            return math.prod(f.shape or (0,)) * f.dtype.nbytes
        return f.dtype.nbytes
    check_placed(f)
    paths = [_path_from_root(_place_node(f, k, f.name)) for k in range(count)]
    length = len(paths[0])
    if any(len(p) != length for p in paths):
        return None
    lca = next(d for d in range(length) if any(p[d] is not paths[0][d] for p in paths))
    if any(p[d].level is not None for p in paths for d in range(lca, length - 1)):
        return None  # a sparse node between the common ancestor and a component
    for d in range(lca, length - 1):
        if any(p[d]._cell_size_bytes != paths[0][d]._cell_size_bytes or
               p[d + 1]._offset_bytes_in_parent_cell != paths[0][d + 1]._offset_bytes_in_parent_cell
               for p in paths):
            return None
    offsets = [p[lca]._offset_bytes_in_parent_cell for p in paths]
    stride = offsets[1] - offsets[0]
    if any(b - a != stride for a, b in zip(offsets, offsets[1:])):
        return None
    return stride
