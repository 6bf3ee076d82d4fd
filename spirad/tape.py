"""`sd.ad.Tape`: record kernel launches, then run their adjoints in reverse order.

    with sd.ad.Tape(loss=loss):
        step(); step(); compute_loss()
    # on exit: loss.grad = 1, then compute_loss.grad(), step.grad(), step.grad()

As in Taichi: gradients of every needs_grad field are cleared at entry (clear_gradients=True) and
the loss (a 0-d field or one-element ndarray) is set to 0. Each recorded launch's adjoint runs
through the same launch path as `kernel.grad(*args)`; a `grad_replaced` call (`custom_grad`) is
one step whose custom gradient runs instead. `grad_check=[x, ...]` checks the gradients of the
listed fields against finite differences afterwards (`grad_check`). `validation=True` runs the
recorded kernels instrumented (passes/validation, tape_validation) and raises at the first
launch that overwrites an element of a differentiated field that the Tape's kernels had read.
"""
from __future__ import annotations

import numpy as np

from kernel_ir.errors import SpiradAutodiffError

from . import state as _state
from .guard import PerThread


_ACTIVE = PerThread()


class Tape:
    active = _ACTIVE  # this thread's Tape being recorded (launches `record`)

    def __init__(self, loss=None, clear_gradients=True, validation=False, grad_check=None):
        self.loss = loss
        self.clear = clear_gradients
        self.validation = validation
        self.grad_check = grad_check
        self.checker = None  # grad_check.GradChecker, made at entry
        self.calls = []
        self.suspended = 0      # > 0 inside a grad_replaced call: its kernels are not recorded
        self.replaying = False  # the backward pass runs (custom gradients call kernels freely)

    def __enter__(self):
        if Tape.active is not None:
            raise SpiradAutodiffError("ad.Tape cannot be nested")
        if self.loss is not None:
            if not _has_grad(self.loss):
                raise SpiradAutodiffError("the Tape's loss must be created with needs_grad=True "
                                          "(a torch tensor: requires_grad=True)")
            if self.loss.shape and int(np.prod(self.loss.shape)) != 1:
                raise SpiradAutodiffError(f"the Tape's loss must be a 0-d field or ndarray (one "
                                          f"element), got shape {tuple(self.loss.shape)}")
        if self.clear:
            for f in _state.current().fields:
                if f.needs_grad and f.shape is not None:
                    f.grad.fill(0)
        if self.loss is not None:
            _fill(self.loss, 0)  # as in Taichi: the loss starts from 0 in every Tape
        if self.grad_check:
            from .grad_check import GradChecker
            self.checker = GradChecker(self.loss, self.grad_check)
        if self.validation:
            from .tape_validation import current
            current().clear()
        _ACTIVE.set(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        _ACTIVE.set(None)
        if exc_type is not None:
            return False
        if self.loss is not None:
            _seed(self.loss)
        self.replaying = True
        for kernel, args in reversed(self.calls):
            kernel.grad(*args)
        if self.checker is not None:
            self.checker.check(self.calls)
        return False

    def launching(self, plan):
        """Called before each forward kernel launch while this Tape is active, with its
        `launch.LaunchPlan` (what it reads and may write: `plan.compiled.reads / writes`).
        Nothing to do for a Tape; `checkpoint`'s step recorder saves what the launch overwrites."""

    def record(self, kernel, args):
        """Record one step (a kernel launch, or a `custom_grad` call) for the backward pass."""
        if not self.suspended:
            self.calls.append((kernel, args))
            if self.validation and hasattr(kernel, "fn"):  # a kernel launch: check the rule
                from .tape_validation import current
                current().check(kernel.fn.__name__)


# A Tape's loss is a 0-d field / one-element ndarray, or (as in Taichi) a one-element torch tensor
# that requires grad; the launches bind the tensor's `.grad` (spirad.interop.arrays).
def _is_tensor(x) -> bool:
    return hasattr(x, "requires_grad") and hasattr(x, "data_ptr")


def _has_grad(loss) -> bool:
    return bool(loss.requires_grad) if _is_tensor(loss) else loss.needs_grad


def _fill(loss, value) -> None:
    if _is_tensor(loss):
        import torch
        with torch.no_grad():
            loss.fill_(value)
    else:
        loss.fill(value)


def _seed(loss) -> None:
    """d loss / d loss = 1."""
    if _is_tensor(loss):
        import torch
        if loss.grad is None:
            loss.grad = torch.ones_like(loss)
        else:
            with torch.no_grad():
                loss.grad.fill_(1)
    else:
        loss.grad.fill(1)
