"""`print` inside kernels: formats registered at compile time, records buffered on the device,
printed by the host at the next sync.

Why this way: every backend already has global loads, stores and integer atomic adds, so a print
is lowered (passes/lower_print) onto three internal fields the kernel binds like any other field
— no backend or code-generator support is needed, and a new backend prints on day one. One set of
buffers per `sd.init()` serves every kernel, so records come out in the order they were claimed:
in program order within a thread (a thread's atomic adds are ordered), interleaved across threads
as they ran, and kernels in launch order.

Buffers (internal fields, allocated at the first kernel that prints):

    ints    i32[INT_WORDS]     word 0: header words claimed; word 1: `floats` words claimed;
                               word 2: `doubles` words claimed; word 3 (DROPPED): records
                               whose header did not fit; records from word RECORDS on
    floats  f32[FLOAT_WORDS]   the f32 (and f16, widened) values of records
    doubles f64[DOUBLE_WORDS]  the f64 values of records (only kernels that print f64 bind it)

A record (one PRINT executed by one thread) claims, with one atomic add on ints[0], its header
words at RECORDS + h: [format id, floats offset (if it has f32 values), doubles offset (if it has
f64 values), int words...] (i32 as is, u32 and u1 as their 32 bits, i64 as low then high word),
and its float values with one atomic add on ints[1] / ints[2]. A record whose words do not fit is
not written (the claim still counts, and it adds 1 to ints[DROPPED]: the host prints how many
lines were dropped, after the lines it has).

The host (`flush`, called by `sd.sync()`, by every host read of a field / ndarray, by a kernel
that returns a value, by `init()` and at exit) walks the records in claim order, formats each
with Python's formatting of its values (`format(value, spec)`, or `spec % value` for Taichi's
printf specs, checked against the dtype when the kernel compiled: numpy scalars of the printed
dtype, so an f32 prints as its shortest repr, or as Taichi's C `%f` with
SPIRAD_PRINT_FLOATS=printf, the Taichi alias' default; u1 as a bool; vectors / matrices as nested lists),
writes them to `sys.stdout` and resets the claims.
"""
from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass

import numpy as np

from kernel_ir import dtypes as T

RECORDS = 4
DROPPED = 3  # the word of `ints` counting records that did not fit
INT_WORDS = 1 << 16
FLOAT_WORDS = 1 << 16
DOUBLE_WORDS = 1 << 15
CAPACITY = {"ints": INT_WORDS - RECORDS, "floats": FLOAT_WORDS, "doubles": DOUBLE_WORDS}
CURSOR = {"ints": 0, "floats": 1, "doubles": 2}  # the word of `ints` that counts each area's claims
_DTYPES = {"ints": T.i32, "floats": T.f32, "doubles": T.f64}


@dataclass(frozen=True)
class Value:
    """A run-time value in a format: `shape` () for a scalar, (n,) / (n, m) for Vector / Matrix;
    `spec` the format spec, `conv` '', 'r', 's' or 'a' (an f-string's !r / !s / !a);
    `printf`: `spec` is a `%` format (Taichi's printf specs, frontend/print_spec.py)."""
    shape: tuple
    dtype: T.DType
    spec: str = ""
    conv: str = ""
    printf: bool = False

    @property
    def count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass(frozen=True)
class PrintFormat:
    """One `print(...)` statement: text pieces (str) and `Value`s, in order (`end` included).
    `assert_site` > 0: the run-time message of that failed assert (`assert c, f"x = {x}"`),
    kept for `runtime.asserts.check` instead of printed."""
    pieces: tuple
    assert_site: int = 0

    @property
    def scalars(self) -> tuple:
        """The dtype of each scalar the record carries, in PRINT source order."""
        return tuple(p.dtype for p in self.pieces if isinstance(p, Value) for _ in range(p.count))


def area(dtype: T.DType) -> str:
    """The buffer a scalar of `dtype` is written to (an f16 as the f32 of its value)."""
    return "doubles" if dtype == T.f64 else ("floats" if dtype.is_float else "ints")


def int_words(dtype: T.DType) -> int:
    return 2 if dtype.bits == 64 else 1


class PrintBuffer:
    """The formats and device buffers of one `sd.init()` (`State.prints`, created at the first
    kernel that prints). `make_field(dtype, shape, name)` creates an internal field
    (`field.internal_field`; passed in, so this module imports no other part of spirad).
    It also carries the record layout to the pass that writes the records
    (`passes/lower_print.py`, which imports nothing of spirad)."""
    RECORDS, DROPPED, CURSOR, CAPACITY = RECORDS, DROPPED, CURSOR, CAPACITY
    area = staticmethod(area)

    def __init__(self, make_field):
        self.make_field = make_field
        self.formats: list = []
        self.fields: dict = {}   # area name -> internal Field
        self.dirty = False       # a program that prints was launched since the last flush
        self.assert_texts: dict = {}  # assert site -> its first failing thread's message

    def register(self, fmt: PrintFormat) -> int:
        self.formats.append(fmt)
        return len(self.formats) - 1

    def field(self, name: str):
        """The internal field of one area (created on first use)."""
        f = self.fields.get(name)
        if f is None:
            size = INT_WORDS if name == "ints" else CAPACITY[name]
            f = self.fields[name] = self.make_field(_DTYPES[name], (size,), f"print.{name}")
        return f

    def ref(self, name: str):
        return self.field(name).ref()

    # -- host side ----------------------------------------------------------------------------
    def flush(self, backend, out=None) -> None:
        if not self.dirty:
            return
        backend.sync()
        ints_st = self.field("ints")._storage()
        head = np.frombuffer(backend.read(ints_st, 4 * RECORDS).tobytes(), np.int32)
        claimed = {a: int(head[CURSOR[a]]) for a in CURSOR}
        used = {a: min(claimed[a], CAPACITY[a]) for a in CURSOR}
        ints = np.frombuffer(backend.read(ints_st, 4 * (RECORDS + used["ints"])).tobytes(),
                             np.int32)[RECORDS:]
        vals = {"ints": ints}
        for a in ("floats", "doubles"):
            if used[a] and a in self.fields:
                raw = backend.read(self.fields[a]._storage(), used[a] * _DTYPES[a].nbytes)
                vals[a] = np.frombuffer(raw.tobytes(), _DTYPES[a].np)
        text, dropped = self.decode(vals, used)
        backend.write(ints_st, np.zeros(RECORDS, np.int32))
        self.dirty = False
        lost = int(head[DROPPED])  # records not written at all
        out = out or sys.stdout
        if text:
            out.write("".join(text))
        if lost or dropped or any(claimed[a] > CAPACITY[a] for a in CURSOR):
            what = (f"{lost} print line(s) dropped" if lost else
                    f"{dropped} printed line(s) lost their float values (shown as nan)")
            msg = (f"spirad: {what}: the kernel print buffer was full ({len(text)} line(s) "
                   f"printed since the last sync); call sd.sync() more often (each sync prints "
                   f"and empties it) or print less")
            out.write(f"[{msg}]\n")
            warnings.warn(msg, RuntimeWarning, stacklevel=3)

    def decode(self, vals, used):
        """(text per record, how many records lost their float values) from the buffers'
        words."""
        ints = vals["ints"]
        pos, text, dropped = 0, [], 0
        while pos < used["ints"]:
            lost_values = False
            fmt = self.formats[int(ints[pos])]
            dts = fmt.scalars
            k = pos + 1
            offs = {}
            for a in ("floats", "doubles"):
                n = sum(area(d) == a for d in dts)
                if n:
                    offs[a] = int(ints[k])
                    k += 1
                    if offs[a] + n > used[a]:
                        lost_values = True
            seen = {"floats": 0, "doubles": 0}
            scalars = []
            for d in dts:
                a = area(d)
                if a == "ints":
                    scalars.append(_int_value(ints, k, d))
                    k += int_words(d)
                else:
                    j = offs[a] + seen[a]
                    seen[a] += 1
                    src = vals.get(a)
                    scalars.append(d.np.type(src[j]) if src is not None and j < len(src)
                                   else d.np.type("nan"))
            pos = k
            dropped += lost_values
            if fmt.assert_site:  # a failed assert's message: raised by asserts.check
                self.assert_texts.setdefault(fmt.assert_site, _render(fmt, scalars))
            else:
                text.append(_render(fmt, scalars))
        return text, dropped


def _int_value(ints, k, d):
    lo = int(ints[k]) & 0xFFFFFFFF
    if d == T.u1:
        return bool(lo)
    if d.bits == 64:
        v = lo | ((int(ints[k + 1]) & 0xFFFFFFFF) << 32)
        return d.np.type(v - (1 << 64) if d.is_signed and v >= 1 << 63 else v)
    return d.np.type(lo - (1 << 32) if d.is_signed and lo >= 1 << 31 else lo)


def _one(x, p: Value) -> str:
    if p.conv:
        x = {"r": repr, "s": str, "a": ascii}[p.conv](_plain(x))
    if p.printf:
        return p.spec % _plain(x)
    if not p.spec and isinstance(x, np.floating) and _printf_floats():
        return ("%.12f" if x.dtype == np.float64 else "%f") % float(x)  # Taichi's printf
    return format(x, p.spec) if p.spec else str(x)


def _printf_floats() -> bool:
    """Whether floats without a spec print as Taichi's C `%f` (SPIRAD_PRINT_FLOATS)."""
    from . import options
    return options.get("SPIRAD_PRINT_FLOATS") == "printf"


def _plain(x):
    return x.item() if isinstance(x, np.generic) else x


def _render(fmt: PrintFormat, scalars) -> str:
    out, k = [], 0
    for p in fmt.pieces:
        if isinstance(p, str):
            out.append(p)
            continue
        xs = scalars[k:k + p.count]
        k += p.count
        if not p.shape:
            out.append(_one(xs[0], p))
        elif len(p.shape) == 1:
            out.append("[" + ", ".join(_one(x, p) for x in xs) + "]")
        else:
            m = p.shape[1]
            rows = ("[" + ", ".join(_one(x, p) for x in xs[r * m:(r + 1) * m]) + "]"
                    for r in range(p.shape[0]))
            out.append("[" + ", ".join(rows) + "]")
    return "".join(out)


def flush(state) -> None:
    """Print every buffered record of `state`'s kernels (no-op when nothing printed)."""
    if state.prints is not None and state.prints.dirty and state.backend is not None:
        state.prints.flush(state.backend)
