"""Logging: Python's `logging`, logger `spirad` (what was compiled, loaded, sized, and how long).

Why: a first call that takes 2 s is either a compile or a slow launch, and a second run that
is as slow means the offline cache missed; without a log line the user cannot tell. The lines:

    INFO   compiled kernel step (forward, vulkan) in 212.4 ms
    INFO   loaded kernel step (adjoint, vulkan) from the offline cache in 3.1 ms
    DEBUG  sized the adstacks of step_grad in 0.08 ms: task 0: capacities [65], strides 260 B
           float / 0 B int; heaps 66560 B float, 0 B int

A library only logs; the application decides where lines go. So the logger has a NullHandler,
and nothing is printed unless the application configures `logging` or asks through
`sd.init(log_level=...)` (Taichi's keyword: `sd.INFO`, "debug", `logging.DEBUG`, ...), which sets
the logger's level and, when neither the logger nor the root logger has a handler yet, adds one
that writes `[spirad] message` lines to stderr.
"""
from __future__ import annotations

import logging
import sys

logger = logging.getLogger("spirad")
logger.addHandler(logging.NullHandler())

TRACE = 5  # below DEBUG (Taichi's `ti.TRACE`)
logging.addLevelName(TRACE, "TRACE")
LEVELS = {"trace": TRACE, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
          "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL}
_handler = None  # the stderr handler `set_level` added, if any


def level_of(level) -> int:
    """A logging level from Taichi's names ("info", sd.INFO) or a `logging` number."""
    if isinstance(level, int) and not isinstance(level, bool):
        return level
    if isinstance(level, str) and level.lower() in LEVELS:
        return LEVELS[level.lower()]
    from kernel_ir.errors import SpiradValueError
    raise SpiradValueError(f"log_level must be one of {', '.join(sorted(LEVELS))} (sd.INFO, ...) "
                           f"or a logging level number, got {level!r}")


def set_level(level) -> None:
    """`sd.init(log_level=...)`: the `spirad` logger's level (and a stderr handler if none)."""
    global _handler
    logger.setLevel(level_of(level))
    real = [h for h in logger.handlers if not isinstance(h, logging.NullHandler)]
    if _handler is None and not real and not logging.getLogger().handlers:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("[spirad] %(message)s"))
        logger.addHandler(_handler)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e3:.3f} ms"


def set_logging_level(level) -> None:
    """Taichi's `ti.set_logging_level(ti.DEBUG)`: the `spirad` logger's level, as
    `init(log_level=)`."""
    set_level(level)


def is_logging_effective(level) -> bool:
    """Taichi's `ti.is_logging_effective(ti.INFO)`: whether messages of `level` are shown."""
    return logger.isEnabledFor(level_of(level))
