"""The op enum: every IR node is one of these.

Groups (`UNARY`, `BINARY`, `COMPARE`, ...) let passes and code generators dispatch through tables
instead of if/elif chains. The meaning of each op is defined by `kernel_ir.interpreter`.
"""
from __future__ import annotations

from enum import Enum, auto


class Op(Enum):
    # leaves
    CONST = auto()          # arg: python value
    ARG = auto()            # arg: scalar-argument index
    LOOP_INDEX = auto()     # arg: unique id; the value of the enclosing RANGE_FOR (or task) index
    NDARRAY_SHAPE = auto()  # arg: (ndarray argument index, axis); dtype i32
    # unary math (operand and result share a dtype; NOT/BIT_NOT on ints/bools)
    NEG = auto(); NOT = auto(); BIT_NOT = auto()
    SIN = auto(); COS = auto(); TAN = auto(); TANH = auto(); ASIN = auto(); ACOS = auto()
    EXP = auto(); LOG = auto(); SQRT = auto(); RSQRT = auto(); ABS = auto(); FLOOR = auto()
    LOG1P = auto(); EXPM1 = auto()
    # (the float math functions: one record each in kernel_ir.mathfns)
    CAST = auto()           # dtype: target type
    BITCAST = auto()        # dtype: a type of the operand's width; the operand's bits as it
    STOP_GRAD = auto()      # the operand's value; no derivative flows through it (frontend/svd)
    # binary (both operands share a dtype; comparisons return u1)
    ADD = auto(); SUB = auto(); MUL = auto(); DIV = auto(); FLOORDIV = auto(); MOD = auto()
    POW = auto(); ATAN2 = auto(); MIN = auto(); MAX = auto()
    AND = auto(); OR = auto(); XOR = auto(); SHL = auto(); SHR = auto()
    CMP_LT = auto(); CMP_LE = auto(); CMP_GT = auto(); CMP_GE = auto(); CMP_EQ = auto(); CMP_NE = auto()
    SELECT = auto()         # srcs: (cond u1, a, b)
    # locals
    ALLOCA = auto()         # a mutable local slot, zero-initialised; arg: name
    LOAD = auto()           # srcs: (alloca,)
    STORE = auto()          # srcs: (alloca, value)
    # globals: fields, ndarrays, kernel temporaries; arg: GlobalRef
    GLOBAL_LOAD = auto()    # srcs: indices (one i32 per dimension)
    GLOBAL_STORE = auto()   # srcs: (*indices, value)
    ATOMIC_ADD = auto()     # srcs: (*indices, value); returns the old value
    # the other read-modify-write atomics: same form as ATOMIC_ADD (`ATOMIC_COMBINE` names each
    # one's combining op); MIN / MAX on ints and floats, AND / OR / XOR on ints and u1
    ATOMIC_MIN = auto(); ATOMIC_MAX = auto()
    ATOMIC_AND = auto(); ATOMIC_OR = auto(); ATOMIC_XOR = auto()
    ATOMIC_XCHG = auto()    # stores the value itself (no combining op); returns the old value
    ATOMIC_MUL = auto()     # Taichi's atomic_mul (ints and floats): a compare-and-swap loop
    # structured control flow
    IF = auto()             # srcs: (cond,); blocks: (then, else)
    RANGE_FOR = auto()      # srcs: (begin, end); arg: LoopArg; blocks: (body,)
    WHILE = auto()          # arg: LoopArg; blocks: (body,); runs until BREAK
    BREAK = auto()
    CONTINUE = auto()       # in a task's top-level body: ends this parallel iteration
    CALL = auto()           # an inlined @func region: arg: CallArg; blocks: (body,); gone after inlining
    PRINT = auto()          # srcs: the values printed; arg: format id (spirad.printing); lowered to
                            # global stores before offloading (passes/lower_print)
    # adstack (reverse mode); arg: AdStackArg
    ADSTACK_ALLOCA = auto()
    ADSTACK_PUSH = auto()          # srcs: (stack, value); zeroes the new entry's adjoint
    ADSTACK_POP = auto()           # srcs: (stack,)
    ADSTACK_LOAD_TOP = auto()      # srcs: (stack,)
    ADSTACK_LOAD_TOP_ADJ = auto()  # srcs: (stack,)
    ADSTACK_ACC_ADJ = auto()       # srcs: (stack, value)

    # Members are singletons compared by identity: hash them by identity too, in C. Enum's own
    # `__hash__` is a Python function (hash of the name), called for every `op in GROUP` and
    # {op: ...}[op] of every pass and code generator (5-10% of a compile's Python calls).
    __hash__ = object.__hash__


LEAVES = frozenset({Op.CONST, Op.ARG, Op.LOOP_INDEX, Op.NDARRAY_SHAPE})
FLOAT_UNARY = frozenset({Op.SIN, Op.COS, Op.TAN, Op.TANH, Op.ASIN, Op.ACOS, Op.EXP, Op.LOG,
                         Op.SQRT, Op.RSQRT, Op.FLOOR, Op.LOG1P,
                         Op.EXPM1})  # int operands: cast to float
UNARY = FLOAT_UNARY | {Op.NEG, Op.NOT, Op.BIT_NOT, Op.ABS, Op.STOP_GRAD}
COMPARE = frozenset({Op.CMP_LT, Op.CMP_LE, Op.CMP_GT, Op.CMP_GE, Op.CMP_EQ, Op.CMP_NE})
BINARY = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.FLOORDIV, Op.MOD, Op.POW, Op.ATAN2, Op.MIN,
                    Op.MAX, Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR}) | COMPARE
BITWISE = frozenset({Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR, Op.BIT_NOT})
PURE = LEAVES | UNARY | BINARY | {Op.CAST, Op.BITCAST, Op.SELECT}
LOOPS = frozenset({Op.RANGE_FOR, Op.WHILE})
CONTROL = LOOPS | {Op.IF, Op.CALL}
STATEMENTS = frozenset({Op.CALL, Op.PRINT, Op.STORE, Op.GLOBAL_STORE, Op.IF, Op.RANGE_FOR, Op.WHILE, Op.BREAK,
                        Op.CONTINUE, Op.ADSTACK_PUSH, Op.ADSTACK_POP, Op.ADSTACK_ACC_ADJ})
# every atomic read-modify-write -> the binary op it applies (new = combine(old, value))
ATOMIC_COMBINE = {Op.ATOMIC_ADD: Op.ADD, Op.ATOMIC_MIN: Op.MIN, Op.ATOMIC_MAX: Op.MAX,
                  Op.ATOMIC_AND: Op.AND, Op.ATOMIC_OR: Op.OR, Op.ATOMIC_XOR: Op.XOR,
                  Op.ATOMIC_XCHG: None, Op.ATOMIC_MUL: Op.MUL}
ATOMICS = frozenset(ATOMIC_COMBINE)
GLOBAL_ACCESS = frozenset({Op.GLOBAL_LOAD, Op.GLOBAL_STORE}) | ATOMICS
SIDE_EFFECTS = STATEMENTS | ATOMICS
