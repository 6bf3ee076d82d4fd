"""`sd.simt.*` in kernels: subgroups of one invocation; cooperative ops refused (spirad.simt)."""
from __future__ import annotations

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradNotSupportedError, SpiradTypeError


def _refuse(path):
    def h(v, args, kw, node):
        raise v.ctx.error(SpiradNotSupportedError, f"sd.simt.{path} needs invocations that wait "
                          f"for each other (block / warp / grid cooperation), which spirad does not "
                          f"expose: select a per-thread version of this code for spirad (as with "
                          f"`sd.static(arch == ...)`)", node)
    return h


def _one_lane(name):
    def h(v, args, kw, node):
        b = v.ctx.b
        if name in ("invocation_id",):
            return b.const(0, T.u32)
        if name == "group_size":
            return b.const(1, T.u32)
        if name in ("sync",):
            return None
        if name == "elect":
            return b.const(True, T.u1)
        if not args:
            raise v.ctx.error(SpiradTypeError, f"subgroup.{name} needs a value", node)
        x = v.rvalue(args[0])
        if name == "ballot":
            return v.select(x, v.ctx.b.const(1, T.u32), v.ctx.b.const(0, T.u32))
        if name == "exclusive_add":  # the sum over no earlier invocation
            return v.ctx.b.const(0, v.to_node(x).dtype)
        return x
    return h


def _tiled(name):
    def h(v, args, kw, node):
        log2 = v.rvalue(args[-1]) if args else None
        if log2 != 0:
            raise v.ctx.error(SpiradNotSupportedError, f"sd.simt.subgroup.{name} with tiles of "
                              f"2**{log2} invocations: spirad's subgroups have one invocation", node)
        x = v.rvalue(args[0])
        return x
    return h


def handlers():
    from .. import simt
    out = {}
    for ns, name, op in simt.all_ops():
        if ns == "subgroup" and name in simt.SUBGROUP_ONE_LANE:
            out[op] = _one_lane(name)
        elif ns == "subgroup":
            out[op] = _tiled(name)
        else:
            out[op] = _refuse(op.path)
    return out
