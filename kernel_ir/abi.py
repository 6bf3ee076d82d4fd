"""The calling convention shared by every backend: how a kernel sees its buffers and arguments.

`kernel_abi(task_list)` fixes, once per compiled kernel:

* `bindings`: every GlobalRef the tasks touch (their bodies, and the bounds of range tasks that
  read globals: `range(n[None])`), in a stable order. Buffer `k` of a launch holds
  `bindings[k]`, laid out in C order with the ref's dtype (u1 as a 4-byte 0/1).
* the argument buffer: one 8-byte slot per scalar argument at `arg_offsets[i]` (the value stored
  with the argument's dtype at the start of its slot), followed by one 8-byte slot per
  (ndarray argument, axis) pair in `shape_offsets` holding that axis' extent as an int32 at the
  start of the slot. Ndarray shapes include vector/matrix component axes.

`pack_args` / `unpack_args` write and read that buffer (the launch path, the reference
interpreter backend, host-evaluated ranges and the code generators' test harnesses all use them).

This module is the one definition of every wire format shared by host and device (engineering 15; a
test fails if these constants are defined anywhere else): the argument buffer above, the status
words a kernel reports errors in (`STATUS_*`, `StatusWord`, `decode_status`), the push constants
of a SPIR-V task (`PUSH_CONSTANTS`), the extra LLVM buffers (`LLVM_EXTRA_BUFFERS`) and the range
arguments a device-evaluated parallel loop writes (`RangeArg`). Backends add their own fixed
buffers (status, adstack heaps) after the kernel's; see each backend.

Status words (u32; zeroed by the host; the first error wins: a compare-and-swap of word CODE from
0, or on profiles without compare-exchange an atomic ticket in word TICKET)
-------------------------------------------------------------------------------------------------
    CODE     STATUS_ADSTACK_OVERFLOW (1) / STATUS_LOOP_CAP (2) / STATUS_INDEX_OUT_OF_RANGE (3) /
             STATUS_OUT_OF_BOUNDS (4: the default check, without debug; TASK and AUX only)
    TASK     the task index
    AUX      overflow: the stack index; index out of range / out of bounds: the binding k
             (abi.bindings[k])
    VALUE_LO index out of range: the offending axis value, bits 0..31
    AXIS     index out of range: that axis
    EXTENT   index out of range: the axis' extent (low 32 bits)
    VALUE_HI index out of range: the axis value, bits 32..63
    SITE     index out of range: the access's position among the task's GLOBAL_LOAD /
             GLOBAL_STORE / atomic nodes in `walk` order
    TICKET   the first-error ticket (SPIR-V profiles without compare-exchange)
`STATUS_WORDS` words in all (the status buffer of every backend holds at least that many).

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
    status     the status words (below) on both backends (LLVM: bufs[n+3]; SPIR-V: binding 1);
               first error wins.
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

import functools
import struct
from dataclasses import dataclass
from enum import IntEnum

from .nodes import ArgSpec, GlobalRef, TaskList, walk
from .ops import GLOBAL_ACCESS, Op
from .rewrite import expr_nodes


@dataclass(frozen=True)
class KernelABI:
    bindings: tuple          # GlobalRef per buffer, in order
    arg_offsets: tuple       # per kernel argument: byte offset of its slot or -1 (not a scalar)
    shape_offsets: tuple     # ((ndarray arg index, axis, byte offset), ...)
    arg_buffer_size: int
    # per task: its range reads globals (`for i in range(n[None])`), so it is read when the task
    # starts: the launch plan has no range for it (`LaunchPlan.ranges[task]` is None) and each
    # backend reads it there (`spirad.backends.range_bounds`). Decided here, once per program.
    device_ranges: tuple = ()

    def binding_index(self, ref: GlobalRef) -> int:
        i = self._lookups[0].get(_key(ref))
        if i is None:
            raise RuntimeError(f"{ref!r} is not bound by this kernel")
        return i

    def shape_offset(self, arg: int, axis: int) -> int:
        off = self._lookups[1].get((arg, axis))
        if off is None:
            raise RuntimeError(f"no shape slot for ndarray arg {arg} axis {axis}")
        return off

    @functools.cached_property
    def _lookups(self) -> tuple:
        """({buffer key: its first binding index}, {(arg, axis): shape slot offset}), built on
        first use: the code generator asks once per access, and a Genesis ndarray kernel has
        hundreds of bindings and shape slots (a scan per access was ~1 s of a cold build)."""
        bindings, shapes = {}, {}
        for i, r in enumerate(self.bindings):
            bindings.setdefault(_key(r), i)
        for a, ax, off in self.shape_offsets:
            shapes.setdefault((a, ax), off)
        return bindings, shapes

    def __getstate__(self):  # pickled without the lookups (built again on first use)
        return {k: v for k, v in self.__dict__.items() if k != "_lookups"}

    def pack_args(self, args, scalars, extent) -> bytearray:
        """The argument buffer: `args` the kernel's ArgSpecs, `scalars[i]` the value of scalar
        argument i (in range of its dtype; u1 as a 4-byte 0/1), `extent(arg, axis)` an ndarray
        argument's axis length."""
        buf = bytearray(self.arg_buffer_size)
        for i, spec in enumerate(args):
            if self.arg_offsets[i] >= 0:
                self.pack_scalar(buf, i, spec.dtype, scalars[i])
        for a, ax, off in self.shape_offsets:
            struct.pack_into(EXTENT_FORMAT, buf, off, extent(a, ax))
        return buf

    def pack_scalar(self, buf: bytearray, i: int, dtype, v) -> None:
        """Write scalar argument i's value `v` (of `dtype`) into the argument buffer `buf`."""
        struct.pack_into(SCALAR_FORMAT[dtype.name], buf, self.arg_offsets[i],
                         bool(v) if dtype.is_bool else v)

    def unpack_args(self, args, argbuf) -> tuple:
        """(scalar argument values, None for other arguments; {ndarray arg: {axis: extent}})."""
        scalars = [struct.unpack_from(SCALAR_FORMAT[spec.dtype.name], argbuf, self.arg_offsets[i])[0]
                   if self.arg_offsets[i] >= 0 else None for i, spec in enumerate(args)]
        shapes = {}
        for a, ax, off in self.shape_offsets:
            shapes.setdefault(a, {})[ax] = struct.unpack_from(EXTENT_FORMAT, argbuf, off)[0]
        return scalars, shapes


ARG_SLOT_BYTES = 8  # one slot per scalar argument and per (ndarray argument, axis)
SCALAR_FORMAT = {"f32": "<f", "f64": "<d", "i32": "<i", "i64": "<q", "u32": "<I", "u64": "<Q",
                 "u1": "<I", "f16": "<e", "i8": "<b", "u8": "<B", "i16": "<h", "u16": "<H"}  # a scalar argument at the start of its slot (struct format)
EXTENT_FORMAT = "<i"        # an ndarray axis extent at the start of its slot
OFFSET_WORD_FORMAT = "<I"   # SPIR-V programs: a root / arena element offset word after the
                            # argument block (`spirv_codegen.buffers`: which word is whose)


def pack_offset_words(words) -> bytes:
    """A SPIR-V program's argument tail: its root / arena element offset words, appended to the
    argument buffer (`spirv_codegen.buffers.offset_words` says which word is whose)."""
    return b"".join(struct.pack(OFFSET_WORD_FORMAT, w) for w in words)


def offset_word(tail: bytes, index: int) -> int:
    """Word `index` of an argument tail (`pack_offset_words`)."""
    return struct.unpack_from(OFFSET_WORD_FORMAT, tail, 4 * index)[0]


def patch_offset_words(tail: bytes, words) -> bytes:
    """`tail` (`pack_offset_words`) with the word at byte `pos` set to `value`, for each
    (pos, value) of `words`: the element offsets of ndarrays placed in an arena, known at
    launch."""
    out = bytearray(tail)
    for pos, value in words:
        struct.pack_into(OFFSET_WORD_FORMAT, out, pos, value)
    return bytes(out)


# -- status words -----------------------------------------------------------------------------
STATUS_OK = 0
STATUS_ADSTACK_OVERFLOW = 1   # an ADSTACK_PUSH found its stack full
STATUS_LOOP_CAP = 2           # an invocation would pass the driver's loop-iteration cap (lavapipe)
STATUS_INDEX_OUT_OF_RANGE = 3  # a bounds-checked global access (init(debug=True))
STATUS_OUT_OF_BOUNDS = 4      # the default (cheap) bounds check: an access out of its buffer was
                              # skipped; words TASK and AUX (the binding k) only


class StatusWord(IntEnum):
    CODE = 0
    TASK = 1
    AUX = 2
    VALUE_LO = 3
    AXIS = 4
    EXTENT = 5
    VALUE_HI = 6
    SITE = 7
    TICKET = 8


STATUS_WORDS = 9
STATUS_GUARD = 256  # SPIR-V root buffers: unused bytes either side of the status words (and of
                    # kernel temporaries): an off-by-one user write never lands on them
STATUS_BYTES = (4 * STATUS_WORDS + 7) & ~7  # the bytes reserved for them: a multiple of 8, so
                                            # what follows them stays 8-byte aligned


@dataclass(frozen=True)
class Status:
    """A decoded status: `code` (0: none), `task`, and per code `stack` (adstack overflow) or
    `binding`, `value`, `axis`, `extent`, `site` (index out of range)."""
    code: int
    task: int
    aux: int
    value: int
    axis: int
    extent: int
    site: int

    @property
    def stack(self) -> int:
        return self.aux

    @property
    def binding(self) -> int:
        return self.aux


def decode_status(words) -> Status:
    """The status in `words` (STATUS_WORDS u32, or at least the first 8)."""
    w = [int(x) for x in words]
    value = (w[StatusWord.VALUE_HI] << 32) | w[StatusWord.VALUE_LO]
    if value >= 1 << 63:
        value -= 1 << 64
    return Status(w[StatusWord.CODE], w[StatusWord.TASK], w[StatusWord.AUX], value,
                  w[StatusWord.AXIS], w[StatusWord.EXTENT], w[StatusWord.SITE])


# -- LLVM task functions: buffers after the kernel's own (bufs[n + k], n = len(abi.bindings)) ---
LLVM_EXTRA_BUFFERS = ("meta", "heap_float", "heap_int", "status")
LLVM_META, LLVM_HEAP_FLOAT, LLVM_HEAP_INT, LLVM_STATUS = range(len(LLVM_EXTRA_BUFFERS))


# -- SPIR-V push constants of a task: (name, struct format), in order -------------------------
PUSH_CONSTANTS = (("begin", "i"), ("end", "i"), ("threads_per_row", "I"))
PUSH_CONSTANT_FORMAT = "<" + "".join(f for _, f in PUSH_CONSTANTS)
PUSH_CONSTANT_BYTES = struct.calcsize(PUSH_CONSTANT_FORMAT)


pack_push_constants = struct.Struct(PUSH_CONSTANT_FORMAT).pack
"""pack_push_constants(begin, end, threads_per_row) -> bytes: a task's push constants (the bound
`Struct.pack`: no Python frame of its own, it runs at every dispatch)."""


# -- the range arguments of a device-evaluated parallel loop (u32 words) -----------------------
class RangeArg(IntEnum):
    """[groups x, groups y, groups z, begin, end]: an indirect dispatch's workgroup counts (the
    first three words, as vkCmdDispatchIndirect / dispatch_workgroups_indirect read them) and
    the range the task then reads."""
    GROUPS_X = 0
    GROUPS_Y = 1
    GROUPS_Z = 2
    BEGIN = 3
    END = 4


RANGE_ARGS_WORDS = len(RangeArg)
MAX_GROUPS_X = 65535  # workgroups per dispatch dimension every Vulkan device allows


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
            off += ARG_SLOT_BYTES
        else:
            arg_offsets.append(-1)
    shape_offsets = []
    for i, a in enumerate(tl.args):
        if a.kind == "ndarray":
            for ax in range(a.ndim):
                shape_offsets.append((i, ax, off))
                off += ARG_SLOT_BYTES
    return KernelABI(bindings, tuple(arg_offsets), tuple(shape_offsets), max(off, 8),
                     tuple(_reads_globals(t) for t in tl.tasks))


def _reads_globals(task) -> bool:
    """Does this task's range read globals (evaluated when the task starts)?"""
    return task.kind == "range" and any(
        n.op == Op.GLOBAL_LOAD for b in (task.begin, task.end) for n in expr_nodes(b))


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
