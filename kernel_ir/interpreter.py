"""Reference interpreter: the definition of what the IR means.

Slow and simple on purpose. Code generators and passes are tested against it. Semantics:

* Values are numpy scalars of the node's dtype (`u1` is a Python bool). Integer arithmetic wraps
  (two's complement); no op traps. Floats follow IEEE at the node's width.
* DIV on floats is true division; on ints it truncates toward zero. FLOORDIV and MOD follow
  Python: the quotient is floored and the remainder takes the divisor's sign (ints and floats).
  Integer division or modulo by zero is undefined (generators must avoid it).
* POW on ints requires a non-negative exponent. SHR is arithmetic for signed, logical for
  unsigned. MIN/MAX on floats return the non-NaN operand if one is NaN (like `fmin`/`fmax`).
* CAST float->int truncates toward zero; anything->u1 is `!= 0`; u1->number is 0/1.
* BITCAST reinterprets the operand's bits as its dtype (same width, no u1; NaN payloads kept).
* ALLOCA (re)initialises its slot to zero every time it executes.
* GLOBAL_* index C-ordered arrays; out-of-range indices are an error here (undefined elsewhere).
* A task of kind 'range' runs its body for each index in [begin, end), in order; the backends may
  run iterations in any order and concurrently, so kernels must not rely on the order except
  through atomics. ATOMIC_<op> stores `combine(old, value)` (`ops.ATOMIC_COMBINE`: MIN / MAX
  as the binary ops, NaN-ignoring on floats; XCHG stores the value) and yields the old value.
* PRINT appends (format id, [values]) to `Memory.prints` (the record a kernel's print stream
  gets; spirad lowers PRINT to stores into print buffers before offloading).
* Adstack ops: a stack is a list of [primal, adjoint] entries with a capacity; PUSH past the
  capacity raises `AdStackOverflowError`. A stack whose AdStackArg says `adjoint_in_heap=False`
  has no adjoint entries to read or accumulate (an internal error).
"""
from __future__ import annotations

import numpy as np

from .dtypes import DType, u1
from .mathfns import MATH
from .nodes import Block, Node, Task, TaskList
from .ops import ATOMIC_COMBINE, Op


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class AdStackOverflowError(Exception):
    def __init__(self, node, capacity):
        super().__init__(f"adstack {node.arg.name!r} overflow (capacity {capacity})")
        self.node, self.capacity = node, capacity


def cast_value(v, dtype: DType):
    """Convert a python/numpy value to the canonical scalar of `dtype` (wrapping ints)."""
    if dtype == u1:
        return bool(v)
    if dtype.is_float:
        return dtype.np.type(v)
    if isinstance(v, (bool, np.bool_)):
        return dtype.np.type(int(v))
    if isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            return dtype.np.type(0)
        v = int(v)  # truncation toward zero
    v = int(v)
    bits = dtype.bits
    v &= (1 << bits) - 1
    if dtype.is_signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return dtype.np.type(v)


def _floordiv(a, b, dt):
    if dt.is_float:
        return dt.np.type(np.floor(a / b))
    return cast_value(int(a) // int(b), dt)


def _mod(a, b, dt):
    if dt.is_float:
        return dt.np.type(a - np.floor(a / b) * b)
    return cast_value(int(a) % int(b), dt)


def _div(a, b, dt):
    if dt.is_float:
        return dt.np.type(a / b)
    q = abs(int(a)) // abs(int(b))
    return cast_value(q if (int(a) < 0) == (int(b) < 0) else -q, dt)


def _pow(a, b, dt):
    if dt.is_float:
        return dt.np.type(np.power(a, b))
    return cast_value(pow(int(a), int(b)), dt)


def _shr(a, b, dt):
    if dt.is_signed:
        return cast_value(int(a) >> int(b), dt)
    return cast_value((int(a) & ((1 << dt.bits) - 1)) >> int(b), dt)


def _unary_float(fn):
    return lambda a, dt: dt.np.type(fn(a))


def _bool_or_int(fn_bool, fn_int):
    return lambda a, b, dt: fn_bool(a, b) if dt == u1 else cast_value(fn_int(int(a), int(b)), dt)


UNARY_IMPL = {
    Op.NEG: lambda a, dt: dt.np.type(-a) if dt.is_float else cast_value(-int(a), dt),
    Op.NOT: lambda a, dt: not a if dt == u1 else cast_value(~int(a), dt),
    Op.BIT_NOT: lambda a, dt: not a if dt == u1 else cast_value(~int(a), dt),
    **{f.op: _unary_float(f.reference) for f in MATH},  # sin, exp, log1p, ... (kernel_ir.mathfns)
    Op.FLOOR: _unary_float(np.floor),
    Op.ABS: lambda a, dt: dt.np.type(abs(a)) if dt.is_float else cast_value(abs(int(a)), dt),
    Op.STOP_GRAD: lambda a, dt: a,
}

BINARY_IMPL = {
    Op.ADD: lambda a, b, dt: dt.np.type(a + b) if dt.is_float else cast_value(int(a) + int(b), dt),
    Op.SUB: lambda a, b, dt: dt.np.type(a - b) if dt.is_float else cast_value(int(a) - int(b), dt),
    Op.MUL: lambda a, b, dt: dt.np.type(a * b) if dt.is_float else cast_value(int(a) * int(b), dt),
    Op.DIV: _div, Op.FLOORDIV: _floordiv, Op.MOD: _mod, Op.POW: _pow,
    Op.ATAN2: lambda a, b, dt: dt.np.type(np.arctan2(a, b)),
    Op.MIN: lambda a, b, dt: dt.np.type(np.fmin(a, b)) if dt.is_float else (a if a < b else b),
    Op.MAX: lambda a, b, dt: dt.np.type(np.fmax(a, b)) if dt.is_float else (a if a > b else b),
    Op.AND: _bool_or_int(lambda a, b: bool(a and b), lambda a, b: a & b),
    Op.OR: _bool_or_int(lambda a, b: bool(a or b), lambda a, b: a | b),
    Op.XOR: _bool_or_int(lambda a, b: bool(a) != bool(b), lambda a, b: a ^ b),
    Op.SHL: lambda a, b, dt: cast_value(int(a) << int(b), dt),
    Op.SHR: _shr,
    Op.CMP_LT: lambda a, b, dt: bool(a < b), Op.CMP_LE: lambda a, b, dt: bool(a <= b),
    Op.CMP_GT: lambda a, b, dt: bool(a > b), Op.CMP_GE: lambda a, b, dt: bool(a >= b),
    Op.CMP_EQ: lambda a, b, dt: bool(a == b), Op.CMP_NE: lambda a, b, dt: bool(a != b),
}


class Memory:
    """Arrays the interpreter reads and writes: globals by (kind, key, grad) plus scalar args."""

    def __init__(self, arrays=None, scalars=(), capacities=None):
        self.arrays = dict(arrays or {})  # GlobalRef.buffer -> numpy array (ndim = ref.ndim)
        self.scalars = list(scalars)
        self.capacities = capacities or {}  # ADSTACK_ALLOCA node -> int capacity (None: unbounded)
        self.prints = []  # (format id, [values]) per PRINT executed

    @classmethod
    def from_args(cls, abi, args, argbuf, view, refs=None, capacities=None) -> "Memory":
        """The memory of a launch from its argument buffer (`abi.unpack_args`): each binding
        (`refs`: (binding index, GlobalRef) pairs, default all of `abi.bindings`) as
        `view(binding index, ref, shape)` with its shape — a field's own, an ndarray's extents
        from the buffer, (1,) for a kernel temporary — and an empty array of the right shape for
        each ndarray whose shape is read but that is never indexed (NDARRAY_SHAPE reads it).
        The one decoding the interpreter backend and host-evaluated ranges share."""
        scalars, shapes = abi.unpack_args(args, argbuf)
        arrays = {}
        for k, ref in (enumerate(abi.bindings) if refs is None else refs):
            if ref.kind == "field":
                shape = ref.shape
            elif ref.kind == "ndarray":
                shape = tuple(shapes[ref.key][ax] for ax in range(ref.ndim))
            else:
                shape = (1,)
            arrays[ref.buffer] = view(k, ref, shape)
        for a, axes in shapes.items():
            arrays.setdefault(("ndarray", a, False),
                              np.zeros(tuple(axes[k] for k in range(len(axes))), np.uint8))
        return cls(arrays, scalars, capacities)

    def array(self, ref):
        try:
            return self.arrays[ref.buffer]
        except KeyError:
            raise RuntimeError(f"interpreter: no memory bound for {ref!r}") from None


class Interpreter:
    def __init__(self, mem: Memory):
        self.mem = mem
        self.env: dict = {}

    # -- expressions -------------------------------------------------------------------------
    def value(self, n: Node):
        try:
            return self.env[n]
        except KeyError:
            raise RuntimeError(f"interpreter: {n!r} used before it was computed") from None

    def run_block(self, block: Block):
        for n in block.nodes:
            self.step(n)

    def step(self, n: Node):
        op, env = n.op, self.env
        with np.errstate(all="ignore"):
            if op in BINARY_IMPL:
                a, b = (self.value(s) for s in n.srcs)
                env[n] = BINARY_IMPL[op](a, b, n.srcs[0].dtype)
            elif op in UNARY_IMPL:
                env[n] = UNARY_IMPL[op](self.value(n.srcs[0]), n.dtype)
            else:
                getattr(self, "op_" + op.name.lower())(n)

    def op_const(self, n):
        self.env[n] = cast_value(n.arg, n.dtype)

    def op_arg(self, n):
        self.env[n] = cast_value(self.mem.scalars[n.arg], n.dtype)

    def op_loop_index(self, n):
        if n not in self.env:
            raise RuntimeError("interpreter: loop index read outside its loop")

    def op_ndarray_shape(self, n):
        idx, axis = n.arg
        arr = self.mem.arrays[("ndarray", idx, False)]
        self.env[n] = cast_value(arr.shape[axis], n.dtype)

    def op_cast(self, n):
        self.env[n] = cast_value(self.value(n.srcs[0]), n.dtype)

    def op_bitcast(self, n):
        x = self.value(n.srcs[0])
        self.env[n] = np.array(x, dtype=n.srcs[0].dtype.np).view(n.dtype.np)[()]

    def op_select(self, n):
        c, a, b = (self.value(s) for s in n.srcs)
        self.env[n] = a if c else b

    def op_alloca(self, n):
        self.env[n] = [cast_value(0, n.dtype)]

    def op_load(self, n):
        self.env[n] = self.value(n.srcs[0])[0]

    def op_store(self, n):
        slot, v = n.srcs
        self.value(slot)[0] = self.value(v)

    def _index(self, n, count):
        arr = self.mem.array(n.arg)
        idx = tuple(int(self.value(s)) for s in n.srcs[:count])
        if len(idx) != arr.ndim or any(not 0 <= i < d for i, d in zip(idx, arr.shape)):
            raise IndexError(f"interpreter: index {idx} out of range for {n.arg!r} of shape {arr.shape}")
        return arr, idx

    def op_global_load(self, n):
        arr, idx = self._index(n, len(n.srcs))
        self.env[n] = cast_value(arr[idx], n.dtype)

    def op_global_store(self, n):
        arr, idx = self._index(n, len(n.srcs) - 1)
        arr[idx] = self.value(n.srcs[-1])

    def op_atomic_add(self, n):
        arr, idx = self._index(n, len(n.srcs) - 1)
        old = cast_value(arr[idx], n.dtype)
        v, comb = self.value(n.srcs[-1]), ATOMIC_COMBINE[n.op]
        new = cast_value(v, n.dtype) if comb is None else BINARY_IMPL[comb](old, v, n.dtype)
        m = n.arg.mask  # a bit-field of the word: only its bits change (GlobalRef.mask)
        arr[idx] = new if not m else cast_value((int(old) & ~m) | (int(new) & m), n.dtype)
        self.env[n] = old

    op_atomic_min = op_atomic_max = op_atomic_and = op_atomic_or = op_atomic_xor = op_atomic_add
    op_atomic_xchg = op_atomic_mul = op_atomic_add

    # -- control flow ------------------------------------------------------------------------
    def op_if(self, n):
        self.run_block(n.blocks[0] if self.value(n.srcs[0]) else n.blocks[1])

    def op_range_for(self, n):
        begin, end = (int(self.value(s)) for s in n.srcs)
        idx = n.arg.index
        for i in range(begin, end):
            self.env[idx] = cast_value(i, idx.dtype)
            try:
                self.run_block(n.blocks[0])
            except _Break:
                break
            except _Continue:
                continue

    def op_while(self, n):
        while True:
            try:
                self.run_block(n.blocks[0])
            except _Break:
                break
            except _Continue:
                continue

    def op_call(self, n):
        self.run_block(n.blocks[0])

    def op_print(self, n):
        self.mem.prints.append((n.arg, [self.value(s) for s in n.srcs]))

    def op_break(self, n):
        raise _Break()

    def op_continue(self, n):
        raise _Continue()

    # -- adstack -----------------------------------------------------------------------------
    def op_adstack_alloca(self, n):
        cap = self.mem.capacities.get(n)
        self.env[n] = {"cap": cap, "entries": []}

    def op_adstack_push(self, n):
        st = self.value(n.srcs[0])
        if st["cap"] is not None and len(st["entries"]) >= st["cap"]:
            raise AdStackOverflowError(n.srcs[0], st["cap"])
        st["entries"].append([self.value(n.srcs[1]), n.srcs[0].dtype.np.type(0)])

    def op_adstack_pop(self, n):
        self.value(n.srcs[0])["entries"].pop()

    def op_adstack_load_top(self, n):
        self.env[n] = self._top(n)[0]

    def op_adstack_load_top_adj(self, n):
        self._heap_adjoint(n)
        self.env[n] = self._top(n)[1]

    def _top(self, n):
        """The top entry; an empty stack reads as a zero entry (backends read entry 0, per the
        ABI's max(count-1, 0); reverse mode reloads the top after its last pop and never uses it)."""
        st = self.value(n.srcs[0])
        if st["entries"]:
            return st["entries"][-1]
        z = n.srcs[0].dtype.np.type(0)
        return [z, z]

    @staticmethod
    def _heap_adjoint(n):
        if not n.srcs[0].arg.adjoint_in_heap:
            raise RuntimeError(f"{n.op.name} on stack {n.srcs[0].arg.name!r}, whose top adjoint "
                               f"lives in a local (passes/autodiff/stack_tops)")

    def op_adstack_acc_adj(self, n):
        self._heap_adjoint(n)
        top = self.value(n.srcs[0])["entries"][-1]
        top[1] = n.srcs[0].dtype.np.type(top[1] + self.value(n.srcs[1]))


def eval_expr(n: Node, mem: Memory):
    """Evaluate a pure expression tree (task bounds); returns a python int/float/bool."""
    it = Interpreter(mem)

    def ev(x):
        if x not in it.env:
            for s in x.srcs:
                ev(s)
            it.step(x)
        return it.env[x]

    return ev(n)


def run_tasks(tl: TaskList, mem: Memory):
    """Run every task of a TaskList in order; temporaries must already be in `mem`."""
    for t in tl.tasks:
        run_task(t, mem)


def run_task(t: Task, mem: Memory):
    if t.kind == "serial":
        it = Interpreter(mem)
        try:
            it.run_block(t.body)
        except _Continue:
            pass
        return
    run_range(t, mem, int(eval_expr(t.begin, mem)), int(eval_expr(t.end, mem)))


def run_range(t: Task, mem: Memory, begin: int, end: int):
    """Run a range task's body for each index in [begin, end) (bounds already evaluated)."""
    for i in range(begin, end):
        it = Interpreter(mem)
        it.env[t.index] = cast_value(i, t.index.dtype)
        try:
            it.run_block(t.body)
        except _Continue:
            pass
