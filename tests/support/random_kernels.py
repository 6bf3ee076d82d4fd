"""Seeded generator of random well-formed kernels, for testing any backend against the interpreter.

    case = generate(seed)                  # or generate(seed, dtypes=(f32, i32, u32, u1))
    case.tl                                # TaskList (verifies with kernel_ir.verifier)
    case.arrays                            # {(kind, key, grad): np.ndarray}: every global bound
    case.scalars                           # per kernel argument: value, or None (ndarray args)
    case.exact                             # True: every float result must match bit for bit

Backend-agnostic: it builds IR only. Kernels avoid everything the IR leaves undefined or that
backends may legitimately disagree on:

* no int division / modulo by 0 or -1 (divisors are patched by a SELECT), shifts are masked below
  the width, int POW exponents are masked to [0, 7];
* floats stay finite and within about +-100: sums are halved, products scaled by 0.01, divisors
  are `|b| + 1`, EXP / TAN / ASIN / ACOS / POW inputs are clamped; no NaN is ever produced, so
  comparisons never see one; float -> int casts only from bounded values (`u32` from `|x|`);
* *inexact* values (anything computed by a transcendental op: results may differ by a few ULP
  between libms) only flow into continuous, gain-bounded ops (+, -, scaled *, numerators, min,
  max, select arms, neg, abs, f32/f64 casts) and stores. Every discontinuous consumer (compares,
  floor, floordiv, mod, casts to ints / u1, divisors, indices) and every transcendental input is
  exact, so control flow and integers are identical on every backend;
* a parallel iteration `i` writes only row `i` of the output arrays (stores or atomics, whose
  returned old value it may use), reads inputs and its own row, and adds order-independent
  values (ints, or small integer-valued floats) to shared accumulators via ATOMIC_ADD.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from kernel_ir.builder import IRBuilder
from kernel_ir.dtypes import ALL, DType, f32, i32, i64, u1, u32
from kernel_ir.nodes import ArgSpec, GlobalRef, Node, Task, TaskList, walk
from kernel_ir.ops import Op

BOUND = 100.0
TRANSCENDENTAL = frozenset({Op.SIN, Op.COS, Op.TAN, Op.TANH, Op.ASIN, Op.ACOS, Op.EXP, Op.LOG,
                            Op.POW, Op.ATAN2})


@dataclass
class RandomCase:
    tl: TaskList
    arrays: dict           # {(kind, key, grad): np.ndarray}, u1 as uint32 0/1
    scalars: list          # per kernel argument (None for ndarray arguments)
    exact: bool = True     # no transcendental op: float results must match bit for bit
    seed: int = 0
    dtypes: tuple = ALL

    def tolerance(self, dt: DType) -> tuple:
        """(rtol, atol) for comparing arrays of `dt` against the interpreter."""
        if self.exact or not dt.is_float:
            return (0.0, 0.0)
        return (1e-5, 1e-4) if dt == f32 else (1e-12, 1e-12)


@dataclass
class _Val:
    node: Node
    exact: bool = True


@dataclass
class _Local:
    slot: Node
    exact: bool


@dataclass
class _Array:
    ref: GlobalRef
    shape: tuple           # concrete shape of the numpy array
    role: str              # 'in' | 'out' (row per iteration) | 'acc' (shared, atomics only)
    extents: list = field(default_factory=list)  # per axis: callable(b) -> i32 node


class _Gen:
    def __init__(self, seed: int, dtypes):
        self.r = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.dtypes = tuple(dtypes)
        self.float_dts = [d for d in self.dtypes if d.is_float] or []
        self.int_dts = [d for d in self.dtypes if d.is_int]
        if i32 not in self.int_dts:
            raise ValueError("random kernels need i32 (indices and loop counters)")
        self.allow_transcendental = self.r.random() < 0.5
        self.used_transcendental = False
        self.args: list[ArgSpec] = []
        self.scalars: list = []
        self.arrays: dict = {}
        self.inputs: list[_Array] = []
        self.outs: dict[DType, _Array] = {}
        self.accs: dict[DType, _Array] = {}
        self.scalar_args: dict[DType, list[int]] = {}
        self.b: IRBuilder = None
        self.n_nodes = 0
        self.index_nest = 0  # loads inside index expressions of loads: bounded nesting

    # -- kernel layout ------------------------------------------------------------------------
    def layout(self):
        r = self.r
        self.rows = r.randint(1, 24)
        for _ in range(r.randint(1, 3)):
            dt = r.choice(self.dtypes)
            self.scalar_args.setdefault(dt, []).append(len(self.args))
            self.args.append(ArgSpec(f"s{len(self.args)}", "scalar", dt))
            self.scalars.append(self.random_values(dt, 1)[0].item())
        self.n_arg = len(self.args)  # an i32 scalar holding `rows` (a task bound)
        self.args.append(ArgSpec("n", "scalar", i32))
        self.scalars.append(self.rows)
        for _ in range(r.randint(1, 4)):
            dt = r.choice(self.dtypes)
            shape = tuple(r.randint(1, 5) for _ in range(r.randint(1, 3)))
            self.inputs.append(self.new_array(dt, shape, "in", r.random() < 0.5))
        for dt in self.dtypes:
            self.outs[dt] = self.new_array(dt, (self.rows, r.randint(1, 4)), "out",
                                           r.random() < 0.4)
            if not dt.is_bool:
                self.accs[dt] = self.new_array(dt, (r.randint(1, 4),), "acc", False)

    def new_array(self, dt, shape, role, as_ndarray) -> _Array:
        if as_ndarray:
            arg = len(self.args)
            grad = role == "out" and self.r.random() < 0.3
            self.args.append(ArgSpec(f"a{arg}", "ndarray", dt, len(shape), needs_grad=grad))
            self.scalars.append(None)
            ref = GlobalRef("ndarray", arg, dt, len(shape), None, f"a{arg}", grad)
            if grad:  # the primal buffer is bound too (it carries the shape)
                self.arrays[("ndarray", arg, False)] = self.random_values(dt, shape)
            extents = [lambda b, a=arg, ax=ax: b.emit(Op.NDARRAY_SHAPE, i32, (), (a, ax))
                       for ax in range(len(shape))]
        else:
            key = len(self.arrays) + 100
            ref = GlobalRef("field", key, dt, len(shape), shape, f"f{key}")
            extents = [lambda b, n=n: b.const(n, i32) for n in shape]
        data = (self.random_values(dt, shape) if role == "in"
                else np.zeros(shape, dt.np))
        self.arrays[(ref.kind, ref.key, ref.grad)] = data
        return _Array(ref, shape, role, extents)

    def random_values(self, dt: DType, shape) -> np.ndarray:
        g = self.np_rng
        if dt.is_bool:
            return g.integers(0, 2, shape).astype(np.uint32)
        if dt.is_float:
            v = g.uniform(-BOUND, BOUND, shape)
            ints = g.integers(-20, 21, shape).astype(np.float64)
            return np.where(g.random(shape) < 0.3, ints, v).astype(dt.np)
        info = np.iinfo(dt.np)
        big = g.integers(info.min, info.max, shape, dtype=dt.np, endpoint=True)
        small = g.integers(-20 if dt.is_signed else 0, 21, shape).astype(dt.np)
        return np.where(g.random(shape) < 0.5, small, big).astype(dt.np)

    # -- scopes -------------------------------------------------------------------------------
    def push(self):
        self.scopes.append(([], []))

    def pop(self):
        self.scopes.pop()

    def values(self, dt, exact):
        return [v.node for vals, _ in self.scopes for v in vals
                if v.node.dtype == dt and (v.exact or not exact)]

    def locals(self, dt=None, exact=None):
        return [l for _, ls in self.scopes for l in ls
                if (dt is None or l.slot.dtype == dt) and (exact is None or l.exact or not exact)]

    def remember(self, node, exact=True):
        self.scopes[-1][0].append(_Val(node, exact))
        return node

    # -- expressions --------------------------------------------------------------------------
    def expr(self, dt: DType, exact: bool, depth: int) -> Node:
        """A value of `dt`; when `exact`, computed without transcendental ops."""
        self.n_nodes += 1
        if depth <= 0 or self.r.random() < 0.3 or self.n_nodes > 400:
            return self.leaf(dt, exact)
        if dt.is_float:
            return self.float_op(dt, exact, depth - 1)
        if dt.is_bool:
            return self.bool_op(depth - 1)
        return self.int_op(dt, depth - 1)

    def leaf(self, dt, exact) -> Node:
        b, r = self.b, self.r
        choices = ["const", "const"]
        if self.values(dt, exact):
            choices += ["pool"] * 4
        if self.locals(dt, exact):
            choices += ["local"] * 2
        if self.scalar_args.get(dt):
            choices.append("arg")
        if self.index_nest < 2 and any(a.ref.dtype == dt for a in self.inputs):
            choices += ["input"] * 2
        pick = r.choice(choices)
        if pick == "pool":
            return r.choice(self.values(dt, exact))
        if pick == "local":
            return b.load(r.choice(self.locals(dt, exact)).slot)
        if pick == "arg":
            return b.arg(r.choice(self.scalar_args[dt]), dt)
        if pick == "input":
            arr = r.choice([a for a in self.inputs if a.ref.dtype == dt])
            return b.global_load(arr.ref, self.indices(arr))
        return b.const(self.const_value(dt), dt)

    def const_value(self, dt):
        r = self.r
        if dt.is_bool:
            return r.random() < 0.5
        if dt.is_float:
            return r.choice([0.0, 1.0, -1.0, 0.5, 2.0, r.randint(-20, 20),
                             round(r.uniform(-BOUND, BOUND), 3)])
        if r.random() < 0.7:
            return r.randint(-20 if dt.is_signed else 0, 20)
        lo, hi = (-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1) if dt.is_signed else \
            (0, (1 << dt.bits) - 1)
        return r.randint(lo, hi)

    def indices(self, arr: _Array) -> list:
        """In-range i32 indices: Python MOD by the (positive) extent."""
        b = self.b
        out = []
        self.index_nest += 1
        for ax in range(arr.ref.ndim):
            v = self.expr(self.r.choice(self.int_dts), True, 1)
            v = b.cast(v, i32)
            out.append(b.binary(Op.MOD, v, arr.extents[ax](b)))
        self.index_nest -= 1
        return out

    def c(self, v, dt):
        return self.b.const(v, dt)

    def float_op(self, dt, exact, d) -> Node:
        b, r = self.b, self.r
        ops = ["add", "sub", "mul", "div", "neg", "abs", "min", "max", "select", "floor", "sqrt",
               "rsqrt", "floordiv", "mod", "cast", "cast", "clamp"]
        if not exact and self.allow_transcendental:
            ops += ["sin", "cos", "tanh", "exp", "log", "asin", "acos", "tan", "atan2", "pow"] * 4
        op = r.choice(ops)
        e = lambda ex=exact: self.expr(dt, ex, d)  # noqa: E731
        half, tiny, one = self.c(0.5, dt), self.c(0.01, dt), self.c(1.0, dt)
        if op in ("add", "sub"):
            v = b.binary(Op.ADD if op == "add" else Op.SUB, e(), e())
            return b.binary(Op.MUL, v, half)
        if op == "mul":
            return b.binary(Op.MUL, e(), b.binary(Op.MUL, e(), tiny))
        if op == "div":
            return b.binary(Op.DIV, e(), self.denominator(dt, d))
        if op in ("neg", "abs"):
            return b.unary(Op.NEG if op == "neg" else Op.ABS, e())
        if op in ("min", "max"):
            return b.binary(Op.MIN if op == "min" else Op.MAX, e(), e())
        if op == "select":
            return b.select(self.expr(u1, True, d), e(), e())
        if op == "clamp":
            return self.clamp(e(), -BOUND, BOUND)
        if op == "floor":
            return b.unary(Op.FLOOR, e(True))
        if op == "sqrt":
            return b.unary(Op.SQRT, b.unary(Op.ABS, e(True)))
        if op == "rsqrt":
            return b.unary(Op.RSQRT, self.denominator(dt, d))
        if op in ("floordiv", "mod"):
            return b.binary(Op.FLOORDIV if op == "floordiv" else Op.MOD, e(True),
                            self.denominator(dt, d))
        if op == "cast":
            return self.cast_to_float(dt, exact, d)
        # transcendental: exact (bounded) inputs, inexact result
        self.used_transcendental = True
        x = e(True)
        if op in ("sin", "cos", "tanh"):
            return b.unary({"sin": Op.SIN, "cos": Op.COS, "tanh": Op.TANH}[op], x)
        if op == "exp":
            return b.unary(Op.EXP, self.clamp(x, -4.0, 4.0))
        if op == "log":
            return b.unary(Op.LOG, b.binary(Op.ADD, b.unary(Op.ABS, x), one))
        if op in ("asin", "acos"):
            return b.unary(Op.ASIN if op == "asin" else Op.ACOS, self.clamp(x, -1.0, 1.0))
        if op == "tan":
            return b.unary(Op.TAN, self.clamp(x, -1.2, 1.2))
        if op == "atan2":
            return b.binary(Op.ATAN2, x, e(True))
        base = b.binary(Op.ADD, b.binary(Op.MUL, b.unary(Op.ABS, x), tiny), half)
        return b.binary(Op.POW, base, self.clamp(e(True), -3.0, 3.0))

    def denominator(self, dt, d) -> Node:
        """|x| + 1 from an exact x: >= 1, so quotients stay bounded and never divide by 0."""
        return self.b.binary(Op.ADD, self.b.unary(Op.ABS, self.expr(dt, True, d)),
                             self.c(1.0, dt))

    def clamp(self, x, lo, hi) -> Node:
        b = self.b
        return b.binary(Op.MIN, b.binary(Op.MAX, x, self.c(lo, x.dtype)), self.c(hi, x.dtype))

    def bounded(self, v) -> Node:
        """Float values stored into locals are clamped: a loop-carried `x = x * x * 0.01` would
        otherwise grow without bound over the iterations."""
        return self.clamp(v, -BOUND, BOUND) if v.dtype.is_float else v

    def cast_to_float(self, dt, exact, d) -> Node:
        b, r = self.b, self.r
        srcs = [s for s in self.dtypes if s != dt]
        src = r.choice(srcs) if srcs else dt
        if src.is_float:  # f32 <-> f64: continuous, keeps inexactness
            return b.cast(self.expr(src, exact, d), dt)
        if src.is_bool:
            return b.cast(self.expr(u1, True, d), dt)
        v = b.binary(Op.MOD, self.expr(src, True, d), self.c(201, src))  # [0, 200]
        return b.binary(Op.SUB, b.cast(v, dt), self.c(100.0, dt))

    def int_op(self, dt, d) -> Node:
        b, r = self.b, self.r
        ops = ["add", "sub", "mul", "div", "floordiv", "mod", "neg", "abs", "not", "min", "max",
               "and", "or", "xor", "shl", "shr", "pow", "select", "cast", "cast", "index"]
        op = r.choice(ops)
        e = lambda: self.expr(dt, True, d)  # noqa: E731
        simple = {"add": Op.ADD, "sub": Op.SUB, "mul": Op.MUL, "min": Op.MIN, "max": Op.MAX,
                  "and": Op.AND, "or": Op.OR, "xor": Op.XOR}
        if op in simple:
            return b.binary(simple[op], e(), e())
        if op in ("div", "floordiv", "mod"):
            den = e()
            bad = b.binary(Op.CMP_EQ, den, self.c(0, dt))
            if dt.is_signed:
                bad = b.binary(Op.OR, bad, b.binary(Op.CMP_EQ, den, self.c(-1, dt)))
            den = b.select(bad, self.c(r.choice([3, 7, 2]), dt), den)
            return b.binary({"div": Op.DIV, "floordiv": Op.FLOORDIV, "mod": Op.MOD}[op], e(), den)
        if op in ("neg", "abs", "not"):
            return b.unary({"neg": Op.NEG, "abs": Op.ABS, "not": Op.BIT_NOT}[op], e())
        if op in ("shl", "shr"):
            amt = b.binary(Op.AND, e(), self.c(dt.bits - 1, dt))
            return b.binary(Op.SHL if op == "shl" else Op.SHR, e(), amt)
        if op == "pow":
            return b.binary(Op.POW, e(), b.binary(Op.AND, e(), self.c(7, dt)))
        if op == "select":
            return b.select(self.expr(u1, True, d), e(), e())
        if op == "index":
            ints = [v for v in self.values(i32, True) if v.op == Op.LOOP_INDEX]
            return b.cast(r.choice(ints), dt) if ints else e()
        src = r.choice([s for s in self.dtypes if s != dt] or [dt])
        if src.is_float:  # bounded, exact; u32 only from |x|
            x = self.expr(src, True, d)
            return b.cast(b.unary(Op.ABS, x) if dt == u32 else x, dt)
        return b.cast(self.expr(src, True, d), dt)

    def bool_op(self, d) -> Node:
        b, r = self.b, self.r
        op = r.choice(["cmp", "cmp", "cmp", "and", "or", "xor", "not", "cast", "select"])
        if op == "cmp":
            dt = r.choice(self.dtypes)
            cmp = r.choice([Op.CMP_LT, Op.CMP_LE, Op.CMP_GT, Op.CMP_GE, Op.CMP_EQ, Op.CMP_NE])
            return b.binary(cmp, self.expr(dt, True, d), self.expr(dt, True, d))
        if op in ("and", "or", "xor"):
            return b.binary({"and": Op.AND, "or": Op.OR, "xor": Op.XOR}[op],
                            self.expr(u1, True, d), self.expr(u1, True, d))
        if op == "not":
            return b.unary(Op.NOT, self.expr(u1, True, d))
        if op == "select":
            return b.select(self.expr(u1, True, d), self.expr(u1, True, d), self.expr(u1, True, d))
        src = r.choice([s for s in self.dtypes if s != u1] or [i32])
        return b.cast(self.expr(src, True, d), u1)

    # -- statements ---------------------------------------------------------------------------
    def any_dtype_value(self):
        dt = self.r.choice(self.dtypes)
        exact = not (dt.is_float and self.allow_transcendental and self.r.random() < 0.5)
        return dt, self.expr(dt, exact, self.r.randint(1, 3)), exact

    def stmts(self, budget: int, loops: int):
        for _ in range(budget):
            if self.n_nodes > 400:
                return
            self.stmt(budget, loops)

    def stmt(self, budget, loops):
        r, b = self.r, self.b
        kinds = ["value", "local", "local", "store", "store", "atomic", "shared"]
        if budget > 1:
            kinds += ["if", "for"] if loops < 2 else ["if"]
            kinds += ["while"] if loops < 2 else []
        if self.in_loop or self.task_kind == "range":
            kinds.append("jump")
        kind = r.choice(kinds)
        if kind == "value":
            dt, v, exact = self.any_dtype_value()
            self.remember(v, exact)
        elif kind == "local":
            ls = self.locals()
            if ls and r.random() < 0.6:
                loc = r.choice(ls)
                b.store(loc.slot, self.bounded(self.expr(loc.slot.dtype, loc.exact,
                                                         r.randint(1, 3))))
            else:
                dt = r.choice(self.dtypes)
                exact = not (dt.is_float and self.allow_transcendental and r.random() < 0.5)
                slot = b.alloca(dt, f"l{len(ls)}")
                self.scopes[-1][1].append(_Local(slot, exact))
                if r.random() < 0.7:
                    b.store(slot, self.bounded(self.expr(dt, exact, r.randint(1, 3))))
        elif kind == "store":
            dt, v, exact = self.any_dtype_value()
            arr = self.outs[dt]
            b.global_store(arr.ref, self.out_index(arr), v)
        elif kind == "atomic":
            dt = r.choice([d for d in self.dtypes if not d.is_bool] or [i32])
            arr = self.outs[dt]
            exact = not (dt.is_float and self.allow_transcendental and r.random() < 0.5)
            old = b.atomic_add(arr.ref, self.out_index(arr), self.expr(dt, exact, 2))
            if dt.is_float:  # cells accumulate: clamp the old value back into range
                old = self.clamp(old, -BOUND, BOUND)
            # the old value of an iteration-private cell is deterministic, but the cell may hold
            # inexact values stored earlier
            self.remember(old, not (dt.is_float and self.allow_transcendental))
        elif kind == "shared":
            dt = r.choice(list(self.accs))
            arr = self.accs[dt]
            if dt.is_float:  # small integers: exact in any summation order
                v = b.cast(b.binary(Op.MOD, self.expr(i32, True, 2), b.const(16, i32)), dt)
            else:
                v = self.expr(dt, True, 2)
            b.atomic_add(arr.ref, self.indices(arr), v)
        elif kind == "if":
            cond = self.expr(u1, True, 2)
            with b.if_(cond) as (then, orelse):
                with then:
                    self.region(lambda: self.stmts(r.randint(1, budget - 1), loops))
                if r.random() < 0.5:
                    with orelse:
                        self.region(lambda: self.stmts(r.randint(1, budget - 1), loops))
        elif kind == "for":
            self.for_loop(budget, loops)
        elif kind == "while":
            self.while_loop(budget, loops)
        elif kind == "jump":
            cond = self.expr(u1, True, 2)
            with b.if_(cond) as (then, _):
                with then:
                    if self.in_loop and r.random() < 0.5:
                        b.break_()
                    else:
                        b.continue_()

    def region(self, fn):
        self.push()
        try:
            fn()
        finally:
            self.pop()

    def out_index(self, arr: _Array) -> list:
        if self.task_kind == "range":  # own row only
            idx = [self.task_index] + self.indices(arr)[1:]
            return idx
        return self.indices(arr)

    def loop_body(self, budget, loops, carried, body_fn):
        saved = self.in_loop
        self.in_loop = True
        start = len(self.b._stack[-1])
        self.push()
        try:
            body_fn()
            self.stmts(self.r.randint(1, max(1, budget - 1)), loops + 1)
        finally:
            self.pop()
            self.in_loop = saved
        # carried: outer slots the body stores
        body = self.b._stack[-1][start:]
        inner = {n for top in body for n in _walk_nodes(top) if n.op == Op.ALLOCA}
        for top in body:
            for n in _walk_nodes(top):
                if n.op == Op.STORE and n.srcs[0] not in inner and n.srcs[0] not in carried:
                    carried.append(n.srcs[0])

    def for_loop(self, budget, loops):
        b, r = self.b, self.r
        begin = b.const(r.randint(-2, 2), i32)
        if r.random() < 0.5:  # data-dependent trip count in [0, 4]
            trips = b.binary(Op.MOD, b.cast(self.expr(r.choice(self.int_dts), True, 1), i32),
                             b.const(5, i32))
        else:
            trips = b.const(r.randint(0, 4), i32)
        end = b.binary(Op.ADD, begin, trips)
        idx_dt = i64 if (i64 in self.dtypes and r.random() < 0.2) else i32
        if idx_dt != i32:
            begin, end = b.cast(begin, idx_dt), b.cast(end, idx_dt)
        carried: list = []
        with b.range_for(begin, end, carried=carried, index_dtype=idx_dt) as j:
            def head():
                self.remember(j if idx_dt == i32 else b.cast(j, i32))
            self.loop_body(budget, loops, carried, head)

    def while_loop(self, budget, loops):
        b, r = self.b, self.r
        counter = b.alloca(i32, "count")
        limit = b.const(r.randint(0, 4), i32)
        carried: list = [counter]
        with b.while_(carried=carried):
            def head():  # the counter runs first, so CONTINUE can never loop forever
                nxt = b.binary(Op.ADD, b.load(counter), b.const(1, i32))
                b.store(counter, nxt)
                with b.if_(b.binary(Op.CMP_GT, nxt, limit)) as (then, _):
                    with then:
                        b.break_()
                self.remember(nxt)
            self.loop_body(budget, loops, carried, head)

    # -- tasks --------------------------------------------------------------------------------
    def task(self, k: int) -> Task:
        r = self.r
        self.b = IRBuilder()
        self.scopes = []
        self.in_loop = False
        self.n_nodes = 0
        self.task_kind = "serial" if (k > 0 and r.random() < 0.3) else "range"
        self.push()
        if self.task_kind == "range":
            self.task_index = Node(Op.LOOP_INDEX, i32, (), object())
            self.remember(self.task_index)
        self.stmts(r.randint(2, 7), 0)
        body = self.b.finish()
        if self.task_kind == "serial":
            return Task("serial", body, name=f"t{k}")
        begin = Node(Op.CONST, i32, (), r.randint(0, min(2, self.rows - 1)))
        end_kind = r.choice(["const", "arg", "shape"])
        out_nd = [a for a in self.outs.values() if a.ref.kind == "ndarray"]
        if end_kind == "arg":
            end = Node(Op.ARG, i32, (), self.n_arg)
        elif end_kind == "shape" and out_nd:
            end = Node(Op.NDARRAY_SHAPE, i32, (), (out_nd[0].ref.key, 0))
        else:
            end = Node(Op.CONST, i32, (), self.rows)
        return Task("range", body, self.task_index, begin, end, name=f"t{k}")

    def build(self, seed) -> RandomCase:
        self.layout()
        tasks = tuple(self.task(k) for k in range(self.r.randint(1, 3)))
        tl = TaskList(f"rand{seed}", tuple(self.args), tasks)
        return RandomCase(tl, self.arrays, self.scalars, not self.used_transcendental, seed,
                          self.dtypes)


def _walk_nodes(n: Node):
    yield n
    for blk in n.blocks:
        yield from walk(blk)


def generate(seed: int, dtypes=ALL) -> RandomCase:
    """A random kernel with its inputs; deterministic in `seed` (and `dtypes`, which must include
    i32: indices and loop counters are i32)."""
    return _Gen(seed, dtypes).build(seed)
