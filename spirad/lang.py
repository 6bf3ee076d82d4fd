"""Functions users call inside kernels (`sd.sin`, `sd.atomic_add`, `sd.static`, ...).

Called from plain Python they compute with numpy, so the same helper code runs on both sides.
Inside kernels the frontend never calls these: it looks each function object up in
`spirad.frontend.builtins.HANDLERS` and emits IR instead.
"""
from __future__ import annotations

import numpy as np


def sin(x): return np.sin(x)
def cos(x): return np.cos(x)
def tan(x): return np.tan(x)
def tanh(x): return np.tanh(x)
def asin(x): return np.arcsin(x)
def acos(x): return np.arccos(x)
def atan2(y, x): return np.arctan2(y, x)
def exp(x): return np.exp(x)
def log(x): return np.log(x)
def sqrt(x): return np.sqrt(x)
def rsqrt(x): return 1.0 / np.sqrt(x)
def pow(x, y): return np.power(x, y)  # noqa: A001 (Taichi name)
def abs(x): return np.abs(x)  # noqa: A001
def floor(x, dtype=None): return np.floor(x) if dtype is None else np.floor(x).astype(dtype.np)
def atan(x): return np.arctan(x)
def min(*xs): return np.minimum.reduce(xs) if len(xs) > 2 else np.minimum(*xs)  # noqa: A001
def max(*xs): return np.maximum.reduce(xs) if len(xs) > 2 else np.maximum(*xs)  # noqa: A001
def select(cond, a, b): return np.where(cond, a, b)


def cast(x, dtype):
    return np.asarray(x).astype(dtype.np)


def atomic_add(target, value):
    raise _python_scope("atomic_add")


def random(dtype=float):  # noqa: A001 (Taichi name)
    """A uniform float in [0, 1) (or a random int). In kernels: per-thread streams
    (spirad.frontend.rng); from Python: numpy's generator, seeded by init(random_seed=)."""
    from . import state as _state
    st = _state.current()
    if getattr(st, "py_rng", None) is None:
        st.py_rng = np.random.default_rng(int(st.options.get("random_seed", 0) or 0))
    if dtype is int or (hasattr(dtype, "is_int") and dtype.is_int):
        return int(st.py_rng.integers(-2**31, 2**31))
    return float(st.py_rng.random())


def randn(dt=None):
    """A standard normal sample (Taichi's ti.randn): Box-Muller over `random()` in kernels; from
    Python, numpy's generator seeded by init(random_seed=)."""
    random()  # makes the seeded generator on first use
    from . import state as _state
    return float(_state.current().py_rng.standard_normal())


def loop_config(serialize=False, block_dim=None, parallelize=None, uniform=False,
                bit_vectorize=False):
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


def assume_in_range(x, base, low, high):
    """Taichi's range hint for `x - base`: returns `x` unchanged."""
    return x


def atomic_sub(target, value):
    raise _python_scope("atomic_sub")


# Quadrants' other atomics: `x = op(x, v)` as one atomic step on a field / ndarray element (a
# plain update on a local), returning the old value. min / max on numbers; and / or / xor on ints.
def atomic_min(target, value):
    raise _python_scope("atomic_min")


def atomic_max(target, value):
    raise _python_scope("atomic_max")


def atomic_and(target, value):
    raise _python_scope("atomic_and")


def atomic_or(target, value):
    raise _python_scope("atomic_or")


def atomic_xor(target, value):
    raise _python_scope("atomic_xor")


def polar_decompose(a, dt=None):
    """(R, S) with a = R @ S, R a rotation and S symmetric; 2x2 matrices (Taichi's closed form)."""
    a = np.asarray(a, dtype=np.float64)
    if a.shape != (2, 2):
        from kernel_ir.errors import SpiradNotSupportedError
        raise SpiradNotSupportedError("polar_decompose supports 2x2 matrices only")
    x, y = a[0, 0] + a[1, 1], a[1, 0] - a[0, 1]
    inv = 1.0 / np.sqrt(x * x + y * y)
    c, s = x * inv, y * inv
    r = np.array([[c, -s], [s, c]])
    from .matrix import matrix_value
    return matrix_value(r), matrix_value(r.T @ a)


def static(x, *more):
    """Evaluate at compile time; `static(range(n))` unrolls a loop."""
    return (x,) + more if more else x


class ndrange:
    """`for i, j in ndrange(n, (a, b))`: a multi-dimensional range (parallel when outermost)."""

    def __init__(self, *dims):
        self.dims = dims

    def __iter__(self):
        import itertools
        rs = [range(*d) if isinstance(d, tuple) else range(d) for d in self.dims]
        return iter(itertools.product(*rs))


class grouped:
    """`for I in grouped(x)`: iterate a field/ndrange with the indices as one vector."""

    def __init__(self, target):
        self.target = target


def _python_scope(name):
    from kernel_ir.errors import SpiradSyntaxError
    return SpiradSyntaxError(f"sd.{name} can only be used inside a kernel or func")
