"""`sd.ad`: the autodiff API namespace (Taichi's `ti.ad`)."""
from .custom_grad import grad_for, grad_replaced
from .fwd_mode import FwdMode
from .tape import Tape

__all__ = ["FwdMode", "Tape", "grad_for", "grad_replaced"]
