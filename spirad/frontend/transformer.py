"""Python AST -> IR. One dispatch table (`build_<NodeType>` methods), one fallback error.

`compile_kernel` translates a kernel for one argument signature into a `KernelIR`; calls of
`@sd.func`s and of plain Python functions and lambdas become CALL regions (flattened later by the
inline pass).
"""
from __future__ import annotations

import ast
import dataclasses

import numpy as np

from kernel_ir.errors import SpiradArgumentError, SpiradError, SpiradSyntaxError, SpiradTypeError
from kernel_ir.nodes import ArgSpec, CallArg, KernelIR, Node
from kernel_ir.ops import Op
from .context import Ctx, FuncFrame
from .expr import ExprVisitor
from .func_types import convert, declared_types
from .value_ops import ValueOps, is_py_scalar
from kernel_ir.source import user_error
from .stmt import StmtVisitor
from .values import GlobalElem, NdarrayArg, Slot, SlotView, VecVal
from ..data.ndarray import Ndarray
from ..data.struct import StructElem, StructVal


UNSUPPORTED_HINTS = {
    "GeneratorExp": "write a loop", "SetComp": "write a loop", "DictComp": "write a loop",
    "Lambda": "define the lambda (or a def / @sd.func) outside the kernel and call it there",
    "FunctionDef": "define the function (a def or @sd.func) outside the kernel and call it",
    "With": "remove the with-block; kernels have no context managers",
    "Try": "remove the try-block; kernels cannot raise or catch exceptions",
    "Raise": "kernels cannot raise exceptions; write a status into a field instead",
    "Global": "fields are visible without 'global'; remove the statement",
    "Nonlocal": "remove the statement", "Delete": "remove the del statement",
    "Dict": "use separate variables or an sd.Vector", "Set": "use separate variables",
    "Yield": "kernels cannot yield", "Await": "kernels cannot await",
}


class Visitor(ValueOps, ExprVisitor, StmtVisitor):
    def __init__(self, ctx: Ctx):
        self.ctx = ctx

    def build(self, node):
        method = getattr(self, "build_" + type(node).__name__, None)
        if method is None:
            kind = type(node).__name__
            hint = UNSUPPORTED_HINTS.get(kind, "rewrite it with assignments, if, for and while")
            if kind == "FunctionDef":  # Taichi's words first (its tests match them)
                where = "kernel" if self.ctx.frame.is_kernel else "func"
                raise self.ctx.error(SpiradSyntaxError, f"Function definition is not allowed in "
                                                        f"'ti.{where}': {hint}", node)
            raise self.ctx.error(SpiradSyntaxError, f"unsupported Python syntax in a kernel: "
                                                    f"{kind}; {hint} (Unsupported node \"{kind}\")", node)
        self.ctx.node_stack.append(node)
        old = self.ctx.b.loc
        self.ctx.b.loc = self.ctx.loc(node)
        try:
            return method(node)
        except SpiradError as e:
            if getattr(e, "loc", None) is not None:
                raise
            # a user error raised below the frontend (e.g. a stale field): point at this node
            raise user_error(type(e), str(e), self.ctx.loc(node)) from None
        finally:
            self.ctx.b.loc = old
            self.ctx.node_stack.pop()

    # -- @func inlining -----------------------------------------------------------------------
    def inline_func(self, func, args, kwargs, node):
        ctx = self.ctx
        src = func.source()
        fdef = src.func_def
        params = [a.arg for a in fdef.args.args]
        bound = dict(zip(params, args))
        bound.update(kwargs)
        defaults = func.fn.__defaults__ or ()
        for p, d in zip(params[len(params) - len(defaults):], defaults):
            bound.setdefault(p, d)  # Python-side default values are compile-time constants
        if len(args) > len(params) or any(k not in params or params.index(k) < len(args)
                                          for k in kwargs) or len(bound) != len(params):
            raise ctx.error(SpiradArgumentError, _argument_mistake(params, args, kwargs, bound) +
                            f": {func.fn.__name__}() takes parameters {params}", node)
        early = getattr(func, "_real_func", False) and _early_rewrite(func, fdef, ctx)
        if early:
            fdef = early
        _check_returns(ctx, src, fdef)
        if ctx.call_depth > 32:
            what = "real_func" if getattr(func, "_real_func", False) else "@sd.func"
            raise ctx.error(SpiradSyntaxError, f"{what} recursion is not supported: spirad "
                            f"inlines every func call (a run-time recursive call would need a "
                            f"call stack); recursion that ends at compile time (sd.static "
                            f"conditions) inlines up to 32 levels; write the recursion as a "
                            f"loop with an explicit stack", node)
        frame = FuncFrame(func.fn, src, is_kernel=False)
        frame.call_loc = ctx.loc(node)
        values = {}
        b = ctx.b
        ret_slot = None
        from ..func import PlainFunc
        assigned = _assigned_names(fdef) if isinstance(func, PlainFunc) else None
        templates = _template_params(func)
        declared, ret_type = ({}, None) if assigned is not None else \
            declared_types(func, ctx.default_fp, ctx.default_ip)  # func_types.py
        with b.region() as out:
            for p in params:
                if p in templates and isinstance(bound[p], (Slot, SlotView, GlobalElem)):
                    # template(): by reference, as in Quadrants / Taichi: `ret += x` and
                    # `ret = x` in the func update the caller's variable or element (Genesis'
                    # spatial hasher accumulates a neighbour sum so)
                    values[p] = ("obj", bound[p])
                    continue
                v = self.rvalue(bound[p])
                if p in declared and isinstance(v, VecVal):
                    _check_matrix_arg(ctx, p, declared[p], v, node)
                if isinstance(v, NdarrayArg):
                    _check_ndarray_arg(ctx, func, p, v, node)
                elif isinstance(v, Ndarray) and getattr(func, "_real_func", False):
                    _refuse_global_ndarray(ctx, func, p, v, node)
                if p in declared and p not in templates and (isinstance(v, (Node, VecVal)) or
                                                             is_py_scalar(v)):
                    v = convert(self, v, declared[p])
                if p in templates and is_py_scalar(v):
                    values[p] = ("obj", v)  # a template() parameter stays a compile-time value
                elif assigned is not None and is_py_scalar(v) and p not in assigned:
                    values[p] = ("obj", v)  # a plain function sees Python values as they are
                elif isinstance(v, (Node, VecVal)) or is_py_scalar(v):
                    values[p] = ("slot", v)
                else:
                    values[p] = ("obj", bound[p])
            ctx.frames.append(frame)
            ctx.call_depth += 1
            saved_loops = ctx.loops
            ctx.loops = list(saved_loops)
            # a real_func is a function call in Taichi: its loops run serially in the calling
            # thread (break allowed), never as the kernel's parallel loop, even at its top level
            real = 1 if getattr(func, "_real_func", False) else 0
            ctx.nested_scopes += real
            frame.loop_base, frame.scope_base = len(ctx.loops), ctx.nested_scopes
            try:
                for p, (kind, v) in values.items():
                    frame.scopes[0][p] = self.new_slot(v, p) if kind == "slot" else v
                if early:  # the helpers the rewritten body names (frontend/early_return.py)
                    from .. import lang
                    frame.scopes[0].update({"__sd_cast": lang.cast, "__sd_ret_t": ret_type,
                                            "__sd_loop_config": lang.loop_config})
                self.build_stmts(fdef.body)
                ret = frame.ret
                if ret is None and ret_type is not None and not frame.returned:
                    raise user_error(SpiradSyntaxError, f"Function has a return type but does not "
                                     f"have a return statement ({func.fn.__name__}); return a "
                                     f"value at its end, or remove the `-> ...` annotation",
                                     src.loc(fdef))
                if ret is not None:
                    ret = self.rvalue(ret)
                    if is_py_scalar(ret) and assigned is None:  # an @sd.func returns a value
                        ret = self.to_node(ret)
                    if ret_type is not None:
                        ret = convert(self, ret, ret_type)
                    ret_slot = self._return_slots(ret, f"{func.fn.__name__}.ret")
            finally:
                ctx.nested_scopes -= real
                ctx.loops = saved_loops
                ctx.call_depth -= 1
                ctx.frames.pop()
        if ret_slot is not None:
            for a in _allocas(ret_slot):  # declared before the call, read after it
                b.append(a)
        b.emit(Op.CALL, None, (), CallArg(func.fn.__name__.strip("<>")), (out[0],))
        if ret_slot is None:
            return None
        return self._returned(ret_slot)

    def _return_slots(self, ret, name):
        """A func's return value stored, inside its region, into allocas the caller declares:
        a vector or scalar one slot, a tuple or list of them (`return pos, quat`) one slot
        each, so no value computed inside the region is used outside it (verifier's rule)."""
        if isinstance(ret, VecVal):
            slot = Slot(tuple(Node(Op.ALLOCA, c.dtype, (), name) for c in ret.comps),
                        ret.shape, ret.dtype)
        elif isinstance(ret, Node):
            slot = Slot((Node(Op.ALLOCA, ret.dtype, (), name),), (), ret.dtype)
        elif isinstance(ret, (tuple, list)) and any(isinstance(x, (Node, VecVal, StructVal,
                                                                   StructElem)) for x in ret):
            return type(ret)(self._return_slots(x, name) for x in ret)
        elif isinstance(ret, (StructVal, StructElem)):  # a struct: a fresh one, member by member
            members = self.struct_members(ret, None)
            return StructVal(ret.stype, {m: self._return_slots(v, f"{name}.{m}")
                                         for m, v in members.items()})
        else:
            return _Returned(ret)  # a compile-time object: returned as it is
        self.store_into(slot, ret)
        return slot

    def _returned(self, ret_slot):
        if isinstance(ret_slot, Slot):
            return self.rvalue(ret_slot)
        if isinstance(ret_slot, StructVal):  # its member slots: the caller's struct value
            return ret_slot
        if isinstance(ret_slot, (tuple, list)):
            return type(ret_slot)(self._returned(x) for x in ret_slot)
        return ret_slot.value


def _check_matrix_arg(ctx, name, t, value, node):
    """A vector / matrix value passed to a func parameter declared as a vector / matrix type of
    another shape: Taichi's TaichiSyntaxError and text."""
    from ..types import MatrixType, VectorType
    if not isinstance(t, (VectorType, MatrixType)):
        return
    want, got = tuple(t.comp_shape), tuple(value.shape)
    if want == got:
        return
    what = f"Argument {name} of type {t} is expected to be a Matrix with"
    if len(want) != len(got):
        msg = f"{what} ndim {len(want)}, but got {len(got)}."
    elif want[0] != got[0]:
        msg = f"{what} n {want[0]}, but got {got[0]}."
    else:
        msg = f"{what} m {want[1]}, but got {got[1]}."
    raise ctx.error(SpiradSyntaxError, msg, node)


def _check_ndarray_arg(ctx, func, name, arr, node):
    """An ndarray passed to a func parameter annotated `types.ndarray(dtype=..., ndim=...)`
    that says otherwise: Taichi's "Invalid value for argument" (a compile error)."""
    import inspect
    from ..types import NdarrayType
    try:
        ann = inspect.signature(func.fn).parameters[name].annotation
    except (TypeError, ValueError, KeyError):
        return
    if not isinstance(ann, NdarrayType):
        return
    why = None
    if ann.ndim is not None and ann.ndim != arr.ndim:
        why = f"ndim {ann.ndim} expected, the ndarray has {arr.ndim}"
    elif ann.dtype is not None:
        from ..data.field import resolve_dtype
        dt, comp = resolve_dtype(ann.dtype)
        if (dt, tuple(comp)) != (arr.dtype, tuple(arr.comp_shape)):
            what = lambda d, c: f"{d}" + (f" of shape {c}" if c else "")  # noqa: E731
            why = (f"elements of {what(dt, tuple(comp))} expected, the ndarray holds "
                   f"{what(arr.dtype, tuple(arr.comp_shape))}")
    if why:
        raise ctx.error(SpiradTypeError, f"Invalid value for argument {name}: {why}", node)


def _refuse_global_ndarray(ctx, func, name, arr, node):
    """A real_func's ndarray parameter given an ndarray the kernel reads as a global: Taichi's
    real function takes the kernel's ndarray arguments only (a TaichiTypeError), and spirad
    keeps a real_func's contract (spirad.real_func)."""
    import inspect
    from ..types import NdarrayType
    try:
        ann = inspect.signature(func.fn).parameters[name].annotation
    except (TypeError, ValueError, KeyError):
        return
    if isinstance(ann, NdarrayType):
        raise ctx.error(SpiradTypeError, f"Expected ndarray in the kernel argument for argument "
                        f"{name}, got a global ndarray: a real_func takes the kernel's "
                        f"ndarray parameters; pass it to the kernel as a types.ndarray() "
                        f"argument",
                        node)


class _Returned:
    """A func's compile-time return value (a field, a Python number, ...), kept as it is."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _allocas(ret_slot):
    if isinstance(ret_slot, Slot):
        return list(ret_slot.allocas)
    if isinstance(ret_slot, (tuple, list)):
        return [a for x in ret_slot for a in _allocas(x)]
    if isinstance(ret_slot, StructVal):
        return [a for x in ret_slot.members.values() for a in _allocas(x)]
    return []


def _template_params(func) -> frozenset:
    """Names of a func's parameters annotated `template()` (also as a string annotation)."""
    cached = getattr(func, "_template_params", None)
    if cached is not None:
        return cached
    import inspect
    from ..types import Template
    out = set()
    for name, p in inspect.signature(func.fn).parameters.items():
        ann = p.annotation
        if isinstance(ann, Template) or ann is Template or (
                isinstance(ann, str) and ann.replace(" ", "").endswith("template()")):
            out.add(name)
    func._template_params = frozenset(out)
    return func._template_params


def _clamped(kernel, name) -> bool:
    """Is kernel parameter `name` annotated `types.ndarray(boundary="clamp")`?"""
    from ..types import NdarrayType
    annotations = getattr(kernel, "_annotations", None)
    for p, ann in (annotations() if annotations is not None else ()):
        if p == name:
            return isinstance(ann, NdarrayType) and ann.boundary == "clamp"
    return False


def _assigned_names(fdef) -> set:
    """Names a function body assigns (its parameters among them stay mutable locals)."""
    return {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _is_static_call(node) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Attribute) and f.attr == "static") or \
        (isinstance(f, ast.Name) and f.id == "static")


def _static_returns(stmt) -> set:
    """Returns reached only through `if sd.static(...)` / `for ... in sd.static(...)`: allowed
    anywhere (the static choice decides at compile time whether they end the function)."""
    out = set()
    if isinstance(stmt, ast.Return):
        out.add(stmt)
    elif isinstance(stmt, ast.If) and _is_static_call(stmt.test) or \
            isinstance(stmt, ast.For) and _is_static_call(stmt.iter):
        for s in stmt.body + stmt.orelse:
            out |= _static_returns(s)
    return out


def _argument_mistake(params, args, kwargs, bound) -> str:
    """What is wrong with a func call's arguments, in Taichi's words."""
    if len(args) > len(params):
        return "Too many arguments"
    for k in kwargs:
        if k not in params:
            return f"Unexpected argument '{k}'"
        if params.index(k) < len(args):
            return f"Multiple values for argument '{k}'"
    missing = [p for p in params if p not in bound]
    return f"Parameter `{missing[0]}` missing" if missing else "wrong arguments"


def _early_rewrite(func, fdef, ctx):
    """A real_func's body rewritten to return at its end (frontend/early_return.py), or None
    when it already does. Cached on the func."""
    from . import early_return
    cached = getattr(func, "_early_fdef", None)
    if cached is not None and cached[0] is fdef:
        return cached[1]
    out = None
    if early_return.needs_rewrite(fdef):
        _, ret_type = declared_types(func, ctx.default_fp, ctx.default_ip)
        if ret_type is None:
            from kernel_ir.source import user_error
            raise user_error(SpiradSyntaxError, "a real_func that returns from inside a loop or "
                             "branch needs its return type annotated (def f(...) -> ti.i32:)",
                             func.source().loc(fdef))
        from kernel_ir.dtypes import DType
        out = early_return.rewrite(fdef, isinstance(ret_type, DType))
    func._early_fdef = (fdef, out)
    return out


def _check_returns(ctx, src, fdef):
    body = fdef.body
    allowed = set()
    for stmt in body:
        allowed |= _static_returns(stmt)
    for i, stmt in enumerate(body):
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Return) and sub not in allowed and not (i == len(body) - 1 and sub is stmt):
                from kernel_ir.source import user_error
                raise user_error(SpiradSyntaxError, "Return inside non-static if/for is not "
                                 "supported: a @sd.func may only return as its last statement "
                                 "(assign to a variable and return it at the end)", src.loc(sub))


def compile_kernel(kernel, arg_values_spec, state, returns=None) -> KernelIR:
    """Translate `kernel` for one signature; `returns`: its KernelReturn, or None.

    `arg_values_spec`: per parameter, ('scalar', dtype) | ('vector', dtype, comp_shape) |
    ('ndarray', dtype, ndim, comp_shape, needs_grad, needs_dual, layout: the axes in storage
    order or None) | ('template', python object).
    A vector / matrix parameter is one scalar launch argument per component (`Kernel.flat`).
    """
    ctx = Ctx(state)
    src = kernel.source()
    frame = FuncFrame(kernel.fn, src, is_kernel=True)
    frame.returns = returns
    ctx.frames.append(frame)
    v = Visitor(ctx)
    fdef = src.func_def
    params = [a.arg for a in fdef.args.args]
    params += [f"__hidden{k}" for k in range(len(arg_values_spec) - len(params))]  # struct_args
    for p, spec in zip(list(params), arg_values_spec):
        if spec[0] == "struct":
            for path, k in spec[2]:
                params[k] = f"{p}.{'.'.join(path)}"
    args = []
    structs = []
    for p, spec in zip(params, arg_values_spec):
        kind = spec[0]
        i = len(args)  # the launch-argument position (vector arguments take one per component)
        if kind == "scalar":
            args.append(ArgSpec(p, "scalar", spec[1]))
            ctx.b.loc = src.loc(fdef)
            frame.scopes[0][p] = v.new_slot(ctx.b.arg(i, spec[1]), p)
        elif kind == "vector":  # ('vector', dtype, comp_shape): one scalar argument per component
            _, dtype, comp_shape = spec
            ctx.b.loc = src.loc(fdef)
            comps = []
            for k in range(int(np.prod(comp_shape))):
                args.append(ArgSpec(f"{p}[{k}]", "scalar", dtype))
                comps.append(ctx.b.arg(i + k, dtype))
            frame.scopes[0][p] = v.new_slot(VecVal(tuple(comps), tuple(comp_shape)), p)
        elif kind == "ndarray":
            _, dtype, ndim, comp_shape, needs_grad, needs_dual, order = spec
            args.append(ArgSpec(p, "ndarray", dtype, ndim + len(comp_shape), needs_grad, order))
            frame.scopes[0][p] = NdarrayArg(i, dtype, ndim, comp_shape, needs_grad, p,
                                            needs_dual=needs_dual, clamp=_clamped(kernel, p),
                                            order=order)
        elif kind == "struct":  # ('struct', dataclass instance, ((path, hidden arg index), ...))
            args.append(ArgSpec(p, "template"))
            structs.append((p, spec))
        elif kind == "ndarray_alias":  # the ndarray of parameter spec[1], passed again
            first = frame.scopes[0][params[spec[1]]]
            args.append(ArgSpec(p, "ndarray", first.dtype, first.ndim + len(first.comp_shape),
                                first.needs_grad, first.order))
            frame.scopes[0][p] = first  # one buffer: reads and writes of both names are seen
            if _clamped(kernel, p) != first.clamp:
                frame.scopes[0][p] = dataclasses.replace(first, clamp=not first.clamp)
        else:
            args.append(ArgSpec(p, "template"))
            frame.scopes[0][p] = spec[1]
    for p, (_, obj, paths) in structs:  # ndarray members read the hidden arguments
        from ..data.struct_args import StructView
        frame.scopes[0][p] = StructView(obj, {path: frame.scopes[0][params[k]] for path, k in paths})
    ctx.b.loc = None
    from . import rng
    ctx.rng_anchor = rng.RngAnchor(ctx.b._stack[0], 0, None)
    try:
        v.build_stmts(fdef.body)
    except RecursionError:
        where = ctx.last_stmt
        raise user_error(SpiradSyntaxError, "this statement nests expressions too deeply to "
                         "compile (a chain of thousands of operations); split it into several "
                         "statements with intermediate variables",
                         where[0].loc(where[1]) if where else src.loc(fdef)) from None
    rng.finish_kernel(ctx)
    if returns is not None and not frame.returned:
        raise user_error(SpiradSyntaxError, f"Kernel has a return type but does not have a "
                         f"return statement (kernel {kernel.fn.__name__}); return a value at its "
                         f"end, or remove the `-> ...` annotation", src.loc(fdef))
    return KernelIR(kernel.fn.__name__, tuple(args), ctx.b.finish(), src.loc(fdef))
