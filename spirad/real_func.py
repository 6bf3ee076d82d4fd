"""`sd.real_func` (Taichi's `ti.real_func`): a func Taichi compiles as a function of its own.

spirad inlines it like any `@sd.func` (so recursion is an error; unlike a func, it may
`return` from inside loops and branches: frontend/early_return.py), but keeps Taichi's contract
of a real function, which is what lets a program move between the two: every parameter is
annotated with its type (but a method's `self`), and a function that returns a value annotates its return type. A
real_func without them is refused when it is decorated, as Taichi refuses it.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

from kernel_ir.errors import SpiradSyntaxError
from .func import Func, func


def real_func(fn) -> Func:
    """Decorator: Taichi's `ti.real_func`, inlined as `@sd.func` after checking that every
    parameter and a returned value are type-annotated."""
    where = f"{fn.__qualname__} ({inspect.getsourcefile(fn)}:{fn.__code__.co_firstlineno})"
    sig = inspect.signature(fn)
    for k, (name, p) in enumerate(sig.parameters.items()):
        if k == 0 and name == "self":
            continue  # a method of a data_oriented class: `self` is the object, as in Taichi
        if p.annotation is inspect.Parameter.empty:
            raise SpiradSyntaxError(f"Argument '{name}' of real function {where} must be type "
                                    f"annotated (a real_func's parameters are typed)")
    if sig.return_annotation is inspect.Signature.empty and _returns_a_value(fn):
        raise SpiradSyntaxError(f"real function {where}: its return value must be annotated "
                                f"(def f(...) -> ti.i32:)")
    f = func(fn)
    f._real_func = True  # may return anywhere (frontend/early_return.py)
    return f


def _returns_a_value(fn) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False  # no source: the func compiles from source and reports that itself
    body = tree.body[0]
    return any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(body))
