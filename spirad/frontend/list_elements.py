"""Assignment to an element of a Python list in a kernel: `verts[1] = verts[2]`.

A list in a kernel is a compile-time list whose elements may be run-time values; in Taichi each
element of a list a kernel builds is a local variable of its own (copied, so assigning an element
changes neither the value it was built from nor the field it was read from), and an element can
be assigned, also under a run-time `if` (Taichi's implicit_fem example swaps two vertices of a
tetrahedron that way). spirad's run-time values are SSA nodes, which cannot be assigned, so a list
bound to a name that the function assigns elements of (`name[k] = ...` anywhere in its body,
found from the AST) gets one local (Slot) per run-time element when it is bound: the locals exist
where the list does, so a store under an `if` is seen after it. The index must be known at
compile time (a run-time index into a Python list has no element to pick).
"""
from __future__ import annotations

import ast
import numbers

from kernel_ir.errors import SpiradSyntaxError
from .values import Slot

_CACHE: dict = {}  # id of a function's AST -> names with element assignments


def element_assigned_names(func_def: ast.AST) -> frozenset:
    """Names `n` with `n[...] = v` / `n[...] += v` in the function's body."""
    key = id(func_def)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is func_def:
        return hit[1]
    names = set()
    for node in ast.walk(func_def):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name):
                    names.add(sub.value.id)
    found = frozenset(names)
    _CACHE[key] = (func_def, found)
    return found


def with_local_elements(v, lst: list, name: str) -> list:
    """A copy of `lst` whose run-time elements are fresh locals holding their values."""
    from .expr import _is_compile_time
    out = []
    for k, x in enumerate(lst):
        x = v.rvalue(x)
        if isinstance(x, list):
            out.append(with_local_elements(v, x, f"{name}[{k}]"))
        elif _is_compile_time(x) or isinstance(x, tuple):
            out.append(x)
        else:
            out.append(v.new_slot(x, f"{name}[{k}]"))
    return out


def assign_element(v, lst: list, idx, value, node) -> None:
    """`lst[idx] = value` for a Python list `lst` in a kernel."""
    if not (isinstance(idx, numbers.Integral) and not isinstance(idx, bool)):
        raise v.ctx.error(SpiradSyntaxError, "an element of a Python list can be assigned in a "
                                             "kernel only at an index known at compile time "
                                             "(use a Vector for a run-time index)", node)
    if not -len(lst) <= idx < len(lst):
        raise v.ctx.error(SpiradSyntaxError, f"list index {idx} out of range for a list of "
                                             f"{len(lst)} elements", node)
    old = lst[idx]
    if isinstance(old, Slot):
        v.store_into(old, value)
        return
    from .expr import _is_compile_time
    value = v.rvalue(value)
    if _is_compile_time(old) and _is_compile_time(value):
        lst[idx] = value  # a compile-time element of a compile-time list: Python's assignment
        return
    raise v.ctx.error(SpiradSyntaxError, "this list element cannot be assigned a run-time value "
                                         "here: assign elements of a list that this function "
                                         "builds from run-time values and binds to a name "
                                         "(`verts = [x[i], x[j]]`, then `verts[1] = ...`)", node)
