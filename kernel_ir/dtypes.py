"""Scalar data types of the IR.

A `DType` is a frozen value: name, kind ('f' float, 'i' signed int, 'u' unsigned int, 'b' bool)
and bit width. In memory (fields, ndarrays, buffers) a `u1` takes 4 bytes holding 0 or 1 (Taichi's layout; the
8- and 16-bit types `u8 i8 u16 i16 f16` take their own width, aligned to it). Promotion rules live in `spirad.frontend.typing`, not here: the IR only states what
each value is.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    """A scalar type: `sd.f16`, `sd.f32`, `sd.f64`, `sd.i8` ... `sd.i64`, `sd.u8` ... `sd.u64`, `sd.u1`. Calling one in a
    kernel casts (`sd.f32(i)`)."""
    name: str
    kind: str  # 'f', 'i', 'u', 'b'
    bits: int

    @property
    def is_float(self) -> bool:
        """f16, f32 or f64."""
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        """A signed or unsigned integer type (not u1)."""
        return self.kind in ("i", "u")

    @property
    def is_signed(self) -> bool:
        """A signed integer type."""
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        """u1, the boolean type."""
        return self.kind == "b"

    @property
    def nbytes(self) -> int:
        """Bytes per element in memory (u1 is stored in 4 bytes)."""
        return 4 if self.kind == "b" else self.bits // 8

    @property
    def np(self) -> np.dtype:
        """The numpy dtype of this type's elements in memory."""
        return _TO_NUMPY[self.name]

    def __repr__(self) -> str:
        return self.name

    def to_string(self) -> str:
        """The name (Taichi's `ti.f32.to_string()`)."""
        return self.name


f16 = DType("f16", "f", 16)
f32 = DType("f32", "f", 32)
f64 = DType("f64", "f", 64)
i8 = DType("i8", "i", 8)
i16 = DType("i16", "i", 16)
i32 = DType("i32", "i", 32)
i64 = DType("i64", "i", 64)
u8 = DType("u8", "u", 8)
u16 = DType("u16", "u", 16)
u32 = DType("u32", "u", 32)
u64 = DType("u64", "u", 64)
u1 = DType("u1", "b", 1)

ALL = (f32, f64, i32, i64, u32, u64, u1)  # (the random-kernel corpora draw from these)
SMALL = (f16, i8, i16, u8, u16)  # the 8- and 16-bit types: device features on Vulkan / Metal
BY_NAME = {d.name: d for d in ALL + SMALL}

_TO_NUMPY = {
    "f16": np.dtype(np.float16),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "u1": np.dtype(np.uint32),  # bools are stored as 4-byte 0/1 in memory (portable to SPIR-V)
}


def from_numpy(dt) -> DType:
    """The DType matching a numpy dtype; raises KeyError for unsupported ones."""
    dt = np.dtype(dt)
    for d in (f32, f64, i32, i64, u32, u64, f16, i8, i16, u8, u16):
        if d.np == dt:
            return d
    if dt == np.dtype(np.bool_):
        return u1
    raise KeyError(str(dt))


class _DefaultUnsigned:
    """Taichi's `default_up` where a dtype is expected: the unsigned integer type that goes with
    default_ip (u32, u64 under `default_ip=i64`), resolved by `from_python` like `int`; the
    element type of `sd.math.uvec2` / `uvec3` / `uvec4`."""

    def __repr__(self):
        return "default_up"


default_up = _DefaultUnsigned()


def from_python(t, default_fp: DType, default_ip: DType):
    """The dtype a Python type names where a dtype is expected (Taichi's convention): `float` ->
    the default float, `int` -> the default int, `bool` -> u1, `default_up` -> the default
    unsigned int; anything else is returned as it is, for the caller to check. The one place
    this mapping is written (annotations, fields, casts, return types, random())."""
    if t is float:
        return default_fp
    if t is int:
        return default_ip
    if t is bool:
        return u1
    if t is default_up:  # Taichi's: u32 with default_ip=i32, else u64
        return u32 if default_ip == i32 else u64
    return t
