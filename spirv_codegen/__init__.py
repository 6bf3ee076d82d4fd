"""spirad's SPIR-V code generator: IR TaskList -> SPIR-V words, one compute module per task.

Public surface:
    compile_tasks(tl, abi, caps, bounds_check=False, device_ranges=()) -> tuple[SpirvTask, ...]
    compile_range_args(tl, task_index, abi, caps): a device range's arguments module
    SpirvCaps, SpirvTask, dispatch_geometry, LOCAL_SIZE
    validate(words, target_env='vulkan1.1'), disassemble(words)
    ARGS_BINDING, STATUS_BINDING, FIRST_ARRAY_BINDING (status codes, push constants, range
    arguments: the wire formats of `kernel_ir.abi`)
    adstack_bindings(n), META_NAME, HEAP_FLOAT_NAME, HEAP_INT_NAME
See `spirv_codegen.lower` for the binding / push-constant / status conventions and
`spirv_codegen.adstack` for the adstack buffers.
"""
from .adstack import HEAP_FLOAT_NAME, HEAP_INT_NAME, META_NAME, adstack_bindings
from .interface import ARGS_BINDING, FIRST_ARRAY_BINDING, STATUS_BINDING
from .lower import (LOCAL_SIZE, SpirvCaps, SpirvTask, compile_task, compile_tasks, dispatch_geometry,
                    global_accesses)
from .range_args import compile_range_args
from .validator import disassemble, validate

__all__ = ["compile_tasks", "compile_task", "SpirvCaps", "SpirvTask", "dispatch_geometry",
           "LOCAL_SIZE", "validate", "disassemble", "ARGS_BINDING",
           "STATUS_BINDING", "FIRST_ARRAY_BINDING", "adstack_bindings", "META_NAME",
           "HEAP_FLOAT_NAME", "HEAP_INT_NAME", "global_accesses", "compile_range_args"]
