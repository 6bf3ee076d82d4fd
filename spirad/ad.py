"""`sd.ad`: the autodiff API namespace (Taichi's `ti.ad`)."""
from .fwd_mode import FwdMode
from .tape import Tape

__all__ = ["FwdMode", "Tape"]
