"""Error types users see.

`SpiradError` is the base of every error caused by user input (bad kernel code, bad arguments,
an unavailable arch, a device limit). Internal invariant violations raise `RuntimeError` instead,
so a user error can never be confused with a compiler bug: a user error is a SpiradError. The
failures a launch reports at run time (`SpiradRuntimeError`: a failed kernel `assert`, an adstack
overflow, a device limit) are also RuntimeErrors, as Quadrants' and Taichi's are; every error
found while compiling (syntax, types, names, autodiff) is not.

The errors that have a Python counterpart also derive from it, as Taichi's error classes do, so
code that catches `TypeError` / `ValueError` / `NameError` / `SyntaxError` catches spirad's too.
`SpiradSyntaxError` keeps its own caret output: its message (`.msg`) is the whole formatted text
and it carries no `lineno`, so Python's traceback printer adds no second source quote.
"""


class SpiradError(Exception):
    """Base class of every user-facing spirad error."""


class SpiradSyntaxError(SpiradError, SyntaxError):
    """Kernel source uses Python syntax or a construct spirad does not support."""


class SpiradTypeError(SpiradError, TypeError):
    """Type mismatch in kernel code or in kernel arguments."""


class SpiradNameError(SpiradError, NameError):
    """Kernel code reads a name that is not defined."""


class SpiradArchError(SpiradError):
    """An explicitly requested arch is unavailable."""


class SpiradRuntimeError(SpiradError, RuntimeError):
    """A failure a kernel launch reports at run time (a failed `assert`, an adstack overflow, a
    device limit): a RuntimeError, as Quadrants' and Taichi's (`QuadrantsRuntimeError`,
    `TaichiRuntimeError`) are. Still a SpiradError: an internal bug is a RuntimeError that is
    not a SpiradError."""


class SpiradDeviceError(SpiradRuntimeError):
    """A device limit, a missing device capability, or device memory exhaustion."""


class SpiradValueError(SpiradError, ValueError):
    """Bad value passed from Python (shape mismatch, out-of-range data)."""


class SpiradAutodiffError(SpiradError):
    """Kernel shape that reverse mode cannot differentiate, with the reason."""


class SpiradNotSupportedError(SpiradError, NotImplementedError):
    """A Taichi / Quadrants feature spirad does not implement; the message names the alternative."""


class SpiradGradCheckError(SpiradAutodiffError, AssertionError):
    """`Tape(grad_check=[...])` found a gradient that disagrees with finite differences (an
    AssertionError, as Taichi's failed check is)."""


class SpiradAssertionError(SpiradRuntimeError, AssertionError):
    """An `assert` in a kernel failed (checked under `init(debug=True)`, as in Taichi): a
    RuntimeError and an AssertionError, as `TaichiAssertionError` / `QuadrantsAssertionError`
    are."""


class SpiradDataAccessError(SpiradAutodiffError, SpiradAssertionError):
    """`Tape(validation=True)`: a recorded kernel broke the global data access rule (overwrote
    values an adjoint re-reads): an autodiff error, and an AssertionError / RuntimeError as
    Quadrants' and Taichi's failed check (`QuadrantsAssertionError`) is."""


class SpiradAdStackOverflow(SpiradAssertionError):
    """An adstack push went past its capacity; raised by the launch on the CPU, at the next sync
    or host read on a GPU. Quadrants raises its `QuadrantsAssertionError` there: a RuntimeError
    and an AssertionError (`except SpiradAssertionError` catches it too)."""


class SpiradIndexError(SpiradValueError, IndexError):
    """An index out of range (Python's and numpy's kind; still a ValueError, as spirad's index
    errors were before)."""


class SpiradArgumentError(SpiradSyntaxError, SpiradTypeError):
    """A kernel or func called with arguments its parameters do not take (too many, a missing
    one, an unknown keyword, a value given twice): a TypeError, as Python's own, and a
    SyntaxError, as Taichi's `TaichiSyntaxError` for the same mistakes."""


class SpiradBoundsError(SpiradIndexError, SpiradAssertionError):
    """A bounds check found an index out of range: a kernel's under `init(debug=True)`, or a
    Python-scope `x[i]` of a field. A SpiradIndexError (IndexError, ValueError), and also an
    AssertionError / RuntimeError, as Taichi raises its bounds checks (`TaichiAssertionError`
    from a kernel, an AssertionError in Python scope)."""


class SpiradOutOfBoundsError(SpiradRuntimeError, IndexError):
    """A kernel launched without `init(debug=True)` indexed a field / ndarray out of range: the
    default bounds check skipped the access (a load read 0, a store wrote nothing) and the next
    sync raises this, naming the kernel, task and field. `init(debug=True)` names the source
    line and the index (a `SpiradIndexError` there)."""


class SpiradShapeError(SpiradValueError, SpiradRuntimeError):
    """`sd.ndarray(dtype, shape)` with a shape that is not a tuple of non-negative integers or
    that holds more elements than an ndarray indexes: a ValueError (spirad's kind for a bad
    value) and a RuntimeError, as Taichi's `TaichiRuntimeError` ("is not a valid shape for
    ndarray") is."""


class SpiradArgumentValueError(SpiradTypeError, ValueError):
    """An array passed for an ndarray parameter whose element type, dimensions or element shape
    the annotation does not take: a TypeError, as spirad's other argument errors, and a
    ValueError, as Taichi's `Invalid value for argument ...` for the same mistakes."""


class SpiradGradDtypeError(SpiradTypeError, SpiradRuntimeError):
    """`needs_grad=True` / `needs_dual=True` on a field or ndarray whose element type is not a
    float (gradients are floats): a TypeError, as spirad's other type mistakes, and a
    RuntimeError, as Taichi's "... is not supported for field with `needs_grad=True`"."""


class SpiradCustomGradError(SpiradTypeError, SpiradRuntimeError):
    """`sd.ad.grad_for(primal)` on something that cannot take a custom gradient: a kernel or a
    plain function (not decorated with `@sd.ad.grad_replaced`), or one that already has one. A
    TypeError, as spirad's other wrong-argument errors, and a RuntimeError, as Taichi's
    `grad_for` raises for the same mistakes."""


class SpiradWarning(UserWarning):
    """A program that runs but probably does not do what its author meant: a narrowing store
    (`i32 <- f32`), `kernel.grad()` with nothing to differentiate, `.grad` of a field without
    one, a silent host <-> device copy of a user's array."""


# Users see the public names (`spirad.SpiradTypeError`, where `sd.SpiradTypeError` is found),
# not this module's path: tracebacks print `__module__.__qualname__`.
for _cls in (SpiradError, SpiradSyntaxError, SpiradTypeError, SpiradNameError, SpiradArchError,
             SpiradRuntimeError, SpiradDeviceError, SpiradValueError, SpiradAutodiffError,
             SpiradAdStackOverflow, SpiradNotSupportedError, SpiradGradCheckError,
             SpiradAssertionError, SpiradIndexError, SpiradDataAccessError, SpiradOutOfBoundsError,
             SpiradBoundsError, SpiradArgumentError, SpiradArgumentValueError,
             SpiradGradDtypeError, SpiradWarning):
    _cls.__module__ = "spirad"
del _cls
