"""Threads and Ctrl-C: every public call is safe from any thread, and an interrupt never leaves
a launch half done (architecture §8).

Why one lock: a backend keeps per-program launch state (the CPU's pointer table and status words,
Vulkan's open command buffer and frame ring, wgpu's encoder, the adstack heaps) and a kernel keeps
its compiled programs and last plans; two threads launching at once corrupt them (wrong results,
spurious adstack overflows, a Vulkan queue wait that never returns, wgpu's "Encoding must not have
ended"). So every public entry point that compiles, launches or touches device memory holds
`LOCK`, one re-entrant lock per process (one state, one device): calls from several threads run
one after the other, and each gives what it would give alone. The CPU backend still splits one
launch across its worker pool.

Why deferred interrupts: `KeyboardInterrupt` is raised in the main thread between two Python
bytecodes, which may be in the middle of recording a command buffer, between a launch and its
write-generation bumps, or while the CPU pool still runs chunks that would write after control
returned. Inside a `launching()` section spirad's SIGINT handler (installed once, at `init()`,
only over Python's default handler) does not raise: it sets `CANCEL`, which the CPU runtime's
workers check between the pieces of their chunks (`llvm_codegen.cpu_runtime`), so a long launch
stops within a few milliseconds; the section then finishes (GPU backends wait for the submitted
work) and `KeyboardInterrupt` is raised when it exits. Later launches and the device are intact.
Outside such sections the handler raises at once, as Python's does.
"""
from __future__ import annotations

import _thread
import functools
import signal
import threading
from typing import Any, Callable, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

LOCK = threading.RLock()
CANCEL = threading.Event()  # set by an interrupt during a launch; the CPU workers stop on it
_MAIN = threading.main_thread().ident
_depth = 0            # nesting of launching() sections in the main thread
_pending = False      # an interrupt arrived inside a section: raised when the outermost exits
_installed = False


def locked(fn: _F) -> _F:
    """Decorator: `fn` runs holding LOCK (typed as `fn` itself, for type checkers)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with LOCK:
            return fn(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


def _on_sigint(signum, frame):
    global _pending
    if _depth > 0:  # inside a launch: stop it, raise when it has returned
        _pending = True
        CANCEL.set()
        return
    raise KeyboardInterrupt


def install() -> None:
    """Install the SIGINT handler (main thread only, over Python's default handler only: a
    handler the program installed itself is left in place)."""
    global _installed
    if _installed or _thread.get_ident() != _MAIN:
        return
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_sigint)
        _installed = True
    except (ValueError, OSError):  # no signals here (an embedded interpreter)
        _installed = True


class _Launching:
    """`with launching():` LOCK held, and in the main thread an interrupt deferred to the exit."""
    __slots__ = ()

    def __enter__(self):
        global _depth
        LOCK.acquire()
        if _thread.get_ident() == _MAIN:
            _depth += 1
        return self

    def __exit__(self, exc_type, exc, tb):
        global _depth, _pending
        raise_now = False
        if _thread.get_ident() == _MAIN:
            _depth -= 1
            if _depth == 0 and _pending:
                _pending = False
                CANCEL.clear()
                raise_now = True
        LOCK.release()
        if raise_now and exc_type is not KeyboardInterrupt:
            raise KeyboardInterrupt
        return False


_LAUNCHING = _Launching()


def launching() -> _Launching:
    return _LAUNCHING


def cancelled() -> bool:
    """An interrupt asked the running launch to stop (backends skip their remaining tasks)."""
    return CANCEL.is_set()


class PerThread:
    """A class attribute with one value per thread (`Tape.active`, `FwdMode.active`): a Tape
    being recorded in one thread never records another thread's launches. Read it as a class
    attribute; set it with `set`."""

    class _Slot(threading.local):
        value = None  # the class default: a thread that never set one reads None, no exception

    def __init__(self):
        self._local = self._Slot()

    def __get__(self, obj, cls=None):
        return self._local.value  # read at every launch: a plain attribute, not getattr's miss

    def set(self, value) -> None:
        global RECORDING
        with _SET_LOCK:
            RECORDING += (value is not None) - (self._local.value is not None)
            self._local.value = value


# How many PerThread values are set, in all threads (a Tape, forward mode, a graph capture):
# a kernel's repeated launch takes its shortcut only while none is (`Kernel.__call__`: one
# global read instead of three per-thread ones; another thread's Tape sends this thread's
# launches through the full path, which asks the per-thread values and gives the same result).
RECORDING = 0
_SET_LOCK = threading.Lock()
