"""The Metal profile's proof: a finished module has none of what naga rejects or panics on.

wgpu hands SPIR-V to naga, and a naga *panic* ends the Python process, so every module the Metal
backend creates passes this check first (after spirv-val). A violation is a compiler bug, raised
as RuntimeError naming the kernel and what was found. Checked (see `profile.py` for why):

* no OpAtomicCompareExchange / OpAtomicCompareExchangeWeak;
* no 64-bit float type (Metal has no f64);
* no OpConstant of a float type whose value is NaN or ±Inf (they must be bitcasts);
* no OpBitcast between a vector and a 64-bit scalar (64-bit join / split must use shifts);
* at most `max_bindings` storage buffers (the layout's count, and the Binding decorations that are
  not uniform buffers).
"""
from __future__ import annotations

import struct

from ._tables import DECORATION, MAGIC, OPCODES

_OP = OPCODES
_NO_RESULT = frozenset(_OP[n] for n in (
    "OpStore", "OpBranch", "OpBranchConditional", "OpSelectionMerge", "OpLoopMerge", "OpReturn",
    "OpReturnValue", "OpFunctionEnd", "OpUnreachable", "OpControlBarrier", "OpMemoryBarrier",
    "OpAtomicStore", "OpLine", "OpNoLine", "OpCopyMemory", "OpSwitch", "OpKill", "OpDecorate",
    "OpMemberDecorate", "OpName", "OpMemberName", "OpCapability", "OpExtension",
    "OpMemoryModel", "OpEntryPoint", "OpExecutionMode", "OpSource", "OpString"))
_RESULT_ONLY = frozenset(_OP[n] for n in ("OpLabel", "OpExtInstImport", "OpTypeVoid",
                                          "OpTypeBool", "OpTypeInt", "OpTypeFloat",
                                          "OpTypeVector", "OpTypePointer", "OpTypeStruct",
                                          "OpTypeRuntimeArray", "OpTypeArray", "OpTypeFunction"))


def _instructions(words):
    i = 5
    while i < len(words):
        n, op = words[i] >> 16, words[i] & 0xFFFF
        if n == 0:
            raise RuntimeError("malformed SPIR-V: an instruction of word count 0")
        yield op, words[i + 1:i + n]
        i += n


def violations(spirv: bytes, max_bindings: int = 28, num_bindings: int | None = None,
               uniform=()) -> list:
    """What in `spirv` the Metal profile forbids (empty: the module is fine). `num_bindings`:
    the storage buffers of the module's layout; `uniform`: its uniform bindings (not counted)."""
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv)
    if not words or words[0] != MAGIC:
        return ["not a SPIR-V module"]
    out = []
    floats, vectors, ids_type = {}, set(), {}
    bindings = set()
    if num_bindings is not None and num_bindings > max_bindings:
        out.append(f"{num_bindings} storage-buffer bindings (Metal allows {max_bindings})")
    for op, a in _instructions(words):
        if op in (_OP["OpAtomicCompareExchange"], _OP["OpAtomicCompareExchangeWeak"]):
            out.append("OpAtomicCompareExchange (naga cannot translate it)")
        elif op == _OP["OpTypeFloat"]:
            floats[a[0]] = a[1]
            if a[1] == 64:
                out.append("a 64-bit float type (Metal has no f64)")
        elif op == _OP["OpTypeVector"]:
            vectors.add(a[0])
        elif op == _OP["OpDecorate"] and a[1] == DECORATION["Binding"]:
            if a[2] not in uniform:
                bindings.add(a[2])
        elif op == _OP["OpConstant"] and a[0] in floats:
            bits = floats[a[0]]
            v = (struct.unpack("<f", struct.pack("<I", a[2]))[0] if bits == 32 else
                 struct.unpack("<d", struct.pack("<II", a[2], a[3]))[0] if bits == 64 else 0.0)
            if v != v or v in (float("inf"), float("-inf")):
                out.append(f"a NaN / Inf OpConstant ({v}) (naga's validator rejects it)")
        elif op == _OP["OpBitcast"]:
            rt, src = a[0], ids_type.get(a[2])
            wide = lambda t: t in ids_type.get("int64", ()) or floats.get(t) == 64  # noqa: E731
            if (rt in vectors and wide(src)) or (src in vectors and wide(rt)):
                out.append("a bitcast between a vector and a 64-bit scalar (naga mistypes it)")
        if op == _OP["OpTypeInt"] and a[1] == 64:
            ids_type.setdefault("int64", set()).add(a[0])
        if op not in _NO_RESULT and op not in _RESULT_ONLY and len(a) >= 2:
            ids_type[a[1]] = a[0]
    if len(bindings) > max_bindings:
        out.append(f"{len(bindings)} storage buffers declared (Metal allows {max_bindings})")
    return list(dict.fromkeys(out))


def check(spirv: bytes, kernel: str, max_bindings: int = 28, num_bindings: int | None = None,
          uniform=()) -> None:
    """RuntimeError naming `kernel` when `spirv` breaks the Metal profile (a compiler bug)."""
    bad = violations(spirv, max_bindings, num_bindings, uniform)
    if bad:
        raise RuntimeError(f"internal error: the SPIR-V of kernel {kernel} breaks the Metal profile "
                           f"({'; '.join(bad)}); it was not given to wgpu, whose shader translator "
                           f"could crash the process")
