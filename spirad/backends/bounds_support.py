"""Host side of the debug bounds checks (`sd.init(debug=True)`), shared by every backend.

Both code generators, when asked for bounds checks, make every global access test each index
against its axis extent; an out-of-range access is skipped (a load or atomic add yields 0, a
store writes nothing) and the first one records STATUS_INDEX_OUT_OF_RANGE in the program's status
words (`kernel_ir.abi`: task, binding, axis value, axis, extent, access site). `status_error`
(`backends/program.py`) decodes them and `index_error` here turns them into a `SpiradIndexError`
(an IndexError and a ValueError) naming the kernel, task, field/ndarray, its shape and the index,
quoting the source line of the access; the backend raises it at the next sync / host read.
"""
from __future__ import annotations

import struct

from kernel_ir.abi import EXTENT_FORMAT
from kernel_ir.errors import SpiradBoundsError, SpiradIndexError, SpiradOutOfBoundsError
from kernel_ir.nodes import walk
from kernel_ir.ops import GLOBAL_ACCESS

_ACCESS = GLOBAL_ACCESS


class BoundsInfo:
    """What a program keeps to describe a bounds error: binding refs, ndarray shape slots,
    per-task access source locations."""

    def __init__(self, tl, abi):
        self.bindings = abi.bindings
        self.shape_offsets = abi.shape_offsets
        self.sites = [[n.loc for n in walk(t.body) if n.op in _ACCESS] for t in tl.tasks]
        # laid-out ndarrays (`layout=`): their storage order of the axes, by argument index
        self.orders = {k: a.order for k, a in enumerate(tl.args)
                       if a.kind == "ndarray" and a.order}

    def ndarray_shape(self, argbuf: bytes, arg: int):
        """The canonical shape of ndarray argument `arg` in a launch's argument buffer."""
        axes = sorted((ax, off) for a, ax, off in self.shape_offsets if a == arg)
        if argbuf is None or not axes:
            return None
        return self.canonical_shape(
            arg, tuple(struct.unpack_from(EXTENT_FORMAT, argbuf, off)[0] for _, off in axes))

    def canonical_shape(self, arg: int, stored: tuple) -> tuple:
        """The canonical shape of ndarray argument `arg` whose storage has shape `stored`."""
        order = self.orders.get(arg)
        if order is None or len(stored) < len(order):
            return stored
        canonical = list(stored)
        for s, a in enumerate(order):  # storage axis s holds canonical axis order[s]
            canonical[a] = stored[s]
        return tuple(canonical)

    def canonical_axis(self, arg: int, axis: int) -> int:
        """The canonical axis of storage axis `axis` of ndarray argument `arg` (the checks test
        the storage's index on each axis; errors name the user's)."""
        order = self.orders.get(arg)
        return order[axis] if order is not None and 0 <= axis < len(order) else axis


def index_error(kernel: str, task_names, info: BoundsInfo, status, argbufs=()) -> SpiradIndexError:
    """The user error for the decoded status (`kernel_ir.abi.Status`) of a bounds failure.
    `argbufs`: the argument buffers of the launches that may have failed (ndarray shapes); the
    first one that gives a shape is named, and the others too when they differ."""
    from kernel_ir.source import format_loc
    task, k, value = status.task, status.binding, status.value
    axis, extent, site = status.axis, status.extent, status.site
    tname = task_names[task] if 0 <= task < len(task_names) else None
    tdesc = f"task {task}" + (f" '{tname}'" if tname else "")
    ref = info.bindings[k] if 0 <= k < len(info.bindings) else None
    loc = None
    if 0 <= task < len(info.sites) and 0 <= site < len(info.sites[task]):
        loc = info.sites[task][site]
    if ref is None:
        what, shape = f"binding {k}", None
    else:
        label = ref.name or str(ref.key)
        if ref.grad and not label.endswith(".grad"):
            label += ".grad"
        what = f"{ref.kind} '{label}'"
        if ref.kind == "ndarray":
            axis = info.canonical_axis(ref.key, axis)
        if ref.shape is not None:  # a field's, or an ndarray's the program was specialised on
            shape = tuple(int(d) for d in ref.shape)
            if ref.kind == "ndarray":
                shape = info.canonical_shape(ref.key, shape)
        elif ref.kind == "ndarray":
            shapes = []
            for buf in argbufs:
                s = info.ndarray_shape(buf, ref.key)
                if s is not None and s not in shapes:
                    shapes.append(s)
            shape = shapes[0] if len(shapes) == 1 else (" or ".join(map(str, shapes)) or None)
        else:
            shape = ()
    shape_s = f" of shape {shape}" if shape is not None else ""
    first = _field_offset(ref, axis)  # a field's `offset=`: the user's index, not storage's
    if first:
        value += first
        shape_s += f" and offset {_field_offset(ref, None)}"
    valid = f"{first}..{first + extent - 1}" if extent > 0 else "none: the axis is empty"
    err = SpiradBoundsError(
        f"{format_loc(loc)}Out of bound access: index out of range in kernel "
        f"{kernel} ({tdesc}): {what}{shape_s} "
        f"indexed with {value} on axis {axis} (extent {extent}; valid {valid}). The access was "
        f"skipped (a load read 0), so this launch's results are wrong. (Found by the bounds "
        f"checks of sd.init(debug=True).)")
    err.loc = loc
    return err


def _field_offset(ref, axis):
    """The `offset=` of the field behind `ref` (axis `axis`, or the tuple when axis is None):
    the checks test the storage index (index - offset), errors name the user's."""
    if ref is None or ref.kind != "field":
        return 0 if axis is not None else ()
    from ..runtime import state
    f = state.current().field_map().get(ref.key)
    offset = f.offset if f is not None else ()
    if axis is None:
        return offset
    return offset[axis] if 0 <= axis < len(offset) else 0


def ref_label(ref) -> str:
    """How errors name a binding: "field 'x'", "ndarray 'a.grad'"."""
    label = ref.name or str(ref.key)
    if ref.grad and not label.endswith(".grad"):
        label += ".grad"
    return f"{ref.kind} '{label}'"


def out_of_bounds_error(kernel: str, task_names, bindings, status) -> SpiradOutOfBoundsError:
    """The user error of STATUS_OUT_OF_BOUNDS: the default (no debug) bounds check skipped an
    access of binding `status.binding` (`bindings`: the kernel ABI's) in task `status.task`."""
    task, k = status.task, status.binding
    tname = task_names[task] if 0 <= task < len(task_names) else None
    tdesc = f"task {task}" + (f" '{tname}'" if tname else "")
    ref = bindings[k] if 0 <= k < len(bindings) else None
    if ref is None:
        what = "a field or ndarray"
    else:
        what = ref_label(ref)
        if ref.shape is not None:
            what += f" of shape {tuple(int(d) for d in ref.shape)}"
        if any(_field_offset(ref, None)):
            what += f" and offset {_field_offset(ref, None)}"
    return SpiradOutOfBoundsError(
        f"kernel {kernel} ({tdesc}) indexed {what} out of range. The access was skipped (a load "
        f"read 0, a store wrote nothing), so this launch's results are wrong; other fields and "
        f"later launches are not affected. Run with sd.init(debug=True) to get the source line "
        f"and the index (or sd.init(check_bounds=False) to drop these checks).")
