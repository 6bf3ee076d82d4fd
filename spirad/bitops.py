"""`sd.math.popcnt / clz / ffs` and `sd.bit_shr` in Python scope (numpy integers in, i32 out); in kernels the
frontend builds them from shifts and masks (`spirad.frontend.bits`), keyed by these functions.
`check_bit_cast`: the widths rule of `sd.bit_cast` (spirad.lang), shared by both scopes."""
from __future__ import annotations


def _np_bits(x):
    import numpy as _np
    a = _np.asarray(x)
    width = a.dtype.itemsize * 8 if a.dtype.kind in "iu" else 32
    return a.astype(_np.uint64) & ((1 << width) - 1), width


def popcnt(x):
    """Number of set bits (an i32)."""
    import numpy as _np
    u, _ = _np_bits(x)
    return _np.vectorize(lambda v: bin(int(v)).count("1"))(u).astype(_np.int32)[()]


def clz(x):
    """Leading zero bits of the unsigned bit pattern (an i32; clz(0) is the width)."""
    import numpy as _np
    u, w = _np_bits(x)
    return _np.vectorize(lambda v: w - int(v).bit_length())(u).astype(_np.int32)[()]


def ffs(x):
    """1-based position of the lowest set bit (an i32; ffs(0) == 0)."""
    import numpy as _np
    u, _ = _np_bits(x)
    return _np.vectorize(lambda v: (int(v) & -int(v)).bit_length())(u).astype(_np.int32)[()]


def bit_shr(x, n):
    """Taichi's `bit_shr`: `x` shifted right by `n` with zeros shifted in (a logical shift of
    its bit pattern; Python ints as 32-bit), of `x`'s type."""
    import numpy as _np
    a = _np.asarray(x)
    width = a.dtype.itemsize * 8 if a.dtype.kind in "iu" and not isinstance(x, int) else 32
    u = int(a) & ((1 << width) - 1)
    r = u >> int(n)
    if a.dtype.kind == "i" and r >= 1 << (width - 1):
        r -= 1 << width
    return r if isinstance(x, int) else a.dtype.type(r)


def check_bit_cast(src, dst) -> None:
    """Refuse a bit_cast between types of different widths, or of u1 (shared by both scopes)."""
    from kernel_ir import dtypes as T
    from kernel_ir.errors import SpiradTypeError
    if not isinstance(dst, T.DType) or dst == T.u1 or src == T.u1:
        raise SpiradTypeError(f"bit_cast needs a numeric scalar and a numeric dtype, got "
                              f"{src} and {dst!r}")
    if src.bits != dst.bits:
        raise SpiradTypeError(f"bit_cast from {src} to {dst}: the two types must have the same "
                              f"width ({src.bits} and {dst.bits} bits)")
