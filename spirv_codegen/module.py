"""A SPIR-V module builder modelled on the spec's logical layout (SPIR-V §2.4).

The module keeps one list of instructions per layout section and joins them only in `to_words()`,
so an instruction can be added at any time from anywhere and still land in the right place:

    capabilities, extensions, ext-inst imports, memory model, entry points, execution modes,
    debug names, annotations, types/constants/global variables, functions

Types and constants are deduplicated through a dict keyed by their description (SPIR-V forbids
two identical non-aggregate type declarations); capabilities, extensions and ext-inst imports
likewise. Ids are allocated from one counter; the bound is written in the header.

An instruction is a list of 32-bit words. Operands passed to `inst()` are ints (ids, literals,
enumerant values), `str` (a literal string: UTF-8, nul-terminated, padded to a word boundary) or
lists of those.

`Function` is a small function/block builder: variables are hoisted into the entry block (SPIR-V
requires Function-storage OpVariables first in the first block), blocks are appended in the order
they are begun (the lowering begins blocks in structured order, which keeps dominators first).
"""
from __future__ import annotations

import struct
from array import array

from . import _tables as T

OP = T.OPCODES


def encode_string(s: str) -> list[int]:
    """A literal string: UTF-8 bytes, nul-terminated, zero-padded to whole little-endian words."""
    b = s.encode("utf-8") + b"\0"
    b += b"\0" * (-len(b) % 4)
    return list(struct.unpack(f"<{len(b) // 4}I", b))


def _flatten(operands) -> list[int]:
    words: list[int] = []
    for o in operands:
        if isinstance(o, str):
            words += encode_string(o)
        elif isinstance(o, (list, tuple)):
            words += _flatten(o)
        else:
            o = int(o)
            if not 0 <= o < 1 << 32:
                raise ValueError(f"SPIR-V operand {o} does not fit a word")
            words.append(o)
    return words


_WORD = "I" if array("I").itemsize == 4 else None  # a C unsigned int: one 32-bit word


def inst(opname: str, *operands) -> list[int]:
    """Encode one instruction `opname operands...`. Most instructions are ids and literals only:
    `array` checks and converts those in one C call (about a sixth of the Python work of a small
    kernel's compile went to `_flatten`); strings, lists and out-of-range values take `_flatten`."""
    try:
        words = array(_WORD, operands).tolist()
    except (TypeError, OverflowError):
        words = _flatten(operands)
    n = len(words) + 1
    if n >= 1 << 16:
        raise ValueError(f"{opname}: instruction too long ({n} words)")
    return [(n << 16) | OP[opname]] + words


SECTIONS = ("capabilities", "extensions", "ext_imports", "memory_model", "entry_points",
            "execution_modes", "debug_names", "annotations", "globals", "functions")


class Module:
    def __init__(self, version: tuple[int, int] = (1, 3), generator: int = 0):
        self.version = version
        self.generator = generator
        self.sections: dict[str, list[list[int]]] = {s: [] for s in SECTIONS}
        self._bound = 1
        self._types: dict[tuple, int] = {}
        self._consts: dict[tuple, int] = {}
        self._seen: set = set()
        self._ext_imports: dict[str, int] = {}
        self.functions: list[Function] = []

    # -- ids and sections --------------------------------------------------------------------
    def id(self) -> int:
        i = self._bound
        self._bound += 1
        return i

    def add(self, section: str, words: list[int]) -> None:
        self.sections[section].append(words)

    def capability(self, name: str) -> None:
        if ("cap", name) not in self._seen:
            self._seen.add(("cap", name))
            self.add("capabilities", inst("OpCapability", T.CAPABILITY[name]))

    def has_capability(self, name: str) -> bool:
        return ("cap", name) in self._seen

    def extension(self, name: str) -> None:
        if ("ext", name) not in self._seen:
            self._seen.add(("ext", name))
            self.add("extensions", inst("OpExtension", name))

    def ext_import(self, name: str = "GLSL.std.450") -> int:
        if name not in self._ext_imports:
            i = self.id()
            self._ext_imports[name] = i
            self.add("ext_imports", inst("OpExtInstImport", i, name))
        return self._ext_imports[name]

    def memory_model(self, addressing: str = "Logical", memory: str = "GLSL450") -> None:
        self.sections["memory_model"] = [inst("OpMemoryModel", T.ADDRESSING_MODEL[addressing],
                                              T.MEMORY_MODEL[memory])]

    def entry_point(self, model: str, fn_id: int, name: str, interface=()) -> None:
        self.add("entry_points", inst("OpEntryPoint", T.EXECUTION_MODEL[model], fn_id, name,
                                      list(interface)))

    def execution_mode(self, fn_id: int, mode: str, *literals: int) -> None:
        self.add("execution_modes", inst("OpExecutionMode", fn_id, T.EXECUTION_MODE[mode],
                                         *literals))

    def name(self, target: int, s: str) -> None:
        self.add("debug_names", inst("OpName", target, s))

    def decorate(self, target: int, deco: str, *literals: int) -> None:
        self.add("annotations", inst("OpDecorate", target, T.DECORATION[deco], *literals))

    def member_decorate(self, struct_id: int, member: int, deco: str, *literals: int) -> None:
        self.add("annotations", inst("OpMemberDecorate", struct_id, member, T.DECORATION[deco],
                                     *literals))

    # -- types (deduplicated) ----------------------------------------------------------------
    def _type(self, key: tuple, opname: str, *operands, decorate=None) -> int:
        t = self._types.get(key)
        if t is None:
            t = self.id()
            self._types[key] = t
            self.add("globals", inst(opname, t, *operands))
            if decorate is not None:
                decorate(t)
        return t

    def t_void(self) -> int:
        return self._type(("void",), "OpTypeVoid")

    def t_bool(self) -> int:
        return self._type(("bool",), "OpTypeBool")

    def t_int(self, bits: int, signed: bool) -> int:
        return self._type(("int", bits, int(signed)), "OpTypeInt", bits, int(signed))

    def t_float(self, bits: int) -> int:
        return self._type(("float", bits), "OpTypeFloat", bits)

    def t_vector(self, comp: int, n: int) -> int:
        return self._type(("vec", comp, n), "OpTypeVector", comp, n)

    def t_runtime_array(self, elem: int, stride: int) -> int:
        return self._type(("rtarray", elem, stride), "OpTypeRuntimeArray", elem,
                          decorate=lambda t: self.decorate(t, "ArrayStride", stride))

    def t_block_struct(self, member: int) -> int:
        """A `Block`-decorated struct holding one member at offset 0 (a storage buffer)."""
        def deco(t):
            self.decorate(t, "Block")
            self.member_decorate(t, 0, "Offset", 0)
        return self._type(("block", member), "OpTypeStruct", member, decorate=deco)

    def t_push_struct(self, members: tuple, offsets: tuple) -> int:
        def deco(t):
            self.decorate(t, "Block")
            for i, off in enumerate(offsets):
                self.member_decorate(t, i, "Offset", off)
        return self._type(("push", members, offsets), "OpTypeStruct", list(members), decorate=deco)

    def t_pointer(self, storage: str, pointee: int) -> int:
        return self._type(("ptr", storage, pointee), "OpTypePointer", T.STORAGE_CLASS[storage],
                          pointee)

    def t_function(self, ret: int, params=()) -> int:
        return self._type(("fn", ret, tuple(params)), "OpTypeFunction", ret, list(params))

    # -- constants (deduplicated) ------------------------------------------------------------
    def const_bool(self, v: bool) -> int:
        key = ("bool", bool(v))
        if key not in self._consts:
            i = self.id()
            self._consts[key] = i
            self.add("globals", inst("OpConstantTrue" if v else "OpConstantFalse",
                                     self.t_bool(), i))
        return self._consts[key]

    def const_words(self, type_id: int, words: tuple) -> int:
        """A numeric constant given by its literal words (low-order word first)."""
        key = ("num", type_id, tuple(words))
        if key not in self._consts:
            i = self.id()
            self._consts[key] = i
            self.add("globals", inst("OpConstant", type_id, i, *words))
        return self._consts[key]

    def const_int(self, bits: int, signed: bool, v: int) -> int:
        v = int(v) & ((1 << bits) - 1)
        if bits < 32 and signed and v >> (bits - 1):  # narrow signed literals are sign-extended
            v |= 0xFFFFFFFF & ~((1 << bits) - 1)
        words = (v,) if bits <= 32 else (v & 0xFFFFFFFF, v >> 32)
        return self.const_words(self.t_int(bits, signed), words)

    def const_float(self, bits: int, v: float) -> int:
        if bits == 16:
            words = struct.unpack("<H", struct.pack("<e", v))
        elif bits == 32:
            words = struct.unpack("<I", struct.pack("<f", v))
        else:
            words = struct.unpack("<II", struct.pack("<d", v))
        return self.const_words(self.t_float(bits), words)

    def spec_const(self, type_id: int, spec_id: int, default: int = 0) -> int:
        """A 32-bit scalar specialization constant (SpecId `spec_id`), given its value when the
        pipeline is created; `default` where none is given."""
        key = ("spec", type_id, spec_id)
        if key not in self._consts:
            i = self.id()
            self._consts[key] = i
            self.add("globals", inst("OpSpecConstant", type_id, i, int(default) & 0xFFFFFFFF))
            self.decorate(i, "SpecId", spec_id)
        return self._consts[key]

    def const_composite(self, type_id: int, parts: tuple) -> int:
        key = ("composite", type_id, tuple(parts))
        if key not in self._consts:
            i = self.id()
            self._consts[key] = i
            self.add("globals", inst("OpConstantComposite", type_id, i, list(parts)))
        return self._consts[key]

    # -- global variables and functions ------------------------------------------------------
    def global_variable(self, ptr_type: int, storage: str) -> int:
        v = self.id()
        self.add("globals", inst("OpVariable", ptr_type, v, T.STORAGE_CLASS[storage]))
        return v

    def function(self, ret_type: int, param_types=(), control: str = "None") -> "Function":
        fn = Function(self, ret_type, tuple(param_types), control)
        self.functions.append(fn)
        return fn

    # -- output ------------------------------------------------------------------------------
    def to_words(self) -> list[int]:
        body: list[int] = []
        for s in SECTIONS[:-1]:
            for ins in self.sections[s]:
                body += ins
        for fn in self.functions:
            body += fn.to_words()
        major, minor = self.version
        header = [T.MAGIC, (major << 16) | (minor << 8), self.generator, self._bound, 0]
        return header + body

    def to_bytes(self) -> bytes:
        w = self.to_words()
        return struct.pack(f"<{len(w)}I", *w)


class Block:
    """A basic block: a label id and its instructions; `terminated` once a terminator is added."""

    def __init__(self, label: int):
        self.label = label
        self.insts: list[list[int]] = []
        self.terminated = False


TERMINATORS = frozenset({"OpBranch", "OpBranchConditional", "OpReturn", "OpReturnValue",
                         "OpUnreachable", "OpKill", "OpSwitch"})


class Function:
    def __init__(self, module: Module, ret_type: int, param_types: tuple, control: str):
        self.m = module
        self.id = module.id()
        self.ret_type = ret_type
        self.type_id = module.t_function(ret_type, param_types)
        self.control = T.FUNCTION_CONTROL[control]
        self.params = [(t, module.id()) for t in param_types]
        self.variables: list[list[int]] = []
        self.blocks: list[Block] = []
        self.current: Block | None = None
        self.begin(module.id())

    @property
    def param_ids(self) -> list[int]:
        return [p for _, p in self.params]

    # -- blocks ------------------------------------------------------------------------------
    def label(self) -> int:
        """Allocate a label id for a block that will be begun later."""
        return self.m.id()

    def begin(self, label: int) -> Block:
        b = Block(label)
        self.blocks.append(b)
        self.current = b
        return b

    @property
    def terminated(self) -> bool:
        return self.current is None or self.current.terminated

    # -- instructions ------------------------------------------------------------------------
    def emit(self, opname: str, *operands) -> None:
        b = self.current
        if b is None or b.terminated:
            raise RuntimeError(f"spirv_codegen: {opname} emitted after a block terminator")
        b.insts.append(inst(opname, *operands))
        if opname in TERMINATORS:
            b.terminated = True

    def op(self, opname: str, result_type: int, *operands) -> int:
        """Emit an instruction with a result; returns the result id."""
        r = self.m.id()
        self.emit(opname, result_type, r, *operands)
        return r

    def ext(self, result_type: int, name: str, *operands, set_name: str = "GLSL.std.450") -> int:
        s = self.m.ext_import(set_name)
        return self.op("OpExtInst", result_type, s, T.GLSL_STD_450[name], *operands)

    def variable(self, pointee: int, init: int | None = None) -> int:
        """A Function-storage variable, hoisted into the entry block."""
        ptr = self.m.t_pointer("Function", pointee)
        v = self.m.id()
        self.variables.append(inst("OpVariable", ptr, v, T.STORAGE_CLASS["Function"],
                                   *(() if init is None else (init,))))
        return v

    def branch(self, target: int) -> None:
        self.emit("OpBranch", target)

    def branch_cond(self, cond: int, t: int, f: int) -> None:
        self.emit("OpBranchConditional", cond, t, f)

    def selection_merge(self, merge: int) -> None:
        self.emit("OpSelectionMerge", merge, T.SELECTION_CONTROL["None"])

    def if_else(self, cond: int, then, orelse) -> tuple:
        """A structured if / else on `cond`: `then()` and `orelse()` emit the two arms, the
        function continues in the merge block. Returns ((then's value, the label its arm ends
        in), (orelse's value, its end label)): the operands of an OpPhi in the merge block."""
        t, f, merge = self.label(), self.label(), self.label()
        self.selection_merge(merge)
        self.branch_cond(cond, t, f)
        arms = []
        for label, arm in ((t, then), (f, orelse)):
            self.begin(label)
            v = arm()
            arms.append((v, self.current.label))
            self.branch(merge)
        self.begin(merge)
        return tuple(arms)

    def loop_merge(self, merge: int, cont: int, unroll: bool = True) -> None:
        """`unroll=False`: LoopControl DontUnroll (`lower._no_unroll`: a loop with a `break`)."""
        self.emit("OpLoopMerge", merge, cont, T.LOOP_CONTROL["None" if unroll else "DontUnroll"])

    def to_words(self) -> list[int]:
        w = inst("OpFunction", self.ret_type, self.id, self.control, self.type_id)
        for t, p in self.params:
            w += inst("OpFunctionParameter", t, p)
        for i, b in enumerate(self.blocks):
            if not b.terminated:
                raise RuntimeError(f"spirv_codegen: block %{b.label} has no terminator")
            w += inst("OpLabel", b.label)
            if i == 0:
                for v in self.variables:
                    w += v
            for ins in b.insts:
                w += ins
        return w + inst("OpFunctionEnd")
