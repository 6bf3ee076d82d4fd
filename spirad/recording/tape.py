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

Record, then backward (Warp's `tape.backward(grads=...)`, Dr.Jit's `backward_from`): a Tape
without a loss only records (as in Taichi, whose Tape evaluates at exit only with a loss), and
`tape.backward(grads={y: dy, ...})` later seeds the gradients of the outputs and runs the
adjoints, so several kernels make one step of a `torch.autograd.Function` (forward records,
backward seeds with torch's output gradients; docs/interop.md). `tape.backward(loss=l)` seeds
`l.grad = 1`; `tape.grad()` is Taichi's name for the loss given at construction. Gradients
accumulate into the inputs over several backward calls, as in torch: `tape.zero()` clears
them, `tape.reset()` also forgets the recorded launches.
"""
from __future__ import annotations

import numpy as np

from kernel_ir.errors import SpiradAutodiffError

from ..runtime import state as _state
from ..tracebacks import api_class
from ..runtime.guard import PerThread


_ACTIVE = PerThread()


@api_class
class Tape:
    """`with sd.ad.Tape(loss=loss): ...` records the kernel launches of the block and, at its end,
    runs their adjoints in reverse order (module doc)."""
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
        """Start recording: clear the gradients (`clear_gradients=True`) and set the loss to 0."""
        if Tape.active is not None:
            raise SpiradAutodiffError("ad.Tape cannot be nested")
        if self.loss is not None:
            self._check_loss(self.loss)
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
        """Stop recording; with a loss, seed `loss.grad` with 1 and run the adjoints in reverse
        order (without one, `backward` does that later)."""
        _ACTIVE.set(None)
        if exc_type is not None:
            return False
        if self.loss is not None:
            self.grad()
        return False

    def grad(self):
        """Run the adjoints of the recorded launches with `loss.grad = 1` (the loss given to the
        Tape; Taichi's `tape.grad()`), then the gradient check if one was asked for."""
        if self.loss is None:
            raise SpiradAutodiffError("Tape.grad() seeds the Tape's loss, and this Tape has none: "
                                      "seed the outputs' gradients with "
                                      "tape.backward(grads={y: dy}) or tape.backward(loss=l)")
        self.backward(loss=self.loss)
        if self.checker is not None:
            self.checker.check(self.calls)

    def backward(self, grads=None, loss=None):
        """Seed, then run the adjoints of the recorded launches in reverse order.

        `loss`: a one-element field or ndarray whose `.grad` is set to 1. `grads`: {field or
        ndarray: gradient}, each gradient a number, a numpy array, a torch tensor, or a field /
        ndarray of the same shape, written into that output's `.grad`. Other gradients keep
        their values (`clear_gradients=True` zeroed the fields' at entry; `zero()` clears).
        Gradients accumulate into inputs over several calls."""
        if Tape.active is self:
            raise SpiradAutodiffError("Tape.backward() runs after the `with` block that records; "
                                      "call it after the block ends")
        if loss is not None:
            self._check_loss(loss)
            _seed_loss(loss)
        for target, g in (grads or {}).items():
            _seed(target, g)
        self.replaying = True
        try:
            for kernel, args in reversed(self.calls):
                kernel.grad(*args)
        finally:
            self.replaying = False

    def zero(self):
        """Zero the gradients of every field with one and of every ndarray a recorded launch
        took (Warp's `tape.zero()`)."""
        from ..data.ndarray import Ndarray
        for f in _state.current().fields:
            if f.needs_grad and f.shape is not None:
                f.grad.fill(0)
        seen = set()
        for _, args in self.calls:
            for a in (args if isinstance(args, tuple) else ()):
                if isinstance(a, Ndarray) and a.grad is not None and id(a) not in seen:
                    seen.add(id(a))
                    a.grad.fill(0)

    def reset(self):
        """Forget the recorded launches and zero the gradients (Warp's `tape.reset()`)."""
        self.zero()
        self.calls = []

    @staticmethod
    def _check_loss(loss):
        if not _has_grad(loss):
            raise SpiradAutodiffError("the Tape's loss must be created with needs_grad=True "
                                      "(a torch tensor: requires_grad=True)")
        if loss.shape and int(np.prod(loss.shape)) != 1:
            raise SpiradAutodiffError(f"the Tape's loss must be a 0-d field or ndarray (one "
                                      f"element), got shape {tuple(loss.shape)}")

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


def _seed(target, g) -> None:
    """`target.grad` = `g` (a number, array, tensor, field or ndarray), for `Tape.backward`."""
    from ..data.field import Field
    from ..data.ndarray import Ndarray
    if not isinstance(target, (Field, Ndarray)):
        raise SpiradAutodiffError(f"Tape.backward(grads=...): the keys are the fields / ndarrays "
                                  f"whose gradients to seed, got {type(target).__name__}")
    if not target.needs_grad:
        raise SpiradAutodiffError(f"Tape.backward(grads=...): {target._kind} {target._label()} "
                                  f"has no gradient (create it with needs_grad=True)")
    if isinstance(g, (Field, Ndarray)):
        target.grad.copy_from(g)
    elif np.ndim(g) == 0 and not hasattr(g, "__dlpack__"):
        target.grad.fill(g)
    else:
        if hasattr(g, "detach"):  # a torch tensor: its values, on the CPU
            g = g.detach().cpu()
        arr = np.asarray(g)
        if arr.shape != target.full_shape:
            raise SpiradAutodiffError(f"Tape.backward(grads=...): the gradient of "
                                      f"{target._kind} {target._label()} has shape {arr.shape}, "
                                      f"expected {target.full_shape}")
        target.grad.from_numpy(arr.astype(target.dtype.np, copy=False))


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


def _seed_loss(loss) -> None:
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
