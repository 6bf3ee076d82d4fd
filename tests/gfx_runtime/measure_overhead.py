"""Measure per-launch overhead of the Vulkan runtime on a tiny kernel (not a test).

Run from the repository root: python -m tests.gfx_runtime.measure_overhead [--validation]
Reports microseconds per launch for (a) 1000 launches recorded into one batch and flushed once
(recording + execution amortised), (b) a flush after every launch, (c) recording alone.
"""

from __future__ import annotations

import struct
import sys
import time


import numpy as np

from tests.gfx_runtime import vk_test_shaders as shaders
from gfx_runtime.vulkan import VulkanRuntime


def main() -> None:
    validation = "--validation" in sys.argv
    rt = VulkanRuntime(validation=validation)
    n = 64
    buf = rt.alloc(n * 4)
    add = rt.pipeline(shaders.assemble("add_one"), 1, 4)
    pc = struct.pack("<I", n)
    launches = 1000
    for _ in range(50):  # warm up (pipeline JIT, descriptor set cache)
        rt.dispatch(add, [buf], (1, 1, 1), pc)
    rt.flush()

    def best_of(fn, repeats=5):
        return min(fn() for _ in range(repeats))

    def batched():
        t = time.perf_counter()
        for _ in range(launches):
            rt.dispatch(add, [buf], (1, 1, 1), pc)
        rt.flush()
        return (time.perf_counter() - t) / launches * 1e6

    def flush_each():
        t = time.perf_counter()
        for _ in range(launches):
            rt.dispatch(add, [buf], (1, 1, 1), pc)
            rt.flush()
        return (time.perf_counter() - t) / launches * 1e6

    def record_only():
        t = time.perf_counter()
        for _ in range(launches):
            rt.dispatch(add, [buf], (1, 1, 1), pc)
        dt = (time.perf_counter() - t) / launches * 1e6
        rt.flush()
        return dt

    def idle_flush():
        t = time.perf_counter()
        for _ in range(launches):
            rt.flush()
        return (time.perf_counter() - t) / launches * 1e6

    results = {
        "batched (1000 launches, one flush)": best_of(batched),
        "flush after every launch": best_of(flush_each),
        "recording only (dispatch call)": best_of(record_only),
        "flush with nothing pending": best_of(idle_flush),
    }
    total = int(buf.view(np.uint32)[0])
    print(f"device: {rt.caps.name}{' (validation on)' if validation else ''}")
    for name, us in results.items():
        print(f"  {name:40s} {us:8.2f} us/launch")
    print(f"  result check: {total} == {50 + 15 * launches}: {total == 50 + 15 * launches}")
    rt.close()


if __name__ == "__main__":
    main()
