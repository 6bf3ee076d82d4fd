"""`sd.ad.Tape`: record kernel launches, then run their adjoints in reverse order.

    with sd.ad.Tape(loss=loss):
        step(); step(); compute_loss()
    # on exit: loss.grad = 1, then compute_loss.grad(), step.grad(), step.grad()

Gradients of every needs_grad field are cleared at entry (clear_gradients=True, as in Taichi).
Each recorded launch's adjoint runs through the same launch path as `kernel.grad(*args)`.
"""
from __future__ import annotations

from kernel_ir.errors import SpiradAutodiffError

from . import state as _state


class Tape:
    active = None  # the Tape being recorded (kernel launches call `record`)

    def __init__(self, loss=None, clear_gradients=True):
        self.loss = loss
        self.clear = clear_gradients
        self.calls = []
        self.suspended = 0      # > 0 inside a grad_replaced call: its kernels are not recorded
        self.replaying = False  # the backward pass runs (custom gradients call kernels freely)

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
        self.replaying = True
        for kernel, args in reversed(self.calls):
            kernel.grad(*args)
        return False

    def record(self, kernel, args):
        """Record one step (a kernel launch, or a `custom_grad` call) for the backward pass."""
        if not self.suspended:
            self.calls.append((kernel, args))
