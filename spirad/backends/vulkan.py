"""Vulkan backend: SPIR-V from `spirv_codegen`, run by `gfx_runtime.vulkan`.

Launches are recorded into the runtime's current batch; nothing is submitted until a host read,
`sync()` or a full batch. Per program we keep: one pipeline per task, a status buffer (checked
at every sync: a lavapipe loop-cap hit raises a clear error), temp buffers, and a small cache of
argument buffers keyed by their bytes (a launch loop with unchanging arguments binds the same
buffer every time; new contents get new buffers until a flush recycles them).
"""
from __future__ import annotations

import os
import struct

import numpy as np

from ..errors import SpiradDeviceError

_ARG_CACHE_MAX = 256


def is_available() -> bool:
    try:
        from gfx_runtime.vulkan import is_available as avail
    except ImportError:
        return False
    return avail()


def unavailable_reason() -> str:
    try:
        import gfx_runtime.vulkan  # noqa: F401
    except ImportError as e:
        return f"the Vulkan runtime cannot be imported ({e}); pip install vulkan"
    return "no Vulkan device found; install mesa-vulkan-drivers for lavapipe (software Vulkan)"


def create(state):
    return VulkanBackend(state)


class VkProgram:
    def __init__(self, name, tasks, pipelines, status, temps, task_names):
        self.name, self.tasks, self.pipelines = name, tasks, pipelines
        self.status, self.temps, self.task_names = status, temps, task_names
        self.arg_bufs: dict = {}
        self.spare: list = []


class VulkanBackend:
    name = "vulkan"

    def __init__(self, state):
        from gfx_runtime.vulkan import VulkanRuntime
        from spirv_codegen import SpirvCaps
        self.rt = VulkanRuntime()
        self.caps = self.rt.caps
        self.spirv_caps = SpirvCaps.from_device(self.caps)
        self.validate = state.debug or self.rt.validation or os.environ.get("SPIRAD_VALIDATE_SPIRV") == "1"
        self.launched: list = []  # programs with work since the last status check

    def capabilities(self) -> dict:
        return {"f64": self.caps.has_f64, "i64": self.caps.has_i64}

    def allocate(self, nbytes):
        return self.rt.alloc(max(int(nbytes), 16))

    def view(self, storage, np_dtype, shape):
        count = int(np.prod(shape, dtype=np.int64))
        return storage.view(np_dtype, count).reshape(shape)

    def compile(self, tl, abi):
        from spirv_codegen import STATUS_WORDS, compile_tasks, validate
        limit = self.caps.max_per_stage_storage_buffers
        if 2 + len(abi.bindings) > limit:
            raise SpiradDeviceError(
                f"kernel {tl.name} binds {2 + len(abi.bindings)} storage buffers (arguments, status and "
                f"{len(abi.bindings)} fields/ndarrays/temporaries) but the device allows "
                f"maxPerStageDescriptorStorageBuffers = {limit}; split the kernel")
        tasks = compile_tasks(tl, abi, self.spirv_caps)
        pipes = []
        for t in tasks:
            if self.validate:
                validate(t.words)
            pipes.append(self.rt.pipeline(t.words, t.num_bindings, t.push_constant_bytes))
        status = self.rt.alloc(4 * STATUS_WORDS)
        temps = {k: self.rt.alloc(16) for k, r in enumerate(abi.bindings) if r.kind == "temp"}
        return VkProgram(tl.name, tasks, pipes, status, temps, [t.name for t in tl.tasks])

    def _arg_buffer(self, p: VkProgram, argbuf: bytes):
        buf = p.arg_bufs.get(argbuf)
        if buf is not None:
            return buf
        if len(p.arg_bufs) >= _ARG_CACHE_MAX:
            self.sync()  # all recorded launches done: their argument buffers are free again
            p.spare.extend(p.arg_bufs.values())
            p.arg_bufs.clear()
        buf = p.spare.pop() if p.spare else self.rt.alloc(max(len(argbuf), 16), zero=False)
        buf.write(argbuf)
        p.arg_bufs[argbuf] = buf
        return buf

    def launch(self, p: VkProgram, storages, argbuf, ranges):
        from spirv_codegen import dispatch_geometry
        args = self._arg_buffer(p, argbuf)
        bufs = [args, p.status]
        for k, st in enumerate(storages):
            bufs.append(st if st is not None else p.temps[k])
        maxg = self.caps.max_compute_work_group_count
        for t, pipe, (b, e) in zip(p.tasks, p.pipelines, ranges):
            n = e - b
            if n <= 0:
                continue
            if t.kind == "serial":
                groups, tpr = (1, 1, 1), 1
            else:
                groups, tpr = dispatch_geometry(n, maxg, t.local_size)
            self.rt.dispatch(pipe, bufs, groups, struct.pack("<iiI", b, e, tpr))
        if not self.launched or self.launched[-1] is not p:
            if p not in self.launched:
                self.launched.append(p)

    def sync(self):
        self.rt.flush()
        if not self.launched:
            return
        launched, self.launched = self.launched, []
        for p in launched:
            words = p.status.view(np.uint32, 4)
            code = int(words[0])
            if code:
                aux = int(words[1])
                words[:] = 0
                raise _status_error(p, code, aux, self.caps)

    def take_validation_messages(self):
        return self.rt.take_validation_messages()

    def close(self):
        self.rt.close()


def _status_error(p, code, aux, caps):
    from spirv_codegen import STATUS_LOOP_CAP
    task = p.task_names[aux] if 0 <= aux < len(p.task_names) else f"#{aux}"
    if code == STATUS_LOOP_CAP:
        return SpiradDeviceError(
            f"kernel {p.name} (task {task}) stopped: a single parallel iteration ran more than "
            f"{caps.loop_iteration_cap} loop iterations, the limit of the {caps.name} driver "
            f"(llvmpipe ends every loop of an invocation silently past it; spirad stopped the "
            f"kernel instead of returning a truncated result). Spread the work over more parallel "
            f"iterations, or run this kernel on arch=cpu")
    return SpiradDeviceError(f"kernel {p.name} (task {task}) reported device error code {code} ({aux})")
