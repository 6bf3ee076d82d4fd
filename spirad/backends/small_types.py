"""The 8- and 16-bit types (`u8 i8 u16 i16 f16`) on SPIR-V devices: what each needs, checked
before code generation so a kernel the device cannot run fails with the feature's name (never a
validation message or a driver crash).

A kernel using a type needs the device's arithmetic feature for it and, since fields, ndarrays
and their gradients keep the type's own width in memory, storage-buffer access at that width:

    u8 / i8     shaderInt8 (Vulkan 1.2)      storageBuffer8BitAccess (Vulkan 1.2)
    u16 / i16   shaderInt16                  storageBuffer16BitAccess (Vulkan 1.1)
    f16         shaderFloat16 (Vulkan 1.2)   storageBuffer16BitAccess (Metal: wgpu's shader-f16)

f16 code uses no 16-bit ints (an f16 in a 32-bit word goes through GLSL's Pack / UnpackHalf2x16),
so it also runs where naga, spirad's route to Metal, has none.

Atomics on these types (and so f16 gradients, which are accumulated with atomic adds) are
compare-and-swap loops on the 32-bit word holding the element (`spirv_codegen.atomics.word_rmw`):
Vulkan's atomic instructions take 32- and 64-bit operands only.
"""
from __future__ import annotations

from kernel_ir.dtypes import SMALL
from kernel_ir.errors import SpiradTypeError
from kernel_ir.nodes import walk
from kernel_ir.ops import ATOMICS
from kernel_ir.source import user_error

# dtype name -> the (caps attribute, Vulkan feature name) pairs a kernel using it needs
NEEDS = {
    "u8": (("has_int8", "shaderInt8"), ("has_storage8", "storageBuffer8BitAccess")),
    "i8": (("has_int8", "shaderInt8"), ("has_storage8", "storageBuffer8BitAccess")),
    "u16": (("has_int16", "shaderInt16"), ("has_storage16", "storageBuffer16BitAccess")),
    "i16": (("has_int16", "shaderInt16"), ("has_storage16", "storageBuffer16BitAccess")),
    "f16": (("has_f16", "shaderFloat16"), ("has_storage16", "storageBuffer16BitAccess")),
}


def _dtypes_of(n):
    yield n.dtype
    dt = getattr(n.arg, "dtype", None)
    if dt is not None:
        yield dt


def check(tl, caps, device: str, refusal: str | None = None, cas: bool = True) -> None:
    """Raise a SpiradTypeError at the first use in `tl` of a small type the device lacks a
    feature for (`caps`: a SpirvCaps), or of an atomic on one where the profile has no
    compare-and-swap (`cas` False: Metal). `refusal`: the sentence saying why this arch lacks a
    type (Metal), instead of the missing features' names."""
    for a in tl.args:
        dt = getattr(a, "dtype", None)
        if dt in SMALL:
            _need(tl, caps, dt, device, refusal, None)
    for t in tl.tasks:
        loc = t.loc
        for n in walk(t.body):
            loc = n.loc or loc
            for dt in _dtypes_of(n):
                if dt in SMALL:
                    _need(tl, caps, dt, device, refusal, loc)
                    if n.op in ATOMICS and not cas:
                        name = n.op.name.lower().replace("xchg", "exchange")
                        raise user_error(SpiradTypeError, (
                            f"kernel {tl.name}: {name} on {dt.name} on {device} needs a "
                            f"compare-and-swap loop on its 32-bit word (SPIR-V atomics are 32- "
                            f"and 64-bit), which naga rejects; an f16 field's gradient is "
                            f"accumulated with one. Use f32 here, or another arch"), loc)


def _need(tl, caps, dt, device, refusal, loc) -> None:
    missing = [feature for attr, feature in NEEDS[dt.name] if not getattr(caps, attr)]
    if not missing:
        return
    why = refusal or (f"the device lacks {' and '.join(missing)}")
    raise user_error(SpiradTypeError, (
        f"kernel {tl.name} uses {dt.name}, which {device} cannot run: {why}; use a 32-bit type "
        f"(sd.i32, sd.u32, sd.f32) or another arch"), loc)
