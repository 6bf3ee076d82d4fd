"""`sd.ad`: the autodiff API namespace (Taichi's `ti.ad`)."""
from .time_steps import CheckpointStats, checkpointed
from ..recording.custom_grad import clear_all_gradients, grad_for, grad_replaced, no_grad
from ..recording.fwd_mode import FwdMode
from ..recording.tape import Tape

__all__ = ["CheckpointStats", "FwdMode", "Tape", "checkpointed", "clear_all_gradients", "grad_for",
           "grad_replaced", "no_grad"]
