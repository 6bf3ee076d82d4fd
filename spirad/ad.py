"""`sd.ad`: the autodiff API namespace (Taichi's `ti.ad`)."""
from .tape import Tape

__all__ = ["Tape"]
