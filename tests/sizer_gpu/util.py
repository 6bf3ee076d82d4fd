"""Helpers for the GPU sizer tests: run many independent (expressions, launch data) cases in one
GPU sizer evaluation and compare each root with the host reference `sizer.eval_tree`.

A batch relabels each case's field ids / argument indices (case c: id -> c * STRIDE + id), packs
all arrays of one dtype into one device ndarray (each leaf reads its slice through the leaf
table's `base`), and evaluates every root of every case as one bytecode: each root is
independent on the device (its own jobs, its own error), so per-root outcomes compare exactly.
"""
import numpy as np

import sizer as sz
import spirad as sd
import spirad.runtime.state as sd_state
from sizer.expr import children, replace_children
from spirad.backends.gpu_sizer import Leaf

STRIDE = 16
_SD_DTYPES = {np.dtype(np.int32): sd.i32, np.dtype(np.uint32): sd.u32, np.dtype(np.int64): sd.i64,
              np.dtype(np.float32): sd.f32, np.dtype(np.float64): sd.f64}


def device_sizer():
    """The backend's GPU sizer; on a backend that sizes on the host (cpu), a GPU sizer over it,
    so the sizer kernels' semantics are tested on the LLVM path too."""
    from spirad.backends.gpu_sizer import GpuSizer
    be = sd_state.backend()
    if be.gpu_sizer is not None:
        return be.gpu_sizer
    if _CPU_SIZER[0] is None or _CPU_SIZER[0].be is not be:  # one per (latest) backend
        _CPU_SIZER[0] = GpuSizer(be)
    return _CPU_SIZER[0]


_CPU_SIZER = [None]


def relabel(e, off: int):
    """`e` with every field id / ndarray arg / scalar arg shifted by `off`."""
    new = tuple(relabel(c, off) for c in children(e))
    if isinstance(e, sz.FieldLoad):
        return sz.FieldLoad(e.field + off, new)
    if isinstance(e, sz.NdarrayRead):
        return sz.NdarrayRead(e.arg + off, new)
    if isinstance(e, sz.NdarrayShape):
        return sz.NdarrayShape(e.arg + off, e.axis)
    if isinstance(e, sz.ScalarArg):
        return sz.ScalarArg(e.arg + off)
    return replace_children(e, new) if new else e


def outcome(f):
    try:
        return ("ok", f())
    except sz.SizerError:
        return ("error",)


def reference(roots, ctx):
    return [outcome(lambda r=r: sz.eval_tree(r, ctx)) for r in roots]


def run_batch(cases, entry_sizes=None, kinds=None):
    """cases: list of (roots, DictContext). Returns (per case: list of outcomes per root,
    the sizer Result)."""
    gs = device_sizer()
    all_roots, owner = [], []
    pools: dict = {}         # numpy dtype -> list of (leaf key, array)
    scalars, shapes = {}, {}
    for c, (roots, ctx) in enumerate(cases):
        off = c * STRIDE
        for r in roots:
            all_roots.append(relabel(r, off))
            owner.append(c)
        for k, v in ctx.scalars.items():
            scalars[k + off] = v
        for k, v in ctx.shapes.items():
            shapes[k + off] = v
        for kind, arrays in (("ndarray", ctx.ndarrays), ("field", ctx.fields)):
            for k, a in arrays.items():
                a = np.asarray(a)
                if a.dtype == np.bool_:
                    a = a.astype(np.uint32)
                pools.setdefault(a.dtype, []).append(((kind, k + off), a))
    leaves, keep = {}, []
    for dt, items in pools.items():
        total = sum(a.size for _, a in items)
        nd = sd.ndarray(_SD_DTYPES[dt], max(total, 1))
        flat = np.zeros(max(total, 1), dt)
        base = 0
        for key, a in items:
            flat[base:base + a.size] = a.reshape(-1)
            leaves[key] = Leaf(nd._storage(), nd.dtype, a.shape, base)
            base += a.size
        nd.from_numpy(flat)
        keep.append(nd)
    plan = gs.plan(all_roots, leaves=leaves, scalars=scalars, shapes=shapes,
                   entry_sizes=entry_sizes, kinds=kinds)
    res = gs.run(plan, raise_errors=False)
    got = [[] for _ in cases]
    for r, c in enumerate(owner):
        got[c].append(("error",) if res.errors[r] else ("ok", res.values[r]))
    return got, res
