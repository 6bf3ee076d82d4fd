"""Typed emission helpers shared by the lowering modules.

An `Emitter` pairs a `Module` with the `Function` being filled and speaks in IR dtypes: `ty(dt)`
is the SPIR-V type of a dtype (declaring Float64 / Int64 capabilities on first use, or failing
clearly when the device lacks them), `c(v, dt)` a deduplicated constant, `op(name, dt, ...)` an
instruction with a result. Helper functions (f64 math, integer pow, casts) are built once per
module through `call(key, ...)`, each in its own SPIR-V function.

Value representation: f32/f64 are OpTypeFloat, i32/i64 signed OpTypeInt, u32 unsigned OpTypeInt,
u1 is OpTypeBool. `U64` is an internal dtype (bit patterns of f64 for compare-and-swap).
"""
from __future__ import annotations

from kernel_ir.dtypes import DType, f16, f32, f64, u1, u32, u64

from .module import Function, Module

U64 = u64

# (float?, bits) -> the SPIR-V capability of an 8- / 16-bit type (arithmetic and locals); its
# storage in buffers needs STORAGE_CAPABILITY[bits] too. `spirv_codegen.small_types` checks the
# device features first, so a kernel never reaches here on a device without them.
SMALL_CAPABILITY = {(False, 8): "Int8", (False, 16): "Int16", (True, 16): "Float16"}
STORAGE_CAPABILITY = {8: ("StorageBuffer8BitAccess", "SPV_KHR_8bit_storage"),
                      16: ("StorageBuffer16BitAccess", "SPV_KHR_16bit_storage")}

SCOPE_DEVICE = 1
SEM_RELAXED = 0


class Emitter:
    def __init__(self, m: Module, caps, fn: Function | None = None, helpers: dict | None = None):
        self.m = m
        self.caps = caps
        self.fn = fn
        self.helpers = {} if helpers is None else helpers

    # -- types -------------------------------------------------------------------------------
    def ty(self, dt) -> int:
        if isinstance(dt, int):
            return dt
        if dt.kind == "b":
            return self.m.t_bool()
        if dt.bits == 64:
            self.require64(dt)
        elif dt.bits < 32:
            self.m.capability(SMALL_CAPABILITY[dt.kind == "f", dt.bits])
        if dt.kind == "f":
            return self.m.t_float(dt.bits)
        return self.m.t_int(dt.bits, dt.kind == "i")

    def require64(self, dt) -> None:
        if dt.kind == "f":
            if not self.caps.has_f64:
                raise RuntimeError("kernel uses f64 but the device has no shaderFloat64")
            self.m.capability("Float64")
        else:
            if not self.caps.has_i64:
                raise RuntimeError(f"kernel uses {dt.name} but the device has no shaderInt64")
            self.m.capability("Int64")

    def t_uvec2(self) -> int:
        return self.m.t_vector(self.ty(u32), 2)

    def t_uvec3(self) -> int:
        return self.m.t_vector(self.ty(u32), 3)

    # -- constants ---------------------------------------------------------------------------
    def c(self, v, dt) -> int:
        if dt.kind == "b":
            return self.m.const_bool(bool(v))
        self.ty(dt)
        if dt.kind == "f":
            v = float(v)
            if v != v or v in (float("inf"), float("-inf")):
                import struct
                fmt = {16: ("<e", "<H"), 32: ("<f", "<I"), 64: ("<d", "<Q")}[dt.bits]
                return self.float_bits(struct.unpack(fmt[1], struct.pack(fmt[0], v))[0], dt)
            return self.m.const_float(dt.bits, v)
        return self.m.const_int(dt.bits, dt.kind == "i", int(v))

    def c_bits(self, bits: int, dt) -> int:
        """A float constant given by its bit pattern."""
        self.ty(dt)
        words = (bits,) if dt.bits <= 32 else (bits & 0xFFFFFFFF, bits >> 32)
        return self.m.const_words(self.ty(dt), words)

    def nan(self, dt) -> int:
        return self.float_bits({16: 0x7E00, 32: 0x7FC00000, 64: 0x7FF8000000000000}[dt.bits], dt)

    def inf(self, dt, sign: int = 1) -> int:
        if dt.bits == 16:
            return self.float_bits(0x7C00 | (0x8000 if sign < 0 else 0), dt)
        if dt.bits == 32:
            return self.float_bits(0x7F800000 | (0x80000000 if sign < 0 else 0), dt)
        return self.float_bits(0x7FF0000000000000 | ((1 << 63) if sign < 0 else 0), dt)

    def float_bits(self, bits: int, dt) -> int:
        """A float given by its bit pattern: a constant, or (profiles that reject NaN / Inf
        constants, `profile.py`) an OpBitcast of an integer constant where it is used."""
        if not self.profile.float_specials_by_bitcast or self.fn is None:
            return self.c_bits(bits, dt)
        if dt == f16:
            return self.f16_from_word(self.c(bits, u32))
        ut = u32 if dt.bits == 32 else U64
        return self.op("OpBitcast", dt, self.c(bits, ut))

    @property
    def profile(self):
        return self.caps.profile  # a SpirvCaps

    # -- instructions ------------------------------------------------------------------------
    def op(self, name: str, dt, *operands) -> int:
        return self.fn.op(name, self.ty(dt), *operands)

    def emit(self, name: str, *operands) -> None:
        self.fn.emit(name, *operands)

    def glsl(self, name: str, dt, *xs) -> int:
        return self.fn.ext(self.ty(dt), name, *xs)

    def sel(self, cond: int, a: int, b: int, dt) -> int:
        return self.op("OpSelect", dt, cond, a, b)

    def band(self, a: int, b: int) -> int:
        return self.op("OpLogicalAnd", u1, a, b)

    def bor(self, a: int, b: int) -> int:
        return self.op("OpLogicalOr", u1, a, b)

    def bnot(self, a: int) -> int:
        return self.op("OpLogicalNot", u1, a)

    def isnan(self, x: int) -> int:
        return self.op("OpIsNan", u1, x)

    def isinf(self, x: int) -> int:
        return self.op("OpIsInf", u1, x)

    def fcmp(self, name: str, a: int, b: int) -> int:
        return self.op("OpFOrd" + name, u1, a, b)

    def signbit(self, x: int, dt) -> int:
        """True when the sign bit of float `x` is set (-0.0 and negative NaNs included)."""
        if dt.bits == 16:  # f16 -> f32 keeps the sign of every value, NaNs included
            x, dt = self.op("OpFConvert", f32, x), f32
        if dt.bits == 32:
            bits = self.op("OpBitcast", u32, x)
        else:
            v = self.fn.op("OpBitcast", self.t_uvec2(), x)
            bits = self.op("OpCompositeExtract", u32, v, 1)
        return self.op("OpINotEqual", u1, self.op("OpBitwiseAnd", u32, bits, self.c(0x80000000, u32)),
                       self.c(0, u32))

    def f16_from_word(self, w: int) -> int:
        """The f16 whose bits are the low half of u32 `w`: GLSL's UnpackHalf2x16 and an exact
        f32 -> f16 conversion. f16 code so needs no 16-bit ints (naga has none) and no vector
        bitcast (which naga mistypes)."""
        pair = self.glsl("UnpackHalf2x16", self.m.t_vector(self.ty(f32), 2), w)
        return self.op("OpFConvert", f16, self.op("OpCompositeExtract", f32, pair, 0))

    def f16_to_word(self, x: int) -> int:
        """The u32 holding f16 `x`'s bits in its low half, zeros above (inverse of the above:
        PackHalf2x16 of the exact f32)."""
        pair = self.fn.op("OpCompositeConstruct", self.m.t_vector(self.ty(f32), 2),
                          self.op("OpFConvert", f32, x), self.c(0.0, f32))
        return self.glsl("PackHalf2x16", u32, pair)

    def f64_from_words(self, lo: int, hi: int) -> int:
        v = self.fn.op("OpCompositeConstruct", self.t_uvec2(), lo, hi)
        return self.op("OpBitcast", f64, v)

    def join64(self, lo: int, hi: int, dt) -> int:
        """The 64-bit value of dtype `dt` whose low / high u32 words are `lo` / `hi`. Integers
        by shifts and OR (naga mistypes a vector bitcast, profile.py); f64 (never on Metal) by
        the vector bitcast, which needs no Int64."""
        if dt == f64:
            return self.f64_from_words(lo, hi)
        wide = lambda w: self.op("OpUConvert", U64, w)  # noqa: E731
        v = self.op("OpBitwiseOr", U64, wide(lo),
                    self.op("OpShiftLeftLogical", U64, wide(hi), self.c(32, u32)))
        return v if dt.kind == "u" else self.op("OpBitcast", dt, v)

    def split64(self, v: int, dt) -> tuple:
        """(low, high) u32 words of the 64-bit value `v` of dtype `dt` (inverse of join64)."""
        if dt == f64:
            pair = self.fn.op("OpBitcast", self.t_uvec2(), v)
            return (self.op("OpCompositeExtract", u32, pair, 0),
                    self.op("OpCompositeExtract", u32, pair, 1))
        u = v if dt.kind == "u" else self.op("OpBitcast", U64, v)
        return (self.op("OpUConvert", u32, u),
                self.op("OpUConvert", u32, self.op("OpShiftRightLogical", U64, u, self.c(32, u32))))

    # -- helper functions --------------------------------------------------------------------
    def call(self, key: str, ret_dt, param_dts, build, *args) -> int:
        """Call helper function `key`, building it with `build(emitter, *params) -> id` once."""
        fid = self.helpers.get(key)
        if fid is None:
            fn = self.m.function(self.ty(ret_dt), [self.ty(p) for p in param_dts])
            self.helpers[key] = fid = fn.id
            self.m.name(fn.id, key)
            sub = Emitter(self.m, self.caps, fn, self.helpers)
            fn.emit("OpReturnValue", build(sub, *fn.param_ids))
        return self.op("OpFunctionCall", ret_dt, fid, *args)


def float_below(v: float, dt) -> float:
    """The largest value of dtype `dt` strictly below `v` (a power of two here)."""
    import numpy as np
    t = np.float32 if dt == f32 else np.float64
    return float(np.nextafter(t(v), t(-np.inf)))

