"""Reverse mode at the API level: `kernel.grad(*args)` and `ad.Tape`.


`kernel.grad(*args)` compiles (once per signature) the adjoint kernel with the passes of
`spirad.passes.autodiff`, evaluates every adstack's capacity for this launch from the current
arguments, fields and ndarrays (`sizer`), and launches it. Gradients accumulate into the `.grad`
of what the kernel reads; a store consumes (zeroes) its target's `.grad` (docs/autodiff.md).
"""
from __future__ import annotations

import sizer as sz

from . import adstack_sizing as _sizing
from . import kernel as _kernel  # (kernel imports this module: only attributes used at run time)
from . import state as _state
from .errors import SpiradAutodiffError
from .ir.abi import adstack_allocas
from .ir.nodes import GlobalRef


def _grad_of_factory(args):
    st = _state.current()
    fields = {f.id: f for f in st.fields}

    def grad_of(ref: GlobalRef):
        if ref.kind == "field":
            f = fields.get(ref.key)
            if f is None or f.grad is None:
                return None
            g = f.grad
            return GlobalRef("field", g.id, g.dtype, ref.ndim, ref.shape, g.name, False)
        if ref.kind == "ndarray":
            if ref.grad or not args[ref.key].needs_grad:
                return None
            return GlobalRef("ndarray", ref.key, ref.dtype, ref.ndim, None, ref.name + ".grad", True)
        if ref.kind == "temp" and ref.dtype.is_float and not ref.grad:
            return GlobalRef("temp", ref.key, ref.dtype, 1, (1,), ref.name + ".grad", True)
        return None
    return grad_of


class GradCompiled:
    def __init__(self, compiled, stacks, required, cache=True):
        self.c = compiled
        self.stacks = stacks  # per task: list of (SizeExpr, dtype) or None
        self.required = required  # per task: list of the natural SizeExpr (or None) or None
        self.sizing = _sizing.SizingSet(_sizing.TaskSizing.of([e for e, _ in st]) if st else None
                                        for st in stacks)
        self.sizing_needed = any(st for st in stacks)
        self.cache = cache  # init(adstack_cache=...): the per-task sizing cache is on
        # a forced size (ad_stack_size / default_ad_stack_size) can overflow; automatic ones cannot
        self.forced = any(st and any(e != r for (e, _), r in zip(st, req))
                          for st, req in zip(stacks, required))
        self.last_launch = None


def compile_grad(kernel, args):
    fwd = kernel.compile(args)
    g = getattr(fwd, "grad_compiled", None)  # one adjoint per compiled forward signature
    if g is not None:
        return g
    from .driver import debug_enabled
    from .passes.autodiff.pipeline import reverse_mode
    from .passes.dce import dce_tasks
    from .passes.simplify import simplify_tasks
    st = _state.current()
    tl = reverse_mode(fwd.tl, _grad_of_factory(args), st.options.get("default_ad_stack_size"),
                      st.options.get("ad_stack_size"), verify=debug_enabled(st),
                      adstack_enabled=st.options.get("ad_stack_experimental_enabled", True))
    tl = dce_tasks(simplify_tasks(tl))
    c = kernel._finish(tl, args, _state.backend())
    stacks, required = [], []
    for t in tl.tasks:
        allocas = adstack_allocas(t)
        stacks.append([(a.arg.capacity, a.dtype) for a in allocas] if allocas else None)
        required.append([a.arg.required for a in allocas] if allocas else None)
    g = GradCompiled(c, stacks, required, st.options.get("adstack_cache", True))
    fwd.grad_compiled = g
    return g


class AdstackLaunch:
    """What a backend needs to run adjoint tasks: capacities per task (None: no stacks) and a
    way to name the size a stack would have needed (for overflow errors)."""

    def __init__(self, g: GradCompiled, caps, args):
        self.g, self.caps, self.args = g, caps, args
        self.forced = g.forced
        self.backend_data = None  # what the backend derived from the capacities (its business)

    def required(self, task: int, stack: int):
        expr = self.g.required[task][stack] if self.g.required[task] else None
        if expr is None:
            return None
        try:
            return int(sz.eval_fast(expr, _sizing.LaunchContext(self.args)))
        except sz.SizerError:
            return None


def launch_grad(kernel, args):
    g = compile_grad(kernel, args)
    al = None
    if g.sizing_needed:
        caps = _sizing.evaluate(g.sizing, args, cache=g.cache)
        al = g.last_launch
        # reuse the launch record (and what backends keep on it) while nothing changed
        if al is None or al.caps is not caps or (al.args is not args and
                                                 not _kernel.same_args(al.args, args)):
            al = g.last_launch = AdstackLaunch(g, caps, args)
    _kernel.launch(g.c, args, adstack=al)
    if g.sizing_needed and _sizing.debug_enabled():
        from .backends.adstack_support import layout_for, task_stacks
        layouts = [layout_for(task_stacks(t), c) if c else None for t, c in zip(g.c.tl.tasks, caps)]
        be = _state.backend()
        heaps = be.heap_bytes() if hasattr(be, "heap_bytes") else (0, 0)
        _sizing.debug_print(g.c.tl.name, g.sizing, caps, layouts, heaps)


class Tape:
    """`with sd.ad.Tape(loss=loss): ...` records kernel launches; on exit sets loss.grad = 1 and
    runs their adjoints in reverse order. Gradients of all needs_grad fields are cleared at entry
    (clear_gradients=True, as in Taichi)."""

    active = None

    def __init__(self, loss=None, clear_gradients=True):
        self.loss = loss
        self.clear = clear_gradients
        self.calls = []

    def __enter__(self):
        if Tape.active is not None:
            raise SpiradAutodiffError("ad.Tape cannot be nested")
        if self.clear:
            for f in _state.current().fields:
                if f.grad is not None and f.shape is not None:
                    f.grad.fill(0)
        Tape.active = self
        return self

    def __exit__(self, exc_type, exc, tb):
        Tape.active = None
        if exc_type is not None:
            return False
        if self.loss is not None:
            if self.loss.grad is None:
                raise SpiradAutodiffError("the Tape's loss must be created with needs_grad=True")
            self.loss.grad.fill(1)
        for kernel, args in reversed(self.calls):
            kernel.grad(*args)
        return False

    def record(self, kernel, args):
        self.calls.append((kernel, args))


def evaluate_capacities(g: GradCompiled, args):
    """Capacities per task for this launch, evaluated afresh (no cache)."""
    return _sizing.evaluate(g.sizing, args, cache=False)
