"""Which keyword arguments a call in a kernel takes: one the frontend does not implement is a
user error at the call, never dropped.

A builtin's handler (`builtins.HANDLERS`) receives every keyword the user wrote; before this
table a handler that read only the keywords it knew dropped the others silently, so
`sd.ndrange(M, N, axes=(1, 0))` (Quadrants') ran in the canonical order and a program that
depended on the order got another answer, with no word (issue #39). Now `check` runs before
every handler: a callee that is not listed takes no keyword, a listed one takes the names
listed, and `SELF_CHECKED` callees bind their keywords themselves and refuse the rest with
their own texts (tests/language/test_call_keywords.py holds each handler to its entry).

Vector methods (`v.normalized(eps=1e-6)`, `sd.Vector.norm(v, eps=...)`) take Taichi's
parameter names: `method_args` binds them to the positional arguments the methods read.
"""
from __future__ import annotations

import builtins as py

from kernel_ir.errors import SpiradTypeError

from .. import bitops, lang
from ..data.matrix import CLASS_LEVEL_METHODS, Matrix, Vector


def _table():
    out = {
        lang.ndrange: {"axes"}, lang.cast: {"obj", "dtype"}, lang.floor: {"dtype"}, lang.random: {"dtype"},
        lang.randn: {"dt", "dtype"}, Vector: {"dt"}, Matrix: {"dt"}, Matrix.diag: {"dim", "val"},
        lang.svd: {"dt"}, lang.sym_eig: {"dt"}, lang.eig: {"dt"},
    }
    return {k: frozenset(v) for k, v in out.items()}


# callees whose handlers bind or validate every keyword themselves (with their own texts)
SELF_CHECKED = frozenset({
    lang.loop_config, py.print, py.range, py.sum, lang.stop_grad, lang.bit_cast, bitops.bit_shr,
    lang.frexp, Vector.zero, Vector.one, Vector.unit, Matrix.identity, Matrix.zero, Matrix.one,
    *(getattr(Vector, n) for n in CLASS_LEVEL_METHODS),
})
KEYWORDS = _table()


def check(v, fn, kwargs, node):
    """Refuse the keywords `fn`'s handler does not implement (Python's text, at the call)."""
    if not kwargs:
        return
    try:
        if fn in SELF_CHECKED:
            return
        allowed = KEYWORDS.get(fn, frozenset())
    except TypeError:  # an unhashable callee (a vector type): listed nowhere
        allowed = frozenset()
    unknown = [k for k in kwargs if k not in allowed]
    if unknown:
        name = getattr(fn, "__qualname__", getattr(fn, "__name__", type(fn).__name__))
        takes = ", ".join(f"{k}=" for k in sorted(allowed)) or "no keyword arguments"
        raise v.ctx.error(SpiradTypeError, f"{name}() got an unexpected keyword argument "
                          f"'{unknown[0]}' in a kernel (it takes {takes})", node)


# Taichi's parameter names of the vector methods, after self (taichi/lang/matrix.py)
METHOD_PARAMS = {"norm": ("eps",), "norm_inv": ("eps",), "normalized": ("eps",),
                 "cast": ("dtype",), "dot": ("other",), "cross": ("other",),
                 "outer_product": ("other",)}


def method_args(v, name, args, kwargs, node):
    """`args` with the keywords of method `name` put in their positions; any other keyword,
    or one given twice, is an error."""
    if not kwargs:
        return list(args)
    params = METHOD_PARAMS.get(name, ())
    out = list(args) + [None] * (len(params) - len(args))
    for k, x in kwargs.items():
        if k not in params:
            takes = ", ".join(f"{p}=" for p in params) or "no keyword arguments"
            raise v.ctx.error(SpiradTypeError, f"{name}() got an unexpected keyword argument "
                              f"'{k}' (it takes {takes})", node)
        i = params.index(k)
        if i < len(args):
            raise v.ctx.error(SpiradTypeError, f"{name}() got multiple values for argument "
                              f"'{k}'", node)
        out[i] = x
    if any(x is None for x in out):
        missing = params[out.index(None)]
        raise v.ctx.error(SpiradTypeError, f"{name}() missing argument '{missing}'", node)
    return out
