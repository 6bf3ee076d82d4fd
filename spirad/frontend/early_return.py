"""`return` anywhere in a `real_func` (Taichi's `ti.real_func` is a function of its own, so it
may return from inside loops and branches; spirad inlines it, `spirad.real_func`).

The function's body is rewritten, once per function, into one that returns at its end: each
`return v` stores v into a result variable (declared with the return type, zero) and sets a done
flag; inside a loop it also leaves the loop (`break`, and `if done: break` after a nested
loop), and statements after a compound statement that may have returned run under
`if not done`. Loops that may return are serialized (`loop_config(serialize=True)`): inlined at
a kernel's top level they would otherwise be the parallel loop, where `break` has no meaning.
The rewritten nodes keep the source locations of the statements they stand for, so errors
still point at the user's lines. Plain `@func`s keep Taichi's refusal ("Return inside
non-static if/for is not supported").
"""
from __future__ import annotations

import ast
import copy

RET, DONE = "__sd_ret", "__sd_done"
HELPERS = {"__sd_cast", "__sd_ret_t", "__sd_loop_config"}


def needs_rewrite(fdef) -> bool:
    """Whether a return stands anywhere but as the body's last statement."""
    body = fdef.body
    for i, stmt in enumerate(body):
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Return) and not (i == len(body) - 1 and sub is stmt):
                return True
    return False


def rewrite(fdef, scalar_return: bool) -> ast.FunctionDef:
    """A copy of `fdef` whose only return is its last statement (see the module).
    `scalar_return`: the result is declared `__sd_cast(0, __sd_ret_t)` (a dtype), else
    `__sd_ret_t(0)` (a vector, matrix or struct type)."""
    f = copy.deepcopy(fdef)
    first = f.body[0]
    init = _call("__sd_cast", [ast.Constant(0), _name("__sd_ret_t")]) if scalar_return else \
        _call("__sd_ret_t", [ast.Constant(0)])
    head = [_assign(RET, init, first), _assign(DONE, ast.Constant(0), first)]
    tail = ast.Return(value=_name(RET))
    ast.copy_location(tail, f.body[-1])
    f.body = head + _block(f.body, False) + [tail]
    ast.fix_missing_locations(f)
    return f


def _returns(stmt) -> bool:
    return any(isinstance(s, ast.Return) for s in ast.walk(stmt))


def _block(stmts, in_loop: bool) -> list:
    out = []
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Return):
            value = s.value if s.value is not None else ast.Constant(0)
            out += [_assign(RET, value, s), _assign(DONE, ast.Constant(1), s)]
            if in_loop:
                out.append(ast.copy_location(ast.Break(), s))
            return out  # the rest of this block is unreachable
        if not _returns(s):
            out.append(s)
            continue
        if isinstance(s, (ast.For, ast.While)):
            s.body = _block(s.body, True)
            s.orelse = _block(s.orelse, in_loop)
            out.append(ast.copy_location(ast.Expr(_call("__sd_loop_config", [], serialize=True)), s))
        elif isinstance(s, ast.If):
            s.body, s.orelse = _block(s.body, in_loop), _block(s.orelse, in_loop)
        else:  # with / try ...: kernels have none that may return
            out.append(s)
            continue
        out.append(s)
        if in_loop:  # a nested loop's break left only that loop
            out.append(ast.copy_location(ast.If(test=_name(DONE), body=[ast.Break()], orelse=[]), s))
        else:
            rest = _block(stmts[i + 1:], False)
            if rest:
                guard = ast.UnaryOp(op=ast.Not(), operand=_name(DONE))
                out.append(ast.copy_location(ast.If(test=guard, body=rest, orelse=[]), s))
            return out
    return out


def _name(n):
    return ast.Name(id=n, ctx=ast.Load())


def _call(fn, args, **kw):
    return ast.Call(func=_name(fn), args=args,
                    keywords=[ast.keyword(arg=k, value=ast.Constant(v)) for k, v in kw.items()])


def _assign(name, value, where):
    return ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                        value=value), where)
