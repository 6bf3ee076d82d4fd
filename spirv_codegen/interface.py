"""The shader interface of a task module: descriptors, push constants, builtins, status writes.

See the binding convention in `spirv_codegen/lower.py`. Descriptors are declared lazily (a task
declares only the buffers it touches; the pipeline layout still has all `num_bindings`).
Values loaded once per invocation (push constants, builtins, scalar arguments, ndarray shapes) go
into the entry block's prologue so they dominate the whole body.
"""
from __future__ import annotations

import struct

from kernel_ir.abi import PUSH_CONSTANTS, RangeArg, StatusWord
from kernel_ir.dtypes import BY_NAME, f16, f64, i32, u1, u32

from ._tables import BUILTIN as _BUILTIN
from .buffers import ARGS_BINDING, FIRST_ARRAY_BINDING, STATUS_BINDING, BufferMap, view_dtype
from .emitter import SCOPE_DEVICE, SEM_RELAXED, STORAGE_CAPABILITY, U64, Emitter

# the push constants (kernel_ir.abi.PUSH_CONSTANTS): member -> (dtype, byte offset)
_PC_TYPES = {"i": i32, "I": u32}
_PC_MEMBERS = tuple((_PC_TYPES[f], struct.calcsize("<" + "".join(g for _, g in PUSH_CONSTANTS[:k])))
                    for k, (_, f) in enumerate(PUSH_CONSTANTS))
PC_BEGIN, PC_END, PC_THREADS_PER_ROW = (
    [name for name, _ in PUSH_CONSTANTS].index(n) for n in ("begin", "end", "threads_per_row"))


class Interface:
    def __init__(self, E: Emitter, abi, storage: dict, device_range_local_size=None, bmap=None):
        self.E = E
        self.abi = abi
        # where each ref lives (`buffers.BufferMap`): its own buffer, or a root view at an offset
        self.bmap = bmap if bmap is not None else BufferMap.own_buffers(abi)
        # device ranges (lower.py): begin / end from the range-arguments buffer (binding 2 +
        # num_arrays, read-only), threads per row = num_workgroups.x * this local size; None:
        # from the push constants
        self.device_range_local_size = device_range_local_size
        self.storage = storage  # binding index k -> 'native' | 'bits' | 'signed' (buffers.py)
        self.readonly: set = set()  # bindings declared NonWritable (read-only storage)
        self._buffers: dict[int, tuple] = {}
        self._prologue_cache: dict = {}
        self._pc = None
        self._in_prologue = False
        self.builtins: list[int] = []
        self.buffer_names: dict[int, str] = {}  # OpName of extra bindings (adstack buffers)
        self.spec_words: set = set()  # argument words given as specialization constants

    # -- prologue ----------------------------------------------------------------------------
    def prologue(self, key, make):
        """Value computed once in the entry block (before its terminator), cached by `key`."""
        if key not in self._prologue_cache:
            fn = self.E.fn
            if self._in_prologue:
                self._prologue_cache[key] = make()
                return self._prologue_cache[key]
            self._in_prologue = True
            saved_block, entry = fn.current, fn.blocks[0]
            term = entry.insts.pop()
            entry.terminated = False
            fn.current = entry
            try:
                self._prologue_cache[key] = make()
            finally:
                entry.insts.append(term)
                entry.terminated = True
                fn.current = saved_block
                self._in_prologue = False
        return self._prologue_cache[key]

    # -- descriptors -------------------------------------------------------------------------
    def _buffer(self, binding: int, elem_dt) -> tuple:
        if binding not in self._buffers:
            E, m = self.E, self.E.m
            elem = E.ty(elem_dt)
            size = 4 if elem_dt.kind == "b" else elem_dt.bits // 8
            if elem_dt.kind != "b" and elem_dt.bits < 32:
                cap, ext = STORAGE_CAPABILITY[elem_dt.bits]
                m.capability(cap)
                m.extension(ext)
            st = m.t_block_struct(m.t_runtime_array(elem, size))
            var = m.global_variable(m.t_pointer("StorageBuffer", st), "StorageBuffer")
            m.decorate(var, "DescriptorSet", 0)
            m.decorate(var, "Binding", binding)
            if binding in self.readonly:
                m.decorate(var, "NonWritable")
            name = {ARGS_BINDING: "args", **self.buffer_names}
            if self.bmap.status_chunk < 0:
                name[STATUS_BINDING] = "status"
            for i, (c, vdt) in enumerate(self.bmap.views):
                start, n = self.bmap.view_start(i), self.bmap.chunk_windows(c)[0]
                for w in range(n):
                    name[start + w] = f"root{c}_{vdt.name}" + (f"_w{w}" if n > 1 else "")
            m.name(var, name.get(binding, f"buf{binding - self.bmap.first_array}"))
            self._buffers[binding] = (var, m.t_pointer("StorageBuffer", elem))
        return self._buffers[binding]

    def element_ptr(self, binding: int, elem_dt, index: int) -> int:
        var, ptr = self._buffer(binding, elem_dt)
        E = self.E
        return E.fn.op("OpAccessChain", ptr, var, E.c(0, i32), index)

    def storage_dtype(self, k: int, dt):
        """(the element type ref k is accessed as, 'native' | 'bool' | 'bits'): u1 is a u32 0/1;
        'bits' is a same-width unsigned int bitcast to and from `dt` (compare-and-swap atomics,
        root views of ints: `buffers.view_dtype`)."""
        access = self.storage.get(k, "native")
        cas = access in ("bits", "fminmax")
        if dt.kind == "b":
            return u32, "bool"
        if access == "words":
            return u32, "words"
        if self.bmap.in_root(k):
            sdt = view_dtype(dt, access)
            return sdt, ("native" if sdt == dt else "bits")
        if cas:
            return (u32 if dt.bits == 32 else U64), "bits"
        return dt, "native"

    def array_ptr(self, k: int, dt, index: int) -> tuple[int, object, str]:
        sdt, kind = self.storage_dtype(k, dt)
        bm = self.bmap
        if not bm.in_root(k):
            return self.element_ptr(bm.own_binding(k), sdt, index), sdt, kind
        E = self.E
        base = self.root_base(k)
        index = E.op("OpIAdd", i32, base, index)
        return self.element_ptr(bm.view_binding(k, sdt), sdt, index), sdt, kind

    def root_base(self, k: int) -> int:
        """The element offset (i32) of root-placed ref k in its view: a field's from
        `root_word` (a specialization constant on Vulkan: fields never move), an ndarray's
        from its argument word (it changes from launch to launch: arenas,
        `backends.root_buffers`)."""
        E, word = self.E, self.bmap.offset_words[k]
        get = self.arg_word if self.abi.bindings[k].kind == "ndarray" else self.root_word
        return self.prologue(("root_base", k), lambda: E.op("OpBitcast", i32, get(word)))

    def word_ptr(self, k: int, dt, index: int) -> tuple:
        """(pointer to the u32 word holding 8- / 16-bit element `index` of ref k, the element's
        bit offset in it): storage kind 'words' (`atomics.word_rmw`). Root and arena offsets are
        8-byte aligned and ndarray bindings start at aligned offsets, so element e of the ref is bits
        (e % per) * bits of word e // per of the binding's u32 view (per elements a word)."""
        E, bm = self.E, self.bmap
        if bm.in_root(k):
            index = E.op("OpIAdd", i32, self.root_base(k), index)
            binding = bm.view_binding(k, u32)
        else:
            binding = bm.own_binding(k)
        e = E.op("OpBitcast", u32, index)
        per_log2 = {8: 2, 16: 1}[dt.bits]
        word = E.op("OpBitcast", i32, E.op("OpShiftRightLogical", u32, e, E.c(per_log2, u32)))
        lane = E.op("OpBitwiseAnd", u32, e, E.c((1 << per_log2) - 1, u32))
        shift = E.op("OpIMul", u32, lane, E.c(dt.bits, u32))
        return self.element_ptr(binding, u32, word), shift

    def root_ptr_as(self, k: int, index: int, vdt) -> int:
        """Pointer to element `index` of root-placed ref k through its chunk's view of type
        `vdt` (one of `buffers.extra_views`: the same bytes as `array_ptr`'s)."""
        bm, E = self.bmap, self.E
        base = self.root_base(k)
        index = E.op("OpIAdd", i32, base, index)
        return self.element_ptr(bm.first_array + bm.views.index((bm.chunk[k], vdt)), vdt, index)

    def access(self, k: int, dt, index: int, body, rdt=None):
        """Emit `body(ptr, sdt, kind, ptr_as)` on element `index` of ref k: `ptr` points at it as
        stored (`storage_dtype`: sdt, kind), `ptr_as(vdt)` at the same bytes through the chunk's
        view of type `vdt` (root-placed refs: `buffers.extra_views`). `body` returns a value
        id of dtype `rdt`, or None (rdt None). A ref in a windowed chunk (`buffers.BufferMap.
        windows`) runs `body` once per window, each behind a branch on the element's window;
        the values meet in an OpPhi. Every other ref: `body` once, as straight-line code."""
        bm = self.bmap
        windowed = bm.windows and bm.in_root(k) and bm.chunk_windows(bm.chunk[k])[0] > 1
        if self.storage.get(k) == "words":
            if windowed:
                raise RuntimeError(f"an atomic on a {dt.name} field larger than one storage "
                                   f"binding is not supported (ref {k})")
            return body(self.word_ptr(k, dt, index), u32, "words", None)
        if not windowed:
            ptr, sdt, kind = self.array_ptr(k, dt, index)
            return body(ptr, sdt, kind, lambda vdt: self.root_ptr_as(k, index, vdt))
        return self._windowed(k, dt, index, body, rdt)

    def _windowed(self, k: int, dt, index: int, body, rdt):
        """`access` for a ref in a windowed chunk: window w = element // per (elements of a
        window), a chain of `if w == 0 .. else if w == n - 2 .. else` (the last window takes
        the rest: an index past the field is as undefined as elsewhere)."""
        E, fn, bm = self.E, self.E.fn, self.bmap
        sdt, kind = self.storage_dtype(k, dt)
        n, wbytes = bm.chunk_windows(bm.chunk[k])
        per = wbytes // (sdt.bits // 8)
        base = self.root_base(k)
        u = E.op("OpBitcast", u32, E.op("OpIAdd", i32, base, index))
        w = E.op("OpUDiv", u32, u, E.c(per, u32))
        local = E.op("OpBitcast", i32, E.op("OpUMod", u32, u, E.c(per, u32)))

        def ptr_in(win, vdt):
            b = bm.view_start(bm.views.index((bm.chunk[k], vdt))) + win
            return self.element_ptr(b, vdt, local)

        def run(win):
            return body(ptr_in(win, sdt), sdt, kind, lambda vdt: ptr_in(win, vdt))

        def chain(win):
            if win == n - 1:
                return run(win)
            here = E.op("OpIEqual", u1, w, E.c(win, u32))
            (a, a_end), (b, b_end) = fn.if_else(here, lambda: run(win), lambda: chain(win + 1))
            return None if rdt is None else E.op("OpPhi", rdt, a, a_end, b, b_end)
        return chain(0)

    def load_elem(self, k: int, dt, index: int) -> int:
        E = self.E

        def body(ptr, sdt, kind, _):
            if kind == "words":
                from .atomics import word_extract
                return word_extract(E, E.op("OpLoad", u32, ptr[0]), ptr[1], dt)
            v = E.op("OpLoad", sdt, ptr)
            if kind == "bool":
                return E.op("OpINotEqual", u1, v, E.c(0, u32))
            if kind == "bits":
                return E.op("OpBitcast", dt, v)
            return v
        return self.access(k, dt, index, body, dt)

    def store_elem(self, k: int, dt, index: int, v: int) -> None:
        E = self.E

        def body(ptr, sdt, kind, _):
            if kind == "words":  # a compare-and-swap loop: the TaskLowerer's (`_global_store`)
                raise RuntimeError("store_elem of a ref accessed through words")
            x = v
            if kind == "bool":
                x = E.sel(v, E.c(1, u32), E.c(0, u32), u32)
            elif kind == "bits":
                x = E.op("OpBitcast", sdt, v)
            E.emit("OpStore", ptr, x)
        self.access(k, dt, index, body)

    # -- argument buffer ---------------------------------------------------------------------
    def root_word(self, word: int) -> int:
        """Argument word `word` holding a root offset (a ref's, or the status words'): on
        profiles with `spec_root_offsets` a specialization constant whose SpecId is the word,
        given its value (the same word of the program's argument tail) when the pipeline is
        created. Why: offsets do not change over a program's life, and the driver's compiler
        then sees constants. Measured on lavapipe, a trip count read from a field at a run-time
        offset made a 256-trip sin / cos loop 2.5% slower than at a constant one (the same
        loop; docs/backends.md). The module still does not depend on where fields sit."""
        E = self.E
        if not E.profile.spec_root_offsets:
            return self.arg_word(word)
        self.spec_words.add(word)
        return E.m.spec_const(E.ty(u32), word)

    def arg_word(self, word: int) -> int:
        E = self.E
        if E.profile.args_uniform:
            return self.prologue(("argw", word), lambda: E.op("OpLoad", u32, self._uniform_arg(word)))
        return self.prologue(("argw", word), lambda: E.op(
            "OpLoad", u32, self.element_ptr(ARGS_BINDING, u32, E.c(word, i32))))

    def _uniform_arg(self, word: int) -> int:
        """Pointer to word `word` of the uniform argument buffer (profile.args_uniform): a
        Block struct holding uvec4[ceil(arg bytes / 16)] with ArrayStride 16."""
        E, m = self.E, self.E.m
        if ARGS_BINDING not in self._buffers:
            n16 = max(1, -(-self.bmap.arg_bytes // 16))
            uvec4 = m.t_vector(E.ty(u32), 4)
            arr = m._type(("array", uvec4, n16, 16), "OpTypeArray", uvec4, E.c(n16, u32),
                          decorate=lambda t: m.decorate(t, "ArrayStride", 16))
            st = m.t_block_struct(arr)
            var = m.global_variable(m.t_pointer("Uniform", st), "Uniform")
            m.decorate(var, "DescriptorSet", 0)
            m.decorate(var, "Binding", ARGS_BINDING)
            m.name(var, "args")
            self._buffers[ARGS_BINDING] = (var, m.t_pointer("Uniform", E.ty(u32)))
        var, ptr = self._buffers[ARGS_BINDING]
        return E.fn.op("OpAccessChain", ptr, var, E.c(0, i32), E.c(word // 4, i32),
                       E.c(word % 4, i32))

    def scalar_arg(self, byte_offset: int, dt) -> int:
        def make():
            E = self.E
            w = byte_offset // 4
            lo = self.arg_word(w)
            if dt.kind == "b":
                return E.op("OpINotEqual", u1, lo, E.c(0, u32))
            if dt.bits == 32:
                return lo if dt == u32 else E.op("OpBitcast", dt, lo)
            if dt == f16:  # at the start of its slot: the low half of the word
                return E.f16_from_word(lo)
            if dt.bits < 32:  # at the start of its slot: the low bits of the word
                u = E.op("OpUConvert", BY_NAME[f"u{dt.bits}"], lo)
                return u if dt.kind == "u" else E.op("OpBitcast", dt, u)
            hi = self.arg_word(w + 1)
            return E.join64(lo, hi, dt)
        return self.prologue(("arg", byte_offset, dt), make)

    def ndarray_shape(self, arg: int, axis: int) -> int:
        return self.scalar_arg(self.abi.shape_offset(arg, axis), i32)

    # -- push constants and builtins ---------------------------------------------------------
    def push_constant(self, member: int) -> int:
        E, m = self.E, self.E.m
        if self._pc is None:
            st = m.t_push_struct(tuple(E.ty(t) for t, _ in _PC_MEMBERS),
                                 tuple(off for _, off in _PC_MEMBERS))
            self._pc = m.global_variable(m.t_pointer("PushConstant", st), "PushConstant")
            m.name(self._pc, "launch")
        dt = _PC_MEMBERS[member][0]
        def make():
            p = E.fn.op("OpAccessChain", m.t_pointer("PushConstant", E.ty(dt)), self._pc,
                        E.c(member, i32))
            return E.op("OpLoad", dt, p)
        return self.prologue(("pc", member), make)

    def range_begin_end(self) -> tuple[int, int]:
        """(begin, end) of a range task: push constants, or words BEGIN / END of the range
        arguments (device ranges)."""
        if self.device_range_local_size is None:
            return self.push_constant(PC_BEGIN), self.push_constant(PC_END)
        E = self.E
        b = self.bmap.end
        self.buffer_names[b] = "range_args"
        self.readonly.add(b)  # also the dispatch's indirect buffer: WebGPU forbids read-write

        def word(k):
            return lambda: E.op("OpBitcast", i32, E.op("OpLoad", u32, self.element_ptr(b, u32, E.c(k, i32))))
        return (self.prologue(("range", RangeArg.BEGIN), word(RangeArg.BEGIN)),
                self.prologue(("range", RangeArg.END), word(RangeArg.END)))

    def threads_per_row(self) -> int:
        if self.device_range_local_size is None:
            return self.push_constant(PC_THREADS_PER_ROW)
        E = self.E
        ngr = self.builtin("NumWorkgroups")
        nx = E.op("OpCompositeExtract", u32, ngr, 0)
        return E.op("OpIMul", u32, nx, E.c(self.device_range_local_size, u32))

    def builtin(self, name: str) -> int:
        E, m = self.E, self.E.m
        def make():
            v3 = E.t_uvec3()
            var = m.global_variable(m.t_pointer("Input", v3), "Input")
            m.decorate(var, "BuiltIn", _BUILTIN[name])
            self.builtins.append(var)
            return E.fn.op("OpLoad", v3, var)
        return self.prologue(("builtin", name), make)

    def opaque_zero(self) -> int:
        """A u32 zero the driver's optimizer cannot see through: num_workgroups.z - 1 (every
        dispatch spirad makes has one layer of workgroups in z: `dispatch_geometry` for up to
        2**31 threads, the range-arguments modules). Float arithmetic built on it is not
        folded (`lower.TaskLowerer.float_operands`)."""
        E = self.E
        def make():
            ngr = self.builtin("NumWorkgroups")
            return E.op("OpISub", u32, E.op("OpCompositeExtract", u32, ngr, 2), E.c(1, u32))
        return self.prologue("opaque_zero", make)

    def linear_id(self) -> int:
        """x + threads_per_row * (y + num_groups_y * z) over the global invocation id."""
        E = self.E
        def make():
            gid = self.builtin("GlobalInvocationId")
            ngr = self.builtin("NumWorkgroups")
            x, y, z = (E.op("OpCompositeExtract", u32, gid, i) for i in range(3))
            ny = E.op("OpCompositeExtract", u32, ngr, 1)
            row = E.op("OpIAdd", u32, y, E.op("OpIMul", u32, ny, z))
            return E.op("OpIAdd", u32, x, E.op("OpIMul", u32, self.threads_per_row(), row))
        return self.prologue("linear", make)

    # -- status ------------------------------------------------------------------------------
    def write_error(self, code: int, aux: int, aux2: int | None = None) -> None:
        """First error wins word CODE (compare-exchange from 0, or the ticket of word TICKET where
        the profile has no compare-exchange); the winner writes `aux` to word TASK (and `aux2` to
        word AUX when given; kernel_ir.abi.StatusWord). Control continues in a new block."""
        E = self.E
        words = [lambda: E.c(aux, u32)] + ([] if aux2 is None else [lambda: E.c(aux2, u32)])
        self.write_error_words(code, words)

    def status_ptr(self, word: int) -> int:
        """Pointer to u32 word `word` of the status: binding 1, or its words in a root chunk."""
        E, bm = self.E, self.bmap
        if bm.status_chunk < 0:
            return self.element_ptr(STATUS_BINDING, u32, E.c(word, i32))
        base = self.prologue("status_base", lambda: E.op("OpBitcast", i32,
                                                         self.root_word(bm.status_word)))
        return self.element_ptr(bm.status_binding(), u32,
                                E.op("OpIAdd", i32, base, E.c(word, i32)))

    def write_error_words(self, code: int, words) -> None:
        """`write_error` with u32 values for the status words after CODE, in `StatusWord` order
        (TASK, AUX, VALUE_LO, ...): ids, or callables giving ids (called where the winner
        stores them)."""
        E, fn = self.E, self.E.fn
        scope, sem = E.c(SCOPE_DEVICE, u32), E.c(SEM_RELAXED, u32)
        if E.profile.compare_exchange:
            p0 = self.status_ptr(StatusWord.CODE)
            old = E.op("OpAtomicCompareExchange", u32, p0, scope, sem, sem, E.c(code, u32),
                       E.c(0, u32))
        else:  # Metal (profile.py): whoever draws ticket 0 is first; it writes word 0 as well
            pt = self.status_ptr(StatusWord.TICKET)
            old = E.op("OpAtomicIAdd", u32, pt, scope, sem, E.c(1, u32))
        won, merge = fn.label(), fn.label()
        first = E.op("OpIEqual", u1, old, E.c(0, u32))
        fn.selection_merge(merge)
        fn.branch_cond(first, won, merge)
        fn.begin(won)
        if not E.profile.compare_exchange:
            E.emit("OpStore", self.status_ptr(StatusWord.CODE), E.c(code, u32))
        for i, w in enumerate(words, StatusWord.CODE + 1):
            E.emit("OpStore", self.status_ptr(i), w() if callable(w) else w)
        fn.branch(merge)
        fn.begin(merge)

    def write_error_and_return(self, code: int, aux: int) -> None:
        """`write_error`, then end the current block with OpReturn."""
        self.write_error(code, aux)
        self.E.fn.emit("OpReturn")
