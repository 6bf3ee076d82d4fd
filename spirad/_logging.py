"""Log levels and log functions under Quadrants' names (`sd.WARN`, `sd.init(log_level=sd.ERROR)`,
`sd._logging.warn(msg)`), over Python's `logging` logger named "spirad".

The module-level functions (`trace` ... `critical`) are looked up by name each time spirad logs,
so a program may replace them (Genesis routes Quadrants' messages into its own logger so)."""
from __future__ import annotations

import logging as _py

TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL = "trace", "debug", "info", "warn", "error", "critical"
LEVELS = {TRACE: 5, DEBUG: _py.DEBUG, INFO: _py.INFO, WARN: _py.WARNING, ERROR: _py.ERROR,
          CRITICAL: _py.CRITICAL}
logger = _py.getLogger("spirad")


def _get_logging(name):
    level = LEVELS[name]
    return lambda msg: logger.log(level, msg)


trace, debug, info, warn, error, critical = (_get_logging(n) for n in LEVELS)


def set_logging_level(level) -> None:
    """`level`: one of the names above (or a `logging` level number)."""
    if isinstance(level, str):
        if level.lower() not in LEVELS:
            from kernel_ir.errors import SpiradValueError
            raise SpiradValueError(f"unknown log level {level!r}; use one of {list(LEVELS)}")
        level = LEVELS[level.lower()]
    logger.setLevel(level)


def log(name: str, msg: str) -> None:
    """Log `msg` through the current function of level `name` (replaceable, see above)."""
    globals()[name](msg)
