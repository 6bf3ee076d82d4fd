"""The dtypes an `@sd.func` declares for its parameters and its return value (issue #35).

Taichi converts a `ti.func`'s arguments to their annotated types and its return value to the
`->` type, as assignments convert: `def f(x: ti.i32) -> ti.i32` called with 2.7 sees x = 2,
and a float returned from it is truncated toward zero. Without this, the func computed in the
caller's type and a different number came out. An annotation counts when it is a dtype
(`sd.i32`, `float`, `int`, `bool`), or a vector / matrix type (its components are converted);
a string annotation (`from __future__ import annotations`) is evaluated in the func's module;
anything else (`template()`, ndarray, struct types) leaves the value as it is. Plain Python
functions inlined into a kernel keep Python's meaning: their annotations are not applied.
"""
from __future__ import annotations

import inspect

from kernel_ir.dtypes import DType, from_python

from .values import VecVal


def declared_types(func, default_fp, default_ip):
    """({parameter: type}, return type or None) for the annotations of `func` that convert."""
    cached = getattr(func, "_declared_types", None)
    if cached is None or cached[0] != (default_fp, default_ip):
        params, ret = {}, None
        try:
            sig = inspect.signature(func.fn)
        except (TypeError, ValueError):
            sig = None
        if sig is not None:
            g = getattr(func.fn, "__globals__", {})
            for name, p in sig.parameters.items():
                t = _convertible(p.annotation, g, default_fp, default_ip)
                if t is not None:
                    params[name] = t
            ret = _convertible(sig.return_annotation, g, default_fp, default_ip)
        cached = ((default_fp, default_ip), params, ret)
        func._declared_types = cached
    return cached[1], cached[2]


def _convertible(ann, g, default_fp, default_ip):
    from ..types import MatrixType, VectorType
    if ann is inspect.Parameter.empty:
        return None
    if isinstance(ann, str):
        try:
            ann = eval(ann, dict(g))  # noqa: S307 (the user's own annotation, in its module)
        except Exception:
            return None
    if ann in (float, int, bool):
        return from_python(ann, default_fp, default_ip)
    if isinstance(ann, DType):
        return ann
    if isinstance(ann, (VectorType, MatrixType)):
        return ann
    return None


def convert(v, value, t):
    """`value` converted to the declared type `t` (`v`: the expression visitor)."""
    from ..types import MatrixType, VectorType
    if isinstance(t, DType):
        if isinstance(value, VecVal):
            return value  # a vector where a scalar was declared: left to the body's errors
        return v.cast(value, t)
    if isinstance(t, (VectorType, MatrixType)) and isinstance(value, VecVal) and \
            tuple(value.shape) == tuple(t.comp_shape):
        return v.cast(value, from_python(t.dtype, v.ctx.default_fp, v.ctx.default_ip))
    return value
