"""Calls the frontend understands: `sd.*` math, casts, atomics, Python builtins, Vector/Matrix.

One table, `HANDLERS`, maps a Python function object to `handler(visitor, args, kwargs, node)`;
the visitor's call path looks the callee up here (one place, no if/elif chain over names).
"""
from __future__ import annotations

import builtins as py
import math

from .. import lang
from kernel_ir.errors import SpiradSyntaxError, SpiradTypeError
from kernel_ir.dtypes import DType, from_python
from kernel_ir.mathfns import MATH
from kernel_ir.ops import ATOMIC_COMBINE, Op
from ..data.matrix import Matrix, Vector
from .rng import h_random
from .value_ops import is_py_scalar
from .values import GlobalElem, Slot, SlotView, VecVal
from ..func import func as _func_decorator


def _unary(op, pyfn=None):
    def h(v, args, kw, node):
        _arity(v, args, 1, node)
        a = v.rvalue(args[0])
        if pyfn is not None and is_py_scalar(a):
            return pyfn(a)
        return v.unop(op, a)
    return h


def _binary(op):
    def h(v, args, kw, node):
        _arity(v, args, 2, node)
        return v.binop(op, args[0], args[1])
    return h


def _minmax(op):
    def h(v, args, kw, node):
        if len(args) == 1 and isinstance(v.rvalue(args[0]), VecVal):
            comps = v.rvalue(args[0]).comps
        else:
            comps = args
        if len(comps) < 2:
            raise v.ctx.error(SpiradTypeError, "min/max need at least two values", node)
        acc = comps[0]
        for c in comps[1:]:
            acc = v.binop(op, acc, c)
        return acc
    return h


def _arity(v, args, n, node):
    if len(args) != n:
        raise v.ctx.error(SpiradTypeError, f"expected {n} argument(s), got {len(args)}", node)


def _cast_to(v, args, kw, node, dtype: DType):
    _arity(v, args, 1, node)
    a = v.rvalue(args[0])
    if is_py_scalar(a):
        return py.float(a) if dtype.is_float else py.int(a)
    return v.cast(a, dtype)


def h_cast(v, args, kw, node):
    args = list(args) + [kw[k] for k in ("obj", "dtype")[len(args):] if k in kw]  # Taichi's names
    _arity(v, args, 2, node)
    dtype = from_python(args[1], v.ctx.default_fp, v.ctx.default_ip)
    if not isinstance(dtype, DType):
        raise v.ctx.error(SpiradTypeError, "cast(x, dtype) needs a dtype such as sd.f32", node)
    return v.cast(args[0], dtype)


def h_float(v, args, kw, node):
    return _cast_to(v, args, kw, node, v.ctx.default_fp)


def h_int(v, args, kw, node):
    return _cast_to(v, args, kw, node, v.ctx.default_ip)


def h_abs(v, args, kw, node):
    _arity(v, args, 1, node)
    a = v.rvalue(args[0])
    return py.abs(a) if is_py_scalar(a) else v.unop(Op.ABS, a)


def _all_any(op, pyfn):
    """Python's `all(x)` / `any(x)` in a kernel, as Taichi reads them: of a vector / matrix,
    whether every / some component is non-zero (a kernel value); of a list or tuple, the same
    over its items; of compile-time values, Python's own answer."""
    def h(v, args, kw, node):
        _arity(v, args, 1, node)
        a = v.rvalue(args[0])
        items = a.comps if isinstance(a, VecVal) else a if isinstance(a, (list, tuple)) else None
        if items is None:
            raise v.ctx.error(SpiradTypeError, f"{pyfn.__name__}() takes a vector, a matrix or a "
                                               f"list in a kernel", node)
        items = [v.rvalue(x) for x in items]
        if all(is_py_scalar(x) for x in items):
            return pyfn(items)
        acc = None
        for x in items:
            c = v.to_cond(x)
            acc = c if acc is None else v.ctx.b.binary(op, acc, c)
        return acc
    return h


def h_select(v, args, kw, node):
    _arity(v, args, 3, node)
    return v.select(*args)


def _local_update(v, target, op, value):
    """An atomic on a local variable (or a component of one; Taichi allows them): the plain
    update `target = target <op> value` (one thread owns a local). Returns the old value."""
    old = v.rvalue(target)
    v.store_into(target, v.binop(op, old, value))
    return old


def _is_global(target) -> bool:
    """A field / ndarray element (a quantized field's too: frontend/quant_ops), not a local."""
    return isinstance(target, GlobalElem) or type(target).__name__ in ("QuantElem", "QuantVecElem")


def _target(v, args, name, node):
    _arity(v, args, 2, node)
    if not isinstance(args[0], (GlobalElem, Slot, SlotView)) and \
            type(args[0]).__name__ not in ("QuantElem", "QuantVecElem"):  # frontend/quant_ops
        raise v.ctx.error(SpiradSyntaxError, f"cannot use a non-writable target as the first "
                                             f"operand of {name}: give a field or ndarray "
                                             f"element or a local variable", node)
    return args[0]


def h_atomic_add(v, args, kw, node):
    target = _target(v, args, "atomic_add", node)
    if not _is_global(target):
        return _local_update(v, target, Op.ADD, args[1])
    return v.atomic_add_into(target, args[1])


def h_atomic_sub(v, args, kw, node):
    """atomic_sub(x[i], v) is atomic_add(x[i], -v); returns the old value."""
    target = _target(v, args, "atomic_sub", node)
    if not _is_global(target):
        return _local_update(v, target, Op.SUB, args[1])
    a = v.rvalue(args[1])
    return v.atomic_add_into(target, -a if is_py_scalar(a) else v.unop(Op.NEG, a))


def h_atomic_mul(v, args, kw, node):
    """Taichi's atomic_mul: on a field / ndarray element an atomic multiply (a compare-and-swap
    loop in every code generator), on a local the plain update; returns the old value."""
    target = _target(v, args, "atomic_mul", node)
    if _is_global(target):
        return v.atomic_into(Op.ATOMIC_MUL, target, args[1], "atomic_mul")
    return _local_update(v, target, Op.MUL, args[1])


def h_func(v, args, kw, node):
    """`sd.func(f)(x)` in a kernel (Taichi's tests do it): `f` made a func where it is called,
    inlined like a decorated one (a plain function's wrapper is cached per function object)."""
    from ..func import Func, plain_func
    _arity(v, args, 1, node)
    f = v.rvalue(args[0])
    if isinstance(f, Func):
        return f
    if not callable(f) or not hasattr(f, "__code__"):
        raise v.ctx.error(SpiradTypeError, f"sd.func() needs a Python function, got "
                                           f"{type(f).__name__}", node)
    return plain_func(f)


def _zero(v, args, node):
    """Taichi's `zero(x)`: `x * 0` (its type and shape)."""
    _arity(v, args, 1, node)
    return v.binop(Op.MUL, v.rvalue(args[0]), 0)


def _atomic(op, name):
    """`sd.atomic_<name>(target, value)` (Quadrants' family): returns the old value."""
    def h(v, args, kw, node):
        target = _target(v, args, f"atomic_{name}", node)
        if isinstance(target, SlotView):  # a component of a local vector
            if ATOMIC_COMBINE[op] is None:
                old = v.rvalue(target)
                v.store_into(target, args[1])
                return old
            return _local_update(v, target, ATOMIC_COMBINE[op], args[1])
        return v.atomic_into(op, target, args[1], f"atomic_{name}")
    return h


def _componentwise(h, v, a, b, node):
    """`h(a, b)` of two vectors / matrices (or one and a scalar), component by component."""
    shape = (a if isinstance(a, VecVal) else b).shape
    ca = a.comps if isinstance(a, VecVal) else (a,) * len(b.comps)
    cb = b.comps if isinstance(b, VecVal) else (b,) * len(a.comps)
    if len(ca) != len(cb):
        raise v.ctx.error(SpiradTypeError, f"operands of different shapes {a.shape} and "
                                           f"{b.shape}", node)
    return VecVal(tuple(h(v, [x, y], node) for x, y in zip(ca, cb)), shape)


def h_raw_div(v, args, node):
    """`raw_div(a, b)`: C's division, integers truncated toward zero, floats the true quotient;
    vectors / matrices component by component."""
    _arity(v, args, 2, node)
    a, b = v.rvalue(args[0]), v.rvalue(args[1])
    if isinstance(a, VecVal) or isinstance(b, VecVal):
        return _componentwise(h_raw_div, v, a, b, node)
    if is_py_scalar(a) and is_py_scalar(b):
        return lang.raw_div(a, b)
    t = v.binop(Op.MOD, a, b).dtype  # the promoted type of a op b
    return v.ctx.b.binary(Op.DIV, v.to_node(a, t), v.to_node(b, t))  # ints: truncating


def h_raw_mod(v, args, node):
    """`raw_mod(a, b)`: a - b * trunc(a / b) (C's %, fmod on floats)."""
    _arity(v, args, 2, node)
    a, b = v.rvalue(args[0]), v.rvalue(args[1])
    if isinstance(a, VecVal) or isinstance(b, VecVal):  # component by component
        return _componentwise(h_raw_mod, v, a, b, node)
    if is_py_scalar(a) and is_py_scalar(b):
        return math.fmod(a, b) if isinstance(a, float) or isinstance(b, float) else int(math.fmod(a, b))
    t = v.binop(Op.MOD, a, b).dtype  # the promoted type of a op b
    na, nb = v.to_node(a, t), v.to_node(b, t)
    bb = v.ctx.b
    if t.is_float:
        q = bb.binary(Op.DIV, na, nb)
        q = bb.select(bb.binary(Op.CMP_LT, q, bb.const(0.0, t)), v.unop(Op.NEG, v.unop(Op.FLOOR, v.unop(Op.NEG, q))),
                      v.unop(Op.FLOOR, q))  # trunc(a / b)
    else:
        q = bb.binary(Op.DIV, na, nb)  # integer DIV truncates toward zero (kernel_ir)
    return bb.binary(Op.SUB, na, bb.binary(Op.MUL, nb, q))


def h_polar_decompose(v, args, kw, node):
    """`R, S = sd.polar_decompose(A)`: A = R S, R a rotation, S symmetric; 2x2 in closed form,
    3x3 from the SVD (frontend/svd)."""
    if len(args) not in (1, 2):
        raise v.ctx.error(SpiradTypeError, "polar_decompose(A, dt=None) takes a matrix", node)
    a = v.rvalue(args[0])
    if isinstance(a, VecVal) and a.shape == (3, 3):
        from .svd import polar3  # R = U Vᵀ, S = V Σ Vᵀ from the 3x3 SVD
        return polar3(v, a, node)
    if not isinstance(a, VecVal) or a.shape != (2, 2):
        from kernel_ir.errors import SpiradNotSupportedError
        shape = a.shape if isinstance(a, VecVal) else "a scalar"
        raise v.ctx.error(SpiradNotSupportedError, f"Polar decomposition only supports 2D and "
                                                   f"3D matrices. (got {shape})", node)
    a00, a01, a10, a11 = a.comps
    x = v.binop(Op.ADD, a00, a11)
    y = v.binop(Op.SUB, a10, a01)
    inv = v.unop(Op.RSQRT, v.binop(Op.ADD, v.binop(Op.MUL, x, x), v.binop(Op.MUL, y, y)))
    c, s = v.binop(Op.MUL, x, inv), v.binop(Op.MUL, y, inv)
    r = VecVal((c, v.unop(Op.NEG, s), s, c), (2, 2))
    rt = VecVal((c, s, v.unop(Op.NEG, s), c), (2, 2))
    return r, v.matmul(rt, a, node)


def _print(v, args, kw, node):
    """`print` in a kernel (frontend/formatting.py: imported by the kernels that print, #27)."""
    from .formatting import h_print
    return h_print(v, args, kw, node)


def _svd_module():
    from . import svd  # loaded by the first kernel that decomposes a matrix
    return svd


def _rows_or_cols(cols):
    def h(v, args, kw, node):
        _arity(v, args, 1, node)
        items = [v.rvalue(x) for x in v.rvalue(args[0])]
        vecs = [x.comps if isinstance(x, VecVal) else tuple(v.rvalue(c) for c in x) for x in items]
        if not vecs or any(len(r) != len(vecs[0]) for r in vecs):
            raise v.ctx.error(SpiradTypeError, "Matrix.rows / cols need vectors of equal size", node)
        rows = [list(r) for r in (zip(*vecs) if cols else vecs)]
        return _build(v, [x for r in rows for x in r], (len(rows), len(rows[0])), None)
    return h


def h_bool(v, args, kw, node):
    """`bool(x)` in a kernel: `x != 0` as a u1 (a compile-time value: Python's bool)."""
    _arity(v, args, 1, node)
    x = v.rvalue(args[0])
    if not isinstance(x, VecVal) and (is_py_scalar(x) or not hasattr(x, "dtype")):
        return py.bool(x)
    if isinstance(x, VecVal):
        raise v.ctx.error(SpiradTypeError, "bool() of a vector / matrix is ambiguous; use "
                                           "all(v) or any(v)", node)
    return v.to_cond(x)


def h_sum(v, args, kw, node):
    """`sum(seq[, start])` over a compile-time sequence (a list, a tuple, a comprehension's
    result, dict values) or a vector's components: unrolled additions, as Python adds."""
    if not 1 <= len(args) <= 2 or kw:
        raise v.ctx.error(SpiradTypeError, "sum(seq[, start]) takes one or two arguments", node)
    seq = v.rvalue(args[0])
    items = seq.comps if isinstance(seq, VecVal) else seq
    if not isinstance(items, (list, tuple, type({}.values()))):
        raise v.ctx.error(SpiradTypeError, f"sum() in a kernel needs a list, tuple or vector "
                                           f"known at compile time, got {type(seq).__name__}", node)
    acc = v.rvalue(args[1]) if len(args) == 2 else 0
    for x in items:
        acc = v.binop(Op.ADD, acc, x)
    return acc


def h_atan(v, args, kw, node):
    _arity(v, args, 1, node)
    return v.binop(Op.ATAN2, args[0], 1.0)


def h_floor(v, args, kw, node):
    """floor(x, dtype=None): Taichi's optional result type. An integer kernel value is refused,
    as in Taichi (its floor is itself: a likely mistake, such as an integer division)."""
    dtype = args[1] if len(args) > 1 else kw.get("dtype")
    a = v.rvalue(args[0]) if args else None
    from kernel_ir.nodes import Node
    if any(isinstance(c, Node) and not c.dtype.is_float
           for c in (a.comps if isinstance(a, VecVal) else (a,))):
        raise v.ctx.error(SpiradTypeError, "'floor' takes real inputs only (floor / ceil / round "
                                           "of an integer is the integer itself)", node)
    r = _unary(Op.FLOOR, math.floor)(v, args[:1], {}, node)
    if dtype is None:
        return r
    return h_cast(v, [r, dtype], {}, node)


def _element_dtype(v, args, kw, node):
    """The element type of `Vector(items, dt)` / `Matrix(rows, dt)` (positional or keyword, as
    in Python scope; Taichi's), or None: from the items."""
    if len(args) not in (1, 2):
        raise v.ctx.error(SpiradTypeError, f"expected 1 or 2 argument(s) (the items, a dtype), "
                                           f"got {len(args)}", node)
    dt = v.rvalue(args[1]) if len(args) == 2 else kw.get("dt")
    return None if dt is None else from_python(dt, v.ctx.default_fp, v.ctx.default_ip)


def h_vector(v, args, kw, node):
    dt = _element_dtype(v, args, kw, node)
    items = v.rvalue(args[0])
    if isinstance(items, VecVal):
        return items if dt is None else VecVal(tuple(v.cast(c, dt) for c in items.comps),
                                               items.shape)
    if not isinstance(items, (list, tuple)) or not items:
        raise v.ctx.error(SpiradTypeError, "Vector([...]) needs a non-empty list", node)
    return _build(v, list(items), (len(items),), dt)


def h_matrix(v, args, kw, node):
    _element_dtype(v, args, kw, node)
    rows = v.rvalue(args[0])
    if isinstance(rows, (list, tuple)) and rows and not any(
            isinstance(r, (list, tuple, VecVal)) for r in rows):
        return h_vector(v, args, kw, node)  # a flat list gives a vector, as in Taichi
    if isinstance(rows, (list, tuple)):
        rows = [r.comps if isinstance(r, VecVal) and len(r.shape) == 1 else r for r in rows]
    if not isinstance(rows, (list, tuple)) or not rows or not all(isinstance(r, (list, tuple)) for r in rows):
        raise v.ctx.error(SpiradTypeError, "Matrix([[...], ...]) needs a list of rows", node)
    m = len(rows[0])
    if any(len(r) != m for r in rows):
        raise v.ctx.error(SpiradTypeError, "Matrix rows must have equal length", node)
    return _build(v, [x for r in rows for x in r], (len(rows), m), _element_dtype(v, args, kw, node))


def _build(v, flat, shape, dt):
    from .typing import promote
    ts = [x.dtype for x in flat if not is_py_scalar(x)]
    if dt is None:
        t = None
        for x in ts:
            t = x if t is None else promote(t, x)
        if t is None:
            t = v.ctx.default_fp if any(isinstance(x, py.float) for x in flat) else v.ctx.default_ip
        elif any(isinstance(x, py.float) for x in flat) and t.is_int:
            t = v.ctx.default_fp
    else:
        t = dt
    return VecVal(tuple(v.to_node(x, t) for x in flat), shape)


def h_diag(v, args, kw, node):
    """`Matrix.diag(dim, val)`: val on the diagonal, 0 elsewhere (dim a compile-time int)."""
    args = list(args) + [kw[k] for k in ("dim", "val")[len(args):] if k in kw]
    _arity(v, args, 2, node)
    dim, val = v.rvalue(args[0]), v.rvalue(args[1])
    if not isinstance(dim, int) or isinstance(dim, bool) or not 0 < dim <= 32:
        raise v.ctx.error(SpiradTypeError, "Matrix.diag(dim, val) needs a compile-time size", node)
    if isinstance(val, VecVal):
        raise v.ctx.error(SpiradTypeError, "Matrix.diag(dim, val) needs a scalar val", node)
    return _build(v, [val if r == c else 0 for r in range(dim) for c in range(dim)], (dim, dim),
                  None)


def _math(op, pyfn):
    """A function of Python's `math` module: folded in Python (double precision) on constants,
    as Taichi does; on kernel values the spirad function of the same meaning."""
    return _unary(op, pyfn)


def _math_helper(name, pyfn):
    """math.ceil / math.trunc: folded on constants, else spirad.math's helper (inlined)."""
    def h(v, args, kw, node):
        _arity(v, args, 1, node)
        a = v.rvalue(args[0])
        if is_py_scalar(a):
            return pyfn(a)
        from .. import math as sdmath
        return v.inline_func(getattr(sdmath, name), [a], {}, node)
    return h


def h_pow(v, args, kw, node):
    """Builtin `pow(a, b)` / `math.pow`: `a ** b`."""
    _arity(v, args, 2, node)
    return v.binop(Op.POW, args[0], args[1])


def h_math_pow(v, args, kw, node):
    _arity(v, args, 2, node)
    a, b = v.rvalue(args[0]), v.rvalue(args[1])
    if is_py_scalar(a) and is_py_scalar(b):
        return math.pow(a, b)
    return v.binop(Op.POW, v.cast(a, v.ctx.default_fp) if is_py_scalar(a) else a, b)


def h_randn(v, args, kw, node):
    """`sd.randn(dtype=None)`: a standard normal sample by Box-Muller from two `sd.random()`
    draws (Taichi's formula: sqrt(-2 log(1 - u1)) cos(2 pi u2))."""
    dtype = args[0] if args else kw.get("dt", kw.get("dtype"))
    dtype = from_python(float if dtype is None else dtype, v.ctx.default_fp, v.ctx.default_ip)
    if not isinstance(dtype, DType) or not dtype.is_float:
        raise v.ctx.error(SpiradTypeError, "randn(dtype) needs a float dtype", node)
    u1 = v.binop(Op.SUB, 1.0, h_random(v, [dtype], {}, node))
    u2 = h_random(v, [dtype], {}, node)
    r = v.unop(Op.SQRT, v.binop(Op.MUL, -2.0, v.unop(Op.LOG, u1)))
    return v.binop(Op.MUL, r, v.unop(Op.COS, v.binop(Op.MUL, math.tau, u2)))


def h_static(v, args, kw, node):
    raise v.ctx.error(SpiradSyntaxError, "static(...) is evaluated by the visitor", node)


def h_range(v, args, kw, node):
    """`range` with compile-time bounds is a Python range (for `static(range(n))`); with run-time
    bounds it only makes sense as a for-loop iterator, which `build_For` handles itself."""
    vals = [v.rvalue(a) for a in args]
    if kw or not all(isinstance(a, int) and not isinstance(a, bool) for a in vals):
        raise v.ctx.error(SpiradSyntaxError, "range() with run-time bounds is only allowed as a "
                                             "for-loop iterator", node)
    return py.range(*vals)


def h_len(v, args, kw, node):
    a = v.rvalue(args[0])
    if isinstance(a, VecVal):
        return a.shape[0]
    if isinstance(a, (list, tuple, str)):
        return len(a)
    from .formatting import FormatStr
    if isinstance(a, FormatStr):
        raise v.ctx.error(SpiradTypeError, FormatStr.ONLY_PRINTED, node)
    raise v.ctx.error(SpiradTypeError, "len() needs a vector or a compile-time sequence", node)


def h_ndrange(v, args, kw, node):
    """`ndrange(n, (a, b), ..., axes=None)`: each entry an integer or an (begin, end) pair of
    integers (Taichi's errors and texts otherwise); numpy integers count as integers. `axes=`
    (Quadrants'): the nesting order, a permutation of the entries' indices, outermost first,
    checked here with Quadrants' texts; the loop builder (frontend/stmt.py) applies it."""
    dims = []
    for a in args:
        d = v.rvalue(a)
        if isinstance(d, (tuple, list)):
            if len(d) != 2:
                raise v.ctx.error(SpiradSyntaxError, "Every argument of ndrange should be a scalar "
                                  "or a tuple/list like (begin, end)", node)
            d = tuple(_ndrange_int(v, v.rvalue(x), node) for x in d)
        else:
            d = _ndrange_int(v, d, node)
        dims.append(d)
    unknown = sorted(set(kw) - {"axes"})
    if unknown:
        raise v.ctx.error(SpiradTypeError, f"ndrange() got an unexpected keyword argument "
                          f"'{unknown[0]}' (it takes `axes=`)", node)
    axes = kw.get("axes")
    if axes is not None:
        axes = v.rvalue(axes)
        axes = tuple(v.rvalue(e) for e in axes) if isinstance(axes, (tuple, list)) else axes
    try:  # Quadrants' checks and texts (data/ndrange_axes.py), at the user's line
        return lang.ndrange(*dims, axes=axes)
    except (SpiradSyntaxError, SpiradTypeError) as e:
        raise v.ctx.error(type(e), str(e), node) from None


def _ndrange_int(v, x, node):
    import numbers
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return int(x)
    dt = getattr(x, "dtype", None)
    if isinstance(dt, DType) and dt.is_int:
        return x
    raise v.ctx.error(SpiradTypeError, "Every argument of ndrange should be an integer scalar or "
                      "a tuple/list of (int, int)", node)


def h_grouped(v, args, kw, node):
    _arity(v, args, 1, node)
    return lang.grouped(args[0])


def _filled(kind):
    """Vector.zero / one / unit and Matrix.identity / zero / one called in a kernel: constants. The
    arguments bind as in Python scope, keywords included (`Matrix.identity(dt=f32, n=3)`, as
    Genesis writes it)."""
    def h(v, args, kw, node):
        import inspect
        vals = [v.rvalue(a) for a in args]
        kvals = {k: v.rvalue(x) for k, x in kw.items()}
        try:
            import numpy as np
            from ..data.matrix import Matrix as M, Vector as V
            fn = {"zero": V.zero, "one": V.one, "unit": V.unit, "identity": M.identity,
                  "mzero": M.zero, "mone": M.one}[kind]
            bound = inspect.signature(fn).bind(*vals, **kvals)
            bound.apply_defaults()
            value = fn(*bound.args, **bound.kwargs)
            dt = bound.arguments["dt"]
        except Exception as e:  # noqa: BLE001 - a bad call: report it at the kernel line
            raise v.ctx.error(SpiradTypeError, f"{kind}(...): {e}", node) from None
        from ..data.field import resolve_dtype
        t = resolve_dtype(from_python(dt, v.ctx.default_fp, v.ctx.default_ip))[0]
        flat = np.asarray(value).reshape(-1).tolist()
        return VecVal(tuple(v.const(x, t) for x in flat), tuple(np.shape(value)))
    return h


def h_stop_grad(v, args, kw, node):
    """`sd.stop_grad(x)`: reads of field / ndarray `x` in the enclosing block are constants to
    reverse mode (`Ctx.grad_stopped`; `StmtVisitor.build_stmts` runs the call first)."""
    from ..data.field import Field
    from .values import NdarrayArg
    if kw or len(args) != 1:
        raise v.ctx.error(SpiradTypeError, "stop_grad() takes one field or ndarray", node)
    x = args[0]
    if isinstance(x, Field):
        key = (x.ref().kind, x.ref().key)
    elif isinstance(x, NdarrayArg):
        key = ("ndarray", x.arg_index)
    else:
        raise v.ctx.error(SpiradTypeError, f"stop_grad() takes a field or an ndarray, got "
                                           f"{type(x).__name__}", node)
    entry = (v.ctx.frame.scopes[-1], key)
    if not any(s is entry[0] and k == entry[1] for s, k in v.ctx.stop_grads):
        v.ctx.stop_grads.append(entry)
    return None


def h_static_assert(v, args, node):
    vals = [v.rvalue(a) for a in args]
    if not vals or not all(is_py_scalar(x) or isinstance(x, str) for x in vals):
        raise v.ctx.error(SpiradTypeError, "Static assert with non-static condition: "
                                           "static_assert(cond, msg) needs a condition known at "
                                           "compile time (assert checks at run time)", node)
    if not vals[0]:
        from kernel_ir.errors import SpiradValueError
        msg = vals[1] if len(vals) > 1 else ""
        raise v.ctx.error(SpiradValueError, f"static_assert failed{': ' + msg if msg else ''}", node)
    return None


def h_loop_config(v, args, kw, node):
    """`sd.loop_config(serialize=..., block_dim=..., parallelize=...)`: applies to the next for
    loop. serialize=True runs it serially (in order, on one thread; break is allowed);
    block_dim / parallelize are scheduling hints (accepted, the backend picks the group size);
    bit_vectorize (Taichi's: one thread per packed word of a quant_array) too: each cell is
    its own compare-and-swap on the word, with the same result. block_dim_adaptive (Taichi's
    CPU block-size heuristic switch) is a scheduling hint too."""
    unknown = set(kw) - {"serialize", "block_dim", "parallelize", "uniform", "bit_vectorize",
                         "block_dim_adaptive",
                         "name"}  # name: Quadrants' label of the loop (profiling), accepted
    if args or unknown:
        raise v.ctx.error(SpiradTypeError, "loop_config takes keyword arguments serialize=, "
                                           "block_dim=, parallelize=", node)
    cfg = {k: v.rvalue(x) for k, x in kw.items()}
    v.ctx.loop_config = cfg
    return None


HANDLERS = {
    Vector.zero: _filled("zero"), Vector.one: _filled("one"), Vector.unit: _filled("unit"),
    Matrix.identity: _filled("identity"), Matrix.zero: _filled("mzero"),
    Matrix.one: _filled("mone"),
    lang.loop_config: h_loop_config, lang.random: h_random,
    lang.floor: h_floor, lang.atan: h_atan,
    Matrix.rows: _rows_or_cols(False), Matrix.cols: _rows_or_cols(True), lang.abs: h_abs, py.abs: h_abs,
    lang.atan2: _binary(Op.ATAN2), lang.pow: _binary(Op.POW),
    lang.min: _minmax(Op.MIN), lang.max: _minmax(Op.MAX), py.min: _minmax(Op.MIN), py.max: _minmax(Op.MAX),
    py.all: _all_any(Op.AND, py.all), py.any: _all_any(Op.OR, py.any),
    lang.select: h_select, lang.cast: h_cast, py.float: h_float, py.int: h_int,
    lang.atomic_add: h_atomic_add, lang.atomic_sub: h_atomic_sub, lang.atomic_mul: h_atomic_mul,
    lang.zero: lambda v, args, kw, node: _zero(v, args, node), _func_decorator: h_func,
    lang.one: lambda v, args, kw, node: v.binop(Op.ADD, _zero(v, args, node), 1),
    lang.atomic_min: _atomic(Op.ATOMIC_MIN, "min"), lang.atomic_max: _atomic(Op.ATOMIC_MAX, "max"),
    lang.atomic_and: _atomic(Op.ATOMIC_AND, "and"), lang.atomic_or: _atomic(Op.ATOMIC_OR, "or"),
    lang.atomic_xor: _atomic(Op.ATOMIC_XOR, "xor"), lang.atomic_exchange: _atomic(Op.ATOMIC_XCHG, "exchange"),
    lang.raw_mod: lambda v, args, kw, node: h_raw_mod(v, args, node),
    lang.raw_div: lambda v, args, kw, node: h_raw_div(v, args, node),
    lang.polar_decompose: h_polar_decompose,
    lang.svd: lambda v, args, kw, node: _svd_module().h_svd(v, args, kw, node),
    lang.sym_eig: lambda v, args, kw, node: _svd_module().h_sym_eig(v, args, kw, node),
    lang.eig: lambda v, args, kw, node: _svd_module().h_eig(v, args, kw, node),
    lang.block_local: lambda v, args, kw, node: None, lang.stop_grad: h_stop_grad,
    lang.cache_read_only: lambda v, args, kw, node: None,
    lang.static_assert: lambda v, args, kw, node: h_static_assert(v, args, node),
    lang.static_print: lambda v, args, kw, node: lang.static_print(*[v.rvalue(a) for a in args]),
    lang.assume_in_range: lambda v, args, kw, node: args[0], Vector: h_vector, Matrix: h_matrix,
    lang.static: h_static, lang.ndrange: h_ndrange, lang.grouped: h_grouped, py.range: h_range, py.len: h_len,
    py.print: _print, py.pow: h_pow, py.bool: h_bool, py.sum: h_sum, Matrix.diag: h_diag, lang.randn: h_randn,
    # Python's math module (Taichi folds these on constants; spirad also takes kernel values)
    math.log: lambda v, args, kw, node: _math_log(v, args, node),
    math.fabs: _math(Op.ABS, math.fabs),
    math.floor: _math(Op.FLOOR, math.floor), math.atan: h_atan, math.pow: h_math_pow,
    math.ceil: _math_helper("ceil", math.ceil), math.trunc: _math_helper("trunc", math.trunc),
    math.atan2: lambda v, args, kw, node: (math.atan2(*[v.rvalue(a) for a in args])
                                           if all(is_py_scalar(v.rvalue(a)) for a in args)
                                           else _binary(Op.ATAN2)(v, args, kw, node)),
}


def _math_functions() -> dict:
    """`sd.<name>` and Python's `math.<name>` of every float math function
    (`kernel_ir.mathfns`): IR on kernel values, folded on Python numbers (math's double
    precision, as Taichi does; the reference where math has no such function)."""
    out = {}
    for f in MATH:
        fold = getattr(math, f.name, None) or (lambda x, r=f.reference: float(r(x)))
        out[getattr(lang, f.name)] = _unary(f.op, fold)
        if hasattr(math, f.name):
            out[getattr(math, f.name)] = _math(f.op, fold)
    return out


HANDLERS = {**_math_functions(), **HANDLERS}  # explicit entries (math.log's base) win


def _math_log(v, args, node):
    """`math.log(x)` or `math.log(x, base)`."""
    if len(args) == 2:
        return v.binop(Op.DIV, _math_log(v, args[:1], node), _math_log(v, args[1:], node))
    return _math(Op.LOG, math.log)(v, args, {}, node)
from .bits import handlers as _bit_handlers  # noqa: E402 (sd.math.popcnt / clz / ffs)
HANDLERS.update(_bit_handlers())
from .float_parts import handlers as _float_parts_handlers  # noqa: E402 (sd.frexp)
HANDLERS.update(_float_parts_handlers())
from .simt_ops import handlers as _simt_handlers  # noqa: E402 (sd.simt.*)
HANDLERS.update(_simt_handlers())
from .sparse_ops import handlers as _sparse_handlers  # noqa: E402 (sd.is_active, sd.append, ...)
HANDLERS.update(_sparse_handlers())


def _operator_handlers():
    """Python's `operator.add` / `sub` / `mul` / `matmul` / ... called in a kernel (Taichi's tests
    pass them around as `ops(a, b)`): the operator itself, on any operands it takes."""
    import operator as o
    binary = {o.add: Op.ADD, o.sub: Op.SUB, o.mul: Op.MUL, o.truediv: Op.DIV,
              o.floordiv: Op.FLOORDIV, o.mod: Op.MOD, o.pow: Op.POW, o.and_: Op.AND,
              o.or_: Op.OR, o.xor: Op.XOR, o.lshift: Op.SHL, o.rshift: Op.SHR}

    def bin_handler(op):
        def h(v, args, kw, node):
            _arity(v, args, 2, node)
            return v.binop(op, args[0], args[1])
        return h

    def matmul(v, args, kw, node):
        _arity(v, args, 2, node)
        return v.matmul(v.rvalue(args[0]), v.rvalue(args[1]), node)

    out = {f: bin_handler(op) for f, op in binary.items()}
    out[o.matmul] = matmul
    return out


HANDLERS.update(_operator_handlers())
