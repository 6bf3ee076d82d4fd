"""`sd.ad.Tape(loss, grad_check=[x, ...])`: check the Tape's gradients against finite differences.

After the backward pass, for each listed field (or ndarray) `x`, Taichi's check: pick a random
direction t, and for step sizes eps = 2^-3, 2^-5, ..., 2^-29 restore the state saved at Tape entry,
set x += eps*t (resp. x -= eps*t), re-run every recorded step and read the loss; the central
difference (L+ - L-) / 2eps must match <x.grad, t> within 1% at some eps. A field's reported error
is the smallest relative error over the eps range; the Tape raises `SpiradGradCheckError` (an
AssertionError, as Taichi's failed check is) naming the fields that fail and the worst error.
Afterwards the state is restored and the steps re-run once more, so the fields hold what the
Tape's own forward pass left (gradients included: they are saved and put back).

The state saved (at Tape entry) is every user field's primal values and the ndarrays listed in
grad_check; other ndarrays the steps read must not be changed by them (outputs may be).
"""
from __future__ import annotations

import numpy as np

from kernel_ir.errors import SpiradGradCheckError, SpiradTypeError

EPS_RANGE = 2.0 ** np.arange(-3, -30, -2).astype(np.float64)
TOLERANCE = 0.01


class GradChecker:
    def __init__(self, loss, to_check):
        from ..runtime import state as _state
        if not isinstance(to_check, (list, tuple)):
            raise SpiradTypeError("grad_check must be a list of the fields whose gradients to check")
        for x in to_check:
            if not getattr(x, "dtype", None) or not x.dtype.is_float or not x.needs_grad:
                raise SpiradTypeError(f"grad_check: {x!r} must be a float field or ndarray with "
                                      f"a gradient (needs_grad=True)")
        if loss is None:
            raise SpiradTypeError("grad_check needs the Tape's loss")
        self.loss, self.to_check = loss, list(to_check)
        from ..data.ndarray import Ndarray
        self.fields = [f for f in _state.current().fields if f.shape is not None]
        self.fields += [x for x in self.to_check if isinstance(x, Ndarray)]
        self.backup = [f.to_numpy() for f in self.fields]
        self.errors: dict = {}

    def _restore(self):
        for f, v in zip(self.fields, self.backup):
            f.from_numpy(v)

    def _loss_after(self, calls, x, delta):
        self._restore()
        x.from_numpy((x.to_numpy().astype(np.float64) + delta).astype(x.dtype.np))
        for step, args in calls:
            _rerun(step, args)
        return float(np.asarray(self.loss.to_numpy(), dtype=np.float64).sum())

    def check(self, calls):
        grads = {id(x): x.grad.to_numpy().astype(np.float64) for x in self.to_check}
        saved_grads = [(f, f.grad.to_numpy()) for f in self.fields if f.needs_grad]
        rng = np.random.RandomState(0)
        failed = []
        for idx, x in enumerate(self.to_check):
            if x is self.loss:
                self.errors[idx] = 0.0
                continue
            tangent = rng.rand(*x.full_shape)
            ip_ad = float(np.sum(grads[id(x)] * tangent))
            best = np.inf
            for eps in EPS_RANGE:
                lp = self._loss_after(calls, x, eps * tangent)
                ln = self._loss_after(calls, x, -eps * tangent)
                ip_fd = (lp - ln) * 0.5 / eps
                err = abs(ip_ad - ip_fd)
                rel = err / (abs(ip_ad) if ip_ad != 0 else 1e-20)
                best = min(best, rel)
                if err <= TOLERANCE * abs(ip_ad) or (ip_ad == 0 and err == 0):
                    break
            self.errors[idx] = best
            name = getattr(x, "name", "") or f"variable {idx}"
            if best > TOLERANCE:
                failed.append((name, best))
                print(f"grad_check: {name} has relative error {best:.3g}, expected {TOLERANCE}")
            else:
                print(f"grad_check: {name} passes (relative error {best:.3g})")
        self._restore()
        for step, args in calls:
            _rerun(step, args)
        for f, g in saved_grads:
            f.grad.from_numpy(g)
        self.worst = max(self.errors.values(), default=0.0)
        if failed:
            names = ", ".join(f"{n} ({e:.3g})" for n, e in failed)
            raise SpiradGradCheckError(f"grad check failed: {names}; worst relative error "
                                       f"{self.worst:.3g} (tolerance {TOLERANCE})")
        return self.worst


def _rerun(step, args):
    """Run one recorded Tape step forward again (a kernel launch, or a grad_replaced call: its
    Tape entry has `rerun`)."""
    rerun = getattr(step, "rerun", None)
    if rerun is not None:
        rerun(args)
    else:
        step(*args)
