"""Custom gradients for Python-scope functions: `sd.ad.grad_replaced` and `sd.ad.grad_for`.

    @sd.ad.grad_replaced
    def step(mul):             # calls kernels
        scale(mul); scale(mul)

    @sd.ad.grad_for(step)
    def step_grad(mul):        # runs instead of the recorded kernels' adjoints
        scale.grad(mul)

As in Taichi: inside an `sd.ad.Tape` a call of `step` records `step` itself (the kernels it
launches are not recorded), and the Tape's backward pass calls `step.grad(*args)` — the function
registered with `grad_for` — at its place in the reverse order. Outside a Tape `step` just runs.
The decorated object is a plain function, so it works as a method too.
"""
from __future__ import annotations

import functools

from kernel_ir.errors import SpiradAutodiffError, SpiradCustomGradError, SpiradTypeError

from .tape import Tape


def grad_replaced(fn):
    """Record calls of `fn` on the active Tape as one step whose adjoint is `fn.grad`."""
    if not callable(fn):
        raise SpiradTypeError(f"grad_replaced expects a function, got {type(fn).__name__}")
    from ..func import PyFunction
    if isinstance(fn, PyFunction):
        raise SpiradTypeError("grad_replaced decorates a Python-scope function that calls "
                              "kernels, not an @sd.kernel / @sd.func")
    return _recorded_as_one_step(fn)


def _recorded_as_one_step(fn):
    """`fn` wrapped so that a Tape records each call as one step (its kernels unrecorded)."""
    @functools.wraps(fn)
    def replaced(*args, **kwargs):
        tape = Tape.active
        if tape is None or tape.replaying or tape.suspended:
            return fn(*args, **kwargs)
        tape.record(_Replaced(replaced), (args, kwargs))
        tape.suspended += 1  # the kernels it launches belong to this step
        try:
            return fn(*args, **kwargs)
        finally:
            tape.suspended -= 1

    replaced.grad = None
    replaced._spirad_grad_replaced = True
    return replaced


def no_grad(fn):
    """A Python-scope function or a kernel that contributes no gradient under a Tape (Taichi's
    `ti.ad.no_grad`): recorded as one step with an empty gradient; `fn.grad(...)` does nothing."""
    if not callable(fn):
        raise SpiradTypeError(f"no_grad expects a function or kernel, got {type(fn).__name__}")
    replaced = _recorded_as_one_step(fn)
    replaced.grad = lambda *a, **k: None
    return replaced


def clear_all_gradients():
    """Zero the gradient of every field (Taichi's `ti.ad.clear_all_gradients()`)."""
    from ..runtime import state as _state
    for f in _state.current().fields:
        if f.needs_grad and f.shape is not None:
            f.grad.fill(0)


def grad_for(primal):
    """Register the decorated function as the gradient of the `grad_replaced` function `primal`."""
    if not getattr(primal, "_spirad_grad_replaced", False):
        from ..func import PyFunction
        what = "a kernel" if isinstance(primal, PyFunction) else type(primal).__name__
        hint = (": wrap the kernel in a Python function decorated with @sd.ad.grad_replaced"
                if what == "a kernel" else "")
        raise SpiradCustomGradError(f"grad_for(primal): primal must be a function decorated with "
                                    f"@sd.ad.grad_replaced, got {what}{hint}")

    def deco(backward):
        if primal.grad is not None:
            raise SpiradCustomGradError(f"{primal.__name__} already has a gradient "
                                        f"({primal.grad.__name__})")
        primal.grad = backward
        return backward
    return deco


class _Replaced:
    """A Tape entry for a grad_replaced call: its `grad(args, kwargs)` calls the custom gradient."""

    def __init__(self, fn):
        self.fn = fn

    def rerun(self, args):
        """Run the primal again (grad_check's finite differences)."""
        self.fn(*args[0], **args[1])

    def grad(self, args, kwargs):
        g = self.fn.grad
        if g is None:
            raise SpiradAutodiffError(f"{self.fn.__name__} is @sd.ad.grad_replaced but has no "
                                      f"gradient; register one with @sd.ad.grad_for("
                                      f"{self.fn.__name__})")
        g(*args, **kwargs)
