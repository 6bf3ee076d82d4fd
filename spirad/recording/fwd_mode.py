"""`sd.ad.FwdMode`: forward-mode autodiff (Jacobian-vector products), Taichi's `ti.ad.FwdMode`.

    x = sd.field(sd.f32, shape=n, needs_dual=True)
    y = sd.field(sd.f32, shape=n, needs_dual=True)
    with sd.ad.FwdMode(loss=y, param=x, seed=[1.0] * n):
        compute_y()                  # runs the forward-mode program: y and y.dual
    y.dual                           # d y / d x in the direction `seed`

On entry: the duals of every field are zeroed (`clear_gradients=True`, as in Taichi; also the duals
of ndarrays given as `loss` or `param`), then `param.dual` is set to `seed` (one value per element
of `param`, vector / matrix components included; a one-element `param` defaults to [1.0]). Every
kernel launched inside the block runs its forward-mode program (`driver.compile_forward_mode`,
through the one launch path): it computes the primal results as the plain kernel does, and the
duals. On exit `param.dual` is zeroed again (the seed is cleared); the duals of the outputs stay.
"""
from __future__ import annotations

import numpy as np

from kernel_ir.errors import SpiradAutodiffError, SpiradTypeError, SpiradValueError

from ..runtime import state as _state
from ..tracebacks import api_class
from ..runtime.guard import PerThread


_ACTIVE = PerThread()


@api_class
class FwdMode:
    """`with sd.ad.FwdMode(loss=y, param=x, seed=[...]): ...`: the kernels launched in the block
    compute Jacobian-vector products into the duals (module doc)."""
    active = _ACTIVE  # this thread's FwdMode block (kernel launches check it)

    def __init__(self, loss=None, param=None, seed=None, clear_gradients=True, parameters=None):
        if param is None:
            param = parameters  # the keyword of older Taichi versions
        if param is None:
            raise SpiradTypeError("FwdMode needs param=: the field or ndarray whose dual is seeded")
        self.loss = loss
        self.param = param
        self.seed = seed
        self.clear = clear_gradients

    def __enter__(self):
        """Clear the duals and seed `param.dual` with `seed`."""
        from ..data.field import Field
        from ..data.ndarray import Ndarray
        if FwdMode.active is not None:
            raise SpiradAutodiffError("ad.FwdMode cannot be nested")
        losses = [] if self.loss is None else (list(self.loss) if isinstance(self.loss, (list, tuple))
                                               else [self.loss])
        for what, a in [("param", self.param)] + [("loss", x) for x in losses]:
            if not isinstance(a, (Field, Ndarray)):
                raise SpiradTypeError(f"FwdMode {what} must be a field or an ndarray, got "
                                      f"{type(a).__name__}")
            if not a.needs_dual:
                raise SpiradAutodiffError(f"FwdMode {what} {a._label()} has no dual: create it with "
                                          f"needs_dual=True (or call sd.root.lazy_dual())")
        p = self.param
        size = int(np.prod(p.full_shape, dtype=np.int64))
        seed = self.seed
        if seed is None:
            if size != 1:
                raise SpiradValueError(f"FwdMode: param has {size} elements, so seed= is needed: one "
                                       f"value per element, e.g. seed=[0, 0, 1] for the derivatives "
                                       f"with respect to the third element, [1, 1, 1] for their sum "
                                       f"(a Jacobian-vector product)")
            seed = [1.0]
        seed = np.asarray(seed, dtype=np.float64)
        if seed.size != size:
            raise SpiradValueError(f"FwdMode: seed has {seed.size} values but param has {size} "
                                   f"elements (shape {p.full_shape})")
        if self.clear:
            for f in _state.current().fields:
                if f.needs_dual and f.shape is not None:
                    f.dual.fill(0)
            for a in losses:
                if isinstance(a, Ndarray):
                    a.dual.fill(0)
        p.dual.from_numpy(seed.reshape(p.full_shape).astype(p.dtype.np))
        _ACTIVE.set(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        """Clear the seed (`param.dual`); the outputs' duals stay."""
        _ACTIVE.set(None)
        self.param.dual.fill(0)  # clear the seed, as Taichi does
        return False
