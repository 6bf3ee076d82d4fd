"""ADSTACK_* lowering: reverse-mode stacks in per-invocation heap rows.

Implements the "Adstack ABI" of `kernel_ir/abi.py` (the contract; read it first) in the portable
Vulkan subset: plain storage buffers through descriptors, no buffer device addresses, no variable
pointers, no Int64 unless a stack itself holds i64.

Bindings of a task that contains ADSTACK_* nodes (n = len(abi.bindings)), all in set 0, all
storage buffers declared as runtime arrays of u32 words (ArrayStride 4):

  2+n  AdStackMeta       [stride_float, stride_int, off_0, cap_0, off_1, cap_1, ...]
                         = `sizer.layout.Layout.metadata()` of this task's stacks, as u32.
  3+n  AdStackHeapFloat  rows x stride_float bytes (f32 entry = 1 word, f64 entry = 2 words,
                         little-endian, bitcast).
  4+n  AdStackHeapInt    rows x stride_int bytes: the S counter slots (unused here, see
                         Counters), then the int stacks' entries (i32/u32 = 1 word bitcast,
                         i64 = 2 words, u1 = one word 0/1).

Profiles with `single_heap` (Metal: one buffer fewer) bind one buffer at 3+n, AdStackHeap, whose
row is the float row followed by the int row: float word(row, b) = row * ((stride_float +
stride_int) >> 2) + (b >> 2), int words start stride_float >> 2 later; num_bindings = 2 + n + 2.

A module declares only the buffers it touches (e.g. no AdStackHeapFloat without float stacks),
but its pipeline layout has all `SpirvTask.num_bindings` = 2 + n + 3 bindings, and the runtime
must bind a buffer (at least 4 bytes) to each of them. Tasks without adstacks keep
`num_bindings` = 2 + n. `SpirvTask.adstacks` lists the stacks' dtypes in ABI order and
`SpirvTask.adstack_kinds` their layout kinds (what `sizer.compute_layout` needs besides the
capacities).

`row` = the invocation's linear id within the dispatch (`Interface.linear_id`); the runtime splits
a range task into dispatches of at most `rows` threads (push constants begin/end per chunk), so
row < rows. A serial task uses row 0. The shader does not check row < rows.

Addressing: every byte offset/stride of the layout is a multiple of 8 and entry sizes are 4 or 8,
so everything is done in u32 word indices: word(row, byte) = row * (stride >> 2) + (byte >> 2).
The heaps must therefore stay below 16 GiB (word indices are u32); Vulkan's
maxStorageBufferRange keeps them far below that.

Counters: a stack's entry count is private to the invocation, so it lives in a u32 Function-
storage variable (zero-initialised, set to 0 by ADSTACK_ALLOCA; drivers promote it to a register),
not in the heap: the ops touch heap memory only for the entries. The layout's 8-byte counter slots
at byte 8*k of each int row stay in place and are never read or written. Counts never exceed
cap_k (a u32), hence no Int64. Every meta word, row base and per-stack base/capacity is computed
once in the entry block's prologue (`Interface.prologue`), not per op.

Semantics (exactly the ABI):
  ALLOCA        count := 0 (both words).
  PUSH v        if count < cap: entry[count] := v, adjoint[count] := 0 (float stacks with heap
                adjoints), count := count + 1; else nothing is written and execution
                continues; the invocation remembers the first such stack k in a Function
                variable and, before it returns, writes status (binding 1) words
                [1 = STATUS_ADSTACK_OVERFLOW, task index, k] if word 0 was still 0
                (compare-exchange). (An atomic on the push path would cost every push on
                lavapipe, which executes both sides of a branch under a lane mask.)
  POP           count := count - 1 if count != 0.
  LOAD_TOP, LOAD_TOP_ADJ, ACC_ADJ
                address entry t = max(count, 1) - 1 (< cap: only PUSH raises the count, and only
                below cap); cap == 0: the loads give 0 and ACC_ADJ writes nothing (the entry
                access sits in a branch, so no out-of-bounds access is even executed).
A float stack with `adjoint_in_heap=False` (layout kind 'primal': reverse mode keeps its top
adjoint in a Function variable) has no adjoint entries: PUSH writes only the primal, and
LOAD_TOP_ADJ / ACC_ADJ on it are an internal error.
Int stacks have no adjoints: LOAD_TOP_ADJ on one is the constant 0 (no memory access; reverse mode
emits it when it undoes a STORE to an int/bool local and never uses the value — as in the LLVM
backend and the interpreter, whose int entries keep a zero adjoint), ACC_ADJ on one is a compile
error. A load whose node dtype differs from the stack's is converted like a CAST.
"""
from __future__ import annotations

from kernel_ir.abi import STATUS_ADSTACK_OVERFLOW, adstack_allocas
from kernel_ir.dtypes import f64, u1, u32

from .interface import FIRST_ARRAY_BINDING
from .lower_math import lower_cast

META_NAME = "AdStackMeta"
HEAP_FLOAT_NAME = "AdStackHeapFloat"
HEAP_INT_NAME = "AdStackHeapInt"
HEAP_NAME = "AdStackHeap"  # both heaps in one buffer (single_heap)


def adstack_bindings(num_arrays: int, single_heap: bool = False,
                     first: int = FIRST_ARRAY_BINDING) -> tuple[int, int, int]:
    """(meta, heap_float, heap_int) binding numbers for a kernel with `num_arrays` arrays from
    binding `first` (`buffers.BufferMap.first_array`); with `single_heap` (profile.py) both
    heaps are one buffer, each row the float row then the int row."""
    b = first + num_arrays
    return (b, b + 1, b + 1) if single_heap else (b, b + 1, b + 2)


class AdStacks:
    """Per-task lowering state of the ADSTACK_* ops (created by TaskLowerer when needed)."""

    def __init__(self, L):
        self.L, self.E, self.io = L, L.E, L.io
        self.allocas = adstack_allocas(L.task)
        self.index = {n: k for k, n in enumerate(self.allocas)}
        self.single = L.E.profile.single_heap
        self.b_meta, self.b_float, self.b_int = adstack_bindings(L.io.bmap.num_arrays, self.single,
                                                                 L.io.bmap.first_array)
        self.io.buffer_names.update({self.b_meta: META_NAME, self.b_float: HEAP_FLOAT_NAME,
                                     self.b_int: HEAP_INT_NAME})
        if self.single:
            self.io.buffer_names[self.b_float] = HEAP_NAME
        self._counts: dict[int, int] = {}  # stack k -> its Function-storage u32 count variable
        self._overflow = None  # Function u32: 1 + the first stack that overflowed, 0 = none

    def setup(self) -> None:
        """The overflow flag, a zero-initialised Function variable (entry block)."""
        if self._overflow is None:
            E = self.E
            self._overflow = E.fn.variable(E.ty(u32), E.c(0, u32))
            E.m.name(self._overflow, "adstack_overflow")

    def flush_overflow(self) -> None:
        """Before an OpReturn: if a push overflowed, write (STATUS_ADSTACK_OVERFLOW, task, stack)
        to the status buffer (first error wins)."""
        if self._overflow is None:
            return
        E, fn = self.E, self.E.fn
        k1 = E.op("OpLoad", u32, self._overflow)
        failed = E.op("OpINotEqual", u1, k1, E.c(0, u32))
        wr, merge = fn.label(), fn.label()
        fn.selection_merge(merge)
        fn.branch_cond(failed, wr, merge)
        fn.begin(wr)
        self.io.write_error_words(STATUS_ADSTACK_OVERFLOW, [
            E.c(self.L.task_index, u32), lambda: E.op("OpISub", u32, k1, E.c(1, u32))])
        fn.branch(merge)
        fn.begin(merge)

    # -- addressing --------------------------------------------------------------------------
    def _ptr(self, binding: int, word: int) -> int:
        return self.io.element_ptr(binding, u32, word)

    def _word(self, binding: int, word: int) -> int:
        return self.E.op("OpLoad", u32, self._ptr(binding, word))

    def _meta(self, w: int) -> int:
        E = self.E
        return self.io.prologue(("adstack_meta", w), lambda: self._word(self.b_meta, E.c(w, u32)))

    def _row_base(self, is_float: bool) -> int:
        """First word of this invocation's row in the float / int heap."""
        E = self.E

        def make():
            if self.single:  # one row = float row, then int row
                row = E.op("OpShiftRightLogical", u32,
                           E.op("OpIAdd", u32, self._meta(0), self._meta(1)), E.c(2, u32))
                base = E.op("OpIMul", u32, self.io.linear_id(), row)
                if is_float:
                    return base
                return E.op("OpIAdd", u32, base,
                            E.op("OpShiftRightLogical", u32, self._meta(0), E.c(2, u32)))
            stride_w = E.op("OpShiftRightLogical", u32, self._meta(0 if is_float else 1),
                            E.c(2, u32))
            return E.op("OpIMul", u32, self.io.linear_id(), stride_w)
        return self.io.prologue(("adstack_row", is_float), make)

    def _stack(self, node):
        """(k, dtype, is_float) of the stack whose ADSTACK_ALLOCA is `node`."""
        try:
            k = self.index[node]
        except KeyError:
            raise RuntimeError(f"spirv_codegen: {node!r} is not an ADSTACK_ALLOCA of this task") \
                from None
        return k, node.dtype, node.dtype.is_float

    def _heap_adjoints(self, n, what):
        """(k, dtype) of a float stack with adjoint entries in the heap."""
        k, dt, is_float = self._stack(n.srcs[0])
        if not is_float or not n.srcs[0].arg.adjoint_in_heap:
            kind, why = (("primal", "its adjoints live in a local") if is_float else
                         ("int", "only float stacks have adjoints"))
            raise RuntimeError(f"spirv_codegen: {what} on {kind} stack {n.srcs[0].arg.name!r} "
                               f"({dt}); {why}")
        return k, dt

    def _cap(self, k: int) -> int:
        return self._meta(3 + 2 * k)

    def _count_var(self, k: int) -> int:
        """Pointer to stack k's count: a zero-initialised Function variable (entry block)."""
        if k not in self._counts:
            E = self.E
            v = self._counts[k] = E.fn.variable(E.ty(u32), E.c(0, u32))
            self.E.m.name(v, f"{self.allocas[k].arg.name}_count" if self.allocas[k].arg else
                          f"adstack{k}_count")
        return self._counts[k]

    def _count(self, k: int) -> int:
        return self.E.op("OpLoad", u32, self._count_var(k))

    def _set_count(self, k: int, v: int) -> None:
        self.E.emit("OpStore", self._count_var(k), v)

    def _entries_word(self, k: int, is_float: bool) -> int:
        """Word index of entry 0 of stack k in its heap row."""
        E = self.E
        return self.io.prologue(("adstack_base", k), lambda: E.op(
            "OpIAdd", u32, self._row_base(is_float),
            E.op("OpShiftRightLogical", u32, self._meta(2 + 2 * k), E.c(2, u32))))

    def _adjoint_word(self, k: int, dt) -> int:
        """Word index of adjoint entry 0: entries + align8(cap * esize) / 4."""
        E = self.E

        def make():
            nbytes = E.op("OpIMul", u32, self._cap(k), E.c(dt.nbytes, u32))
            region = E.op("OpBitwiseAnd", u32, E.op("OpIAdd", u32, nbytes, E.c(7, u32)),
                          E.c(0xFFFFFFF8, u32))
            return E.op("OpIAdd", u32, self._entries_word(k, True),
                        E.op("OpShiftRightLogical", u32, region, E.c(2, u32)))
        return self.io.prologue(("adstack_adj", k), make)

    def _elem_word(self, base: int, i: int, dt) -> int:
        E = self.E
        if dt.nbytes == 8:
            i = E.op("OpShiftLeftLogical", u32, i, E.c(1, u32))
        return E.op("OpIAdd", u32, base, i)

    # -- typed entry access ------------------------------------------------------------------
    def _load(self, binding: int, word: int, dt) -> int:
        E = self.E
        lo = self._word(binding, word)
        if dt.nbytes == 4:
            if dt == u1:
                return E.op("OpINotEqual", u1, lo, E.c(0, u32))
            return lo if dt == u32 else E.op("OpBitcast", dt, lo)
        hi = self._word(binding, E.op("OpIAdd", u32, word, E.c(1, u32)))
        return E.join64(lo, hi, dt)

    def _store(self, binding: int, word: int, dt, v: int) -> None:
        E = self.E
        if dt.nbytes == 4:
            if dt == u1:
                v = E.sel(v, E.c(1, u32), E.c(0, u32), u32)
            elif dt != u32:
                v = E.op("OpBitcast", u32, v)
            E.emit("OpStore", self._ptr(binding, word), v)
            return
        lo, hi = E.split64(v, dt)
        E.emit("OpStore", self._ptr(binding, word), lo)
        E.emit("OpStore", self._ptr(binding, E.op("OpIAdd", u32, word, E.c(1, u32))), hi)

    def _heap(self, is_float: bool) -> int:
        return self.b_float if is_float else self.b_int

    # -- structured helpers ------------------------------------------------------------------
    def _if_then(self, cond: int, then):
        """`if cond: then()`; returns (then's result, label ending the then arm, label before)."""
        fn = self.E.fn
        arm, merge = fn.label(), fn.label()
        before = fn.current.label
        fn.selection_merge(merge)
        fn.branch_cond(cond, arm, merge)
        fn.begin(arm)
        v = then()
        end = fn.current.label
        fn.branch(merge)
        fn.begin(merge)
        return v, end, before

    def _top(self, k: int) -> int:
        """max(count, 1) - 1, which is < cap whenever cap != 0 (the only case it is used)."""
        E = self.E
        cnt = self._count(k)
        one = E.c(1, u32)
        return E.op("OpISub", u32, E.sel(E.op("OpIEqual", u1, cnt, E.c(0, u32)), one, cnt, u32),
                    one)

    def _nonempty_cap(self, k: int) -> int:
        E = self.E
        return self.io.prologue(("adstack_hascap", k), lambda: E.op(
            "OpINotEqual", u1, self._cap(k), E.c(0, u32)))

    def _read_top(self, k: int, dt, base: int, heap: int) -> int:
        E = self.E
        v, end, before = self._if_then(
            self._nonempty_cap(k), lambda: self._load(heap, self._elem_word(base, self._top(k), dt),
                                                      dt))
        return E.op("OpPhi", dt, v, end, E.c(0, dt), before)

    # -- ops ---------------------------------------------------------------------------------
    def alloca(self, n) -> None:
        E = self.E
        k, _, _ = self._stack(n)
        self._set_count(k, E.c(0, u32))

    def push(self, n) -> None:
        E, fn = self.E, self.E.fn
        k, dt, is_float = self._stack(n.srcs[0])
        v = self.L.v(n.srcs[1])
        cnt = self._count(k)
        ok = E.op("OpULessThan", u1, cnt, self._cap(k))
        yes, no, merge = fn.label(), fn.label(), fn.label()
        fn.selection_merge(merge)
        fn.branch_cond(ok, yes, no)
        fn.begin(yes)
        self._store(self._heap(is_float), self._elem_word(self._entries_word(k, is_float), cnt, dt),
                    dt, v)
        if is_float and n.srcs[0].arg.adjoint_in_heap:
            self._store(self.b_float, self._elem_word(self._adjoint_word(k, dt), cnt, dt), dt,
                        E.c(0, dt))
        self._set_count(k, E.op("OpIAdd", u32, cnt, E.c(1, u32)))
        fn.branch(merge)
        fn.begin(no)  # overflow: remember the first stack; `flush_overflow` reports it on return
        self.setup()
        old = E.op("OpLoad", u32, self._overflow)
        E.emit("OpStore", self._overflow,
               E.sel(E.op("OpIEqual", u1, old, E.c(0, u32)), E.c(k + 1, u32), old, u32))
        fn.branch(merge)
        fn.begin(merge)

    def pop(self, n) -> None:
        E = self.E
        k, _, _ = self._stack(n.srcs[0])
        cnt = self._count(k)
        nz = E.op("OpINotEqual", u1, cnt, E.c(0, u32))
        self._set_count(k, E.sel(nz, E.op("OpISub", u32, cnt, E.c(1, u32)), cnt, u32))

    def _as_node_dtype(self, n, v: int, dt) -> int:
        want = n.dtype or dt
        return v if want == dt else lower_cast(self.E, v, dt, want)

    def load_top(self, n) -> int:
        k, dt, is_float = self._stack(n.srcs[0])
        v = self._read_top(k, dt, self._entries_word(k, is_float), self._heap(is_float))
        return self._as_node_dtype(n, v, dt)

    def load_top_adj(self, n) -> int:
        _, dt, is_float = self._stack(n.srcs[0])
        if not is_float:
            return self.E.c(0, n.dtype or dt)
        k, dt = self._heap_adjoints(n, "ADSTACK_LOAD_TOP_ADJ")
        v = self._read_top(k, dt, self._adjoint_word(k, dt), self.b_float)
        return self._as_node_dtype(n, v, dt)

    def acc_adj(self, n) -> None:
        E = self.E
        k, dt = self._heap_adjoints(n, "ADSTACK_ACC_ADJ")
        v = self.L.v(n.srcs[1])

        def then():
            w = self._elem_word(self._adjoint_word(k, dt), self._top(k), dt)
            self._store(self.b_float, w, dt,
                        E.op("OpFAdd", dt, self._load(self.b_float, w, dt), v))
        self._if_then(self._nonempty_cap(k), then)
