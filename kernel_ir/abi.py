"""The calling convention shared by every backend: how a kernel sees its buffers and arguments.

`kernel_abi(task_list)` fixes, once per compiled kernel:

* `bindings`: every GlobalRef the tasks touch (their bodies, and the bounds of range tasks that
  read globals: `range(n[None])`), in a stable order. Buffer `k` of a launch holds
  `bindings[k]`, laid out in C order with the ref's dtype (u1 as a 4-byte 0/1).
* the argument buffer: one 8-byte slot per scalar argument at `arg_offsets[i]` (the value stored
  with the argument's dtype at the start of its slot), followed by one 8-byte slot per
  (ndarray argument, axis) pair in `shape_offsets` holding that axis' extent as an int32 at the
  start of the slot. Ndarray shapes include vector/matrix component axes.

Backends add their own fixed buffers (status, adstack heaps) after these; see each backend.

Adstack ABI (tasks containing ADSTACK_* nodes; reverse mode)
------------------------------------------------------------
* Stacks of a task are numbered k = 0..S-1 in the order their ADSTACK_ALLOCA nodes appear in
  `walk(task.body)` (`adstack_allocas(task)`). Stack k holds elements of its ALLOCA's dtype;
  it is a *float* stack if the dtype is a float, else an *int* stack (u1 entries take 4 bytes).
  Entry size = dtype.nbytes. A float stack whose AdStackArg says `adjoint_in_heap=False` is a
  *primal* stack: reverse mode keeps the adjoint of its top entry in a local
  (`passes/autodiff/stack_tops`), so it has no adjoint entries (`adstack_kind`).
* Three extra buffers, per launch of such a task, appended after the kernel's own buffers (LLVM:
  `bufs[n]`, `bufs[n+1]`, `bufs[n+2]`, `bufs[n+3]` with n = len(abi.bindings); SPIR-V: bindings
  2+n, 3+n, 4+n — SPIR-V's status buffer stays at binding 1):
    meta       u32 words: [stride_float, stride_int, off_0, cap_0, off_1, cap_1, ...]
               (sizer.layout.Layout.metadata()): strides in bytes of one row of each heap;
               off_k = byte offset of stack k's entries inside its heap's row; cap_k = capacity
               in entries.
    heap_float rows x stride_float bytes. Stack k (float) primal entry i at
               row*stride_float + off_k + i*esize; its adjoint entry i at
               row*stride_float + off_k + align8(cap_k*esize) + i*esize (primal stacks: none).
    heap_int   rows x stride_int bytes. The layout reserves an 8-byte slot per stack k at
               row*stride_int + 8*k that no backend writes: a stack's entry count is
               private to its thread / invocation and lives in a function-local variable (LLVM:
               an entry-block alloca; SPIR-V: a Function-storage variable), which ADSTACK_ALLOCA
               sets to 0. Int stack k's entry i at row*stride_int + off_k + i*esize.
    status     u32 words [code, task index, stack index, 0] on both backends (LLVM: bufs[n+3];
               SPIR-V: binding 1); first error wins.
  `row`: LLVM = the `worker` argument of the task function; SPIR-V = the invocation's linear id
  within the dispatch (the runtime splits a range into dispatches of at most `rows` threads).
* Semantics: ADSTACK_ALLOCA sets the count to 0. PUSH at count == cap records
  (code 1 = ADSTACK_OVERFLOW, task index, k) in the status buffer and writes nothing (count stays);
  otherwise writes the primal, zeroes the adjoint ('float' kind only) and increments the count.
  POP decrements a non-zero count. LOAD_TOP / LOAD_TOP_ADJ / ACC_ADJ address entry max(count-1, 0) (never out of
  bounds, even after an overflow); with cap == 0 they read 0 and write nothing. Int stacks have
  no adjoints: LOAD_TOP_ADJ on an int stack reads 0 (no memory access); ACC_ADJ on an int stack is
  invalid (a compile error), and so are LOAD_TOP_ADJ and ACC_ADJ on a primal stack.
"""
from __future__ import annotations

from dataclasses import dataclass

from .nodes import ArgSpec, GlobalRef, TaskList, walk
from .ops import GLOBAL_ACCESS, Op
from .rewrite import expr_nodes


@dataclass(frozen=True)
class KernelABI:
    bindings: tuple          # GlobalRef per buffer, in order
    arg_offsets: tuple       # per kernel argument: byte offset of its slot or -1 (not a scalar)
    shape_offsets: tuple     # ((ndarray arg index, axis, byte offset), ...)
    arg_buffer_size: int

    def binding_index(self, ref: GlobalRef) -> int:
        k = _key(ref)
        for i, r in enumerate(self.bindings):
            if _key(r) == k:
                return i
        raise RuntimeError(f"{ref!r} is not bound by this kernel")

    def shape_offset(self, arg: int, axis: int) -> int:
        for a, ax, off in self.shape_offsets:
            if a == arg and ax == axis:
                return off
        raise RuntimeError(f"no shape slot for ndarray arg {arg} axis {axis}")


def _key(ref: GlobalRef) -> tuple:
    return ref.buffer


def _sort_key(ref: GlobalRef):
    return ({"field": 0, "ndarray": 1, "temp": 2}[ref.kind], ref.key, ref.grad, ref.dual)


def kernel_abi(tl: TaskList) -> KernelABI:
    refs = set(tl.temps)
    for t in tl.tasks:
        bounds = expr_nodes(t.begin) + expr_nodes(t.end) if t.kind == "range" else []
        for n in list(walk(t.body)) + bounds:
            if n.op in GLOBAL_ACCESS:
                refs.add(n.arg)
    # ndarray refs of the same argument may differ in name only: dedupe by identity fields
    uniq = {}
    for r in refs:
        uniq.setdefault(_key(r), r)
    bindings = tuple(sorted(uniq.values(), key=_sort_key))
    off = 0
    arg_offsets = []
    for a in tl.args:
        a: ArgSpec
        if a.kind == "scalar":
            arg_offsets.append(off)
            off += 8
        else:
            arg_offsets.append(-1)
    shape_offsets = []
    for i, a in enumerate(tl.args):
        if a.kind == "ndarray":
            for ax in range(a.ndim):
                shape_offsets.append((i, ax, off))
                off += 8
    return KernelABI(bindings, tuple(arg_offsets), tuple(shape_offsets), max(off, 8))


def adstack_allocas(task) -> list:
    """The ADSTACK_ALLOCA nodes of a task, in stack-number order."""
    return [n for n in walk(task.body) if n.op == Op.ADSTACK_ALLOCA]


def adstack_kind(alloca) -> str:
    """The stack's layout kind (`sizer.layout`): 'float' (primal and adjoint entries), 'primal'
    (a float stack whose top adjoint lives in a local: `AdStackArg.adjoint_in_heap` is False) or
    'int'."""
    if not alloca.dtype.is_float:
        return "int"
    return "float" if alloca.arg.adjoint_in_heap else "primal"
