"""Inline @func calls: splice every CALL region into its parent block."""
from __future__ import annotations

from kernel_ir.nodes import KernelIR
from kernel_ir.ops import Op
from kernel_ir.rewrite import Splice, keep, rebuild


def _visit(n, srcs, blocks, arg, env):
    if n.op == Op.CALL:
        return Splice(list(blocks[0].nodes))
    return keep(n, srcs, blocks, arg, env)


def inline_calls(k: KernelIR) -> KernelIR:
    return KernelIR(k.name, k.args, rebuild(k.body, _visit), k.loc)
