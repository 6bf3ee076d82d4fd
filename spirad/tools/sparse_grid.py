"""`sd.sparse` (Taichi's `ti.sparse`): `grid(members, shape)`, a 2-D / 3-D struct field on a
bitmasked node (a cell becomes active when written), and `usage(grid)`, the fraction of its
cells that are active.

Built from spirad's own parts (`sd.Struct.field`, `sd.root.bitmasked`, a kernel counting
active cells), so it runs on every arch that has bitmasked nodes."""
from __future__ import annotations

from kernel_ir.errors import SpiradValueError

from ..data.field import ij, ijk, root
from ..data.struct import Struct
from ..frontend.sparse_api import is_active
from ..kernel import kernel
from ..lang import grouped
from ..types import template


def grid(members: dict, shape):
    """A struct field with `members` (name -> type) of `shape` (2 or 3 axes), placed on a
    bitmasked node: cells start inactive and become active when written."""
    shape = tuple(shape)
    if len(shape) not in (2, 3):
        raise SpiradValueError(f"sd.sparse.grid: only 2-D and 3-D grids, got shape {shape}")
    x = Struct.field(members)
    root.bitmasked(ij if len(shape) == 2 else ijk, shape).place(x)
    return x


@kernel
def _active_cells(x: template()) -> int:
    """The active cells of the bitmasked node `x` (a field) is placed on."""
    n = 0
    for I in grouped(x.parent()):
        if is_active(x.parent(), I):
            n += 1
    return n


def usage(x) -> float:
    """The fraction of `x`'s cells (a `grid`) that are active, in [0, 1]."""
    total = 1
    for n in x.shape:
        total *= n
    member = next(iter(x.members.values())) if hasattr(x, "members") else x
    return _active_cells(member) / total
