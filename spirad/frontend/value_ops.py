"""Value-level operations: turning frontend values into IR nodes, arithmetic with promotion,
element-wise vector math, loads and stores of locals and globals."""
from __future__ import annotations

import numbers

from kernel_ir.errors import SpiradSyntaxError, SpiradTypeError
from kernel_ir import dtypes as T
from kernel_ir.nodes import Node
from kernel_ir.ops import ATOMIC_COMBINE, FLOAT_UNARY, Op
from .typing import literal_type, promote, true_div_type
from .values import GlobalElem, ShapeVal, Slot, SlotView, VecVal

PY_SCALAR = (bool, numbers.Integral, numbers.Real)
_WARNED: dict = {}  # filename -> warnings registry of narrowing warnings (once per line)


def is_py_scalar(v) -> bool:
    return isinstance(v, PY_SCALAR) and not isinstance(v, Node)


class ValueOps:
    """Mixin for the AST visitor (needs `self.ctx`)."""

    # -- reading values -----------------------------------------------------------------------
    def rvalue(self, v):
        """Resolve lvalue-ish things (Slot, GlobalElem) into Nodes / VecVals; others unchanged."""
        b = self.ctx.b
        if isinstance(v, Slot):
            if not v.shape:
                return b.load(v.allocas[0])
            return VecVal(tuple(b.load(a) for a in v.allocas), v.shape)
        if isinstance(v, SlotView):
            from .local_index import read_view  # imported by the kernels that use it (#27)
            return read_view(self, v)
        if isinstance(v, ShapeVal):  # `n, m = arr.shape`: one i32 per axis
            return tuple(b.emit(Op.NDARRAY_SHAPE, T.i32, (), (v.arr.arg_index, v.arr.axis(k)))
                         for k in range(v.arr.ndim))
        if isinstance(v, GlobalElem):
            stop = self.ctx.stop_grads and self.ctx.grad_stopped(v.ref)  # sd.stop_grad(x)
            if not v.comp_shape:
                x = b.global_load(v.ref, v.indices)
                return b.unary(Op.STOP_GRAD, x) if stop else x
            comps = []
            for k in _comp_indices(v.comp_shape):
                idx = v.indices + tuple(b.const(c, T.i32) for c in k)
                x = b.global_load(v.ref, idx)
                comps.append(b.unary(Op.STOP_GRAD, x) if stop else x)
            return VecVal(tuple(comps), v.comp_shape)
        if isinstance(v, (list, tuple)) and not isinstance(v, VecVal):
            return type(v)(self.rvalue(x) for x in v)
        if type(v).__name__ in ("QuantElem", "QuantVecElem"):  # bit-packed (frontend/quant_ops)
            from .quant_ops import load, load_vec
            return load(self, v) if type(v).__name__ == "QuantElem" else load_vec(self, v)
        return v

    def const(self, v, dtype):
        if dtype.is_int and isinstance(v, float):
            v = int(v)
        return self.ctx.b.const(v, dtype)

    def to_node(self, v, dtype=None) -> Node:
        """A scalar node; Python scalars become constants (typed by `dtype` or the defaults)."""
        v = self.rvalue(v)
        if isinstance(v, Node):
            return self.ctx.b.cast(v, dtype) if dtype is not None else v
        if is_py_scalar(v):
            t = dtype or literal_type(v, None, self.ctx.default_fp, self.ctx.default_ip)
            self.check_literal(v, t)
            return self.const(v, t)
        if isinstance(v, VecVal):
            raise self.ctx.error(SpiradTypeError, "expected a scalar, got a vector/matrix")
        from .formatting import FormatStr
        if isinstance(v, FormatStr):
            raise self.ctx.error(SpiradTypeError, FormatStr.ONLY_PRINTED)
        raise self.ctx.error(SpiradTypeError, f"expected a number, got {type(v).__name__}")

    def check_literal(self, v, t):
        """An integer literal must fit the type it takes (Taichi and Quadrants refuse it too):
        3000000000 as an i32 would wrap silently. Unsigned types also take the negative
        literals of their width (`x & -1`). An explicit cast (`sd.i64(3000000000)`) types it."""
        if not (t.is_int and t != T.u1 and isinstance(v, numbers.Integral)) or isinstance(v, bool):
            return
        lo = -(1 << (t.bits - 1))
        hi = (1 << t.bits) - 1 if not t.is_signed else (1 << (t.bits - 1)) - 1
        if not lo <= v <= hi:
            wide = "sd.i64" if -(1 << 63) <= v < (1 << 63) else "a smaller value"
            why = ": it exceeded the range of default_ip" if t == self.ctx.default_ip else ""
            raise self.ctx.error(SpiradTypeError, f"integer literal {v} does not fit {t} (the type "
                                 f"it takes here{why}); write {wide}({v}) to type it, or use "
                                 f"sd.init(default_ip=sd.i64)")

    def to_cond(self, v) -> Node:
        n = self.to_node(v)
        if n.dtype == T.u1:
            return n
        return self.ctx.b.binary(Op.CMP_NE, n, self.const(0, n.dtype))

    # -- arithmetic ---------------------------------------------------------------------------
    def binop(self, op: Op, a, b):
        a, b = self.rvalue(a), self.rvalue(b)
        if op == Op.ADD and type(a) is type(b) and isinstance(a, (list, tuple)):
            return a + b  # compile-time sequences (of any values) concatenate, as in Python
        from ..data.field import _HostArray
        if isinstance(a, _HostArray) or isinstance(b, _HostArray):  # `v * x`, x a whole field
            raise self.ctx.error(SpiradTypeError, f"unsupported operand type(s) for {op.name}: "
                                                  f"'{type(a).__name__}' and "
                                                  f"'{type(b).__name__}' (index a field or "
                                                  f"ndarray first: x[i], or x[None] for shape ())")
        if isinstance(a, VecVal) or isinstance(b, VecVal):
            return self._vec_binop(op, a, b)
        if is_py_scalar(a) and is_py_scalar(b):
            return _fold_python(op, a, b, self.ctx)
        ta = a.dtype if isinstance(a, Node) else None
        tb = b.dtype if isinstance(b, Node) else None
        if ta is None and tb is None:
            raise self.ctx.error(SpiradTypeError, f"unsupported operands {type(a).__name__}, {type(b).__name__}")
        fp, ip = self.ctx.default_fp, self.ctx.default_ip
        if ta is None:
            ta = literal_type(a, tb, fp, ip)
        if tb is None:
            tb = literal_type(b, ta, fp, ip)
        t = promote(ta, tb)
        if op == Op.DIV:  # an int literal counts as an int here (f16 / 3 is an f32, as in Taichi)
            t = true_div_type(ip if _int_literal(a) else ta, ip if _int_literal(b) else tb, fp)
        elif op in (Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR) and t.is_float:
            sym = {Op.AND: "&", Op.OR: "|", Op.XOR: "^", Op.SHL: "<<", Op.SHR: ">>"}[op]
            raise self.ctx.error(SpiradTypeError, f"unsupported operand type(s) for '{sym}': bit "
                                                  f"operation {sym} needs integers, got {t}; "
                                                  f"convert first, e.g. sd.cast(v, sd.i32)")
        elif op == Op.POW and is_py_scalar(b) and isinstance(b, numbers.Integral) and 0 <= b <= 8:
            return self._int_power(self.to_node(a, t), int(b))
        elif op in (Op.ATAN2,) and not t.is_float:
            t = fp
        elif op == Op.ATAN2 and t == T.f16:
            t = T.f32  # Taichi: atan2 is an f32 unless an operand is an f64
        elif op == Op.POW and t.is_int and is_py_scalar(b) and b < 0 and not self.ctx.state.debug:
            raise self.ctx.error(SpiradTypeError, "integer power with a negative exponent")
        if op == Op.POW and t.is_int and self.ctx.state.debug:
            self._check_int_exponent(b)
        if op in (Op.SHL, Op.SHR) and t == T.u1:
            t = ip
        if op == Op.POW and t == T.f16:  # computed in f32, as every f16 math function
            na, nb = self.to_node(a, T.f32), self.to_node(b, T.f32)
            return self.ctx.b.cast(self.ctx.b.binary(op, na, nb), t)
        na, nb = self.to_node(a, t), self.to_node(b, t)
        return self.ctx.b.binary(op, na, nb)

    def _check_int_exponent(self, e):
        """Under debug, an integer power fails where its exponent is negative, as Taichi's debug
        mode checks it (a SpiradAssertionError at the launch's sync; without debug a constant
        negative exponent is a compile error and a run-time one gives 0)."""
        if is_py_scalar(e):
            if e >= 0:
                return
            failed = self.ctx.b.const(True, T.u1)
        elif e.dtype.is_signed:
            failed = self.ctx.b.binary(Op.CMP_LT, e, self.const(0, e.dtype))
        else:
            return
        from ..runtime.asserts import state_of
        from ..data.field import internal_field
        a = state_of(self.ctx.state, internal_field)
        a.record(self.ctx.b, failed, a.site("Negative exponent in pow(int, int) is not allowed.",
                                            self.ctx.b.loc))

    def _int_power(self, x: Node, k: int) -> Node:
        b = self.ctx.b
        if k == 0:
            return self.const(1, x.dtype)
        acc = x
        for _ in range(k - 1):
            acc = b.binary(Op.MUL, acc, x)
        return acc

    def _vec_binop(self, op, a, b):
        shape = a.shape if isinstance(a, VecVal) else b.shape
        if isinstance(a, VecVal) and isinstance(b, VecVal) and a.shape != b.shape:
            raise self.ctx.error(SpiradTypeError, f"shape mismatch {a.shape} vs {b.shape}")
        n = len(a.comps) if isinstance(a, VecVal) else len(b.comps)
        a, b = self._sequence_as_vector(a, shape), self._sequence_as_vector(b, shape)
        ca = a.comps if isinstance(a, VecVal) else (a,) * n
        cb = b.comps if isinstance(b, VecVal) else (b,) * n
        return VecVal(tuple(self.binop(op, x, y) for x, y in zip(ca, cb)), shape)

    def _sequence_as_vector(self, v, shape):
        """A Python tuple / list of scalars (nested for a matrix) beside a vector or matrix of
        that shape stands for one (Taichi: `(i, j, k) + offset`); anything else unchanged."""
        if not isinstance(v, (tuple, list)):
            return v
        rows = [v] if len(shape) == 1 else list(v)
        if len(rows) != (1 if len(shape) == 1 else shape[0]) or any(
                not isinstance(r, (tuple, list)) or len(r) != shape[-1] for r in rows):
            raise self.ctx.error(SpiradTypeError, f"a Python {type(v).__name__} of "
                                 f"{len(v)} element(s) beside a vector / matrix of shape {shape}")
        comps = tuple(self.rvalue(x) for r in rows for x in r)
        if any(not (isinstance(x, Node) or is_py_scalar(x)) for x in comps):
            raise self.ctx.error(SpiradTypeError, "a Python sequence in vector arithmetic must "
                                                  "hold scalars")
        return VecVal(comps, shape)

    def unop(self, op: Op, a):
        a = self.rvalue(a)
        if isinstance(a, VecVal):
            return VecVal(tuple(self.unop(op, c) for c in a.comps), a.shape)
        if is_py_scalar(a):
            a = self.to_node(a)
        if op in FLOAT_UNARY and not a.dtype.is_float:
            a = self.ctx.b.cast(a, self.ctx.default_fp)
        if op in FLOAT_UNARY and a.dtype == T.f16 and op != Op.FLOOR:
            # f16 math runs in f32 and rounds back (Taichi's LLVM backends do the same): one
            # path for every backend, and no half-precision library needed anywhere
            b = self.ctx.b
            return b.cast(b.unary(op, b.cast(a, T.f32)), T.f16)
        if op in (Op.NOT, Op.BIT_NOT) and a.dtype.is_float:  # Taichi refuses both
            sym, fix = ("not", "compare instead (`x == 0`)") if op == Op.NOT else \
                ("~", "convert first, e.g. sd.cast(v, sd.i32)")
            raise self.ctx.error(SpiradTypeError, f"'{sym}' takes integral inputs only (an "
                                                  f"integer), got {a.dtype}; {fix}")
        if op == Op.NOT:
            return self.ctx.b.unary(Op.NOT, self.to_cond(a))
        return self.ctx.b.unary(op, a)

    def select(self, c, a, b):
        c, a, b = self.rvalue(c), self.rvalue(a), self.rvalue(b)
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
            if len(a) != len(b):  # `x, y = (a, b) if c else (d, e)`: element by element
                raise self.ctx.error(SpiradTypeError, f"if / else gives tuples of different "
                                                      f"lengths ({len(a)} and {len(b)})")
            return tuple(self.select(c, x, y) for x, y in zip(a, b))
        for x in (a, b):
            if not isinstance(x, (Node, VecVal)) and not is_py_scalar(x):
                raise self.ctx.error(SpiradTypeError, f"if / else needs numbers, vectors or "
                                                      f"tuples of them, got {type(x).__name__}")
        vecs = [x for x in (a, b, c) if isinstance(x, VecVal)]
        if vecs:  # component-wise (a vector condition too: `select(v < 0, -1.0, 1.0)`)
            n, shape = len(vecs[0].comps), vecs[0].shape
            if any(x.shape != shape for x in vecs):
                raise self.ctx.error(SpiradTypeError, f"Cannot broadcast tensor to tensor: select "
                                                      f"of vectors / matrices of different shapes "
                                                      f"{[x.shape for x in vecs]}")
            ca = a.comps if isinstance(a, VecVal) else (a,) * n
            cb = b.comps if isinstance(b, VecVal) else (b,) * n
            cc = c.comps if isinstance(c, VecVal) else (c,) * n
            return VecVal(tuple(self.select(x, y, z) for x, y, z in zip(cc, ca, cb)), shape)
        cond = self.to_cond(c)
        ta = a.dtype if isinstance(a, Node) else None
        tb = b.dtype if isinstance(b, Node) else None
        fp, ip = self.ctx.default_fp, self.ctx.default_ip
        ta = ta or literal_type(a, tb, fp, ip)
        tb = tb or literal_type(b, ta, fp, ip)
        t = promote(ta, tb)
        return self.ctx.b.select(cond, self.to_node(a, t), self.to_node(b, t))

    def cast(self, v, dtype):
        v = self.rvalue(v)
        if isinstance(v, VecVal):
            return VecVal(tuple(self.cast(c, dtype) for c in v.comps), v.shape)
        if dtype.is_int and dtype != T.u1 and isinstance(v, numbers.Integral) \
                and not isinstance(v, bool):  # an explicit cast of a literal wraps, as in C
            v = v % (1 << dtype.bits)
            if dtype.is_signed and v >= 1 << (dtype.bits - 1):
                v -= 1 << dtype.bits
        return self.to_node(v, dtype)

    # -- writing ------------------------------------------------------------------------------
    def narrowing(self, value, dtype, what="assignment"):
        """Warn (`SpiradWarning`, at the kernel line; once per line) when storing `value` into
        a `dtype` location loses precision, as Taichi does: a float into an integer, f64 into
        f32, i64 into i32. The store still converts (toward zero for float -> int)."""
        if isinstance(value, Node):
            src = value.dtype
        elif isinstance(value, float) and not isinstance(value, bool):
            if not dtype.is_int or float(value).is_integer():
                return
            src = self.ctx.default_fp
        else:
            return
        if src == dtype or promote(dtype, src) == dtype:
            return
        loc = self.ctx.loc()
        if loc is None or self.ctx.frame.internal:
            return
        import warnings
        from kernel_ir.errors import SpiradWarning
        how = "truncated toward zero" if dtype.is_int and src.is_float else "rounded / wrapped"
        warnings.warn_explicit(
            SpiradWarning(f"{what} may lose precision: {dtype} <- {src} (the value is {how}); "
                          f"convert explicitly, e.g. sd.cast(value, sd.{dtype}), to say so"),
            SpiradWarning, loc.filename, loc.lineno,
            registry=_WARNED.setdefault(loc.filename, {}))

    def store_into(self, target, value, warn=True):
        """Assign `value` to a Slot or GlobalElem (casting to the target's type; `warn`: a
        narrowing conversion warns, except where the type was declared: return values)."""
        b = self.ctx.b
        value = self.rvalue(value)
        narrowing = self.narrowing if warn else (lambda *a: None)
        if isinstance(target, SlotView):
            from .local_index import store_view
            store_view(self, target, value)
            return
        if isinstance(target, Slot):
            if target.shape:
                comps = self._comps_for(value, target.shape, target.dtype)
                for a, c in zip(target.allocas, comps):
                    narrowing(c, target.dtype)
                    b.store(a, self.to_node(c, target.dtype))
            else:
                narrowing(value, target.dtype)
                b.store(target.allocas[0], self.to_node(value, target.dtype))
            return
        if isinstance(target, GlobalElem):
            ref = target.ref
            _activate(self, target)  # a field below a sparse SNode (frontend/sparse_ops.py)
            if target.comp_shape:
                comps = self._comps_for(value, target.comp_shape, ref.dtype)
                for k, c in zip(_comp_indices(target.comp_shape), comps):
                    idx = target.indices + tuple(b.const(x, T.i32) for x in k)
                    narrowing(c, ref.dtype)
                    b.global_store(ref, idx, self.to_node(c, ref.dtype))
            else:
                narrowing(value, ref.dtype)
                b.global_store(ref, target.indices, self.to_node(value, ref.dtype))
            return
        if type(target).__name__ in ("QuantElem", "QuantVecElem"):  # frontend/quant_ops
            from .quant_ops import store, store_vec
            (store if type(target).__name__ == "QuantElem" else store_vec)(self, target, value)
            return
        raise self.ctx.error(SpiradSyntaxError, f"cannot assign to {type(target).__name__}")

    def atomic_add_into(self, target, value):
        """`target += value` on a global: atomic. Returns the old value."""
        return self.atomic_into(Op.ATOMIC_ADD, target, value)

    def atomic_into(self, op: Op, target, value, what="atomic_add"):
        """`sd.atomic_<op>(target, value)`: on a field / ndarray element an atomic read-modify-
        write (vectors: one per component); on a local (Quadrants allows it) the plain update.
        Returns the old value."""
        b = self.ctx.b
        value = self.rvalue(value)
        if isinstance(target, Slot):
            old = self.rvalue(target)
            comb = ATOMIC_COMBINE[op]
            dt = target.dtype
            _check_atomic_type(self, op, dt, what)
            if target.shape:
                comps = self._comps_for(value, target.shape)
                olds = old.comps
                for a, o, c in zip(target.allocas, olds, comps):
                    c = self.to_node(c, dt)
                    b.store(a, c if comb is None else b.binary(comb, o, c))
                return old
            c = self.to_node(value, dt)
            b.store(target.allocas[0], c if comb is None else b.binary(comb, old, c))
            return old
        if type(target).__name__ in ("QuantElem", "QuantVecElem"):  # frontend/quant_ops
            if op != Op.ATOMIC_ADD:
                raise self.ctx.error(SpiradTypeError, f"{what} on a quantized field: only "
                                                      f"atomic_add (`+=`, `-=`) is supported")
            from .quant_ops import atomic_add, atomic_add_vec
            return (atomic_add if type(target).__name__ == "QuantElem" else atomic_add_vec)(
                self, target, value)
        if not isinstance(target, GlobalElem):
            raise self.ctx.error(SpiradTypeError, f"{what} needs a field or ndarray element or a "
                                                  f"local variable")
        ref = target.ref
        _check_atomic_type(self, op, ref.dtype, what)
        _activate(self, target)
        if target.comp_shape:
            comps = self._comps_for(value, target.comp_shape)
            olds = []
            for k, c in zip(_comp_indices(target.comp_shape), comps):
                idx = target.indices + tuple(b.const(x, T.i32) for x in k)
                self.narrowing(c, ref.dtype, "atomic add")
                olds.append(b.atomic(op, ref, idx, self.to_node(c, ref.dtype)))
            return VecVal(tuple(olds), target.comp_shape)
        self.narrowing(value, ref.dtype, "atomic add")
        return b.atomic(op, ref, target.indices, self.to_node(value, ref.dtype))

    def _tensor_text(self, shape, dtype) -> str:
        """Taichi's text of a vector / matrix type: `[Tensor (2, 3) i32]`."""
        return f"[Tensor ({', '.join(map(str, shape))}) {dtype}]"

    def _comps_for(self, value, shape, dtype=None):
        n = 1
        for s in shape:
            n *= s
        if isinstance(value, VecVal):
            if value.shape != shape:
                src = self.to_node(value.comps[0]).dtype if value.comps else ""
                tensor = lambda sh, t: f"[Tensor ({', '.join(map(str, sh))}) {t}]"  # noqa: E731
                taichi = f"'{tensor(value.shape, src)}' to '{tensor(shape, dtype)}': " if dtype else ""
                raise self.ctx.error(SpiradTypeError, f"cannot assign {taichi}shape {value.shape} "
                                                      f"to shape {shape}")
            return value.comps
        if isinstance(value, (list, tuple)):  # x[i] = [a, b] (Taichi): a list of components
            flat = [self.rvalue(c) for c in value]
            flat = [y for c in flat for y in (c if isinstance(c, (list, tuple)) else
                                              c.comps if isinstance(c, VecVal) else (c,))]
            if len(flat) != n:
                from .typing import literal_type, promote
                ts = [c.dtype if hasattr(c, "dtype") else
                      literal_type(c, None, self.ctx.default_fp, self.ctx.default_ip) for c in flat]
                vt = ts[0] if ts else dtype
                for t in ts[1:]:
                    vt = promote(vt, t)
                taichi = f"cannot assign '{self._tensor_text((len(flat),), vt)}' to " \
                    f"'{self._tensor_text(shape, dtype)}': " if dtype is not None else ""
                raise self.ctx.error(SpiradTypeError, f"{taichi}cannot assign {len(flat)} values "
                                                      f"to shape {shape}")
            return tuple(self.rvalue(c) for c in flat)
        return (value,) * n

    def new_slot(self, value, name, dtype=None) -> Slot:
        """A fresh local holding `value` (its type, or `dtype` when annotated)."""
        value = self.rvalue(value)
        b = self.ctx.b
        if isinstance(value, VecVal):
            t = dtype or value.dtype
            slot = Slot(tuple(b.alloca(t, f"{name}[{k}]") for k in range(len(value.comps))), value.shape, t)
        else:
            n = self.to_node(value, dtype)
            slot = Slot((b.alloca(n.dtype, name),), (), n.dtype)
            b.store(slot.allocas[0], n)
            return slot
        self.store_into(slot, value)
        return slot


def _comp_indices(shape):
    if len(shape) == 1:
        return [(k,) for k in range(shape[0])]
    return [(r, c) for r in range(shape[0]) for c in range(shape[1])]


_PY_OPS = {
    Op.ADD: lambda a, b: a + b, Op.SUB: lambda a, b: a - b, Op.MUL: lambda a, b: a * b,
    Op.DIV: lambda a, b: a / b, Op.FLOORDIV: lambda a, b: a // b, Op.MOD: lambda a, b: a % b,
    Op.POW: lambda a, b: a ** b, Op.AND: lambda a, b: a & b, Op.OR: lambda a, b: a | b,
    Op.XOR: lambda a, b: a ^ b, Op.SHL: lambda a, b: a << b, Op.SHR: lambda a, b: a >> b,
    Op.MIN: min, Op.MAX: max,
    Op.CMP_LT: lambda a, b: a < b, Op.CMP_LE: lambda a, b: a <= b, Op.CMP_GT: lambda a, b: a > b,
    Op.CMP_GE: lambda a, b: a >= b, Op.CMP_EQ: lambda a, b: a == b, Op.CMP_NE: lambda a, b: a != b,
}


def _int_literal(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _fold_python(op, a, b, ctx):
    import math
    if op == Op.ATAN2:
        return math.atan2(a, b)
    try:
        return _PY_OPS[op](a, b)
    except ZeroDivisionError:
        raise ctx.error(SpiradTypeError, "division by zero in a compile-time expression") from None


def _check_atomic_type(v, op, dt, what):
    if op in (Op.ATOMIC_AND, Op.ATOMIC_OR, Op.ATOMIC_XOR) and dt.is_float:
        raise v.ctx.error(SpiradTypeError, f"{what} needs an integer target, got {dt} (bitwise "
                                           f"atomics are defined on integers only)")
    if op in (Op.ATOMIC_MIN, Op.ATOMIC_MAX, Op.ATOMIC_MUL) and dt == T.u1:
        raise v.ctx.error(SpiradTypeError, f"{what} needs a number, got u1")


def _activate(builder, target) -> None:
    """A write to a field element below a sparse SNode activates its cells (sparse_ops)."""
    if getattr(target.owner, "_kind", None) == "field" and target.ref.kind == "field":
        from .sparse_ops import activate_on_write
        activate_on_write(builder, target.owner, target.indices)
