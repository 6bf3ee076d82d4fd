"""Compile context shared by the frontend's visitors: builder, scopes, source, type defaults."""
from __future__ import annotations

import builtins

from kernel_ir.errors import SpiradNameError
from kernel_ir.builder import IRBuilder
from kernel_ir.source import user_error

from ..source import SourceInfo


class FuncFrame:
    """One kernel or @func being translated: its source and name lookup."""

    def __init__(self, fn, src: SourceInfo, is_kernel: bool):
        self.fn = fn
        self.src = src
        self.is_kernel = is_kernel
        args = src.func_def.args  # a kernel's own parameters are read-only (stmt.py)
        self.param_names = frozenset(a.arg for a in args.posonlyargs + args.args + args.kwonlyargs)
        self.scopes: list[dict] = [{}]
        self.loop_base = self.scope_base = 0  # a func's own loops / scopes start there
        closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    closure[name] = cell.cell_contents
                except ValueError:
                    pass
        self.closure = closure
        self.ret = None  # (Slot) for @func return values
        self.returns = None  # kernels: the KernelReturn of `-> type` (spirad.compile.kernel_return)
        self.returned = False  # kernels: a `return` was compiled; the statements after it are not
        self.loop_depth = 0  # serial loops entered inside this frame
        self.call_loc = None  # a @func's: where its caller called it (errors quote the chain)
        from ..tracebacks import internal_file
        self.internal = internal_file(src.filename)  # spirad's own kernels (GPU sizer): no warnings


class Ctx:
    def __init__(self, state):
        self.b = IRBuilder()
        self.state = state
        self.default_fp = state.default_fp
        self.default_ip = state.default_ip
        self.frames: list[FuncFrame] = []
        self.node_stack: list = []
        self.loops: list = []  # 'parallel', 'serial', 'static' kinds of enclosing loops
        self.call_depth = 0
        # Enclosing source scopes that are not the kernel's outermost one: bodies of non-static
        # `if` / `else` (a Python-constant condition included), `for` and `while`, counted across
        # @func calls. A loop is parallel exactly when this is 0 (Taichi's rule: funcs are
        # inlined, `sd.static` ifs and loops are resolved before scoping).
        self.nested_scopes = 0
        self.static_depth = 0  # > 0 while building the arguments of sd.static(...)
        self.loop_config = None  # sd.loop_config(...) waiting for the next for loop
        self.stop_grads = []  # sd.stop_grad(x): (the scope dict of its block, x's GlobalRef key)
        self.static_break = []  # per enclosing static loop with break/continue: its flag slot
        self.rng_anchor = None   # frontend.rng: where the current random stream's slot goes
        self.rng_sites = 0
        self.rng_used = False
        self.unrolled = 0       # iterations unrolled by sd.static loops (the unroll limit)
        self.last_stmt = None   # (SourceInfo, ast statement) being compiled (deep expressions)

    @property
    def frame(self) -> FuncFrame:
        return self.frames[-1]

    def loc(self, node=None):
        node = node if node is not None else (self.node_stack[-1] if self.node_stack else None)
        return self.frame.src.loc(node) if node is not None else None

    def error(self, cls, msg, node=None):
        """A user error at `node` of the current frame, quoting the @func calls that led
        there first (Taichi's layout: kernel_ir/source.py)."""
        calls = [f.call_loc for f in self.frames[1:] if f.call_loc is not None]
        return user_error(cls, msg, self.loc(node), calls)

    # -- names ----------------------------------------------------------------------------------
    def lookup(self, name, node):
        f = self.frame
        for scope in reversed(f.scopes):
            if name in scope:
                return scope[name]
        if name in f.closure:
            return f.closure[name]
        g = f.fn.__globals__
        if name in g:
            return g[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(SpiradNameError, f"Name \"{name}\" is not defined; assign it before this "
                                          f"line (a variable first assigned inside an if / for / "
                                          f"while body exists only in that body)", node)

    def grad_stopped(self, ref) -> bool:
        """Whether reads of `ref` are under an `sd.stop_grad` of its array (a block that is
        still open: its scope dict is on a frame's scope stack)."""
        key = (ref.kind, ref.key)
        return any(k == key and any(scope is s for f in self.frames for s in f.scopes)
                   for scope, k in self.stop_grads)

    def find_local(self, name):
        for scope in reversed(self.frame.scopes):
            if name in scope:
                return scope[name]
        return None

    def bind(self, name, value):
        self.frame.scopes[-1][name] = value
