"""Which program a launch outside the launch path gets: the generic one of its signature.

A kernel's first launch compiles a program specialised on its ndarrays' shapes, and the launch
path picks, at each launch, that program or the generic one by the shapes it is given
(passes/shape_specialise, `Kernel._specialised_shapes`). A caller that compiles a program and
launches or replays it itself with ndarrays of other shapes bypasses that choice: the GPU sizer
(its scratch arrays grow) and the CUDA device-check bundle (its programs are replayed on the
device at other N). Such callers compile inside `shape_agnostic()`. A context variable, not an
option: it belongs to the calling code, and a thread or task of the user's is unaffected.
"""
from __future__ import annotations

import contextlib
import contextvars

_agnostic = contextvars.ContextVar("spirad_shape_agnostic", default=False)


def agnostic() -> bool:
    """True inside `shape_agnostic()`."""
    return _agnostic.get()


@contextlib.contextmanager
def shape_agnostic():
    """Every program compiled inside is the generic one of its signature, never specialised on
    the shapes of the ndarrays it is compiled for; programs compiled before keep their form, and
    a launch inside takes the generic program of its signature."""
    token = _agnostic.set(True)
    try:
        yield
    finally:
        _agnostic.reset(token)
