"""Expression visitors: `build_<ast node>` methods returning frontend values."""
from __future__ import annotations

import ast
import collections.abc
import numbers

import numpy as np

from kernel_ir.errors import (SpiradAutodiffError, SpiradError, SpiradIndexError,
                              SpiradSyntaxError, SpiradTypeError)
from kernel_ir import dtypes as T
from kernel_ir.ops import Op

from ..func import BoundFunc, Func, PyFunction, is_plain_python_function, plain_func
from . import call_keywords
from .builtins import HANDLERS
from .namespace_hooks import append_target
from .value_ops import is_py_scalar
from .matrix_ops import METHODS as _MATRIX_METHODS, matmul_vectors
from ..data.matrix import _swizzle, swizzle_range_error
from .values import GlobalElem, NdarrayArg, ShapeVal, Slot, SlotView, StaticIndexVec, VecVal

BINOPS = {ast.Add: Op.ADD, ast.Sub: Op.SUB, ast.Mult: Op.MUL, ast.Div: Op.DIV,
          ast.FloorDiv: Op.FLOORDIV, ast.Mod: Op.MOD, ast.Pow: Op.POW, ast.LShift: Op.SHL,
          ast.RShift: Op.SHR, ast.BitAnd: Op.AND, ast.BitOr: Op.OR, ast.BitXor: Op.XOR}
CMPOPS = {ast.Lt: Op.CMP_LT, ast.LtE: Op.CMP_LE, ast.Gt: Op.CMP_GT, ast.GtE: Op.CMP_GE,
          ast.Eq: Op.CMP_EQ, ast.NotEq: Op.CMP_NE}


class BoundMethod:
    """`obj.name(...)` in a kernel: `fn(visitor, obj, args, node)`; its keywords, where it has
    any, are bound to positions first (call_keywords.method_args)."""
    def __init__(self, fn, obj, name=""):
        self.fn, self.obj, self.name = fn, obj, name


class ExprVisitor:
    def build_Constant(self, node):
        if isinstance(node.value, (bool, int, float)) or node.value is None or isinstance(node.value, str):
            return node.value
        raise self.ctx.error(SpiradSyntaxError, f"unsupported constant {node.value!r}", node)

    def build_Name(self, node):
        return self.py_constant(self.ctx.lookup(node.id, node))

    def py_constant(self, v):
        """A value read from Python scope: numpy scalars become numbers, `sd.Vector` /
        `sd.Matrix` values (MatrixValue) become constant vectors; anything else is unchanged."""
        from ..data.matrix import MatrixValue
        if isinstance(v, MatrixValue):
            t = self.ctx.default_fp if v.dtype.kind == "f" else self.ctx.default_ip
            return VecVal(tuple(self.const(x, t) for x in np.asarray(v).reshape(-1).tolist()),
                          tuple(v.shape))
        from ..data.struct import Struct
        if isinstance(v, Struct):  # a Python-scope struct value: a kernel-local copy
            values = {m: self.py_constant(x) for m, x in v.items()}
            stype = v._stype or self.struct_type_of(values, None)
            return self.struct_value(stype, (), {}, None, values=values)
        return _numpy_constant(v)

    def struct_type_of(self, values: dict, node):
        """The StructType `sd.Struct(a=..., b=...)` gets from its member values: kernel
        values keep their types, Python ints / floats take the default types, vectors their
        shape (Taichi infers them the same way)."""
        from ..data.struct import StructType, StructVal
        from ..types import MatrixType, VectorType
        members = {}
        for m, x in values.items():
            x = self.rvalue(x)
            if isinstance(x, (list, tuple)):
                x = self.compound_value(VectorType(len(x), _common_type(self, x)), [x], node)
            if isinstance(x, VecVal):
                dt = x.comps[0].dtype if hasattr(x.comps[0], "dtype") else self.ctx.default_fp
                members[m] = VectorType(x.shape[0], dt) if len(x.shape) == 1 else \
                    MatrixType(x.shape[0], x.shape[1], dt)
            elif isinstance(x, bool) or isinstance(x, int):
                members[m] = self.ctx.default_ip
            elif isinstance(x, float):
                members[m] = self.ctx.default_fp
            elif hasattr(x, "dtype"):
                members[m] = x.dtype
            else:
                what = "a nested struct" if isinstance(x, StructVal) else type(x).__name__
                raise self.ctx.error(SpiradTypeError, f"struct member {m!r}: {what} is not "
                                     f"supported in a kernel struct value (numbers and vectors "
                                     f"are)", node)
        return StructType(members)

    def struct_value(self, stype, args, kwargs, node, values=None):
        """A fresh StructVal of `stype`: members from `values` (name -> value), or from the
        call's positional / keyword arguments; members not given are zero."""
        from ..data.field import resolve_dtype
        from ..data.struct import StructVal
        from ..types import MatrixType, VectorType
        names = list(stype.members)
        if values is None:
            if len(args) > len(names) or any(k not in names for k in kwargs):
                raise self.ctx.error(SpiradTypeError, f"{stype.name}() takes members {names}", node)
            values = dict(zip(names, args))
            values.update(kwargs)
        from ..data.struct import StructElem, StructType
        slots = {}
        for m, ty in stype.members.items():
            v = values.get(m, 0)
            if isinstance(ty, StructType):  # a nested struct: its own StructVal
                sub = self.struct_members(v, node) if isinstance(v, (StructVal, StructElem)) \
                    else v if isinstance(v, dict) else dict(zip(ty.members, [v]))  # as ty(v)
                slots[m] = self.struct_value(ty, (), {}, node, values=sub)
            elif isinstance(ty, (VectorType, MatrixType)):
                v = self.compound_value(ty, [v], node)
                slots[m] = self.new_slot(v, f"{stype.name}.{m}")
            else:
                t = resolve_dtype(T.from_python(ty, self.ctx.default_fp, self.ctx.default_ip))[0]
                v = self.rvalue(v)
                if isinstance(v, numbers.Integral) and not isinstance(v, bool):
                    # Taichi's struct type casts its members: a literal takes default_ip (and
                    # must fit it), then converts (`s0(b=65537)` of an i16 member is 1)
                    self.check_literal(v, self.ctx.default_ip)
                    slots[m] = self.new_slot(self.cast(v, t), f"{stype.name}.{m}", t)
                    continue
                slots[m] = self.new_slot(self.to_node(v, t), f"{stype.name}.{m}", t)
        return StructVal(stype, slots)

    def struct_members(self, v, node):
        """name -> readable value of a StructVal or StructElem."""
        from ..data.struct import StructVal
        if isinstance(v, StructVal):
            return {m: self.rvalue(s) for m, s in v.members.items()}
        return {m: self.rvalue(self.member_elem(f, v.idx, node)) for m, f in v.sf.members.items()}

    def struct_method(self, obj, name):
        """`p.area` of a dataclass method in a kernel: the method bound to the struct value or
        element `p` (inlined with `self` = p, by reference: `self.x = v` writes p's member)."""
        from ..func import BoundFunc, Func, plain_func
        fn = obj.stype.methods[name]
        return BoundFunc(fn if isinstance(fn, Func) else plain_func(fn), obj)

    def member_elem(self, f, idx, node):
        """Element `idx` of a struct field's member `f`: a field element, or for a struct member
        (a struct field of its own) its StructElem."""
        from ..data.struct import StructElem, StructField
        return StructElem(f, idx) if isinstance(f, StructField) else self.field_elem(f, idx, node)

    def compound_value(self, ty, args, node):
        """`vec3(x, y, z)`, `vec3(0)`, `vec3(v2, z)`, `mat2(a, b, c, d)`: a vector / matrix type
        called in a kernel."""
        from ..data.field import resolve_dtype
        flat = []
        for a in args:
            a = self.rvalue(a)
            flat.extend(a.comps if isinstance(a, VecVal) else
                        [self.rvalue(x) for x in a] if isinstance(a, (list, tuple)) else [a])
        try:
            flat = ty.flat_values([flat])
        except SpiradTypeError as e:
            raise self.ctx.error(SpiradTypeError, str(e), node) from None
        dt = ty.dtype
        t = resolve_dtype(T.from_python(dt, self.ctx.default_fp, self.ctx.default_ip))[0]
        return VecVal(tuple(self.to_node(x, t) for x in flat), ty.comp_shape)

    def build_Slice(self, node):
        """`a:b:c` inside a subscript: a compile-time slice (local_index.py)."""
        parts = [None if p is None else self.rvalue(self.build(p))
                 for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def build_Tuple(self, node):
        return tuple(self.build(e) for e in node.elts)

    def build_List(self, node):
        return [self.build(e) for e in node.elts]

    def build_BinOp(self, node):
        a, b = self.build(node.left), self.build(node.right)
        if isinstance(node.op, ast.MatMult):
            return self.matmul(self.rvalue(a), self.rvalue(b), node)
        ra, rb = self.rvalue(a), self.rvalue(b)
        if _is_compile_time(ra) and _is_compile_time(rb) and not (is_py_scalar(ra) and is_py_scalar(rb)) \
                and type(node.op) in _PY_BINOPS:  # `[x] * 12`, list + list, dtype arithmetic
            return _PY_BINOPS[type(node.op)](ra, rb)
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.ctx.error(SpiradSyntaxError, f"unsupported operator {type(node.op).__name__}", node)
        r = self.binop(op, a, b)
        if self.ctx.state.debug:  # Taichi's overflow checks, if asked for (frontend/overflow.py)
            from .overflow import check
            check(self, op, ra, rb, r, node)
        return r

    def build_UnaryOp(self, node):
        a = self.rvalue(self.build(node.operand))
        if isinstance(node.op, ast.UAdd):
            return a
        if isinstance(node.op, ast.Not) and _is_compile_time(a) and not is_py_scalar(a):
            return not a  # `not some_tuple`, `not None`
        if is_py_scalar(a):
            return {ast.USub: lambda x: -x, ast.Not: lambda x: not x, ast.Invert: lambda x: ~x}[type(node.op)](a)
        op = {ast.USub: Op.NEG, ast.Not: Op.NOT, ast.Invert: Op.BIT_NOT}[type(node.op)]
        return self.unop(op, a)

    def build_BoolOp(self, node):
        from .boolops import build_boolop  # Taichi's two meanings of `and` / `or` (boolops.py)
        return build_boolop(self, node, _is_compile_time)

    def build_Compare(self, node):
        self._identity_and_membership(node)
        left = self.build(node.left)
        result = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.build(comp)
            lv, rv = self.rvalue(left), self.rvalue(right)
            if _is_compile_time(lv) and _is_compile_time(rv) and (
                    type(op) not in CMPOPS or not (is_py_scalar(lv) and is_py_scalar(rv))):
                r = _PY_CMPOPS[type(op)](lv, rv)  # `in`, `is`, `==` on dtypes, tuples, objects
                result = r if result is None else (result and r) if is_py_scalar(result) else \
                    self.ctx.b.binary(Op.AND, self.to_cond(result), self.to_cond(bool(r)))
                left = right
                continue
            if type(op) not in CMPOPS:
                raise self.ctx.error(SpiradSyntaxError, f"unsupported comparison {type(op).__name__}", node)
            r = self.binop(CMPOPS[type(op)], left, right)
            if result is None:
                result = r
            elif is_py_scalar(result) and is_py_scalar(r):
                result = result and r
            else:
                result = self.ctx.b.binary(Op.AND, self.to_cond(result), self.to_cond(r))
            left = right
        return result

    def _identity_and_membership(self, node):
        """`is` / `in` outside `static(...)`: Taichi refuses them in kernels (they would compare
        Python objects at compile time, never values); inside `static(...)` they are Python's."""
        if self.ctx.static_depth:
            return
        for op in node.ops:
            if isinstance(op, (ast.Is, ast.IsNot)):
                name = "is" if isinstance(op, ast.Is) else "is not"
                raise self.ctx.error(SpiradSyntaxError, f'Operator "{name}" in Taichi scope is not '
                                     f'supported: compare values with == / !=, or objects inside '
                                     f'static(...)', node)
            if isinstance(op, (ast.In, ast.NotIn)):
                raise self.ctx.error(SpiradSyntaxError, f'"{type(op).__name__}" is only supported '
                                     f'inside `ti.static` (static(...) in kernels)', node)

    def build_IfExp(self, node):
        c = self.rvalue(self.build(node.test))
        if is_py_scalar(c):
            return self.build(node.body if c else node.orelse)
        if isinstance(c, VecVal):  # Python's truth of a vector is ambiguous (Taichi refuses too)
            raise self.ctx.error(SpiradSyntaxError, "a conditional expression needs a scalar "
                                 "condition, got a vector / matrix. Please use \"ti.select\" "
                                 "instead. (sd.select(cond, a, b) selects element-wise)", node.test)
        from .conditional import build_conditional  # only the chosen side runs
        return build_conditional(self, node, c)

    def build_Attribute(self, node):
        obj = self.build(node.value)
        name = node.attr
        if type(obj).__name__ == "QuantVecElem":  # `x[i].y` of a quantized vector: its value
            obj = self.rvalue(obj)
        if isinstance(obj, NdarrayArg):
            if name == "shape":
                return ShapeVal(obj)
            if name == "grad":
                if not obj.needs_grad:
                    raise self.ctx.error(SpiradTypeError, f"ndarray '{obj.name}' was created without needs_grad=True", node)
                return NdarrayArg(obj.arg_index, obj.dtype, obj.ndim, obj.comp_shape, True, obj.name, True,
                                  clamp=obj.clamp, order=obj.order)
            if name == "dual":
                if not obj.needs_dual:
                    raise self.ctx.error(SpiradTypeError, f"ndarray '{obj.name}' was created without "
                                         f"needs_dual=True", node)
                return NdarrayArg(obj.arg_index, obj.dtype, obj.ndim, obj.comp_shape, False,
                                  obj.name, dual=True, clamp=obj.clamp, order=obj.order)
            raise self.ctx.error(SpiradSyntaxError, f"ndarray has no attribute '{name}' in kernels", node)
        if isinstance(obj, (Slot, GlobalElem, VecVal, SlotView)):
            return self.vec_attr(obj, name, node)
        from ..data.struct import StructElem, StructVal
        if isinstance(obj, (StructVal, StructElem)) and name in obj.stype.methods and \
                name not in (obj.members if isinstance(obj, StructVal) else obj.sf.members):
            return self.struct_method(obj, name)
        if isinstance(obj, StructVal):
            if name not in obj.members:
                raise self.ctx.error(SpiradTypeError, f"struct {obj.stype.name} has no member "
                                                      f"'{name}' (members: {list(obj.members)})", node)
            return obj.members[name]
        if isinstance(obj, StructElem):  # s[i].member
            f = obj.sf.members.get(name)
            if f is None:
                raise self.ctx.error(SpiradTypeError, f"struct {obj.sf.name} has no member "
                                                      f"'{name}' (members: {list(obj.sf.members)})", node)
            return self.member_elem(f, obj.idx, node)
        from ..data.field import Field
        if isinstance(obj, Field) and obj._primal is None and (
                name == "grad" and not obj.needs_grad or name == "dual" and not obj.needs_dual):
            raise self.ctx.error(SpiradAutodiffError, obj.no_companion_message(name), node)
        from ..data.field import SNode
        from .sparse_ops import DynamicRow, dynamic_row
        if name in ("append", "length", "deactivate") and isinstance(obj, Field) and \
                dynamic_row(obj, ()) is not None:  # `x.append(v)`: the list of a root dynamic
            obj = dynamic_row(obj, ())
        if isinstance(obj, DynamicRow):
            if name not in ("append", "length", "deactivate"):
                raise self.ctx.error(SpiradSyntaxError, f"a dynamic list x[I] has append(), "
                                                        f"length() and deactivate(), not '{name}'", node)
            return BoundMethod(obj.method(name), obj, name)
        if name == "parent" and isinstance(obj, (Field, SNode)):  # a node, at compile time
            return BoundMethod(lambda bld, o, args, n: o.parent(*[bld.rvalue(a) for a in args]),
                               obj, name)
        if name == "fill" and (isinstance(obj, Field) or getattr(obj, "_struct_members", False)):
            from .field_methods import field_fill  # `x.fill(v)` in a kernel: Quadrants' loop
            return BoundMethod(field_fill, obj, name)
        try:
            return self.py_constant(getattr(obj, name))
        except AttributeError as e:
            from kernel_ir.errors import SpiradNotSupportedError
            if isinstance(e, SpiradNotSupportedError):  # a Taichi name spirad lacks: say so
                raise self.ctx.error(SpiradNotSupportedError, str(e), node) from None
            raise self.ctx.error(SpiradSyntaxError, f"'{type(obj).__name__}' object has no attribute '{name}'", node) from None

    def vec_attr(self, obj, name, node):
        shape = obj.shape if isinstance(obj, (Slot, VecVal, SlotView)) else obj.comp_shape
        ks = _swizzle(name) if len(shape) == 1 else None
        if ks is not None:  # Taichi's swizzles: `v.x`, `v.zyx`, `v.rg`, `v.stp`
            bad = swizzle_range_error(shape[0], name)
            if bad:
                raise self.ctx.error(SpiradSyntaxError, bad, node)
            if len(ks) == 1:
                return self.component(obj, ks, node)
            if isinstance(obj, Slot):  # a local: its components, read and written in place
                return Slot(tuple(obj.allocas[k] for k in ks), (len(ks),), obj.dtype)
            comps = self.rvalue(obj).comps  # a value or a global element: read only
            return VecVal(tuple(comps[k] for k in ks), (len(ks),))
        if name in VEC_PROPERTIES and shape:  # Taichi's `v.n` / `m.m`: compile-time sizes
            return VEC_PROPERTIES[name](shape)
        method = VEC_METHODS.get(name)
        if method is None:
            raise self.ctx.error(SpiradSyntaxError, f"vectors have no attribute '{name}'", node)
        return BoundMethod(method, obj, name)

    def build_Subscript(self, node):
        obj = self.build(node.value)
        if type(obj).__name__ == "QuantVecElem":  # `x[i][c]` of a quantized vector: its value
            obj = self.rvalue(obj)
        sl = node.slice
        idx = self.build(sl)
        idx = tuple(idx) if isinstance(idx, (tuple, list)) else (idx,)  # lists index too (Quadrants)
        from ..data.field import Field
        from ..data.struct import StructElem, StructField
        from ..data.quant import QuantField
        quant = isinstance(obj, QuantField) or getattr(obj, "_quant_vector", False)
        if (isinstance(obj, (Field, NdarrayArg, StructField)) or quant) and \
                any(isinstance(x, (tuple, list)) for x in idx):
            idx = _flatten_indices(idx)  # `I = (i, j)`; `x[f, I, b]`: a tuple spreads too
        flat = []
        for x in idx:  # an index vector (grouped loops) spreads over several axes
            x = self.rvalue(x) if isinstance(x, Slot) else x
            if isinstance(x, StaticIndexVec):
                flat.extend(int(c.arg) for c in x.comps)
            else:
                flat.extend(x.comps if isinstance(x, VecVal) else (x,))
        idx = tuple(flat)
        from ..data.struct_args import StructView
        target = append_target(obj, idx) if isinstance(obj, StructView) else None
        if target is not None:
            return target  # `A[i, j] += v` on a SparseMatrixBuilder (frontend/namespace_hooks)
        if isinstance(obj, (Field, NdarrayArg, StructField)) or quant:
            idx = self.expand_index_vectors(idx)
            if idx == (None,):  # x[None]: the element of a 0-d field / ndarray
                idx = ()
        if isinstance(obj, QuantField):  # a bit-packed field (frontend/quant_ops.py)
            from .quant_ops import quant_elem
            return quant_elem(self, obj, idx, node)
        if getattr(obj, "_quant_vector", False):  # its vector / matrix form
            from .quant_ops import quant_vec_elem
            return quant_vec_elem(self, obj, idx, node)
        if isinstance(obj, (Field, StructField)) and len(idx) == len(obj.shape or ()) - 1:
            from .sparse_ops import dynamic_row  # `x[i].append(v)` of a dynamic list
            row = dynamic_row(obj, idx)
            if row is not None:
                return row
        if isinstance(obj, StructField):
            return StructElem(obj, idx)
        if isinstance(obj, Field):
            return self.field_elem(obj, idx, node)
        if isinstance(obj, NdarrayArg):
            if len(idx) != obj.ndim:
                raise self.ctx.error(SpiradTypeError, f"ndarray '{obj.name}' has {obj.ndim} dimension(s) "
                                                      f"but is indexed with {len(idx)}", node)
            ix = self.indices(idx)
            if obj.clamp:  # boundary="clamp": each index into [0, shape - 1], as Taichi
                ix = tuple(self.clamp_index(n, obj.arg_index, obj.axis(k))
                           for k, n in enumerate(ix))
            return GlobalElem(obj.ref(), obj.stored(ix), obj.comp_shape, obj)
        if isinstance(obj, ShapeVal):
            k = self.rvalue(idx[0])
            if not isinstance(k, numbers.Integral) or not 0 <= k < obj.arr.ndim:
                raise self.ctx.error(SpiradTypeError, f"shape index must be a constant in [0, {obj.arr.ndim})", node)
            return self.ctx.b.emit(Op.NDARRAY_SHAPE, T.i32, (),
                                   (obj.arr.arg_index, obj.arr.axis(int(k))))
        if isinstance(obj, (Slot, GlobalElem, VecVal, SlotView)):
            return self.component(obj, idx, node)
        if isinstance(obj, (tuple, list)):
            k = self.rvalue(idx[0])
            what = f"{ast.unparse(node.value)}" if isinstance(node, ast.Subscript) else "it"
            kind = type(obj).__name__
            if not isinstance(k, numbers.Integral):
                raise self.ctx.error(SpiradTypeError, f"{what} is a Python {kind}: a kernel indexes it "
                                     f"only with compile-time constants, and this index is a run-time "
                                     f"value. Put the values in a field or ndarray (t = sd.field(sd.f32, "
                                     f"{len(obj)}); t.from_numpy(np.array({what}))) and index that, or "
                                     f"loop with `for j in sd.static(range({len(obj)}))`", node)
            if not -len(obj) <= k < len(obj):
                raise self.ctx.error(SpiradIndexError, f"{kind} index {k} is out of range: {what} has "
                                                       f"{len(obj)} element(s)", node)
            # a Python-scope Vector / Matrix element (`static(offsets)[0]`) is a constant vector
            # outside static(...), as the same value read by name is
            return obj[k] if self.ctx.static_depth else self.py_constant(obj[k])
        key = tuple(self.rvalue(k) for k in idx)
        if hasattr(obj, "__getitem__") and _is_compile_time(obj) and _is_compile_time(key):
            try:  # a compile-time container (dict, numpy array, ...) at a compile-time key
                return self.py_constant(obj[key[0] if len(key) == 1 else key])
            except (KeyError, IndexError, TypeError) as e:
                raise self.ctx.error(SpiradTypeError, f"{type(obj).__name__}[{key}]: "
                                                      f"{type(e).__name__}: {e}", node) from None
        from ..data.ndarray import Ndarray
        if isinstance(obj, Ndarray):  # Taichi's TaichiRuntimeTypeError text
            raise self.ctx.error(SpiradTypeError, "Ndarray shouldn't be passed in via "
                                 "`ti.template()`, please annotate your kernel using "
                                 "`ti.types.ndarray(...)` instead", node)
        raise self.ctx.error(SpiradTypeError, f"'{type(obj).__name__}' object is not subscriptable in a kernel", node)

    def field_elem(self, obj, idx, node):
        """`x[idx]` of a field (`idx` already expanded)."""
        ref = obj.ref()
        if len(idx) != len(obj.shape):
            raise self.ctx.error(SpiradTypeError, f"field '{obj.name}' has {len(obj.shape)} dimension(s) "
                                                  f"but is indexed with {len(idx)}", node)
        wide = any(n > 2**31 - 1 for n in obj.shape)  # an axis past i32 (the CPU only)
        ix = self.indices(idx, wide)
        if any(obj.offset):  # Taichi's `offset=`: storage index = index - offset, before the
            b = self.ctx.b   # bounds checks and the adjoint (x.grad shares x's offset)
            ix = tuple(n if o == 0 else b.binary(Op.SUB, n, b.const(o, n.dtype))
                       for n, o in zip(ix, obj.offset))
        return GlobalElem(ref, ix, obj.comp_shape, obj)

    def clamp_index(self, n, arg_index, axis):
        """`n` clamped into [0, extent - 1] of axis `axis` of ndarray argument `arg_index`."""
        b = self.ctx.b
        last = b.binary(Op.SUB, b.emit(Op.NDARRAY_SHAPE, T.i32, (), (arg_index, axis)),
                        b.const(1, T.i32))
        hi = b.binary(Op.MIN, n, b.cast(last, n.dtype))
        return b.binary(Op.MAX, hi, b.const(0, n.dtype))

    def expand_index_vectors(self, idx):
        """`x[I]` / `x[I, j]` with an index vector `I` (from `grouped`): one index per component."""
        out = []
        for v in idx:
            r = self.rvalue(v)
            out.extend(r.comps if isinstance(r, VecVal) else (v,))
        return tuple(out)

    def indices(self, idx, wide: bool = False):
        """Index nodes of a global access: i32, or i64 for an array with an axis longer than
        2**31 - 1 (`wide`: a field on the CPU; backends with 32-bit indices refuse such fields
        when they are created)."""
        it = T.i64 if wide else T.i32
        out = []
        for v in idx:
            v = self.rvalue(v)
            if isinstance(v, VecVal):
                out.extend(self.to_node(c, it) for c in v.comps)
                continue
            n = self.to_node(v, it if wide and is_py_scalar(v) else None)
            if not (n.dtype.is_int or n.dtype == T.u1):
                raise self.ctx.error(SpiradTypeError, f"indices must be integers, got {n.dtype}")
            out.append(self.ctx.b.cast(n, it))
        return tuple(out)

    def component(self, obj, idx, node):
        """obj[idx] for a vector/matrix local, value or global element."""
        shape = obj.shape if isinstance(obj, (Slot, VecVal, SlotView)) else obj.comp_shape
        if not shape:
            raise self.ctx.error(SpiradTypeError, "scalar is not subscriptable", node)
        for k in idx:  # Taichi's and Quadrants' rule for vectors / matrices (fields allow them)
            k = self.rvalue(k)
            parts = (k.start, k.stop) if isinstance(k, slice) else (k,)
            if any(isinstance(p, numbers.Integral) and p < 0 for p in parts):
                raise self.ctx.error(SpiradSyntaxError, "Negative indices are not supported in "
                                     "Taichi kernels. Count from the front (v[n - 1]).", node)
        if isinstance(obj, GlobalElem) and any(isinstance(k, slice) for k in idx):
            return self.component(self.rvalue(obj), idx, node)  # a slice reads the element
        if isinstance(obj, GlobalElem):
            if len(idx) != len(shape):
                raise self.ctx.error(SpiradTypeError, f"Expected {len(shape)} indices, got "
                                                      f"{len(idx)}: element of shape {shape} "
                                                      f"indexed with {len(idx)} indices", node)
            cix = self.indices(idx)
            if getattr(obj.owner, "clamp", False):  # boundary="clamp": as Taichi, the flat
                b = self.ctx.b                     # component index into [0, size - 1]
                flat = cix[0] if len(cix) == 1 else b.binary(
                    Op.ADD, b.binary(Op.MUL, cix[0], b.const(shape[1], cix[0].dtype)), cix[1])
                size = shape[0] * (shape[1] if len(shape) == 2 else 1)
                flat = b.binary(Op.MAX, b.binary(Op.MIN, flat, b.const(size - 1, flat.dtype)),
                                b.const(0, flat.dtype))
                cix = (flat,) if len(cix) == 1 else (
                    b.binary(Op.DIV, flat, b.const(shape[1], flat.dtype)),
                    b.binary(Op.MOD, flat, b.const(shape[1], flat.dtype)))
            return GlobalElem(obj.ref, obj.indices + cix, (), obj.owner)
        ks = [self.rvalue(k) for k in idx]
        if isinstance(obj, SlotView) or not all(isinstance(k, numbers.Integral) for k in ks) \
                or isinstance(obj, Slot) and len(ks) < len(shape):
            from .local_index import index_view  # imported by the kernels that use it (#27)
            return index_view(self, obj, ks, node)  # run-time indices, slices (local_index.py)
        if len(ks) == 1 and len(shape) == 2:  # row of a matrix
            r = ks[0]
            comps = self.rvalue(obj).comps
            return VecVal(comps[r * shape[1]:(r + 1) * shape[1]], (shape[1],))
        if len(ks) > len(shape):  # Taichi's text
            raise self.ctx.error(SpiradIndexError, f"Expected {len(shape)} indices, got "
                                                   f"{len(ks)}: index {tuple(ks)} of a value of "
                                                   f"shape {shape}", node)
        if len(ks) != len(shape) or any(not 0 <= k < s for k, s in zip(ks, shape)):
            raise self.ctx.error(SpiradIndexError, f"index {tuple(ks)} is out of range for shape {shape}", node)
        flat = ks[0] if len(shape) == 1 else ks[0] * shape[1] + ks[1]
        if isinstance(obj, Slot):
            return Slot((obj.allocas[flat],), (), obj.dtype)
        if isinstance(obj, StaticIndexVec):
            return int(obj.comps[flat].arg)
        return obj.comps[flat]

    def matmul(self, a, b, node):
        if not (isinstance(a, VecVal) and isinstance(b, VecVal)):
            raise self.ctx.error(SpiradTypeError, "@ needs matrices/vectors", node)
        sa, sb = a.shape, b.shape
        r = matmul_vectors(self, a, b, node)
        if r is not None:
            return r
        if len(sa) == 2 and len(sb) == 1:
            if sa[1] != sb[0]:
                raise self.ctx.error(SpiradTypeError, f"@ shape mismatch {sa} @ {sb}", node)
            return VecVal(tuple(self._dot(a.comps[r * sa[1]:(r + 1) * sa[1]], b.comps) for r in range(sa[0])), (sa[0],))
        if len(sa) == 2 and len(sb) == 2:
            if sa[1] != sb[0]:
                raise self.ctx.error(SpiradTypeError, f"@ shape mismatch {sa} @ {sb}", node)
            comps = []
            for r in range(sa[0]):
                for c in range(sb[1]):
                    comps.append(self._dot(a.comps[r * sa[1]:(r + 1) * sa[1]], b.comps[c::sb[1]]))
            return VecVal(tuple(comps), (sa[0], sb[1]))
        raise self.ctx.error(SpiradTypeError, f"@ not defined for shapes {sa} and {sb}", node)

    def _dot(self, xs, ys):
        acc = self.binop(Op.MUL, xs[0], ys[0])
        for x, y in zip(xs[1:], ys[1:]):
            acc = self.binop(Op.ADD, acc, self.binop(Op.MUL, x, y))
        return acc

    def primitive_call(self, dtype, args, kwargs, node):
        """`sd.f32(x)`: a cast of one scalar, with Taichi's rules for a primitive type's call
        (Taichi and Quadrants refuse the rest): one argument and no vector (`v.cast(sd.f32)`
        converts a vector), and a literal written in the call has the type's kind and fits it
        (`sd.f32(0)`, `sd.i32(0.5)`, `sd.u16(-1)` are refused; `sd.cast` converts them)."""
        if len(args) != 1 or kwargs:
            raise self.ctx.error(SpiradSyntaxError, f"A primitive type can only decorate a single "
                                 f"expression. ({dtype}(x) converts one value)", node)
        v = self.rvalue(args[0])
        from ..data.struct import StructElem, StructVal
        if isinstance(v, (VecVal, StructVal, StructElem)):
            raise self.ctx.error(SpiradSyntaxError, f"A primitive type cannot decorate an "
                                 f"expression with a compound type. (convert a vector with "
                                 f"v.cast(sd.{dtype}))", node)
        lit = node.args[0]
        if isinstance(lit, ast.UnaryOp) and isinstance(lit.op, (ast.USub, ast.UAdd)):
            lit = lit.operand
        if isinstance(lit, ast.Constant) and is_py_scalar(v) and not isinstance(v, bool) \
                and dtype != T.u1:
            if isinstance(v, numbers.Integral) and dtype.is_float:
                raise self.ctx.error(SpiradTypeError, f"Integer literals must be annotated with a "
                                     f"integer type. For type casting, use `ti.cast`. (write "
                                     f"{v}.0, or sd.cast({v}, sd.{dtype}))", node)
            if not isinstance(v, numbers.Integral) and dtype.is_int:
                raise self.ctx.error(SpiradTypeError, f"Floating-point literals must be annotated "
                                     f"with a floating-point type. For type casting, use "
                                     f"`ti.cast`. (sd.cast({v}, sd.{dtype}) truncates)", node)
            if dtype.is_int and not np.iinfo(dtype.np).min <= v <= np.iinfo(dtype.np).max:
                raise self.ctx.error(SpiradTypeError, f"Integer literal {v} exceeded the range of "
                                     f"specified dtype: {dtype} (sd.cast({v}, sd.{dtype}) wraps)", node)
        return self.cast(v, dtype)

    def build_Call(self, node):
        fn = self.build(node.func)
        if fn is _static_marker():
            return self.build_static(node)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):  # f(*seq) over a sequence known at compile time
                seq = self.rvalue(self.build(a.value))
                if isinstance(seq, np.ndarray):  # a numpy array of sizes (Genesis' grid_res)
                    seq = [x.item() if isinstance(x, np.generic) else x for x in seq.tolist()]
                if isinstance(seq, VecVal) and len(seq.shape) == 1:  # `min(*v)`: its components
                    seq = list(seq.comps)
                if isinstance(seq, (range, collections.abc.Iterator)):  # a range, a generator
                    seq = list(seq)
                if not isinstance(seq, (tuple, list)):
                    raise self.ctx.error(SpiradSyntaxError, "*args needs a tuple or list known at "
                                                            "compile time in kernels", a)
                args.extend(seq)
                continue
            args.append(self.build(a))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.ctx.error(SpiradSyntaxError, "**kwargs calls are not supported in kernels", kw)
            kwargs[kw.arg] = self.build(kw.value)
        if isinstance(fn, BoundMethod):  # a vector's method binds Taichi's keywords, the rest none
            return fn.fn(self, fn.obj, call_keywords.method_args(self, fn.name, args, kwargs, node), node)
        if isinstance(getattr(fn, "__self__", None), dict) and \
                getattr(fn, "__name__", "") in ("keys", "values", "items", "get") and not kwargs:
            from .comprehension import dict_view
            return dict_view(self, fn, [self.rvalue(a) for a in args], node)
        if isinstance(getattr(fn, "__self__", None), str) and getattr(fn, "__name__", "") == "format":
            from .formatting import str_format
            return str_format(self, fn.__self__, args, kwargs, node)
        h = HANDLERS.get(fn) if _hashable(fn) else None
        if h is not None:
            call_keywords.check(self, fn, kwargs, node)  # a keyword it does not implement: an error
            return h(self, args, kwargs, node)
        if isinstance(fn, Func):
            return self.inline_func(fn, args, kwargs, node)
        if isinstance(fn, BoundFunc):
            return self.inline_func(fn.func, [fn.obj] + args, kwargs, node)
        if isinstance(fn, PyFunction):
            raise self.ctx.error(SpiradSyntaxError, "kernels cannot call kernels; make the callee a @sd.func", node)
        if is_plain_python_function(fn):  # Taichi inlines plain functions and lambdas too
            return self.inline_func(plain_func(fn), args, kwargs, node)
        if is_plain_python_function(getattr(fn, "__func__", None)):  # a bound method
            return self.inline_func(plain_func(fn.__func__), [fn.__self__] + args, kwargs, node)
        from kernel_ir.dtypes import DType
        if isinstance(fn, DType):  # sd.f32(x) casts
            return self.primitive_call(fn, args, kwargs, node)
        from ..types import MatrixType, VectorType
        if isinstance(fn, (VectorType, MatrixType)):
            call_keywords.check(self, fn, kwargs, node)  # `vec3(1, 2, 3)`: no keyword
            return self.compound_value(fn, args, node)
        from ..data.struct import Struct, StructType
        if isinstance(fn, StructType):
            return self.struct_value(fn, args, kwargs, node)
        if fn is Struct:  # `sd.Struct(a=..., b=...)` / `sd.Struct({...})` in a kernel
            values = self.rvalue(args[0]) if len(args) == 1 and not kwargs else dict(kwargs)
            if args and not (len(args) == 1 and isinstance(values, dict)) or not values:
                raise self.ctx.error(SpiradTypeError, "sd.Struct(...) takes a dict of members "
                                     "or members as keywords", node)
            return self.struct_value(self.struct_type_of(values, node), (), {}, node,
                                     values=values)
        if isinstance(fn, type) and issubclass(fn, np.generic) and len(args) == 1:
            try:  # np.float32(x) casts like sd.f32(x)
                dt = T.from_numpy(np.dtype(fn))
            except (TypeError, ValueError, KeyError):
                dt = None
            if dt is not None:
                a = self.rvalue(args[0])
                return fn(a).item() if is_py_scalar(a) else self.cast(a, dt)
        name = getattr(fn, "__name__", type(fn).__name__)
        vals = [self.rvalue(a) for a in args]
        if fn in _SEQUENCE_BUILTINS and not kwargs and all(isinstance(x, (tuple, list, range))
                                                         for x in vals):
            return list(fn(*vals))  # enumerate / zip / reversed over compile-time sequences
        kvals = {k: self.rvalue(x) for k, x in kwargs.items()}
        if fn in (np.array, np.asarray) and all(_is_compile_time(x) for x in vals + list(kvals.values())):
            arr = np.asarray(fn(*vals, **kvals))  # Taichi: a 0-d array of constants is a scalar
            if arr.ndim != 0:
                raise self.ctx.error(SpiradTypeError, f"Only 0-dimensional numpy array can be used "
                                     f"to initialize a scalar expression (got shape {arr.shape}); "
                                     f"use sd.Vector / sd.Matrix for several values", node)
            return self.py_constant(arr[()])
        if self.ctx.static_depth and callable(fn) and \
                all(_is_compile_time(x) for x in vals + list(kvals.values())):
            try:  # inside sd.static(...), a Python call on compile-time values runs now (Quadrants)
                return self.py_constant(fn(*vals, **kvals))
            except SpiradError:
                raise
            except Exception as e:
                raise self.ctx.error(SpiradTypeError, f"calling '{name}' at compile time failed: "
                                                      f"{type(e).__name__}: {e}", node) from None
        raise self.ctx.error(SpiradSyntaxError, _uncallable(fn, node) + " (inside sd.static(...), "
                             "other Python functions run at compile time on values known then)", node)

    def build_static(self, node):
        self.ctx.static_depth += 1  # Python calls in here run at compile time
        try:
            vals = [self.rvalue(self.build(a)) for a in node.args]
        finally:
            self.ctx.static_depth -= 1
        for v in vals:  # a sequence known at compile time may hold run-time values (unrolled)
            if not _is_compile_time(v) and not isinstance(v, (tuple, list)):
                raise self.ctx.error(SpiradSyntaxError, "Input to static() must be compile-time constants: "
                                                         "static() needs a value known at compile time", node)
        return vals[0] if len(vals) == 1 else tuple(vals)

    def build_Dict(self, node):
        """`{"a": x, "b": y}`: a compile-time dict (values any kernel value; a key computed at
        run time is a key of its own, as in Taichi), as `sd.Struct({...})` and Taichi's kernels
        read them."""
        out = {}
        for k, val in zip(node.keys, node.values):
            if k is None:  # `{**other}`
                more = self.rvalue(self.build(val))
                if not isinstance(more, dict):
                    raise self.ctx.error(SpiradSyntaxError, "** in a kernel dict needs a dict", val)
                out.update(more)
                continue
            key = self.rvalue(self.build(k))
            if not _is_compile_time(key):  # a key of its own, as Taichi's (comprehension.py)
                from .comprehension import RunTimeKey
                key = RunTimeKey(key)
            out[key] = self.rvalue(self.build(val))
        return out

    def build_DictComp(self, node):
        from .comprehension import dict_comp
        return dict_comp(self, node, _is_compile_time)

    def build_ListComp(self, node):
        from .comprehension import list_comp  # unrolled at compile time, as Quadrants does
        return list_comp(self, node, _is_compile_time)

    def build_JoinedStr(self, node):
        from .formatting import joined_str
        return joined_str(self, node)


_NP_NAMES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2",
             "power": "pow", "absolute": "abs", "fabs": "abs", "minimum": "min", "maximum": "max",
             "fmin": "min", "fmax": "max", "where": "select", "round": "round", "rint": "round"}


def _uncallable(fn, node) -> str:
    """The message for a call of something kernels cannot call, naming it as written
    (`np.sin`) and the spirad function to use instead when there is one."""
    written = ast.unparse(node.func)
    name = getattr(fn, "__name__", type(fn).__name__)
    module = getattr(fn, "__module__", None) or type(fn).__module__ or ""
    if isinstance(fn, np.ufunc) or module.split(".")[0] == "numpy":
        from .. import lang, math as sdmath
        cand = _NP_NAMES.get(name, name)
        alt = f"sd.{cand}" if callable(getattr(lang, cand, None)) and \
            not isinstance(getattr(lang, cand), type) else \
            f"sd.math.{cand}" if callable(getattr(sdmath, cand, None)) else None
        use = f"; use {alt}(...)" if alt else "; write it with spirad's math (sd.sin, sd.exp, ...)"
        return (f"cannot call {written} inside a kernel: numpy functions run on the host, not in "
                f"kernels{use}")
    return (f"cannot call {written} ({type(fn).__name__} {name!r}) inside a kernel: only spirad "
            f"functions (sd.sin, ...), @sd.func, plain Python functions and math builtins are "
            f"allowed")


def _numpy_constant(v):
    """A numpy scalar or 0-d array read from Python scope is the Python number it holds (typed
    like a literal, as Taichi does); anything else is returned unchanged."""
    if isinstance(v, np.generic) and v.dtype.kind in "biuf":
        return v.item()
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "biuf":
        return v.item()
    return v


def _hashable(x):
    try:
        hash(x)
        return True
    except TypeError:
        return False


def _static_marker():
    from .. import lang
    return lang.static


def _is_compile_time(v):
    from kernel_ir.nodes import Node
    if isinstance(v, (Node, VecVal, Slot, GlobalElem, SlotView)):
        return False
    if isinstance(v, (list, tuple)):
        return all(_is_compile_time(x) for x in v)
    return True


# -- vector methods -------------------------------------------------------------------------------
def _m_dot(v, obj, args, node):
    a, b = v.rvalue(obj), v.rvalue(args[0])
    if not isinstance(b, VecVal) or a.shape != b.shape:
        raise v.ctx.error(SpiradTypeError, "dot() needs two vectors of the same size", node)
    return v._dot(a.comps, b.comps)


def _m_norm_sqr(v, obj, args, node):
    a = v.rvalue(obj)
    return v._dot(a.comps, a.comps)


def _eps(v, args, node, what):
    """The optional `eps` of norm / normalized / norm_inv (Taichi: default 0)."""
    if len(args) > 1:
        raise v.ctx.error(SpiradTypeError, f"{what}(eps=0) takes one optional argument", node)
    return v.rvalue(args[0]) if args else 0


def _m_norm(v, obj, args, node):
    """Taichi's `v.norm(eps)`: sqrt(v . v + eps) (eps inside the root keeps the gradient
    finite at v = 0)."""
    eps = _eps(v, args, node, "norm")
    sq = _m_norm_sqr(v, obj, (), node)
    return v.unop(Op.SQRT, sq if _is_zero(eps) else v.binop(Op.ADD, sq, eps))


def _m_norm_inv(v, obj, args, node):
    """Taichi's `v.norm_inv(eps)`: 1 / sqrt(v . v + eps)."""
    eps = _eps(v, args, node, "norm_inv")
    sq = _m_norm_sqr(v, obj, (), node)
    return v.unop(Op.RSQRT, sq if _is_zero(eps) else v.binop(Op.ADD, sq, eps))


def _m_normalized(v, obj, args, node):
    """Taichi's `v.normalized(eps)`: v / (|v| + eps) (eps outside the root, as Taichi has it)."""
    eps = _eps(v, args, node, "normalized")
    a = v.rvalue(obj)
    if len(a.shape) != 1:
        raise v.ctx.error(SpiradTypeError, "normalized() needs a vector", node)
    n = _m_norm(v, obj, (), node)
    inv = v.binop(Op.DIV, 1.0, n if _is_zero(eps) else v.binop(Op.ADD, n, eps))
    return v.binop(Op.MUL, a, inv)


def _is_zero(x):
    return is_py_scalar(x) and x == 0


def _m_cast(v, obj, args, node):
    """`v.cast(dtype)`: every component cast (Taichi's Matrix.cast)."""
    if len(args) != 1:
        raise v.ctx.error(SpiradTypeError, "cast(dtype) takes one dtype", node)
    dtype = args[0]
    dtype = T.from_python(dtype, v.ctx.default_fp, v.ctx.default_ip)
    if not isinstance(dtype, T.DType):
        raise v.ctx.error(SpiradTypeError, "cast(dtype) needs a dtype such as sd.f32", node)
    return v.cast(obj, dtype)


def _m_reduce(op, what):
    def m(v, obj, args, node):
        a = v.rvalue(obj)
        if args:
            raise v.ctx.error(SpiradTypeError, f"{what}() takes no arguments", node)
        acc = a.comps[0]
        for c in a.comps[1:]:
            acc = v.binop(op, acc, c)
        return acc
    return m


def _m_sum(v, obj, args, node):
    a = v.rvalue(obj)
    acc = a.comps[0]
    for c in a.comps[1:]:
        acc = v.binop(Op.ADD, acc, c)
    return acc


def _m_transpose(v, obj, args, node):
    a = v.rvalue(obj)
    if len(a.shape) != 2:
        raise v.ctx.error(SpiradTypeError, "`transpose()` cannot apply to a vector. If you want "
                                           "something like `a @ b.transpose()`, write "
                                           "`a.outer_product(b)` instead.", node)  # Taichi's
    n, m = a.shape
    return VecVal(tuple(a.comps[r * m + c] for c in range(m) for r in range(n)), (m, n))


def _m_cross(v, obj, args, node):
    """3-vectors: the cross product; 2-vectors: the scalar x0 y1 - x1 y0 (as in Taichi)."""
    a, b = v.rvalue(obj), v.rvalue(args[0])
    if a.shape not in ((2,), (3,)) or not isinstance(b, VecVal) or b.shape != a.shape:
        raise v.ctx.error(SpiradTypeError, "cross() needs two 2-vectors or two 3-vectors", node)
    x = a.comps
    y = b.comps
    def c(i, j):
        return v.binop(Op.SUB, v.binop(Op.MUL, x[i], y[j]), v.binop(Op.MUL, x[j], y[i]))
    if a.shape == (2,):
        return c(0, 1)
    return VecVal((c(1, 2), c(2, 0), c(0, 1)), (3,))


def _m_trace(v, obj, args, node):
    a = v.rvalue(obj)
    if len(a.shape) != 2 or a.shape[0] != a.shape[1]:
        raise v.ctx.error(SpiradTypeError, f"trace() expected a square matrix, got shape {a.shape}", node)
    n = a.shape[0]
    acc = a.comps[0]
    for k in range(1, n):
        acc = v.binop(Op.ADD, acc, a.comps[k * n + k])
    return acc


def _m_outer_product(v, obj, args, node):
    a, b = v.rvalue(obj), v.rvalue(args[0])
    if len(a.shape) != 1 or not isinstance(b, VecVal) or len(b.shape) != 1:
        raise v.ctx.error(SpiradTypeError, "outer_product() needs two vectors", node)
    return VecVal(tuple(v.binop(Op.MUL, x, y) for x in a.comps for y in b.comps),
                  (a.shape[0], b.shape[0]))


def _square(v, obj, node, what):
    a = v.rvalue(obj)
    if len(a.shape) != 2 or a.shape[0] != a.shape[1] or a.shape[0] not in (1, 2, 3, 4):
        raise v.ctx.error(SpiradTypeError, f"{what}() needs a square matrix of size 1 to 4, "
                                           f"got shape {a.shape}", node)
    n = a.shape[0]
    return a, n, (lambda r, c: a.comps[r * n + c])


def _det(v, n, m):
    """Determinant by cofactor expansion of the n x n minor `m(r, c)` (n <= 4)."""
    if n == 1:
        return m(0, 0)
    acc = None
    for c in range(n):
        def minor(r, cc, c=c):
            return m(r + 1, cc if cc < c else cc + 1)
        term = v.binop(Op.MUL, m(0, c), _det(v, n - 1, minor))
        acc = term if acc is None else v.binop(Op.SUB if c % 2 else Op.ADD, acc, term)
    return acc


def _m_determinant(v, obj, args, node):
    _, n, m = _square(v, obj, node, "determinant")
    return _det(v, n, m)


def _m_inverse(v, obj, args, node):
    """Adjugate / determinant (unrolled; n <= 4)."""
    a, n, m = _square(v, obj, node, "inverse")
    inv_det = v.binop(Op.DIV, 1.0, _det(v, n, m))
    if n == 1:
        return VecVal((inv_det,), (1, 1))
    comps = []
    for r in range(n):
        for c in range(n):  # inverse[r][c] = cofactor(c, r) / det
            def minor(i, j, r=r, c=c):
                return m(i if i < c else i + 1, j if j < r else j + 1)
            cof = _det(v, n - 1, minor)
            if (r + c) % 2:
                cof = v.unop(Op.NEG, cof)
            comps.append(v.binop(Op.MUL, cof, inv_det))
    return VecVal(tuple(comps), (n, n))


VEC_METHODS = {"trace": _m_trace, "outer_product": _m_outer_product,
               "determinant": _m_determinant, "inverse": _m_inverse,
               "dot": _m_dot, "norm": _m_norm, "norm_sqr": _m_norm_sqr, "normalized": _m_normalized,
               "sum": _m_sum, "transpose": _m_transpose, "cross": _m_cross,
               "norm_inv": _m_norm_inv, "cast": _m_cast, "max": _m_reduce(Op.MAX, "max"),
               "min": _m_reduce(Op.MIN, "min")}
VEC_METHODS.update(_MATRIX_METHODS)  # fill / any / all (matrix_ops.py)

import operator as _operator  # noqa: E402
_PY_CMPOPS = {ast.Eq: _operator.eq, ast.NotEq: _operator.ne, ast.Lt: _operator.lt,
              ast.LtE: _operator.le, ast.Gt: _operator.gt, ast.GtE: _operator.ge,
              ast.Is: _operator.is_, ast.IsNot: _operator.is_not,
              ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_PY_BINOPS = {ast.Add: _operator.add, ast.Mult: _operator.mul, ast.Sub: _operator.sub,
              ast.BitOr: _operator.or_, ast.BitAnd: _operator.and_}
_SEQUENCE_BUILTINS = (enumerate, zip, reversed, list, tuple, sorted)
VEC_PROPERTIES = {"n": lambda shape: shape[0], "m": lambda shape: shape[1] if len(shape) == 2 else 1}



def _class_method(name):
    """`sd.Vector.normalized(v, eps)` in a kernel: the method of `v`."""
    def h(v, args, kw, node):
        if not args or not isinstance(v.rvalue(args[0]), VecVal):
            raise v.ctx.error(SpiradTypeError, f"{name}() needs a vector or matrix first", node)
        return VEC_METHODS[name](v, args[0], call_keywords.method_args(v, name, args[1:], kw, node), node)
    return h


def _register_class_methods():
    from ..data.matrix import CLASS_LEVEL_METHODS, Vector
    HANDLERS.update({getattr(Vector, n): _class_method(n) for n in CLASS_LEVEL_METHODS})


_register_class_methods()


def _flatten_indices(idx) -> tuple:
    """Indices with nested tuples / lists spread in place (Taichi: `x[f, I, b]`, `I` a tuple)."""
    out = []
    for x in idx:
        out.extend(_flatten_indices(x) if isinstance(x, (tuple, list)) else (x,))
    return tuple(out)


def _common_type(v, items):
    """The scalar type of a vector built from `items` (a kernel value's type, else the
    default float type if any item is a float, else the default int type)."""
    for x in items:
        if hasattr(x, "dtype"):
            return x.dtype
    return v.ctx.default_fp if any(isinstance(x, float) for x in items) else v.ctx.default_ip
