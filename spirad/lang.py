"""Functions users call inside kernels (`sd.sin`, `sd.atomic_add`, `sd.static`, ...).

Called from plain Python they compute with numpy, so the same helper code runs on both sides.
Inside kernels the frontend never calls these: it looks each function object up in
`spirad.frontend.builtins.HANDLERS` and emits IR instead.
"""
from __future__ import annotations

import numpy as np


def sin(x):
    """Sine (radians). In kernels: f32 / f64 on every backend (docs/vecmath.md for accuracy)."""
    return np.sin(x)


def cos(x):
    """Cosine (radians)."""
    return np.cos(x)


def tan(x):
    """Tangent (radians)."""
    return np.tan(x)


def tanh(x):
    """Hyperbolic tangent."""
    return np.tanh(x)


def asin(x):
    """Arc sine, in [-pi/2, pi/2]."""
    return np.arcsin(x)


def acos(x):
    """Arc cosine, in [0, pi]."""
    return np.arccos(x)


def atan2(y, x):
    """The angle of the point (x, y), in (-pi, pi] (note the argument order: y first)."""
    return np.arctan2(y, x)


def exp(x):
    """e to the power x."""
    return np.exp(x)


def log(x):
    """Natural logarithm."""
    return np.log(x)


def sqrt(x):
    """Square root."""
    return np.sqrt(x)


def log1p(x):
    """log(1 + x), accurate for x near 0 (where log(1 + x) loses x's digits)."""
    return np.log1p(x)


def expm1(x):
    """exp(x) - 1, accurate for x near 0 (where exp(x) - 1 loses x's digits)."""
    return np.expm1(x)


def rsqrt(x):
    """1 / sqrt(x)."""
    return 1.0 / np.sqrt(x)


def pow(x, y):  # noqa: A001 (Taichi name)
    """x to the power y; an integer exponent known at compile time becomes multiplications."""
    return np.power(x, y)


def frexp(x):
    """(mantissa, exponent) with x = mantissa * 2 ** exponent and 0.5 <= |mantissa| < 1 (C's
    frexp; (0, 0) for zero; the exponent an i32). In kernels: exact, from comparisons with
    powers of two (spirad.frontend.float_parts), differentiable in the mantissa."""
    m, e = np.frexp(x)
    return m, np.int32(e) if np.ndim(e) == 0 else e.astype(np.int32)


def abs(x):  # noqa: A001
    """Absolute value (integers and floats)."""
    return np.abs(x)


def floor(x, dtype=None):
    """The largest integer <= x, as a float; `dtype=sd.i32` gives an integer (Taichi)."""
    return np.floor(x) if dtype is None else np.floor(x).astype(dtype.np)


def atan(x):
    """Arc tangent, in (-pi/2, pi/2)."""
    return np.arctan(x)


def min(*xs):  # noqa: A001
    """The smallest of two or more values (element-wise on vectors)."""
    return np.minimum.reduce(xs) if len(xs) > 2 else np.minimum(*xs)


def max(*xs):  # noqa: A001
    """The largest of two or more values (element-wise on vectors)."""
    return np.maximum.reduce(xs) if len(xs) > 2 else np.maximum(*xs)


def select(cond, a, b):
    """`a` where `cond` is true, else `b` (both are evaluated; element-wise on vectors, and
    an `sd.Vector` / `sd.Matrix` in gives one out, as Taichi's)."""
    r = np.where(cond, a, b)
    from .data.matrix import MatrixValue
    if r.ndim and any(isinstance(x, MatrixValue) for x in (cond, a, b)):
        return r.view(MatrixValue)
    return r


def cast(x, dtype):
    """`x` converted to `dtype` (float -> int truncates toward zero)."""
    return np.asarray(x).astype(dtype.np)


def atomic_add(target, value):
    """`target += value` atomically on a field / ndarray element (kernels only); returns the old
    value. `+=` on a global element in a kernel is the same."""
    raise _python_scope("atomic_add")


def random(dtype=float):  # noqa: A001 (Taichi name)
    """A uniform float in [0, 1) (or a random int). In kernels: per-thread streams
    (spirad.frontend.rng); from Python: numpy's generator, seeded by init(random_seed=)."""
    from .runtime import state as _state
    st = _state.current()
    if getattr(st, "py_rng", None) is None:
        st.py_rng = np.random.default_rng(st.options.random_seed)
    from kernel_ir.dtypes import from_python
    if getattr(from_python(dtype, st.default_fp, st.default_ip), "is_int", False):
        return int(st.py_rng.integers(-2**31, 2**31))
    return float(st.py_rng.random())


def randn(dt=None):
    """A standard normal sample (Taichi's ti.randn): Box-Muller over `random()` in kernels; from
    Python, numpy's generator seeded by init(random_seed=)."""
    random()  # makes the seeded generator on first use
    from .runtime import state as _state
    return float(_state.current().py_rng.standard_normal())


def loop_config(serialize=False, block_dim=None, parallelize=None, uniform=False,
                bit_vectorize=False, name=None):
    """`sd.loop_config(serialize=True)` before a for loop in a kernel runs that loop serially;
    block_dim / parallelize are hints. Only meaningful inside kernels."""
    raise _python_scope("loop_config")


def static_assert(cond, msg=""):
    """A compile-time assertion (Taichi's ti.static_assert)."""
    if not cond:
        from kernel_ir.errors import SpiradValueError
        raise SpiradValueError(f"static_assert failed: {msg}" if msg else "static_assert failed")


def static_print(*args):
    """Print at compile time (Taichi's ti.static_print)."""
    print(*args)


def block_local(*fields):
    """Taichi's shared-memory cache hint: accepted, no effect (the backend schedules)."""
    return None


def cache_read_only(*fields):
    """Taichi's hint that a kernel only reads `fields` (a read-only cache): accepted, no
    effect (the backend schedules)."""
    return None


def stop_grad(x):
    """Quadrants' / Taichi's `stop_grad(field)`, in a kernel: no gradient flows into `x`'s
    `.grad` from the values read of `x` in the enclosing block (and the blocks within it, @func
    bodies called from them included): reverse mode treats them as constants there."""
    raise _python_scope("stop_grad")


def assume_in_range(x, base, low, high):
    """Taichi's range hint for `x - base`: returns `x` unchanged."""
    return x


def atomic_sub(target, value):
    """`target -= value` atomically (kernels only); returns the old value."""
    raise _python_scope("atomic_sub")


# Quadrants' other atomics: `x = op(x, v)` as one atomic step on a field / ndarray element (a
# plain update on a local), returning the old value. min / max on numbers; and / or / xor on ints.
def atomic_min(target, value):
    """`target = min(target, value)` atomically on a global element (kernels only); returns the old
    value."""
    raise _python_scope("atomic_min")


def atomic_max(target, value):
    """`target = max(target, value)` atomically on a global element (kernels only); returns the old
    value."""
    raise _python_scope("atomic_max")


def atomic_and(target, value):
    """`target &= value` atomically on an integer global element (kernels only); returns the old
    value."""
    raise _python_scope("atomic_and")


def atomic_or(target, value):
    """`target |= value` atomically on an integer global element (kernels only); returns the old
    value."""
    raise _python_scope("atomic_or")


def atomic_xor(target, value):
    """`target ^= value` atomically on an integer global element (kernels only); returns the old
    value."""
    raise _python_scope("atomic_xor")


def atomic_mul(target, value):
    """`target *= value` atomically (Taichi's ti.atomic_mul; kernels only): on a field / ndarray
    element a compare-and-swap loop (Metal has none: a compile error), on a local the plain
    update; returns the old value. Not differentiated (reverse mode refuses it on a float with
    a gradient)."""
    raise _python_scope("atomic_mul")


def zero(x):
    """Taichi's `ti.zero(x)` (kernels only): `x * 0`, zeros of x's type and shape."""
    raise _python_scope("zero")


def one(x):
    """Taichi's `ti.one(x)` (kernels only): `x * 0 + 1`, ones of x's type and shape."""
    raise _python_scope("one")


def atomic_exchange(target, value):
    """Store `value`, return the old value, atomically (Quadrants)."""
    raise _python_scope("atomic_exchange")


def raw_div(a, b):
    """C's division: integers (both operands) truncated toward zero (Python's `//` floors),
    otherwise the true quotient (Taichi's `ti.raw_div`)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        q = np.abs(a) // np.abs(b)
        r = np.where((a < 0) != (b < 0), -q, q)
        return r.item() if r.ndim == 0 else r
    r = np.true_divide(a, b)
    return r.item() if np.ndim(r) == 0 else r


def raw_mod(a, b):
    """C's remainder: the sign of `a` (Python's `%` takes the sign of `b`)."""
    return np.fmod(a, b)


def polar_decompose(a, dt=None):
    """(R, S) with a = R @ S, R a rotation and S symmetric; 2x2 (Taichi's closed form) and 3x3
    (from `svd`) matrices."""
    a = np.asarray(a, dtype=np.float64)
    from .data.matrix import matrix_value
    if a.shape == (3, 3):
        u, s, v = (np.asarray(x) for x in svd(a))
        return matrix_value(u @ v.T), matrix_value(v @ s @ v.T)
    if a.shape != (2, 2):
        from kernel_ir.errors import SpiradNotSupportedError
        raise SpiradNotSupportedError("polar_decompose supports 2x2 and 3x3 matrices")
    x, y = a[0, 0] + a[1, 1], a[1, 0] - a[0, 1]
    inv = 1.0 / np.sqrt(x * x + y * y)
    c, s = x * inv, y * inv
    r = np.array([[c, -s], [s, c]])
    return matrix_value(r), matrix_value(r.T @ a)


def _square(a, name, sizes=(2, 3)) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] not in sizes:
        from kernel_ir.errors import SpiradNotSupportedError
        raise SpiradNotSupportedError(f"{name} supports " + " and ".join(
            f"{k}x{k}" for k in sizes) + f" matrices (got shape {a.shape})")
    return a


def svd(a, dt=None):
    """(U, S, V) with a = U @ S @ V.T, S diagonal — in kernels 2x2 and 3x3 with Taichi's
    conventions (frontend/svd: 2x2 s1 >= s2 >= 0 and V a rotation; 3x3 U, V rotations, the last
    singular value negative when det a < 0); here numpy's SVD brought to those conventions
    (signs of singular vectors may differ from a kernel's)."""
    a = _square(a, "svd")
    u, s, vt = np.linalg.svd(a)
    v = vt.T
    if a.shape[0] == 3:
        for m in (u, v):
            if np.linalg.det(m) < 0:
                m[:, 2] *= -1
                s[2] *= -1
    elif np.linalg.det(v) < 0:
        v[:, 1] *= -1
        u[:, 1] *= -1
    from .data.matrix import matrix_value
    return matrix_value(u), matrix_value(np.diag(s)), matrix_value(v)


def sym_eig(a, dt=None):
    """(eigenvalues, eigenvectors as columns) of a symmetric 2x2 (values descending, Taichi's
    order) or 3x3 (ascending) matrix."""
    a = _square(a, "sym_eig")
    w, q = np.linalg.eigh(a)
    if a.shape[0] == 2:
        w, q = w[::-1], q[:, ::-1]
    from .data.matrix import matrix_value
    return matrix_value(w), matrix_value(q)


def eig(a, dt=None):
    """Eigenvalues (rows: real, imaginary part) and eigenvectors (columns of (re, im) pairs) of a
    2x2 real matrix, Taichi's layout."""
    a = _square(a, "eig", (2,))
    w, q = np.linalg.eig(a)
    order = np.argsort(-w.real, kind="stable")
    w, q = w[order], q[:, order]
    vals = np.stack([w.real, w.imag], 1)
    vecs = np.stack([q.real, q.imag], 1).reshape(4, 2)
    from .data.matrix import matrix_value
    return matrix_value(vals), matrix_value(vecs)


def static(x, *more):
    """Evaluate at compile time; `static(range(n))` unrolls a loop."""
    return (x,) + more if more else x


class ndrange:
    """`for i, j in ndrange(n, (a, b))`: a multi-dimensional range (parallel when outermost).
    `axes=(1, 0)` (Quadrants'): the nesting order, outermost first; the targets stay bound to
    the canonical axes (spirad/data/ndrange_axes.py)."""

    def __init__(self, *dims, axes=None):
        from .data.ndrange_axes import check
        self.dims = dims
        self.axes = check(axes, len(dims))  # Quadrants' nesting order (data/ndrange_axes.py)

    def __iter__(self):
        from .data.ndrange_axes import iterate
        rs = [range(*d) if isinstance(d, tuple) else range(d) for d in self.dims]
        return iterate(rs, self.axes)


class grouped:
    """`for I in grouped(x)`: iterate a field/ndrange with the indices as one vector."""

    def __init__(self, target):
        self.target = target


def _python_scope(name):
    from kernel_ir.errors import SpiradSyntaxError
    return SpiradSyntaxError(f"sd.{name} can only be used inside a kernel or func")


def bit_cast(x, dtype):
    """Taichi's `ti.bit_cast(x, dtype)`: the scalar `x` with its bits unchanged, read as `dtype`,
    a type of the same width (C++'s `reinterpret_cast`: `bit_cast(1.0, sd.i32)` is 1065353216,
    and back). In kernels and in Python scope (numpy); vectors are refused, as in Taichi."""
    import numpy as _np
    from kernel_ir import dtypes as T
    from kernel_ir.errors import SpiradTypeError
    from .runtime import state as _state
    from .bitops import check_bit_cast
    st = _state.current()
    dst = T.from_python(dtype, st.default_fp, st.default_ip)
    a = _np.asarray(x)
    if a.ndim != 0:
        raise SpiradTypeError(f"bit_cast takes a scalar, got shape {a.shape} (as Taichi: "
                              f"cast the components one by one)")
    if a.dtype.kind == "f" and not isinstance(x, _np.generic):
        a = a.astype(st.default_fp.np)  # a Python float: default_fp, as in kernels
    elif a.dtype.kind in "iu" and not isinstance(x, _np.generic):
        a = a.astype(st.default_ip.np)
    if a.dtype.kind not in "fiu":
        raise SpiradTypeError(f"bit_cast needs a numeric scalar, got {x!r}")
    check_bit_cast(T.BY_NAME[f"{a.dtype.kind}{a.dtype.itemsize * 8}"], dst)
    return a.view(dst.np)[()]
