"""Host side of the debug bounds checks (`sd.init(debug=True)`), shared by the CPU and Vulkan
backends.

Both code generators, when asked for bounds checks, make every GLOBAL_LOAD / GLOBAL_STORE /
ATOMIC_ADD test each index against its axis extent; an out-of-range access is skipped (a load or
atomic add yields 0, a store writes nothing) and the first one records, in the program's status
buffer, the u32 words

    0 STATUS_INDEX_OUT_OF_RANGE (3)   4 the offending axis
    1 task index                      5 that axis' extent (low 32 bits)
    2 binding k (abi.bindings[k])     6 the offending *axis value*, bits 32..63
    3 the offending axis value,       7 access site: position of the access among the task's
      bits 0..31                        GLOBAL_LOAD/GLOBAL_STORE/ATOMIC_ADD nodes in walk order

(`llvm_codegen.program`, `spirv_codegen.lower`). The backend turns them into a
`SpiradValueError` naming the kernel, task, field/ndarray, its shape and the index, quoting the
source line of the access, and raises it at the next sync / host read.
"""
from __future__ import annotations

import struct

from kernel_ir.errors import SpiradValueError
from kernel_ir.nodes import walk
from kernel_ir.ops import GLOBAL_ACCESS, Op

STATUS_INDEX_OUT_OF_RANGE = 3
_ACCESS = GLOBAL_ACCESS


class BoundsInfo:
    """What a program keeps to describe a bounds error: binding refs, ndarray shape slots,
    per-task access source locations."""

    def __init__(self, tl, abi):
        self.bindings = abi.bindings
        self.shape_offsets = abi.shape_offsets
        self.sites = [[n.loc for n in walk(t.body) if n.op in _ACCESS] for t in tl.tasks]

    def ndarray_shape(self, argbuf: bytes, arg: int):
        axes = sorted((ax, off) for a, ax, off in self.shape_offsets if a == arg)
        if argbuf is None or not axes:
            return None
        return tuple(struct.unpack_from("<i", argbuf, off)[0] for _, off in axes)


def index_error(kernel: str, task_names, info: BoundsInfo, words, argbufs=()) -> SpiradValueError:
    """The user error for status `words` (8 u32) of a bounds failure. `argbufs`: the argument
    buffers of the launches that may have failed (ndarray shapes); the first one that gives a
    shape is named, and the others too when they differ."""
    from kernel_ir.source import format_loc
    task, k, lo, axis, extent, hi, site = (int(w) for w in words[1:8])
    value = (hi << 32) | lo
    if value >= 1 << 63:
        value -= 1 << 64
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
        if ref.shape is not None:
            shape = tuple(int(d) for d in ref.shape)
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
    valid = f"0..{extent - 1}" if extent > 0 else "none: the axis is empty"
    err = SpiradValueError(
        f"{format_loc(loc)}index out of range in kernel {kernel} ({tdesc}): {what}{shape_s} "
        f"indexed with {value} on axis {axis} (extent {extent}; valid {valid}). The access was "
        f"skipped (a load read 0), so this launch's results are wrong. (Found by the bounds "
        f"checks of sd.init(debug=True).)")
    err.loc = loc
    return err
