"""`sd.math` (Taichi's `ti.math`): constants, GLSL-style vector types and helper functions.

Every helper here is an ordinary function over spirad's own builtins, so one definition serves
both scopes: inside kernels it is inlined like an `@sd.func` (`MathFunc` is a Func), and called
from Python it runs on numbers / numpy arrays / `sd.Vector` values (the builtins are numpy there).
Functions take scalars or vectors (component-wise) unless they say otherwise.
"""
from __future__ import annotations

import math as _m

from kernel_ir import dtypes as _T

from .func import Func
from .data.matrix import Matrix, Vector
from .lang import abs, cos, exp, floor, log, max, min, select, sin, sqrt  # noqa: A004
from .lang import acos, asin, atan, atan2, pow, rsqrt, tan, tanh  # noqa: F401,A004 (ti.math names)
from .types import MatrixType, VectorType

pi = _m.pi
e = _m.e
inf = _m.inf
nan = _m.nan
_LN2, _INV_LN2, _INV_LN10 = _m.log(2.0), 1.0 / _m.log(2.0), 1.0 / _m.log(10.0)

vec2, vec3, vec4 = VectorType(2, float), VectorType(3, float), VectorType(4, float)
ivec2, ivec3, ivec4 = VectorType(2, int), VectorType(3, int), VectorType(4, int)
uvec2, uvec3, uvec4 = (VectorType(n, _T.default_up) for n in (2, 3, 4))  # u32 / u64: default_ip's
mat2, mat3, mat4 = MatrixType(2, 2, float), MatrixType(3, 3, float), MatrixType(4, 4, float)


class MathFunc(Func):
    """A helper usable in both scopes: inlined in kernels, run directly from Python."""

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def _both(fn) -> MathFunc:
    return MathFunc(fn)


@_both
def ceil(x, dtype=None):
    """The smallest integer >= x (as a float; `dtype=int` gives an integer, as Taichi's)."""
    return -floor(-x, dtype)


@_both
def trunc(x):
    """x rounded toward zero (as a float)."""
    return select(x < 0, -floor(-x), floor(x))


@_both
def round(x, dtype=None):  # noqa: A001 - half away from zero, like C's round (Taichi's ti.round)
    """x rounded to the nearest integer, halves away from zero (as C's round; a float, or
    `dtype`'s value, as Taichi's `round(x, dtype)`)."""
    a = abs(x)
    t = floor(a)
    r = t + select(a - t >= 0.5, 1.0, 0.0)
    return floor(select(x < 0, -r, r), dtype)


@_both
def sign(x):
    """1.0, -1.0 or 0.0 by the sign of x."""
    return select(x > 0, 1.0, select(x < 0, -1.0, 0.0))


@_both
def fract(x):
    """x - floor(x), in [0, 1)."""
    return x - floor(x)


@_both
def clamp(x, xmin, xmax):
    """x limited to [xmin, xmax]."""
    return min(max(x, xmin), xmax)


@_both
def mix(x, y, a):
    """Linear interpolation x * (1 - a) + y * a."""
    return x * (1.0 - a) + y * a


@_both
def step(edge, x):
    """0.0 where x < edge, else 1.0."""
    return select(x < edge, 0.0, 1.0)


@_both
def smoothstep(edge0, edge1, x):
    """Hermite interpolation 0 -> 1 as x goes from edge0 to edge1 (GLSL's smoothstep)."""
    t = clamp((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


@_both
def degrees(x):
    """Radians to degrees."""
    return x * (180.0 / pi)


@_both
def radians(x):
    """Degrees to radians."""
    return x * (pi / 180.0)


@_both
def log2(x):
    """Base-2 logarithm."""
    return log(x) * _INV_LN2


@_both
def log10(x):
    """Base-10 logarithm."""
    return log(x) * _INV_LN10


@_both
def exp2(x):
    """2 to the power x."""
    return exp(x * _LN2)


@_both
def dot(x, y):
    """Dot product of two vectors."""
    return x.dot(y)


@_both
def cross(x, y):
    """Cross product of two 3-vectors (a scalar for 2-vectors)."""
    return x.cross(y)


@_both
def length(x):
    """Euclidean length of a vector."""
    return sqrt(x.dot(x))


@_both
def distance(x, y):
    """Euclidean distance between two points."""
    return length(x - y)


@_both
def normalize(x):
    """The vector scaled to length 1."""
    return x * (1.0 / sqrt(x.dot(x)))


@_both
def reflect(x, n):
    """x reflected at the plane with normal n (n of length 1)."""
    return x - 2.0 * n.dot(x) * n


@_both
def refract(x, n, eta):
    """The refraction of direction x at normal n with index ratio eta (zero on total internal
    reflection)."""
    d = n.dot(x)
    k = 1.0 - eta * eta * (1.0 - d * d)
    return select(k < 0.0, 0.0, 1.0) * (eta * x - (eta * d + sqrt(max(k, 0.0))) * n)


@_both
def isinf(x):
    """Whether x is +inf or -inf."""
    return abs(x) == inf


@_both
def isnan(x):
    """Whether x is NaN."""
    return x != x


@_both
def vdir(angle):
    """The unit 2-vector (cos angle, sin angle)."""
    return Vector([cos(angle), sin(angle)])


@_both
def determinant(m):
    """Determinant of a square matrix."""
    return m.determinant()


@_both
def inverse(m):
    """Inverse of a square matrix."""
    return m.inverse()


@_both
def rot2(angle):
    """The 2x2 rotation matrix by `angle` (radians)."""
    c = cos(angle)
    s = sin(angle)
    return Matrix([[c, -s], [s, c]])


@_both
def cmul(a, b):
    """Product of two complex numbers stored as 2-vectors (re, im)."""
    return Vector([a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]])


@_both
def cconj(a):
    """Complex conjugate of a 2-vector (re, im)."""
    return Vector([a[0], -a[1]])


@_both
def cdiv(a, b):
    """Quotient a / b of two complex numbers stored as 2-vectors (Taichi's `ti.math.cdiv`)."""
    d = b[0] * b[0] + b[1] * b[1]
    return Vector([(a[0] * b[0] + a[1] * b[1]) / d, (a[1] * b[0] - a[0] * b[1]) / d])


@_both
def cinv(a):
    """Reciprocal 1 / a of a complex number stored as a 2-vector (Taichi's `ti.math.cinv`)."""
    d = a[0] * a[0] + a[1] * a[1]
    return Vector([a[0] / d, -a[1] / d])


@_both
def cexp(a):
    """exp(a) of a complex number stored as a 2-vector (Taichi's `ti.math.cexp`)."""
    r = exp(a[0])
    return Vector([r * cos(a[1]), r * sin(a[1])])


@_both
def clog(a):
    """The principal logarithm of a complex number stored as a 2-vector: (log |a|, arg a), the
    argument in (-pi, pi] (Taichi's `ti.math.clog`)."""
    return Vector([0.5 * log(a[0] * a[0] + a[1] * a[1]), atan2(a[1], a[0])])


@_both
def cpow(a, n):
    """a ** n of a complex number stored as a 2-vector and a real exponent n, through the polar
    form (Taichi's `ti.math.cpow`); 0 for a = 0."""
    r2 = a[0] * a[0] + a[1] * a[1]
    t = atan2(a[1], a[0]) * n
    m = select(r2 > 0, pow(select(r2 > 0, r2, 1.0), n * 0.5), 0.0)
    return Vector([m * cos(t), m * sin(t)])


@_both
def csqrt(a):
    """The square root of a complex number stored as a 2-vector with a non-negative real part
    (the one with a non-negative imaginary part when both are 0; Taichi's `ti.math.csqrt`);
    0 for a = 0."""
    r2 = a[0] * a[0] + a[1] * a[1]
    m = select(r2 > 0, sqrt(sqrt(select(r2 > 0, r2, 1.0))), 0.0)
    t = atan2(a[1], a[0]) * 0.5
    return Vector([m * cos(t), m * sin(t)])


@_both
def rotation2d(angle):
    """Taichi's name of `rot2`: the 2x2 counter-clockwise rotation by `angle` (radians)."""
    return rot2(angle)


@_both
def translate(dx, dy, dz):
    """The 4x4 homogeneous matrix that translates by (dx, dy, dz)."""
    return Matrix([[1.0, 0.0, 0.0, dx], [0.0, 1.0, 0.0, dy], [0.0, 0.0, 1.0, dz],
                   [0.0, 0.0, 0.0, 1.0]])


@_both
def scale(sx, sy, sz):
    """The 4x4 homogeneous matrix that scales the axes by (sx, sy, sz)."""
    return Matrix([[sx, 0.0, 0.0, 0.0], [0.0, sy, 0.0, 0.0], [0.0, 0.0, sz, 0.0],
                   [0.0, 0.0, 0.0, 1.0]])


@_both
def rot_by_axis(axis, angle):
    """The 4x4 homogeneous rotation by `angle` (radians) about the 3-vector `axis` (normalised
    here), laid out as Taichi's `ti.math.rot_by_axis` (the transpose of Rodrigues' matrix)."""
    c = cos(angle)
    s = sin(angle)
    a = normalize(axis)
    t = (1.0 - c) * a
    return Matrix([[c + t[0] * a[0], t[0] * a[1] + s * a[2], t[0] * a[2] - s * a[1], 0.0],
                   [t[1] * a[0] - s * a[2], c + t[1] * a[1], t[1] * a[2] + s * a[0], 0.0],
                   [t[2] * a[0] + s * a[1], t[2] * a[1] - s * a[0], c + t[2] * a[2], 0.0],
                   [0.0, 0.0, 0.0, 1.0]])


@_both
def rot_yaw_pitch_roll(yaw, pitch, roll):
    """The 4x4 homogeneous rotation by Euler angles (radians), in Taichi's convention: about Y
    (yaw) first, then X (pitch), then Z (roll)."""
    ch, sh = cos(yaw), sin(yaw)
    cp, sp = cos(pitch), sin(pitch)
    cb, sb = cos(roll), sin(roll)
    return Matrix([[ch * cb + sh * sp * sb, sb * cp, -sh * cb + ch * sp * sb, 0.0],
                   [-ch * sb + sh * sp * cb, cb * cp, sb * sh + ch * sp * cb, 0.0],
                   [sh * cp, -sp, ch * cp, 0.0],
                   [0.0, 0.0, 0.0, 1.0]])


@_both
def rotation3d(ang_x, ang_y, ang_z):
    """`rot_yaw_pitch_roll(ang_z, ang_x, ang_y)`, as Taichi's `ti.math.rotation3d`."""
    return rot_yaw_pitch_roll(ang_z, ang_x, ang_y)


@_both
def mod(x, y):
    """x - y * floor(x / y): the remainder with the sign of y (GLSL's mod)."""
    return x - y * floor(x / y)


def eye(n: int):
    """The n x n identity matrix (Python scope; in kernels use sd.Matrix.identity(float, n))."""
    import numpy as np
    return Matrix(np.eye(n).tolist())


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("MathFunc", "annotations",
                                                                   "MatrixType", "VectorType",
                                                                   "Func")]


# -- Quadrants' bit counting (qd.math.popcnt / clz / ffs): i32 results over the unsigned bit
# pattern. In kernels these are builtins (`spirad.frontend.bits`: shifts, masks and selects, the
# same code on every backend); from Python they run on numpy integers.
from .bitops import clz, ffs, popcnt  # noqa: E402,F401 (Python scope; kernels: frontend/bits)


@_both
def outer(a, b):
    """The outer product a_i b_j of two vectors (`a.outer_product(b)`)."""
    return a.outer_product(b)
