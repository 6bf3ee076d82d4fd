"""Host-side constant folding before encoding (see ``bytecode.encode``)."""

from __future__ import annotations

from .context import DictContext
from .errors import SizerError
from .expr import (BoundVariable, Const, FieldLoad, MaxOverRange, NdarrayRead,
                   NdarrayShape, ScalarArg, SizeExpr, children, replace_children)

__all__ = ["fold_constants"]


def _mapping(x) -> dict:
    if x is None:
        return {}
    if hasattr(x, "items"):
        return dict(x.items())
    return dict(enumerate(x))


def fold_constants(e: SizeExpr, *, scalar_args=None, ndarray_shapes=None) -> SizeExpr:
    """Replace provided ``ScalarArg`` / ``NdarrayShape`` leaves by constants,
    then every subtree that reads no data and has no free bound variable by
    its value.  A subtree whose evaluation raises is left as it is."""
    from .evaluate import eval_fast, to_int

    scalars = _mapping(scalar_args)
    shapes = {k: tuple(v) for k, v in _mapping(ndarray_shapes).items()}
    empty = DictContext()

    def go(n: SizeExpr):
        """-> (folded node, reads data?, free vars)"""
        if isinstance(n, Const):
            return n, False, frozenset()
        if isinstance(n, ScalarArg):
            if n.arg in scalars:
                return Const(to_int(scalars[n.arg], f"ScalarArg({n.arg})")), False, frozenset()
            return n, True, frozenset()
        if isinstance(n, NdarrayShape):
            if n.arg in shapes:
                shape = shapes[n.arg]
                if not 0 <= n.axis < len(shape):
                    raise SizerError(f"NdarrayShape({n.arg}, {n.axis}): axis out of range "
                                     f"for shape {shape}")
                return Const(to_int(shape[n.axis], f"NdarrayShape({n.arg})")), False, frozenset()
            return n, True, frozenset()
        if isinstance(n, BoundVariable):
            return n, False, frozenset({n.var})
        results = [go(c) for c in children(n)]
        new = replace_children(n, tuple(r[0] for r in results))
        data = any(r[1] for r in results) or isinstance(n, (FieldLoad, NdarrayRead))
        if isinstance(n, MaxOverRange):
            free = results[0][2] | results[1][2] | (results[2][2] - {n.var})
        else:
            free = frozenset().union(*(r[2] for r in results))
        if not data and not free and not isinstance(new, Const):
            try:
                return Const(eval_fast(new, empty)), False, free
            except SizerError:
                pass
        return new, data, free

    return go(e)[0]
