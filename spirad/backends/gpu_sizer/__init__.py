"""The GPU sizer: a task's adstack size expressions evaluated on the device (architecture §4).

Which module holds what:

    device_program  pure: bytecode -> the device tables (device dialect, leaf, stack and job
                    tables, slicing, the prepass description) and the host's error messages;
                    no spirad state, no device
    reduce          pure: the MaxOverRange fast path (which nodes become one device min / max
                    reduction, how a range is cut into parts, the rewrite with the results)
    kernels         loads `shaders/sizer_kernel.py` (the device side, spirad kernels) and
                    compiles each kernel once per backend
    runner          `GpuSizer`, the backend hook: scratch buffers through the backend's
                    `read` / `write`, launches, rounds, the one read-back, the SizedTask with
                    the device-written metadata buffer

The word layouts both sides share are `sizer.device_format` (described in `sizer/FORMAT.md`).
"""
from .device_program import DeviceProgram, Leaf, Unsupported
from .kernels import load_kernel_module
from .runner import GpuSizer, Plan, Result, task_leaves

__all__ = ["GpuSizer", "Plan", "Result", "Leaf", "Unsupported", "DeviceProgram",
           "load_kernel_module", "task_leaves"]
