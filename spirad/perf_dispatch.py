"""`@sd.perf_dispatch` (Quadrants): one prototype, several registered implementations.

Quadrants times the compatible implementations on the first calls and keeps the fastest per
geometry hash. spirad runs the first registered implementation whose `is_compatible(*args,
**kwargs)` accepts the call, always: the choice never depends on timing, so two runs of a program
give the same numbers (Quadrants' own `use_deterministic_algorithms` mode settles its choices for
the same reason). The timing keywords are accepted and recorded.
"""
from __future__ import annotations

import inspect

from kernel_ir.errors import SpiradSyntaxError


class PerfDispatch:
    def __init__(self, proto, options: dict):
        self.proto = proto
        self.options = options
        self.impls = []  # (callable, is_compatible or None), in registration order
        self.__name__ = getattr(proto, "__name__", "perf_dispatch")
        self.__doc__ = getattr(proto, "__doc__", None)
        self._params = list(inspect.signature(proto).parameters)

    def register(self, implementation=None, *, is_compatible=None):
        def deco(fn):
            target = getattr(fn, "fn", fn)  # a @kernel: its Python function's signature
            params = list(inspect.signature(target).parameters)
            if params != self._params:
                raise SpiradSyntaxError(f"perf_dispatch '{self.__name__}': '{target.__name__}' "
                                        f"takes ({', '.join(params)}), the prototype "
                                        f"({', '.join(self._params)})")
            self.impls.append((fn, is_compatible))
            return fn
        return deco(implementation) if implementation is not None else deco

    def __call__(self, *args, **kwargs):
        for fn, ok in self.impls:
            if ok is None or ok(*args, **kwargs):
                return fn(*args, **kwargs)
        raise SpiradSyntaxError(f"perf_dispatch '{self.__name__}': no registered implementation "
                                f"accepts these arguments")


def perf_dispatch(fn=None, *, get_geometry_hash=None, **options):
    """`@sd.perf_dispatch(get_geometry_hash=..., warmup=..., active=..., ...)` (see module)."""
    options = dict(options, get_geometry_hash=get_geometry_hash)
    if fn is not None:
        return PerfDispatch(fn, options)
    return lambda f: PerfDispatch(f, options)
