"""Per-function lowering state: the builder, node -> value map, loop targets, hoisted loads,
the code generator's switches (`options`) and the register width of the node being lowered
(`lanes`: 1, or W while the SPMD lowering lowers a varying node; `at_lanes`).

Everything loop-invariant that a task reads from its launch arguments (buffer base pointers,
scalar arguments, ndarray extents) is loaded once in the entry block, next to the hoisted
`alloca`s, so LLVM sees plain invariants inside the loops and can vectorize.
"""
from __future__ import annotations

import contextlib

from llvmlite import ir

from kernel_ir.abi import LLVM_STATUS, KernelABI
from kernel_ir.nodes import Block, GlobalRef, Node

from . import local_arrays, lltypes
from .lltypes import I32, I64, PTR
from .options import CodegenOptions
from .target import CPU, INTRINSIC_MATH, Target, math_symbol


class CodegenError(RuntimeError):
    """The IR asks for something this backend cannot lower; the message names the op."""


class ModuleLib:
    """Declarations shared by all functions of one LLVM module (intrinsics, libm, helpers)."""

    def __init__(self, module: ir.Module, target: Target = CPU):
        self.module = module
        self.target = target
        self._fns: dict[str, ir.Function] = {}
        self.kept: list[ir.Function] = []  # vecmath vector variants (lower_math.emit_kept)
        self.checked_copies = 0  # functions of versioned regions' checked copies (cold_copy)

    def declare(self, name: str, ret: ir.Type, args) -> ir.Function:
        fn = self._fns.get(name)
        if fn is None:  # vecmath declares intrinsics / libm in the module directly
            fn = self.module.globals.get(name)
            if fn is None:
                fn = ir.Function(self.module, ir.FunctionType(ret, list(args)), name)
            self._fns[name] = fn
        return fn

    def has(self, name: str) -> bool:
        return name in self._fns

    def intrinsic(self, base: str, dtype, nargs: int, extra=(), lanes: int = 1) -> ir.Function:
        """`llvm.<base>.<suffix>` taking `nargs` values of `dtype` (`lanes` wide; plus `extra`
        arg types)."""
        t = lltypes.reg_type(dtype, lanes)
        return self.declare(f"llvm.{base}.{lltypes.suffix(dtype, lanes)}", t,
                            [t] * nargs + list(extra))

    def math(self, base: str, dtype, nargs: int, lanes: int = 1) -> ir.Function:
        """Math function `base` (sin, tan, atan2, pow, ...) of `dtype` as this target calls it:
        on the CPU an LLVM intrinsic (`INTRINSIC_MATH`) or the C library (`tanf`), on a GPU the
        device library's symbol (`llvm_codegen.target`)."""
        t = lltypes.reg_type(dtype, lanes)
        if self.target.math == "libm":
            if base in INTRINSIC_MATH:
                return self.intrinsic(base, dtype, nargs, lanes=lanes)
            return self.declare(base + ("f" if dtype.name == "f32" else ""), t, [t] * nargs)
        return self.declare(math_symbol(self.target, base, dtype.name), t, [t] * nargs)


class FnContext:
    TASK_SETTINGS = ("task_index", "bounds_check", "access_sites", "oob_check", "oob_safe",
                     "variant_sites")
    """The per-task settings a code generator sets after construction (below); a function
    lowered on the task's behalf (`cold_copy`'s checked copy) takes the same (`settings_of`)."""

    def settings_of(self, other: "FnContext") -> None:
        """Take `other`'s `TASK_SETTINGS`."""
        for k in self.TASK_SETTINGS:
            setattr(self, k, getattr(other, k))

    def __init__(self, lib: ModuleLib, fn: ir.Function, abi: KernelABI, arg_specs, lower_table,
                 options: CodegenOptions = CodegenOptions()):
        self.lib = lib
        self.options = options
        self.width = 1  # lanes of the task function (an SPMD task's W: `spmd.SpmdContext`)
        self.lanes = 1  # register width of the node being lowered (`at_lanes`): 1 or `width`
        self.fn = fn
        self.abi = abi
        self.arg_specs = arg_specs
        self.table = lower_table
        self.bufs_arg, self.args_arg = fn.args[0], fn.args[1]
        self.entry = fn.append_basic_block("entry")
        self.entry_b = ir.IRBuilder(self.entry)  # allocas and invariant loads; no terminator yet
        self.b: ir.IRBuilder = None  # set by the caller to the first body block
        self.env: dict[Node, ir.Value] = {}
        self.loops: list[tuple[ir.Block, ir.Block]] = []  # (continue target, break target)
        self.top_continue: ir.Block = None  # CONTINUE at task top level
        self.adstack = None  # lower_adstack.AdstackState of a task with adstacks
        self.worker: ir.Value = None  # i32 heap row: CPU worker slot or GPU global thread id
        self.task_index = 0
        self.bounds_check = False  # emit index checks on global accesses (lower_memory)
        self.access_sites: dict = {}  # global access node -> its site number (bounds checks)
        self.oob_check = False  # the default checks (lower_memory: STATUS_OUT_OF_BOUNDS)
        self.oob_safe = frozenset()  # accesses proven in range (kernel_ir.index_range): unchecked
        self.current: Node = None  # the node being lowered
        self.variant_sites: frozenset = frozenset()  # math nodes worth a vector variant (lower_math)
        self.local_arrays = None  # local_arrays.Plan of a scalar CPU task (None: none)
        self._status = None
        self._bufs: dict[int, ir.Value] = {}
        self._shapes: dict[tuple, ir.Value] = {}
        self._args: dict[tuple, ir.Value] = {}

    # -- register width --------------------------------------------------------------------
    @contextlib.contextmanager
    def at_lanes(self, w: int):
        """Lower with registers `w` lanes wide inside (the SPMD lowering's varying nodes)."""
        old, self.lanes = self.lanes, w
        try:
            yield
        finally:
            self.lanes = old

    def reg_type(self, dt) -> ir.Type:
        return lltypes.reg_type(dt, self.lanes)

    def const(self, dt, v) -> ir.Constant:
        return lltypes.const(dt, v, self.lanes)

    def suffix(self, dt) -> str:
        return lltypes.suffix(dt, self.lanes)

    def intrinsic(self, base: str, dtype, nargs: int, extra=()) -> ir.Function:
        return self.lib.intrinsic(base, dtype, nargs, extra, lanes=self.lanes)

    def math_fn(self, base: str, dtype, nargs: int) -> ir.Function:
        return self.lib.math(base, dtype, nargs, lanes=self.lanes)

    # -- blocks and values --------------------------------------------------------------------
    def block(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

    def value(self, n: Node) -> ir.Value:
        try:
            return self.env[n]
        except KeyError:
            raise CodegenError(f"LLVM codegen: {n!r} used before it was computed") from None

    def lower_block(self, block: Block):
        for n in block.nodes:
            rule = self.table.get(n.op)
            if rule is None:
                raise CodegenError(f"LLVM codegen: op {n.op.name} has no lowering rule (the math "
                                   f"functions with an `expand` in kernel_ir.mathfns are expanded "
                                   f"before code generation: passes.expand_math)")
            self.current = n
            if self.local_arrays is not None and local_arrays.handles(self, n):
                v = local_arrays.lower(self, n)
            else:
                v = rule(self, n)
            if v is not None:
                self.env[n] = v

    def jump(self, target: ir.Block):
        """Branch to `target` and continue emitting into a fresh (unreachable) block: code after
        a BREAK / CONTINUE in the same IR block is dead but must still be well formed."""
        self.b.branch(target)
        self.b.position_at_end(self.block("dead"))

    def close_into(self, target: ir.Block):
        if not self.b.block.is_terminated:
            self.b.branch(target)

    # -- entry-block hoisting -----------------------------------------------------------------
    def hoisted_alloca(self, t: ir.Type, name: str = "") -> ir.Value:
        return entry_alloca(self.entry_b, self.lib.target, t, name)

    def buffer_ptr(self, ref: GlobalRef) -> ir.Value:
        k = self.abi.binding_index(ref)
        p = self._bufs.get(k)
        if p is None:
            slot = self.entry_b.gep(self.bufs_arg, [ir.Constant(I64, k)], inbounds=True,
                                    source_etype=PTR)
            p = self._bufs[k] = self.entry_b.load(slot, name=f"buf{k}", typ=PTR)
        return p

    def arg_load(self, offset: int, t: ir.Type) -> ir.Value:
        """Load a `t` at byte `offset` of the argument buffer (in the entry block)."""
        key = (offset, str(t))
        v = self._args.get(key)
        if v is None:
            p = self.entry_b.gep(self.args_arg, [ir.Constant(I64, offset)], inbounds=True,
                                 source_etype=ir.IntType(8))
            v = self._args[key] = self.entry_b.load(p, typ=t, name=f"arg{offset}")
        return v

    def status_ptr(self) -> ir.Value:
        """The status buffer bufs[n + LLVM_STATUS] (n = len(abi.bindings)), loaded in the entry
        block."""
        if self._status is None:
            n = len(self.abi.bindings)
            slot = self.entry_b.gep(self.bufs_arg, [ir.Constant(I64, n + LLVM_STATUS)], inbounds=True,
                                    source_etype=PTR)
            self._status = self.entry_b.load(slot, name="status", typ=PTR)
        return self._status

    def ndarray_extent(self, arg: int, axis: int) -> ir.Value:
        """Axis extent of ndarray argument `arg` as i32 (from the argument buffer)."""
        return self.arg_load(self.abi.shape_offset(arg, axis), I32)




class _SpaceAlloca(ir.instructions.AllocaInstr):
    """`alloca T, addrspace(N)` (llvmlite prints no address space on allocas)."""

    def __init__(self, parent, typ, addrspace, name):
        super().__init__(parent, typ, None, name)
        self.type = ir.PointerType(addrspace=addrspace)
        self.addrspace = addrspace

    def descr(self, buf):
        buf.append(f"alloca {self.allocated_type}, addrspace({self.addrspace})")
        if self.metadata:
            buf.append(self._stringify_metadata(leading_comma=True))


def entry_alloca(b: ir.IRBuilder, target: Target, t: ir.Type, name: str = "") -> ir.Value:
    """A private slot of type `t` as a flat pointer: a plain alloca, or on a target with private
    allocas in another address space (AMDGPU: 5) one there, cast to flat."""
    if not target.alloca_addrspace:
        return b.alloca(t, name=name)
    a = _SpaceAlloca(b.block, t, target.alloca_addrspace, name + ".p")
    b._insert(a)
    return b.addrspacecast(a, PTR, name=name)
