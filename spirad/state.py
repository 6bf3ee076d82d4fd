"""Process-wide runtime state: the chosen arch and backend, default types, live fields.

`init()` replaces the whole state (fields and compiled kernels of the previous state become
invalid), as in Taichi. The backend is created lazily, so importing spirad costs nothing.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from kernel_ir import dtypes as T


@dataclass
class State:
    arch: str = "cpu"
    default_fp: T.DType = T.f32
    default_ip: T.DType = T.i32
    debug: bool = False
    options: dict = field(default_factory=dict)
    backend: object = None
    epoch: int = 0
    fields: list = field(default_factory=list)
    _ids: itertools.count = field(default_factory=itertools.count)
    _field_map: tuple = (0, {})  # (len(fields) when built, id -> Field)

    def new_id(self) -> int:
        return next(self._ids)

    def field_map(self) -> dict:
        """Field id -> Field (gradient fields included), rebuilt when fields were added."""
        if self._field_map[0] != len(self.fields) or not self._field_map[1]:
            m = {}
            for f in self.fields:
                m[f.id] = f
                if f.grad is not None:
                    m[f.grad.id] = f.grad
            self._field_map = (len(self.fields), m)
        return self._field_map[1]


_epoch = itertools.count(1)
state = State(epoch=next(_epoch))


def reset(**kw) -> State:
    global state
    old = state
    if old.backend is not None:
        old.backend.close()
    state = State(epoch=next(_epoch), **kw)
    return state


def current() -> State:
    return state


def backend():
    """The live backend, created on first use."""
    s = state
    if s.backend is None:
        from .backends import load_backend
        s.backend = load_backend(s.arch, s)
    return s.backend
