"""`sd.extension` (Taichi's `ti.extension`): optional features an arch may lack, and
`is_extension_supported(arch, ext)` to ask. spirad has the adstack, assertions, dynamic indexing,
block-local hints and sparse SNodes (bitmasked / pointer / dynamic, spirad.data.sparse_layout) everywhere;
64-bit data where the device has it; quantized types (bit-packed fields, spirad.data.quant)
where the device has a compare-and-swap (not Metal); no meshes."""
from __future__ import annotations

import enum


class extension(enum.Enum):  # noqa: N801 - Taichi's name
    """Optional features an arch may have (Taichi's `ti.extension`): ask with
    `sd.is_extension_supported(arch, sd.extension.data64)`."""
    sparse = "sparse"
    quant = "quant"
    quant_basic = "quant_basic"
    mesh = "mesh"
    data64 = "data64"
    adstack = "adstack"
    bls = "bls"
    assertion = "assertion"
    extfunc = "extfunc"
    dynamic_index = "dynamic_index"


_EVERYWHERE = {extension.adstack, extension.assertion, extension.bls, extension.dynamic_index,
               extension.sparse}


def is_extension_supported(arch: str, ext: extension) -> bool:
    """Whether `arch` (an arch that is available) has `ext`. data64 needs 64-bit floats and
    integers on the device (Metal has no f64)."""
    if ext in _EVERYWHERE:
        return True
    if ext in (extension.quant, extension.quant_basic):  # stores: a compare-and-swap loop
        return arch != "metal"
    if ext is extension.data64:
        from . import state
        st = state.current()
        if st.arch == arch and st.backend is not None:
            caps = st.backend.capabilities()
            return bool(caps.get("f64") and caps.get("i64"))
        return arch != "metal"
    return False
