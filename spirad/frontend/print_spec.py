"""Format specs of kernel prints, with Taichi's meaning: printf's.

Taichi hands a print's format spec to printf: `{:.10d}` pads an integer to ten digits, `{:.2}`
of a float is `%.2f`, `{:i}` / `{:u}` are integers, and a conversion that does not fit the
value's dtype (`{:d}` of an f32, `{:u}` of an i32) is refused when the kernel compiles. spirad
does the same for every spec printf understands, so Taichi programs print what Taichi prints.
A spec that only Python's format mini-language has (`>8`, `,`, `_`, `b`) keeps Python's meaning;
it is tried at compile time on a value of the dtype, so a bad spec is a user error at the
print's line, never an exception when the host formats the record at the next sync
(spirad.printing).
"""
from __future__ import annotations

import re

from kernel_ir import dtypes as T

_PRINTF = re.compile(r"([-+ #0]*)(\d*)(\.\d*)?([hlLqjzt]*)([csdioxXufFeEaAgGnp]?)")
_UNSUPPORTED, _SIGNED, _UNSIGNED, _REAL = "csnpaA", "di", "oxXu", "fFeEgG"


def resolve(spec: str, dtype: T.DType) -> tuple:
    """(spec, is_printf) for a value of `dtype`: a printf spec as a Python `%` format (length
    modifiers dropped, the dtype's conversion added when the spec has none), else the Python
    spec unchanged. Raises TypeError with the message for the user."""
    m = _PRINTF.fullmatch(spec)
    if m is None:
        _try_python(spec, dtype)
        return spec, False
    flags, width, precision, _length, conv = m.groups()
    if conv and conv in _UNSUPPORTED:
        raise TypeError(f"conversion '{conv}' is not supported.")
    real = dtype.is_float
    fits = (not conv or (conv in _REAL and real) or (conv in _SIGNED and not real and dtype.is_signed)
            or (conv in _UNSIGNED and not real and not dtype.is_signed))
    if not fits:
        raise TypeError(f"'{spec}' doesn't match '{dtype.name}'.")
    if not conv:
        conv = "f" if real else ("d" if dtype.is_signed else "u")
    return f"%{flags}{width}{precision or ''}{conv}", True


def _try_python(spec: str, dtype: T.DType) -> None:
    sample = 0.0 if dtype.is_float else (False if dtype == T.u1 else 0)
    try:
        format(sample, spec)
    except (ValueError, TypeError) as e:
        raise TypeError(f"format spec '{spec}' does not fit a {dtype.name} value: {e}") from None


def static_dtype(x):
    """The dtype Taichi gives a compile-time value in a print (a Python int is an i32, a float
    an f32, as literals are), or None for values printed by Python (strings, objects)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return T.f32 if isinstance(x, float) else T.i32

