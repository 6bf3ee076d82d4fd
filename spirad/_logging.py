"""Quadrants' `qd._logging` names over spirad's logger (`spirad.runtime.logger`): the level names and one
log function per level (`warn(msg)`, ...).

The functions are module attributes looked up at each use, so a program may replace them (Genesis
routes Quadrants' messages into its own logger that way)."""
from __future__ import annotations

from .runtime.logger import LEVELS as _LEVELS, logger, set_level

TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL = "trace", "debug", "info", "warn", "error", "critical"


def _get_logging(name):
    level = _LEVELS[name]
    return lambda msg: logger.log(level, msg)


trace, debug, info, warn, error, critical = (_get_logging(n) for n in
                                             (TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL))


def set_logging_level(level) -> None:
    set_level(level)
