"""User frames only: spirad's own frames are cut from the tracebacks of user errors.

Why: a compile error is raised 10-20 calls deep in the frontend; those frames said nothing to
the user and pushed the message (which quotes the kernel line with a caret) off the screen.

How: every public entry point (`@api`: kernel calls, field and ndarray methods, `init`, the
Tape...) catches `SpiradError` on its way out and replaces the traceback with one that keeps
only frames outside spirad's packages (the user's code, and libraries such as torch between
them). On Python 3.11+ the error is re-raised with a bare `raise`, which adds no frame for the
entry point itself, so the traceback ends at the user's line that called spirad. Internal errors
(RuntimeError: a compiler bug) keep every frame. `SPIRAD_DEBUG=1` keeps every frame of user
errors too.

`called_from_user()` tells whether the caller of a public function is user code (warnings that
only make sense for a user's own call, such as `kernel.grad()` with nothing to differentiate).
"""
from __future__ import annotations

import functools
import os
import sys
import types
from typing import Any, Callable, TypeVar

from kernel_ir.errors import SpiradError

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGES = ("spirad", "kernel_ir", "passes", "sizer", "spirv_codegen", "llvm_codegen", "gfx_runtime",
             "shaders")
_PREFIXES = tuple(os.path.join(_ROOT, p) + os.sep for p in _PACKAGES)
_BARE_RERAISE = sys.version_info >= (3, 11)  # RERAISE takes the traceback from the exception


def internal_file(filename: str) -> bool:
    """Whether `filename` is one of spirad's own source files."""
    return filename.startswith(_PREFIXES)


def debug() -> bool:
    from . import options
    return options.get("SPIRAD_DEBUG")


def _user_tb(tb):
    """`tb` without spirad's frames (a new chain; the frames themselves are shared)."""
    kept = []
    while tb is not None:
        if not internal_file(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def strip(exc: BaseException) -> BaseException:
    """Cut spirad's frames from `exc`'s traceback and from those of its cause / context."""
    seen = set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = _user_tb(e.__traceback__)
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return exc


_F = TypeVar("_F", bound=Callable[..., Any])
_C = TypeVar("_C", bound=type)


def api(fn: _F) -> _F:
    """A public entry point: user errors leave it with user frames only (module doc). Typed as
    returning `fn` itself, so type checkers see the wrapped function's signature."""
    @functools.wraps(fn)
    def entry(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SpiradError as e:
            if debug():
                raise
            strip(e)
            if _BARE_RERAISE:
                raise
            raise e.with_traceback(e.__traceback__)  # noqa: B904 - Python 3.10: one frame more
    entry.__spirad_api__ = True  # type: ignore[attr-defined]
    return entry  # type: ignore[return-value]


_DUNDERS = ("__init__", "__call__", "__getitem__", "__setitem__", "__enter__", "__exit__",
            "__iter__")


def api_class(cls: _C) -> _C:
    """`api` on every public method a class defines, and on the dunders users call (not on
    properties: they raise no user errors, and `Field.grad` looks at its caller)."""
    for name, v in list(vars(cls).items()):
        if name.startswith("_") and name not in _DUNDERS:
            continue
        if isinstance(v, staticmethod):
            setattr(cls, name, staticmethod(api(v.__func__)))
        elif isinstance(v, classmethod):
            setattr(cls, name, classmethod(api(v.__func__)))
        elif isinstance(v, types.FunctionType):
            setattr(cls, name, api(v))
    return cls


def reraise_stripped(e: SpiradError):
    """For entry points with their own `except SpiradError as e:` (hot paths): call, then
    `raise` bare."""
    if not debug():
        strip(e)


_ENTRY_CODE = api(lambda: None).__code__  # the frames of `api` wrappers


def called_from_user(depth: int = 2) -> bool:
    """Whether the function `depth - 1` frames up was called from outside spirad (its `api`
    wrapper, if any, not counted)."""
    try:
        f = sys._getframe(depth)
    except ValueError:
        return True
    while f is not None and f.f_code is _ENTRY_CODE:
        f = f.f_back
    return f is None or not internal_file(f.f_code.co_filename)


def warn_user(msg: str) -> None:
    """A `SpiradWarning` pointing at the user's call site (shown once per site by Python's
    default warning filter)."""
    import warnings
    from kernel_ir.errors import SpiradWarning
    warnings.warn(msg, SpiradWarning, stacklevel=user_stacklevel())


_PASSED_THROUGH = ("torch.",)  # libraries between the user and spirad (torch.autograd, DLPack)


def user_stacklevel() -> int:
    """`warnings.warn` stacklevel of the innermost user frame (the call site in user code):
    spirad's frames and torch's in between are skipped."""
    f, level = sys._getframe(1), 1
    while f is not None and (internal_file(f.f_code.co_filename) or
                             str(f.f_globals.get("__name__", "")).startswith(_PASSED_THROUGH)):
        f, level = f.f_back, level + 1
    return level
