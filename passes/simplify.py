"""Constant folding and algebraic simplification.

Folds ops whose operands are all constants (using the reference interpreter's op table, so folding
can never disagree with execution), integer identities (x+0, x-0, x*1, x*0, x//1), no-op casts,
SELECT/IF on constant conditions. Float identities other than x*1 and x+(-0.0) are not applied (x*0
and x+0 are not identities for NaN / -0.0).
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.interpreter import BINARY_IMPL, UNARY_IMPL, cast_value
from kernel_ir.nodes import KernelIR, Node, TaskList
from kernel_ir.ops import Op
from kernel_ir.rewrite import Splice, keep, rebuild

import numpy as np


def _const(n: Node, value) -> Node:
    v = value.item() if hasattr(value, "item") else value
    return Node(Op.CONST, n.dtype, (), v, (), n.loc)


def _is_const(n, value=None):
    return n.op == Op.CONST and (value is None or n.arg == value)


def fold(n: Node, srcs, blocks, arg, env):
    op = n.op
    if srcs and all(s.op == Op.CONST for s in srcs) and (op in BINARY_IMPL or op in UNARY_IMPL or op == Op.CAST):
        vals = [cast_value(s.arg, s.dtype) for s in srcs]
        try:
            with np.errstate(all="ignore"):
                if op in BINARY_IMPL:
                    if op in (Op.DIV, Op.FLOORDIV, Op.MOD) and srcs[0].dtype.is_int and int(vals[1]) == 0:
                        return keep(n, srcs, blocks, arg, env)
                    r = BINARY_IMPL[op](vals[0], vals[1], srcs[0].dtype)
                elif op in UNARY_IMPL:
                    r = UNARY_IMPL[op](vals[0], n.dtype)
                else:
                    r = cast_value(vals[0], n.dtype)
        except (ValueError, OverflowError):
            return keep(n, srcs, blocks, arg, env)
        return _const(n, r)
    if op == Op.CAST and srcs[0].dtype == n.dtype:
        return Splice([], srcs[0])
    if op in (Op.ADD, Op.SUB) and srcs[1].op == Op.CONST and srcs[1].dtype.is_int and srcs[1].arg == 0:
        return Splice([], srcs[0])
    if op == Op.ADD and srcs[0].op == Op.CONST and srcs[0].dtype.is_int and srcs[0].arg == 0:
        return Splice([], srcs[1])
    if op == Op.MUL and n.dtype.is_int:
        for a, b in ((srcs[0], srcs[1]), (srcs[1], srcs[0])):
            if _is_const(b, 1):
                return Splice([], a)
            if _is_const(b, 0):
                return _const(n, 0)
    if op == Op.MUL and n.dtype.is_float and srcs[1].op == Op.CONST and srcs[1].arg == 1.0:
        return Splice([], srcs[0])
    if op == Op.FLOORDIV and n.dtype.is_int and _is_const(srcs[1], 1):
        return Splice([], srcs[0])
    if op == Op.SELECT and srcs[0].op == Op.CONST:
        return Splice([], srcs[1] if srcs[0].arg else srcs[2])
    if op == Op.IF and srcs[0].op == Op.CONST:
        return Splice(list(blocks[0 if srcs[0].arg else 1].nodes))
    return keep(n, srcs, blocks, arg, env)


def simplify_kernel(k: KernelIR) -> KernelIR:
    return KernelIR(k.name, k.args, rebuild(k.body, fold), k.loc)


def simplify_tasks(tl: TaskList) -> TaskList:
    tasks = []
    for t in tl.tasks:
        env = {}
        body = rebuild(t.body, fold, env)
        tasks.append(replace(t, body=body))
    return TaskList(tl.name, tl.args, tuple(tasks), tl.temps)
