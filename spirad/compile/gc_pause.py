"""Python's cyclic garbage collector paused while a kernel compiles.

A compile allocates millions of small objects (IR nodes, the passes' rebuilt blocks, llvmlite's
instructions and their text) and frees almost all of them by reference counting. Each
allocation still counts towards the collector's thresholds, so a compile ran many collections,
and the full ones traverse every object of the process (Genesis, torch, the IR of the kernels
compiled before). Genesis' ndarray `kernel_detection` compiled in 15.7 / 15.3 s of CPU with
the collector on and 12.9 / 13.1 s with it off (its code generator 2.4 -> 1.2 s, its frontend
1.3 -> 0.5 s; docs/performance.md, gbuild6). The collector changes no value: it only frees
cycles, which it frees after the compile instead (the next collection). The pause nests and is
shared by threads: the collector is disabled while any compile runs, and enabled again after
the last one ends only if it was enabled when the first began.
"""
from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_depth = 0
_resume = False  # the collector was on when the outermost compile began


@contextlib.contextmanager
def paused():
    """Run the block with the cyclic collector disabled (see the module docstring)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
