"""List and dict comprehensions in kernels: `[H[j, k] for j in range(3)]`,
`{j: x[j] for j in range(3)}`.

Quadrants and Taichi unroll a comprehension at compile time: every iterable must be known then
(`range` of constants, a tuple or list, `static(...)`), each element is built once per item, and
the result is a Python list (so `qd.Vector([... for ...])` builds a vector). An `if` clause must
be known at compile time too. Genesis' FEM solver builds a force vector from a matrix column so.
"""
from __future__ import annotations

import ast

from kernel_ir.errors import SpiradSyntaxError


def list_comp(v, node: ast.ListComp, is_compile_time) -> list:
    """The list a comprehension builds, unrolled (`v`: the frontend's visitor;
    `is_compile_time(value)`: its test for a value known at compile time)."""
    out = []
    _generate(v, node, 0, out, is_compile_time)
    return out


def dict_comp(v, node: ast.DictComp, is_compile_time) -> dict:
    """The dict a comprehension builds, unrolled. A key known at compile time is a Python key;
    a key computed at run time (`{x[j]: ... for j in range(3)}`, Taichi's test_expr_dict) is,
    as in Taichi, a key of its own (a value, compared by identity: no other key equals it), so
    `.values()` / `.items()` hold one entry per item."""
    pairs = []
    _generate(v, node, 0, pairs, is_compile_time)
    out = {}
    for key, value in pairs:
        out[key if is_compile_time(key) else RunTimeKey(v.rvalue(key))] = value
    return out


class RunTimeKey:
    """A dict key computed at run time: equal only to itself (Taichi's keys are its Expr
    objects, hashed by identity); `.value` is the value."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _iterable(v, gen):
    seq = v.rvalue(v.build(gen.iter))
    if isinstance(seq, (range, tuple, list)):
        return list(seq)
    from .values import VecVal
    if isinstance(seq, VecVal) and len(seq.shape) == 1:  # a vector's components
        return list(seq.comps)
    if isinstance(seq, VecVal) and len(seq.shape) == 2:  # a matrix's rows, as in Taichi
        m = seq.shape[1]
        return [VecVal(seq.comps[r * m:(r + 1) * m], (m,)) for r in range(seq.shape[0])]
    raise v.ctx.error(SpiradSyntaxError, "a list comprehension in a kernel needs an iterable "
                                         "known at compile time (range of constants, a tuple or "
                                         "list, static(...), a vector or matrix); write a loop "
                                         "instead", gen.iter)


def _bind(v, target, item):
    if isinstance(target, ast.Name):
        v.ctx.bind(target.id, item)
        return
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(item, (tuple, list)) and \
            len(item) == len(target.elts):
        for t, x in zip(target.elts, item):
            _bind(v, t, x)
        return
    raise v.ctx.error(SpiradSyntaxError, "a comprehension's target must be a name or a tuple of "
                                         "names matching the items", target)


def _generate(v, node, k, out, is_compile_time):
    if k == len(node.generators):
        if isinstance(node, ast.DictComp):
            out.append((v.rvalue(v.build(node.key)), v.rvalue(v.build(node.value))))
        else:
            out.append(v.rvalue(v.build(node.elt)))
        return
    gen = node.generators[k]
    if gen.is_async:
        raise v.ctx.error(SpiradSyntaxError, "async comprehensions are not supported in kernels", gen)
    for item in _iterable(v, gen):
        v.ctx.frame.scopes.append({})
        try:
            _bind(v, gen.target, item)
            keep = True
            for cond in gen.ifs:
                c = v.rvalue(v.build(cond))
                if not is_compile_time(c):
                    raise v.ctx.error(SpiradSyntaxError, "a list comprehension's 'if' must be "
                                                         "known at compile time in kernels", cond)
                if not c:
                    keep = False
                    break
            if keep:
                _generate(v, node, k + 1, out, is_compile_time)
        finally:
            v.ctx.frame.scopes.pop()


def dict_view(v, method, args, node):
    """`d.keys()` / `d.values()` / `d.items()` / `d.get(k[, default])` of a kernel's dict (its
    entries are known at compile time): lists, unrolled like a comprehension's; a run-time key
    reads as its value."""
    d, name = method.__self__, method.__name__
    def key(k):
        return k.value if isinstance(k, RunTimeKey) else k
    if name == "get":
        if not 1 <= len(args) <= 2:
            raise v.ctx.error(SpiradSyntaxError, "dict.get takes a key and an optional default",
                              node)
        return d.get(args[0], args[1] if len(args) == 2 else None)
    if args:
        raise v.ctx.error(SpiradSyntaxError, f"dict.{name}() takes no arguments", node)
    if name == "keys":
        return [key(k) for k in d]
    if name == "values":
        return list(d.values())
    return [(key(k), x) for k, x in d.items()]
