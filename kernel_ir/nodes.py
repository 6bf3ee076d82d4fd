"""IR nodes: one immutable node type, blocks, and the containers that hold a kernel.

A `Node` is `(op, dtype, srcs, arg, blocks)`. Nodes are compared by identity (two `CONST 1` nodes
are distinct nodes), so a node can be used as a dict key and as an SSA name. A `Block` is the
ordered tuple of nodes of one region; its order is the execution order. A node may reference, as
a source, any node that appears earlier in its own block or in an enclosing block (dominance of
structured code); the verifier checks this.

Locals are explicit slots (`ALLOCA`, `LOAD`, `STORE`), which serves both SPIR-V (Function
variables) and LLVM (alloca + mem2reg). Loops are structured and list their loop-carried locals
explicitly in `LoopArg.carried`: the slots the body stores that a later iteration (or code after
the loop) may read.

After offloading a kernel is a `TaskList`: each `Task` is either a parallel range loop whose body
runs once per index, or a serial one-thread body.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any, Optional

from .dtypes import DType
from .ops import ATOMICS, Op


@dataclass(frozen=True)
class SrcLoc:
    """Where a node came from in the user's source: used for error messages."""
    filename: str
    lineno: int
    col: int
    end_col: int
    line_text: str
    func_name: str = ""


@dataclass(frozen=True, eq=False)
class Node:
    op: Op
    dtype: Optional[DType] = None
    srcs: tuple = ()
    arg: Any = None
    blocks: tuple = ()
    loc: Optional[SrcLoc] = None

    def __repr__(self) -> str:  # short form; the printer gives the full form
        return f"<{self.op.name} {self.dtype} #{id(self) % 100000}>"


@dataclass(frozen=True)
class Block:
    nodes: tuple = ()

    def __iter__(self):
        return iter(self.nodes)

    def __len__(self):
        return len(self.nodes)


VERSIONED = "versioned"
"""The arg of an IF that passes/bounds_versioning made: `if guard: copy else: original`, the
else block the region as it was, every access checked, run only where the guard failed. A code
generator may compile that block cheaply (llvm_codegen/cold_copy); any other IF has arg None."""


AT_LAUNCH = ".at_launch"
"""The name suffix of a sparse struct-for's snapshot: a copy of a node's activation masks (list
lengths) a step before the loop writes, which the loop's activity test reads instead of the
masks its own body changes (spirad/frontend/sparse_ops.py). Reverse mode refuses such a loop
(passes/autodiff/sparse_activity.py): the adjoint cannot know which cells the forward visited."""


def is_snapshot(ref) -> bool:
    """`ref` names a struct-for's copy of a sparse node's masks (`AT_LAUNCH`)."""
    return ref.kind == "field" and ref.name.endswith(AT_LAUNCH)


@dataclass(frozen=True)
class GlobalRef:
    """A global array a kernel reads or writes.

    kind: 'field' (key = field id; shape static), 'ndarray' (key = kernel argument index; shape at
    run time, `shape` is None) or 'temp' (key = slot; a per-kernel scratch buffer holding values
    handed from one task to the next). `grad` selects the gradient buffer of an ndarray or temp,
    `dual` the forward-mode tangent buffer of an ndarray (fields' gradients and duals are fields
    of their own). Element layout is C order over all `ndim` dimensions, vector/matrix
    components included.

    `mask` (0: the whole element) names a bit-field of an unsigned-int element (a word of a
    quantized type's bit-packed storage, spirad.data.quant): an atomic on such a ref changes only
    the masked bits (XCHG sets them to the value's, ADD adds the value and wraps inside them),
    as one compare-and-swap of the word, and returns the whole old word. Loads and plain
    stores never carry a mask.
    """
    kind: str
    key: int
    dtype: DType
    ndim: int
    shape: Optional[tuple] = None
    name: str = ""
    grad: bool = False
    dual: bool = False
    mask: int = 0

    @property
    def buffer(self) -> tuple:
        """Which buffer this ref names: (kind, key, False | True (its grad) | 'dual')."""
        return (self.kind, self.key, "dual" if self.dual else self.grad)

    def __repr__(self) -> str:
        g = ".dual" if self.dual else (".grad" if self.grad else "")
        m = f"&{self.mask:#x}" if self.mask else ""
        return f"{self.kind}:{self.name or self.key}{g}{m}"


@dataclass(frozen=True, eq=False)
class LoopArg:
    """Payload of RANGE_FOR / WHILE: the index leaf (RANGE_FOR only) and the carried slots.
    The other fields are keyword-only: a field added among them once shifted a positional
    `trips` into the new field, and reverse mode silently lost its trip counts (a wrong
    gradient for loops with `break`). Passes copy a payload with `dataclasses.replace`."""
    index: Optional[Node]
    carried: tuple = ()
    _: KW_ONLY
    static_trips: Optional[int] = None   # known trip count (RANGE_FOR with constant bounds)
    parallel: bool = False               # the kernel's outermost loop: becomes a task
    trips: Optional[Node] = None         # reverse mode: slot counting executed iterations
    serialised: bool = False             # parallel, though written serialised (Task.serialised)
    lanes: bool = False                  # made parallel for its SIMD lanes (Task.lanes)


@dataclass(frozen=True)
class CallArg:
    """Payload of CALL: which @func this region came from (for diagnostics)."""
    name: str


@dataclass(frozen=True, eq=False)
class AdStackArg:
    """Payload of ADSTACK_* nodes: the stack (its ADSTACK_ALLOCA) and its element type."""
    name: str
    capacity: Any = None  # sizer SizeExpr once sizing ran
    required: Any = None  # the automatic size (differs from `capacity` when a size is forced)
    adjoint_in_heap: bool = True  # float stacks: adjoints in the heap's adjoint half (else the
                                  # adjoint of the top lives in a local: passes/autodiff/stack_tops)
    measured: int = -1    # >= 0: no size expression; the launch's counting pass measures the
                          # capacity into its counter `measured` (passes/autodiff/counting)


@dataclass(frozen=True)
class ArgSpec:
    """A kernel argument: 'scalar' (dtype), 'ndarray' (dtype, ndim, needs_grad, order) or
    'template'. `order`: an ndarray's storage order of its axes (Quadrants' `layout=`), None
    where canonical; its accesses index the storage, errors name the canonical axes."""
    name: str
    kind: str
    dtype: Optional[DType] = None
    ndim: int = 0
    needs_grad: bool = False
    order: Optional[tuple] = None


@dataclass(frozen=True)
class KernelIR:
    """A kernel before offloading: its arguments and its top-level body."""
    name: str
    args: tuple
    body: Block
    loc: Optional[SrcLoc] = None


@dataclass(frozen=True)
class Task:
    """One launch unit. kind 'range': `body` runs for `index` in [begin, end) in parallel, with
    `begin`/`end` pure expressions over CONST, ARG, NDARRAY_SHAPE and integer arithmetic, and
    possibly GLOBAL_LOADs (a range read from fields / ndarrays / temporaries, evaluated when the
    task starts: spirad.backends.range_bounds); kind 'serial': `body` runs once on one thread (index/begin/end are None).
    `ordered` (range tasks): the iterations run one after another in index order, never two at
    once (`sd.init(deterministic=True)` on devices that cap an invocation's loops:
    passes/deterministic.py); every buffer is then iteration-private.
    `proven`: global accesses of `body` a pass proved in range (passes/bounds_versioning: the
    copy of a loop that runs only when a guard before it held); the default bounds checks skip
    them (`kernel_ir.index_range`).
    `serialised` (range tasks): a loop written serialised that passes/independent_loops made
    parallel; the CPU code generator keeps such a task scalar where its body holds a loop
    (`llvm_codegen.codegen.spmd_choice`) unless `lanes`: the pass made it parallel for its
    SIMD lanes (`work_estimate.worth_lanes`: a heavy body over many iterations)."""
    kind: str
    body: Block
    index: Optional[Node] = None
    begin: Optional[Node] = None
    end: Optional[Node] = None
    name: str = ""
    loc: Optional[SrcLoc] = None
    ordered: bool = False
    proven: frozenset = frozenset()
    serialised: bool = False
    lanes: bool = False


@dataclass(frozen=True)
class TaskList:
    name: str
    args: tuple
    tasks: tuple
    temps: tuple = ()  # GlobalRefs of kind 'temp' (one element each) handed between tasks


def walk(block: Block):
    """Yield every node of `block` in execution order, descending into nested blocks.

    One generator with a stack of the blocks being walked, not a generator per nesting level: a
    recursive `yield from` passes each node up through every enclosing level (Genesis' ndarray
    `kernel_detection`, ~9 levels deep on average, made the compile's walks 68 M generator
    steps for 7.7 M nodes)."""
    stack = [iter(block.nodes)]
    while stack:
        for n in stack[-1]:
            yield n
            if n.blocks:  # its blocks next, in order, then the rest of this one
                stack.extend([iter(b.nodes) for b in reversed(n.blocks)])
                break
        else:
            stack.pop()


def globals_used(block: Block) -> tuple[set, set]:
    """(read, written) sets of GlobalRef in a block."""
    reads, writes = set(), set()
    for n in walk(block):
        if n.op == Op.GLOBAL_LOAD:
            reads.add(n.arg)
        elif n.op == Op.GLOBAL_STORE or n.op in ATOMICS:
            writes.add(n.arg)
            if n.op in ATOMICS:
                reads.add(n.arg)
    return reads, writes


def readonly_fields(*blocks: Block) -> frozenset:
    """The buffers (`GlobalRef.buffer`) of the fields the blocks read and never write (no store,
    no atomic). Fields never alias one another (ndarray arguments may be one array twice), so
    such a read gives the same value wherever a kernel, or its adjoint (which writes gradients
    only), repeats it."""
    read, written = set(), set()
    for b in blocks:
        r, w = globals_used(b)
        read |= {g.buffer for g in r if g.kind == "field"}
        written |= {g.buffer for g in w}
    return frozenset(read - written)


def carried_slots(body: Block) -> tuple:
    """Slots stored inside `body` but allocated outside it: the loop-carried locals."""
    inner, stored = set(), {}  # a dict: the slots in first-store order, each once
    for n in walk(body):
        if n.op == Op.ALLOCA:
            inner.add(n)
        elif n.op == Op.STORE:
            stored.setdefault(n.srcs[0])
    return tuple(s for s in stored if s not in inner)
