"""A kernel specialised on its ndarrays' shapes: every extent a run-time constant of its launch.

    n = x.shape[0]             # NDARRAY_SHAPE (x, 0)      ->  CONST 256
    y[i, i_b]                  # GlobalRef ndarray:y       ->  the same ref, `shape` (12, 256)

Why: an ndarray's extents are known only at launch, so `kernel_ir.index_range` cannot prove an
access in range and the default bounds checks (architecture §8) test it at every execution; in
field mode, where shapes are compile-time constants, the same accesses are proven at compile time
and loop versioning's guards fold, and the checks cost a tenth (docs/performance.md, gcheck2).
`spirad.kernel.Kernel` compiles a kernel taking ndarrays for the shapes of its first launch with
this pass (after inlining, before `simplify` folds the constants, so offloading, autodiff,
`index_range`, `bounds_versioning` and the code generators see them); a launch with other
shapes runs the generic program (compiled once, at the first such launch), never this one.

What changes: an `NDARRAY_SHAPE` leaf of an argument in `shapes` becomes a `CONST` of its value,
and each ndarray `GlobalRef` of such an argument (its `.grad` and `.dual` too) gets the argument's
full shape (element axes included) as `shape`, as a field's ref has: the code generators then use
constant extents for addresses and for the checks that remain, and `index_range` proves an index
against it. An access it cannot prove keeps its check, against the constant extent.

Why it is sound, forward and gradient programs alike: the pass replaces a run-time value by the
value it has at every launch that runs this program (the launch path runs a specialised program
only for arguments of exactly these shapes, and an ndarray's shape cannot change), so every node
computes what it computed before, in every execution. Nothing is forwarded, recomputed, moved or
dropped: control flow (`break`, `continue`, `while` loops, early returns lowered to flags, nested
loops) and the order of stores, overwritten ones included, are the program's own, node for node.
Reverse mode, forward mode and the adstack sizer (host and GPU) run on this program, so they read
the same constants where they read shapes; a gradient's or dual's shape is its ndarray's.
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir import dtypes as T
from kernel_ir.nodes import GlobalRef, KernelIR, Node
from kernel_ir.ops import Op
from kernel_ir.rewrite import keep, rebuild

I32_MAX = (1 << 31) - 1


def specialisable(shapes: dict) -> bool:
    """Whether `shapes` (argument index -> full shape) can be constants: some ndarray, and every
    extent an i32 (`NDARRAY_SHAPE` is i32; a longer axis is refused at launch anyway)."""
    return bool(shapes) and all(0 <= int(d) <= I32_MAX for s in shapes.values() for d in s)


def specialise_shapes(k: KernelIR, shapes: dict) -> KernelIR:
    """`k` with the extents of the ndarray arguments in `shapes` (index -> full shape) constant."""
    if not shapes:
        return k
    refs = {}

    def shaped(ref):
        if not isinstance(ref, GlobalRef) or ref.kind != "ndarray" or ref.shape is not None or \
                ref.key not in shapes:
            return ref
        r = refs.get(ref)
        if r is None:
            shape = tuple(int(d) for d in shapes[ref.key])
            if len(shape) != ref.ndim:
                raise RuntimeError(f"shape_specialise: {ref!r} has {ref.ndim} axes, the argument "
                                   f"{len(shape)}")
            r = refs[ref] = replace(ref, shape=shape)
        return r

    def visit(n, srcs, blocks, arg, env):
        if n.op == Op.NDARRAY_SHAPE and not n.srcs and n.arg[0] in shapes:
            a, axis = n.arg
            return Node(Op.CONST, T.i32, (), int(shapes[a][axis]), (), n.loc)
        return keep(n, srcs, blocks, shaped(arg), env)

    body = rebuild(k.body, visit)
    return k if body is k.body else replace(k, body=body)
