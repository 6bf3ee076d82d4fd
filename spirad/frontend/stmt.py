"""Statement visitors: assignment, control flow, loops (parallel / serial / static), returns."""
from __future__ import annotations

import ast
import numbers

from .. import lang
from ..data import ndrange_axes
from kernel_ir.errors import SpiradSyntaxError, SpiradTypeError, SpiradValueError
from kernel_ir import dtypes as T
from kernel_ir.ops import Op
from .expr import BINOPS
from . import rng
from .namespace_hooks import AppendTarget
from .list_elements import assign_element, element_assigned_names, with_local_elements
from .value_ops import is_py_scalar
from .values import GlobalElem, NdarrayArg, Slot, SlotView, StaticIndexVec, VecVal




def _loop_dtype(dims) -> T.DType:
    """The index type of a loop nest over `dims` ((begin, end) pairs: Python ints or nodes):
    i64 when a bound is a 64-bit value, or the Python-int bounds (a field's shape) do not fit
    i32 — also their product, the flattened index of a parallel nest — else i32. A bound is
    never narrowed: `range(n)` with an i64 `n` runs in i64."""
    total, static = 1, True
    for lo, hi in dims:
        for v in (lo, hi):
            if isinstance(v, numbers.Integral):
                if not -(1 << 31) <= v < (1 << 31):
                    return T.i64
            elif getattr(v, "dtype", None) is not None and v.dtype.is_int and v.dtype.bits == 64:
                return T.i64
            else:
                static = False
        if static:
            total *= max(int(hi) - int(lo), 0)
    return T.i64 if static and len(dims) > 1 and total >= 1 << 31 else T.i32


def _kind_of(v) -> str:
    return "vector" if isinstance(v, VecVal) else "run-time scalar" \
        if not isinstance(v, (tuple, list)) and hasattr(v, "dtype") else type(v).__name__


class _Unrolled(Exception):
    """Raised to stop compiling a static branch after `break`/`continue` (not supported)."""


class StmtVisitor:
    def build_stmts(self, stmts):
        for s in stmts:  # sd.stop_grad(x) applies to its whole block, reads before it included
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                    getattr(s.value.func, "attr", getattr(s.value.func, "id", None)) == "stop_grad" \
                    and self._callee(s.value) is lang.stop_grad:
                self.build(s)
        for s in stmts:
            if self.ctx.frame.returned:
                return  # after a kernel's `return` (reached through sd.static if / for)
            self.ctx.last_stmt = (self.ctx.frame.src, s)  # where a RecursionError is reported
            self.build(s)

    def build_Pass(self, node):
        pass

    def build_Expr(self, node):
        if isinstance(node.value, ast.Constant) and (isinstance(node.value.value, str) or
                                                     node.value.value is Ellipsis):
            return  # a docstring, or `...` (an empty body, as `pass`)
        self.build(node.value)

    # -- assignment ---------------------------------------------------------------------------
    def build_Assign(self, node):
        value = self.build(node.value)
        if len(node.targets) > 1:
            value = self.rvalue(value)
        if isinstance(node.value, ast.Call) and self._callee(node.value) is lang.static:
            names = [n for t in node.targets
                     for n in (t.elts if isinstance(t, ast.Tuple) else (t,))]
            for t in names:  # Taichi's rules for naming a compile-time value
                if isinstance(t, ast.Subscript):
                    raise self.ctx.error(SpiradSyntaxError, "Static assign cannot be used on "
                                         "elements in arrays: `X = sd.static(v)` names a "
                                         "compile-time value", t)
                if isinstance(t, ast.Name) and \
                        isinstance(self.ctx.find_local(t.id), (Slot, SlotView)):
                    raise self.ctx.error(SpiradSyntaxError, f"Recreating variables is not "
                                         f"allowed: '{t.id}' is a variable here; name the "
                                         f"sd.static(...) value anew", t)
        if isinstance(node.value, ast.Call) and self._callee(node.value) is lang.static \
                and all(isinstance(t, ast.Name) and self.ctx.find_local(t.id) is None
                        for t in node.targets):
            for t in node.targets:  # `X = sd.static(v)`: X names the compile-time value itself
                self.ctx.bind(t.id, value)
            return
        if isinstance(value, list) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in element_assigned_names(self.ctx.frame.src.func_def):
            self.ctx.bind(node.targets[0].id, with_local_elements(self, value, node.targets[0].id))
            return  # a list of locals (list_elements.py), bound as is
        for t in node.targets:
            self.assign(t, value)

    def build_NamedExpr(self, node):
        """`(a := v)`: assigns `a` as `a = v` does, and is the value of `a` (Taichi too)."""
        self.assign(node.target, self.build(node.value))
        return self.build(node.target)

    def build_AnnAssign(self, node):
        if not isinstance(node.target, ast.Name) or node.value is None:
            raise self.ctx.error(SpiradSyntaxError, "annotated assignment needs a name and a value", node)
        dtype = T.from_python(self.build(node.annotation), self.ctx.default_fp,
                              self.ctx.default_ip)
        if not isinstance(dtype, T.DType):
            raise self.ctx.error(SpiradTypeError, "annotation must be a dtype such as sd.f32", node.annotation)
        value = self.build(node.value)
        self.check_not_kernel_arg(node.target, node)
        if self.ctx.find_local(node.target.id) is not None:
            raise self.ctx.error(SpiradSyntaxError, f"'{node.target.id}' is already defined", node)
        self.ctx.bind(node.target.id, self.new_slot(value, node.target.id, dtype))

    def check_not_kernel_arg(self, target, node):
        """A kernel's own parameters are read-only in its body, as in Taichi and Quadrants: a
        launch argument is a value, and rebinding its name would hide that (a @func's
        parameters are the func's locals and may be assigned)."""
        frame = self.ctx.frame
        if isinstance(target, ast.Name) and frame.is_kernel and target.id in frame.param_names:
            raise self.ctx.error(SpiradSyntaxError, f'Kernel argument "{target.id}" is immutable '
                                 f"in the kernel. If you want to change its value, please "
                                 f"create a new variable (`{target.id}_ = {target.id}`)", node)

    def assign(self, target, value):
        ctx = self.ctx
        from ..data.struct import StructElem, StructVal
        if isinstance(target, ast.Name):
            self.check_not_kernel_arg(target, target)
            existing = ctx.find_local(target.id)
            if isinstance(existing, (Slot, SlotView, GlobalElem)):  # the last two: a func's
                self.store_into(existing, value)  # template() parameter, bound by reference
                return
            if isinstance(value, (StructVal, StructElem)):  # struct values copy
                if isinstance(existing, StructVal) and existing.stype is value.stype:
                    self.store_struct(existing, value, target)
                else:
                    ctx.bind(target.id, self.struct_value(value.stype, (), {}, target,
                                                          self.struct_members(value, target)))
                return
            v = self.rvalue(value)
            from kernel_ir.nodes import Node
            if isinstance(v, (Node, VecVal)) or is_py_scalar(v):
                ctx.bind(target.id, self.new_slot(v, target.id))
            else:
                ctx.bind(target.id, v)  # compile-time object (field, ndarray, tuple, ...)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            v = self.rvalue(value)
            items = v.comps if isinstance(v, VecVal) else v
            if isinstance(v, VecVal) and len(v.shape) == 2:  # a matrix unpacks into its rows
                m = v.shape[1]
                items = tuple(VecVal(v.comps[r * m:(r + 1) * m], (m,)) for r in range(v.shape[0]))
            elts = target.elts
            if not isinstance(items, (tuple, list)):
                raise ctx.error(SpiradTypeError, f"cannot unpack a {_kind_of(items)} into "
                                                 f"{len(elts)} targets: only tuples, lists and "
                                                 f"vectors unpack", target)
            stars = [k for k, e in enumerate(elts) if isinstance(e, ast.Starred)]
            if stars:  # `a, *b = ...`: b is a compile-time list of the values in the middle
                k, after = stars[0], len(elts) - stars[0] - 1
                if len(items) < len(elts) - 1:
                    raise ctx.error(SpiradValueError, f"not enough values to unpack (expected at "
                                                      f"least {len(elts) - 1}, got {len(items)})",
                                    target)
                items = list(items[:k]) + [list(items[k:len(items) - after])] + \
                    list(items[len(items) - after:])
                elts = [e.value if isinstance(e, ast.Starred) else e for e in elts]
            elif len(items) != len(elts):
                raise ctx.error(SpiradValueError, f"cannot unpack {len(items)} values into "
                                                  f"{len(elts)} targets", target)
            for t, x in zip(elts, items):
                self.assign(t, x)
            return
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            base = self.build(target.value)
            if isinstance(base, list):  # an element of a Python list (list_elements.py)
                assign_element(self, base, self.rvalue(self.build(target.slice)), value, target)
                return
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            lhs = self.build(target)
            if isinstance(lhs, (StructElem, StructVal)):
                if not isinstance(value, (StructVal, StructElem)) or \
                        not same_members(value.stype, lhs.stype):
                    raise ctx.error(SpiradTypeError, f"assign a {lhs.stype.name} value to a "
                                                     f"{lhs.stype.name} element", target)
                self.store_struct(lhs, value, target)
                return
            if not isinstance(lhs, (Slot, GlobalElem, SlotView)) and \
                    type(lhs).__name__ not in ("QuantElem", "QuantVecElem"):  # quant_ops
                raise ctx.error(SpiradSyntaxError, "this expression cannot be assigned to", target)
            self.store_into(lhs, value)
            return
        raise ctx.error(SpiradSyntaxError, f"cannot assign to {type(target).__name__}", target)

    def build_Assert(self, node):
        """`assert cond[, msg]`: under init(debug=True) a failing thread records the site
        (spirad.runtime.asserts, raised at the next sync). Otherwise the condition is still evaluated
        and only the check is dropped, as in Taichi 1.7.4: `assert bump(i) >= 0` runs bump's
        side effects either way (issue #35); a pure condition is removed by dce."""
        ctx = self.ctx
        msg = ""
        if node.msg is not None:
            msg = self._assert_message(node.msg)
        cond = self.rvalue(self.build(node.test))
        if not ctx.state.debug:
            return
        if is_py_scalar(cond) and cond:
            return
        # `assert False, "unreachable"` fails where it runs (under a run-time `if`: only when
        # that branch is taken), as in Taichi: a run-time failure, not a compile error
        from ..runtime.asserts import state_of
        from ..data.field import internal_field
        a = state_of(ctx.state, internal_field)
        from .formatting import FormatStr, emit_assert_text
        if isinstance(msg, FormatStr):  # run-time values: the failing thread records them
            site = a.site(ast.unparse(node.msg), ctx.loc(node))
            a.record(ctx.b, ctx.b.unary(Op.NOT, self.to_cond(cond)), site,
                     then=lambda: emit_assert_text(self, node.msg, msg, site))
            return
        site = a.site(msg, ctx.loc(node))
        a.record(ctx.b, ctx.b.unary(Op.NOT, self.to_cond(cond)), site)

    def _assert_message(self, m):
        """An assert's message: a string known at compile time, or text with run-time values
        (an f-string, `.format(...)`, or a `%` template, as Taichi formats them)."""
        from kernel_ir.nodes import Node
        from .formatting import FormatStr, percent_format
        if isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mod) and \
                isinstance(m.left, ast.Constant) and isinstance(m.left.value, str):
            args = self.rvalue(self.build(m.right))
            args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
            if any(isinstance(x, (Node, VecVal)) for x in args):
                return percent_format(self, m.left.value, args, m)
            return m.left.value % args
        msg = self.rvalue(self.build(m))
        if not isinstance(msg, (str, FormatStr)):
            raise self.ctx.error(SpiradTypeError, "an assert's message must be a string (an "
                                                  "f-string or format of kernel values too)", m)
        return msg

    def _struct_leaves(self, value, node):
        """The leaf values of a struct value, nested structs flattened in member order (as
        `compile.kernel_return.struct_leaves` orders the return fields)."""
        from ..data.struct import StructElem, StructVal
        for v in self.struct_members(value, node).values():
            if isinstance(v, (StructVal, StructElem)):
                yield from self._struct_leaves(v, node)
            else:
                yield v

    def store_struct(self, lhs, value, node):
        """Member-wise store of a struct value into a StructVal or a struct field element."""
        from ..data.struct import StructElem, StructVal
        vals = self.struct_members(value, node)
        for m, v in vals.items():
            dst = lhs.members[m] if isinstance(lhs, StructVal) else \
                self.member_elem(lhs.sf.members[m], lhs.idx, node)
            if isinstance(dst, (StructVal, StructElem)):  # a nested struct member
                self.store_struct(dst, v, node)
                continue
            self.store_into(dst, v)

    def build_AugAssign(self, node):
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.ctx.error(SpiradSyntaxError, f"unsupported operator {type(node.op).__name__}=", node)
        if isinstance(node.target, ast.Name):
            self.check_not_kernel_arg(node.target, node)
            slot = self.ctx.find_local(node.target.id)
            if isinstance(slot, Slot):
                self.store_into(slot, self.binop(op, slot, self.build(node.value)))
                return
            if not isinstance(slot, (SlotView, GlobalElem)):  # those: a func's template()
                cur = self.ctx.lookup(node.target.id, node.target)  # parameter, by reference
                raise self.ctx.error(SpiradSyntaxError, f"cannot update '{node.target.id}' "
                                                        f"({type(cur).__name__}) in place inside a kernel", node)
            lhs = slot
        else:
            lhs = self.build(node.target)
        rhs = self.build(node.value)
        if isinstance(lhs, AppendTarget):  # a sparse matrix builder: append a triplet
            if op not in (Op.ADD, Op.SUB):
                raise self.ctx.error(SpiradSyntaxError, f"{lhs.what} takes only "
                                     "`A[i, j] += v` and `A[i, j] -= v`", node)
            lhs.insert(self, rhs, op == Op.SUB, node)
            return
        if type(lhs).__name__ in ("QuantElem", "QuantVecElem"):  # bit-packed (frontend/quant_ops)
            if op in (Op.ADD, Op.SUB):
                rhs = self.rvalue(rhs)
                if op == Op.SUB:
                    rhs = -rhs if is_py_scalar(rhs) else self.unop(Op.NEG, rhs)
                self.atomic_add_into(lhs, rhs)
            else:
                self.store_into(lhs, self.binop(op, lhs, rhs))
            return
        if isinstance(lhs, GlobalElem) and op in (Op.ADD, Op.SUB):
            if op == Op.SUB:
                rhs = self.unop(Op.NEG, self.rvalue(rhs) if not is_py_scalar(self.rvalue(rhs)) else self.to_node(self.rvalue(rhs), lhs.ref.dtype))
            self.atomic_add_into(lhs, rhs)
            return
        if isinstance(lhs, GlobalElem) and op in _BIT_ATOMICS:  # Taichi: |= &= ^= on globals are atomic
            self.atomic_into(_BIT_ATOMICS[op], lhs, rhs, f"{_BIT_NAMES[op]}=")
            return
        if not isinstance(lhs, (Slot, GlobalElem, SlotView)):
            raise self.ctx.error(SpiradSyntaxError, "this expression cannot be updated in place", node)
        self.store_into(lhs, self.binop(op, lhs, rhs))

    # -- if -----------------------------------------------------------------------------------
    def build_If(self, node):
        static = isinstance(node.test, ast.Call) and self._callee(node.test) is lang.static
        c = self.rvalue(self.build(node.test))
        if static:  # resolved before scoping: the chosen body stands in the enclosing scope
            self.scoped(node.body if c else node.orelse)
            return
        self.ctx.nested_scopes += 1  # not the outermost scope, even when `c` is a constant
        try:
            if is_py_scalar(c) or c is None:
                self.scoped(node.body if c else node.orelse)
                return
            cond = self.to_cond(c)
            with self.ctx.b.if_(cond) as (then, orelse):
                with then:
                    self.scoped(node.body)
                with orelse:
                    self.scoped(node.orelse)
        finally:
            self.ctx.nested_scopes -= 1

    def scoped(self, stmts):
        self.ctx.frame.scopes.append({})
        try:
            self.build_stmts(stmts)
        finally:
            self.ctx.frame.scopes.pop()

    # -- loops --------------------------------------------------------------------------------
    def build_While(self, node):
        """`while cond: body`. With `init(max_while_iterations=N)` the loop also counts its
        iterations: a head check `if count > N: break` (after the condition, so a loop that
        ends by itself within N iterations never trips it) and, after the loop, `count > N`
        records the failure (spirad.runtime.asserts, raised at the next sync naming this line). Both
        are plain exit checks and a held local for reverse mode: no autodiff stack."""
        if node.orelse:
            raise self.ctx.error(SpiradSyntaxError, "while ... else is not supported", node)
        b = self.ctx.b
        cap = int(self.ctx.state.options.max_while_iterations or 0)
        count = b.alloca(T.i32, "while_count") if cap > 0 else None
        self.ctx.loops.append("serial")
        self.ctx.nested_scopes += 1
        try:
            with b.while_():
                c = self.rvalue(self.build(node.test))
                if is_py_scalar(c):
                    if not c:
                        b.break_()
                else:
                    with b.if_(self.unop(Op.NOT, self.to_cond(c))) as (then, _):
                        with then:
                            b.break_()
                if count is not None:
                    with b.if_(b.binary(Op.CMP_GT, b.load(count), b.const(cap, T.i32))) as (then, _):
                        with then:
                            b.break_()
                    b.store(count, b.binary(Op.ADD, b.load(count), b.const(1, T.i32)))
                self.scoped(node.body)
        finally:
            self.ctx.nested_scopes -= 1
            self.ctx.loops.pop()
        if count is not None:
            self._while_cap_report(count, cap, node)

    def _while_cap_report(self, count, cap, node):
        from kernel_ir.errors import SpiradDeviceError
        from ..runtime.asserts import state_of
        from ..data.field import internal_field
        ctx, b = self.ctx, self.ctx.b
        a = state_of(ctx.state, internal_field)
        site = a.site(f"this while loop ran more than {cap} iterations (sd.init("
                      f"max_while_iterations={cap})); it stopped there, so this launch's results "
                      f"are wrong. A loop that never ends is a bug in the kernel; raise the cap if "
                      f"it does end", ctx.loc(node), SpiradDeviceError)
        a.record(b, b.binary(Op.CMP_GT, b.load(count), b.const(cap, T.i32)), site)

    def build_For(self, node):
        ctx = self.ctx
        if node.orelse:
            raise ctx.error(SpiradSyntaxError, "for ... else is not supported", node)
        it = node.iter
        if isinstance(it, ast.IfExp):
            return self._for_over_chosen_iterable(node)
        cfg, ctx.loop_config = ctx.loop_config, None  # sd.loop_config(...) applies to this loop
        if isinstance(it, ast.Call) and self._callee(it) is lang.static:
            if len(it.args) == 1 and isinstance(it.args[0], ast.Call) \
                    and self._callee(it.args[0]) is lang.static:
                raise ctx.error(SpiradSyntaxError, "'ti.static' cannot be nested: write one "
                                                   "sd.static(...)", it.args[0])
            return self.static_for(node, self.build(it))
        # The outermost scope of the kernel, reached through @func calls and sd.static
        # if / for (see docs/parallel_loops.md); decided here, never by constant folding.
        parallel = ctx.nested_scopes == 0 and not (cfg and cfg.get("serialize"))
        iterable = self.build(it) if not (isinstance(it, ast.Call) and self._callee(it) is range) else None
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        for t in targets:
            if not isinstance(t, ast.Name):
                raise ctx.error(SpiradSyntaxError, "loop targets must be names", t)
        names = [t.id for t in targets]
        if iterable is None or not _over_ndrange(iterable):  # range and struct-fors (Taichi's)
            declared = [n for n in names if any(n in s for s in ctx.frame.scopes)]
            if declared:
                raise ctx.error(SpiradSyntaxError, f"Variable '{declared[0]}' is already declared "
                                f"in the outer scope and cannot be used as loop variable",
                                targets[names.index(declared[0])])
        if iterable is None:
            begin, end = self.range_args(it, node)
            if len(names) != 1:
                raise ctx.error(SpiradSyntaxError, "range() yields one index", node.target)
            return self.emit_loop([(begin, end)], names, node, parallel, grouped=False)
        grouped = isinstance(iterable, lang.grouped)
        if grouped:
            iterable = iterable.target
        dims = self.iteration_dims(iterable, node)
        from .sparse_ops import loop_guard  # a struct-for over a sparse field / node
        self._sparse_guard = loop_guard(iterable)
        # where a snapshot of its masks would go (before the loop), and whether a launch-time
        # copy can be taken there (not inside a parallel loop): frontend/sparse_ops.py
        self._sparse_site = (ctx.b.position(), "parallel" in ctx.loops, parallel, node)
        if not grouped and len(names) != len(dims):
            what = "Ndrange for loop with number of the loop variables not equal to the " \
                   "dimension of the ndrange is not supported: " \
                if isinstance(iterable, lang.ndrange) else ""  # Taichi's text
            raise ctx.error(SpiradSyntaxError, f"{what}loop over {len(dims)} dimension(s) needs "
                            f"{len(dims)} index name(s), got {len(names)}", node.target)
        if grouped and len(names) != 1:
            raise ctx.error(SpiradSyntaxError, "grouped() yields one index vector", node.target)
        axes = iterable.axes if isinstance(iterable, lang.ndrange) else None
        return self.emit_loop(dims, names, node, parallel, grouped, axes)

    def _for_over_chosen_iterable(self, node):
        """`for i in (A if sd.static(flag) else B):` (Quadrants' idiom): the condition is known
        at compile time, and the loop is the one over the chosen side, built as if written so
        (static, range, ndrange, grouped, a field: any loop form, at any depth). The other side
        is never evaluated."""
        it = node.iter
        c = self.rvalue(self.build(it.test))
        if not is_py_scalar(c) and not isinstance(c, (type(None), str, tuple, list, dict)):
            raise self.ctx.error(SpiradSyntaxError, "a for-loop's iterable chosen by `A if cond "
                                 "else B` needs a condition known at compile time (sd.static(...) "
                                 "or a template() value); a run-time condition cannot pick "
                                 "the loop", it.test)
        chosen = ast.copy_location(ast.For(target=node.target, iter=it.body if c else it.orelse,
                                           body=node.body, orelse=node.orelse,
                                           type_comment=getattr(node, "type_comment", None)), node)
        ast.fix_missing_locations(chosen)
        return self.build_For(chosen)

    def _callee(self, call):
        try:
            return self.build(call.func)
        except Exception:
            return None

    def range_args(self, call, loop):
        if call.keywords or not 1 <= len(call.args) <= 2:  # no step: Taichi's text, at the loop
            raise self.ctx.error(SpiradSyntaxError, f"Range should have 1 or 2 arguments, found "
                                                    f"{len(call.args) + len(call.keywords)}", loop)
        args = [self.rvalue(self.build(a)) for a in call.args]
        if len(args) == 1:
            args = [0] + args
        return tuple(args)

    def iteration_dims(self, obj, node):
        from ..data.field import Field
        if isinstance(obj, lang.ndrange):
            dims = []
            for d in obj.dims:
                d = self.rvalue(d)
                if isinstance(d, tuple):  # h_ndrange checked the entries
                    dims.append(d)
                else:
                    dims.append((0, d))
            return dims
        from ..data.field import SNode
        if isinstance(obj, SNode) or getattr(obj, "_quant", False) or \
                getattr(obj, "_quant_vector", False):  # a node's cells (Taichi's); quantized
            return [(0, s) for s in obj.shape]
        if isinstance(obj, Field) or getattr(obj, "_struct_members", False):
            # Taichi's `offset=`: the loop runs over [offset, offset + shape) (a struct field's
            # members share theirs; a member named `offset` must not shadow it)
            f = obj if isinstance(obj, Field) else obj.leaves()[0]
            return [(o, o + s) for o, s in zip(f.offset, obj.shape)]
        from ..data.struct_args import StructView
        from ..texture import Texture
        if isinstance(obj, StructView) and obj.is_a(Texture):
            obj = obj.data  # `for i, j in tex`: over the texels (Taichi's rw_texture loop)
        if isinstance(obj, NdarrayArg):
            return [(0, self.ctx.b.emit(Op.NDARRAY_SHAPE, T.i32, (), (obj.arg_index, obj.axis(k))))
                    for k in range(obj.ndim)]
        raise self.ctx.error(SpiradSyntaxError, "for-loops iterate over range(), ndrange(), grouped(), "
                                                "a field, or static(...)", node.iter)

    def emit_loop(self, dims, names, node, parallel, grouped, axes=None):
        """The loop over `dims` (canonical order). `axes` (an ndrange's `axes=`, None for the
        identity: the code is then exactly the code before `axes=`) nests the levels in that
        order, outermost first, and binds each level's index to its canonical name."""
        ctx, b = self.ctx, self.ctx.b
        bounds = []
        it = _loop_dtype(dims)
        for lo, hi in dims:
            lo_n, hi_n = (self.to_node(v, it if is_py_scalar(v) else None) for v in (lo, hi))
            if not (lo_n.dtype.is_int and hi_n.dtype.is_int):
                raise ctx.error(SpiradTypeError, "loop bounds must be integers", node.iter)
            bounds.append((b.cast(lo_n, it), b.cast(hi_n, it)))
        bounds = ndrange_axes.physical(bounds, axes)
        if parallel and len(bounds) > 1:
            return self._parallel_nd(bounds, names, node, grouped, axes)
        if not bounds:  # a 0-d field: one iteration (an empty index vector under grouped)
            self.ctx.loops.append("parallel" if parallel else "serial")
            try:
                with b.range_for(b.const(0, T.i32), b.const(1, T.i32), parallel=parallel) as i:
                    saved = rng.enter_parallel(ctx, i) if parallel else None
                    self._bind_indices(names, [], grouped, node)
                if parallel:
                    rng.leave_parallel(ctx, saved)
            finally:
                self.ctx.loops.pop()
            return
        if parallel:
            ctx.loops.append("parallel")
            try:
                with b.range_for(*bounds[0], parallel=True) as i:
                    saved = rng.enter_parallel(ctx, i)
                    self._bind_indices(names, [i], grouped, node)
                rng.leave_parallel(ctx, saved)
            finally:
                ctx.loops.pop()
            return
        self._serial_nest(bounds, names, node, grouped, [], axes)

    def _serial_nest(self, bounds, names, node, grouped, idx, axes=None):
        b = self.ctx.b
        if not bounds:
            self._bind_indices(names, ndrange_axes.canonical(idx, axes), grouped, node)
            return
        self.ctx.loops.append("serial" if len(bounds) == 1 else "nest")
        try:
            with b.range_for(*bounds[0]) as i:
                self._serial_nest(bounds[1:], names, node, grouped, idx + [i], axes)
        finally:
            self.ctx.loops.pop()

    def _parallel_nd(self, bounds, names, node, grouped, axes=None):
        """One parallel loop over the product of the extents. An axis with end < start runs no
        iteration (Taichi's `ndrange((5, 2), (4, 1))`: 0), so each extent is max(end - start, 0):
        two negative extents multiplied to a positive count (9 iterations there; issue #35).
        `bounds` are in nesting order (`axes`), the last level fastest in the flat index."""
        b = self.ctx.b
        extents = [b.binary(Op.MAX, b.binary(Op.SUB, hi, lo), b.const(0, hi.dtype))
                   for lo, hi in bounds]
        total = extents[0]
        for e in extents[1:]:
            total = b.binary(Op.MUL, total, e)
        self.ctx.loops.append("parallel")
        try:
            with b.range_for(b.const(0, total.dtype), total, parallel=True) as lin:
                saved = rng.enter_parallel(self.ctx, lin)
                idx = []
                rest = lin
                for k in range(len(bounds) - 1, -1, -1):
                    if k > 0:
                        idx.append(b.binary(Op.ADD, bounds[k][0], b.binary(Op.MOD, rest, extents[k])))
                        rest = b.binary(Op.FLOORDIV, rest, extents[k])
                    else:
                        idx.append(b.binary(Op.ADD, bounds[0][0], rest))
                self._bind_indices(names, ndrange_axes.canonical(idx[::-1], axes), grouped, node)
            rng.leave_parallel(self.ctx, saved)
        finally:
            self.ctx.loops.pop()

    def _bind_indices(self, names, idx, grouped, node):
        frame = self.ctx.frame
        frame.scopes.append({})
        self.ctx.nested_scopes += 1
        try:
            if grouped:
                frame.scopes[-1][names[0]] = VecVal(tuple(idx), (len(idx),))
            else:
                for n, i in zip(names, idx):
                    frame.scopes[-1][n] = i
            guard, self._sparse_guard = getattr(self, "_sparse_guard", None), None
            if guard is not None:  # a sparse struct-for: the cells active at its start only
                from .sparse_ops import guarded_body
                guarded_body(self, guard, idx, lambda: self.build_stmts(node.body),
                             self._sparse_site)
            else:
                self.build_stmts(node.body)
        finally:
            self.ctx.nested_scopes -= 1
            frame.scopes.pop()

    def static_for(self, node, values):
        ctx = self.ctx
        if isinstance(values, lang.grouped):
            if not isinstance(values.target, lang.ndrange):  # Taichi's rule too
                raise ctx.error(SpiradSyntaxError, "Only 'ti.ndrange' is allowed in "
                                "'ti.static(ti.grouped(...))': unroll an sd.ndrange of constants, "
                                "or loop over a field with `for I in sd.grouped(x)`", node.iter)
            values = [tuple(x) for x in iter(values.target)]
            grouped = True
        else:
            grouped = False
        try:
            items = list(values)
        except TypeError:
            raise ctx.error(SpiradSyntaxError, "static(...) in a for-loop needs an iterable known at compile time", node.iter) from None
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        self._count_unrolled(node, len(items))
        jumps = _loop_jumps(node.body)
        if jumps:  # break / continue: each iteration runs in a one-trip serial loop (see below)
            return self._static_for_with_jumps(node, items, targets, grouped, "break" in jumps)
        ctx.loops.append("static")
        try:
            for item in items:
                if ctx.frame.returned:
                    break
                ctx.frame.scopes.append({})
                try:
                    self._bind_static(targets, item, grouped)
                    self.build_stmts(node.body)
                finally:
                    ctx.frame.scopes.pop()
        finally:
            ctx.loops.pop()

    def _count_unrolled(self, node, n: int):
        """Every iteration an `sd.static` loop unrolls (nested ones multiply) counts towards
        the kernel's limit, `init(static_unroll_limit=)`: past it, a clear error instead of a
        compile that takes minutes and gigabytes."""
        ctx = self.ctx
        ctx.unrolled += n
        limit = ctx.state.options.static_unroll_limit
        if limit and ctx.unrolled > limit:
            raise ctx.error(SpiradValueError, f"sd.static loops unroll {ctx.unrolled:,} "
                            f"iterations in this kernel (this loop: {n:,}), more than the limit of "
                            f"{limit:,}; use a run-time loop (range without sd.static), or raise "
                            f"the limit with sd.init(static_unroll_limit=...)", node.iter)

    def _bind_static(self, targets, item, grouped):
        if grouped:  # `static(grouped(ndrange(...)))`: an index vector of constants (Taichi's
            # Python-scope Vector: `I.cast(f32)`, `base + I`, and `I[d]` indexing Python lists)
            item = StaticIndexVec(tuple(self.const(int(x), T.i32) for x in item), (len(item),))
            self.ctx.bind(targets[0].id, item)
        elif len(targets) == 1:
            self.ctx.bind(targets[0].id, item)
        else:
            for t, x in zip(targets, item):
                self.ctx.bind(t.id, x)

    def _static_for_with_jumps(self, node, items, targets, grouped, has_break):
        """An unrolled loop whose body breaks or continues: each iteration is the body of a
        one-trip serial loop, so `continue` / `break` leave it (a BREAK); `break` also sets a
        flag that skips the remaining iterations. The body is then not the kernel's outermost
        scope (its loops are serial), as for any loop with a run-time exit."""
        ctx, b = self.ctx, self.ctx.b
        flag = self.new_slot(self.const(0, T.i32), "static_break") if has_break else None
        ctx.static_break.append(flag)
        ctx.nested_scopes += 1
        try:
            for item in items:
                ctx.frame.scopes.append({})
                try:
                    self._bind_static(targets, item, grouped)
                    if flag is None:
                        self._one_trip(node)
                    else:
                        go = b.binary(Op.CMP_EQ, self.rvalue(flag), self.const(0, T.i32))
                        with b.if_(go) as (then, _):
                            with then:
                                self._one_trip(node)
                finally:
                    ctx.frame.scopes.pop()
        finally:
            ctx.nested_scopes -= 1
            ctx.static_break.pop()

    def _one_trip(self, node):
        b = self.ctx.b
        self.ctx.loops.append("static-jump")
        try:
            with b.range_for(self.const(0, T.i32), self.const(1, T.i32)):
                self.build_stmts(node.body)
        finally:
            self.ctx.loops.pop()

    def build_Break(self, node):
        self._loop_jump(node, "break")
        if self.ctx.loops[-1] == "static-jump":  # leave the iteration, skip the rest
            self.store_into(self.ctx.static_break[-1], self.const(1, T.i32))
        self.ctx.b.break_()

    def build_Continue(self, node):
        self._loop_jump(node, "continue")
        if self.ctx.loops[-1] == "static-jump":  # leave this iteration's one-trip loop
            self.ctx.b.break_()
            return
        self.ctx.b.continue_()

    def _loop_jump(self, node, what):
        loops = self.ctx.loops
        if not loops:
            raise self.ctx.error(SpiradSyntaxError, f"'{what}' outside a loop", node)
        kind = loops[-1]
        if kind == "static":
            raise self.ctx.error(SpiradSyntaxError, f"'{what}' is not supported in a static (unrolled) loop", node)
        if kind == "nest":
            raise self.ctx.error(SpiradSyntaxError, f"'{what}' inside a multi-dimensional serial loop is "
                                                    f"ambiguous; use nested range() loops", node)
        if kind == "parallel" and what == "break":
            raise self.ctx.error(SpiradSyntaxError, "Cannot break in the outermost loop: 'break' is not "
                                                    "allowed in the outermost (parallel) loop of a "
                                                    "kernel; use 'continue' or an if", node)

    # -- return -------------------------------------------------------------------------------
    def build_Return(self, node):
        frame = self.ctx.frame
        if frame.is_kernel:
            return self.kernel_return(node)
        if frame.ret is not None:
            raise self.ctx.error(SpiradSyntaxError, "a @sd.func may only return once, as its last statement", node)
        if self.ctx.nested_scopes > frame.scope_base or \
                any(k != "static" for k in self.ctx.loops[frame.loop_base:]):
            raise self.ctx.error(SpiradSyntaxError, "Return inside non-static if/for is not "
                                 "supported (nor inside a while) in a @sd.func; assign the value "
                                 "to a variable and return it at the end", node)
        frame.ret = self.rvalue(self.build(node.value)) if node.value is not None else None
        frame.returned = True  # a return under sd.static if / for: the rest is not compiled

    def kernel_return(self, node):
        """`return v` in a kernel: stores into the kernel's return fields (`kernel_return`)."""
        ctx, frame = self.ctx, self.ctx.frame
        value = None if node.value is None else self.rvalue(self.build(node.value))
        if frame.returns is None:
            if value is not None:
                raise ctx.error(SpiradSyntaxError, "this kernel returns a value but has no return "
                                "type annotation; declare it: def k(...) -> sd.f32 (or a "
                                "sd.types.vector / matrix type, or a tuple of types)", node)
            frame.returned = True
            return
        if ctx.nested_scopes or any(k != "static" for k in ctx.loops):
            raise ctx.error(SpiradSyntaxError, "Return inside non-static if/for is not "
                            "supported (nor inside a while; as in Taichi); assign the value to a "
                            "variable and return it at the end of the kernel", node)
        fields, items = frame.returns.fields, frame.returns.items
        values = value if frame.returns.is_tuple else (value,)
        if not isinstance(values, (tuple, list)) or len(values) != len(items):
            raise ctx.error(SpiradTypeError, f"the kernel's return type has {len(items)} "
                            f"value(s); return a tuple of {len(items)}", node)
        from ..data.struct import StructElem, StructType, StructVal
        flat = []
        for t, v in zip(items, values):
            if not isinstance(t, StructType):
                flat.append(v)
                continue
            if not isinstance(v, (StructVal, StructElem)) or \
                    list(v.stype.members.items()) != list(t.members.items()):
                raise ctx.error(SpiradTypeError, f"the kernel returns a {t.name} struct; "
                                f"return a value of that type", node)
            flat.extend(self._struct_leaves(v, node))  # `-> P`: the members, in order
        values = tuple(flat)
        if len(values) != len(fields):
            raise ctx.error(SpiradTypeError, f"the kernel's return type has {len(fields)} "
                            f"value(s); return a tuple of {len(fields)}", node)
        for f, v in zip(fields, values):
            shape = v.shape if isinstance(v, VecVal) else ()
            if v is None or (not isinstance(v, VecVal) and not is_py_scalar(v)
                             and not hasattr(v, "dtype")):
                raise ctx.error(SpiradTypeError, f"cannot return {type(v).__name__} as "
                                f"{_type_name(f)}", node)
            if shape != f.comp_shape:
                raise ctx.error(SpiradTypeError, f"the kernel returns a value of shape {shape} "
                                f"but its return type is {_type_name(f)}", node)
            self.store_into(GlobalElem(f.ref(), (), f.comp_shape, f), v, warn=False)  # declared
        frame.returned = True


def same_members(a, b) -> bool:
    """Whether struct types `a` and `b` have the same member names (nested struct members
    alike): a value of `a` then stores into `b` member by member, each converted to its type
    (`x[i] = sd.Struct(a=2 * i, b=1.0)` into a field of `P(a=f32, b=i32)`, as Taichi)."""
    from ..data.struct import StructType
    if a is b:
        return True
    if set(a.members) != set(b.members):
        return False
    return all(same_members(a.members[m], t) if isinstance(t, StructType) else
               not isinstance(a.members[m], StructType) for m, t in b.members.items())


def _over_ndrange(iterable) -> bool:
    """`sd.ndrange(...)` or `sd.grouped(sd.ndrange(...))`: loops whose index names Taichi lets
    shadow a variable of the enclosing scope (its range and struct-fors refuse that)."""
    if isinstance(iterable, lang.grouped):
        iterable = iterable.target
    return isinstance(iterable, lang.ndrange)


def _loop_jumps(body) -> set:
    """'break' / 'continue' statements of this loop level (not of loops nested in it)."""
    found = set()

    def visit(n):
        if isinstance(n, ast.Break):
            found.add("break")
        elif isinstance(n, ast.Continue):
            found.add("continue")
        elif isinstance(n, (ast.For, ast.While, ast.FunctionDef, ast.Lambda, ast.ClassDef)):
            return
        for c in ast.iter_child_nodes(n):
            visit(c)

    for st in body:
        visit(st)
    return found


def _type_name(f) -> str:
    cs = f.comp_shape
    if not cs:
        return str(f.dtype)
    return f"vector({cs[0]}, {f.dtype})" if len(cs) == 1 else f"matrix({cs[0]}, {cs[1]}, {f.dtype})"


_BIT_ATOMICS = {Op.AND: Op.ATOMIC_AND, Op.OR: Op.ATOMIC_OR, Op.XOR: Op.ATOMIC_XOR}
_BIT_NAMES = {Op.AND: "&", Op.OR: "|", Op.XOR: "^"}
