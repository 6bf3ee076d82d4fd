"""Per-function lowering state: the builder, node -> value map, loop targets, hoisted loads.

Everything loop-invariant that a task reads from its launch arguments (buffer base pointers,
scalar arguments, ndarray extents) is loaded once in the entry block, next to the hoisted
`alloca`s, so LLVM sees plain invariants inside the loops and can vectorize.
"""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.abi import KernelABI
from kernel_ir.nodes import Block, GlobalRef, Node

from .lltypes import I32, I64, PTR, reg_type, suffix


class CodegenError(RuntimeError):
    """The IR asks for something this backend cannot lower; the message names the op."""


class ModuleLib:
    """Declarations shared by all functions of one LLVM module (intrinsics, libm, helpers)."""

    def __init__(self, module: ir.Module):
        self.module = module
        self._fns: dict[str, ir.Function] = {}
        self.kept: list[ir.Function] = []  # vecmath vector variants (lower_math.emit_kept)

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

    def intrinsic(self, base: str, dtype, nargs: int, extra=()) -> ir.Function:
        """`llvm.<base>.<suffix>` taking `nargs` values of `dtype` (plus `extra` arg types)."""
        t = reg_type(dtype)
        return self.declare(f"llvm.{base}.{suffix(dtype)}", t, [t] * nargs + list(extra))


class FnContext:
    def __init__(self, lib: ModuleLib, fn: ir.Function, abi: KernelABI, arg_specs, lower_table):
        self.lib = lib
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
        self.task_index = 0
        self.bounds_check = False  # emit index checks on global accesses (lower_memory)
        self.access_sites: dict = {}  # global access node -> its site number (bounds checks)
        self.current: Node = None  # the node being lowered
        self.variant_sites: frozenset = frozenset()  # math nodes worth a vector variant (lower_math)
        self._status = None
        self._bufs: dict[int, ir.Value] = {}
        self._shapes: dict[tuple, ir.Value] = {}
        self._args: dict[tuple, ir.Value] = {}

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
                raise CodegenError(f"LLVM codegen: op {n.op.name} has no lowering rule")
            self.current = n
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
        return self.entry_b.alloca(t, name=name)

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
        """The status buffer bufs[n+3] (n = len(abi.bindings)), loaded in the entry block."""
        if self._status is None:
            n = len(self.abi.bindings)
            slot = self.entry_b.gep(self.bufs_arg, [ir.Constant(I64, n + 3)], inbounds=True,
                                    source_etype=PTR)
            self._status = self.entry_b.load(slot, name="status", typ=PTR)
        return self._status

    def ndarray_extent(self, arg: int, axis: int) -> ir.Value:
        """Axis extent of ndarray argument `arg` as i32 (from the argument buffer)."""
        return self.arg_load(self.abi.shape_offset(arg, axis), I32)


