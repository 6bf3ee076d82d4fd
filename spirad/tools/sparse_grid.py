"""`sd.sparse` (Taichi's `ti.sparse`): `grid(members, shape)`, a 2-D / 3-D struct field on a
bitmasked node (a cell becomes active when written), and `usage(grid)`, the fraction of its
cells that are active.

Built from spirad's own parts (`sd.Struct.field`, `sd.root.bitmasked`, a kernel counting
active cells), so it runs on every arch that has bitmasked nodes."""
# imported under private names: `dir(sd.sparse)` is Taichi's `ti.sparse` (grid, usage)
from kernel_ir.errors import SpiradValueError as _SpiradValueError

from ..data.field import ij as _ij, ijk as _ijk, root as _root
from ..data.struct import Struct as _Struct
from ..frontend.sparse_api import is_active as _is_active
from ..kernel import kernel as _kernel
from ..lang import grouped as _grouped
from ..types import template as _template


def grid(members: dict, shape):
    """A struct field with `members` (name -> type) of `shape` (2 or 3 axes), placed on a
    bitmasked node: cells start inactive and become active when written."""
    shape = tuple(shape)
    if len(shape) not in (2, 3):
        raise _SpiradValueError(f"sd.sparse.grid: only 2-D and 3-D grids, got shape {shape}")
    x = _Struct.field(members)
    _root.bitmasked(_ij if len(shape) == 2 else _ijk, shape).place(x)
    return x


@_kernel
def _active_cells(x: _template()) -> int:
    """The active cells of the bitmasked node `x` (a field) is placed on."""
    n = 0
    for I in _grouped(x.parent()):
        if _is_active(x.parent(), I):
            n += 1
    return n


def usage(x) -> float:
    """The fraction of `x`'s cells (a `grid`) that are active, in [0, 1]."""
    total = 1
    for n in x.shape:
        total *= n
    member = next(iter(x.members.values())) if hasattr(x, "members") else x
    return _active_cells(member) / total
