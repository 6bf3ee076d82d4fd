"""Matrix-free Krylov solvers: `sd.linalg.MatrixFreeCG` (conjugate gradients, A symmetric
positive definite) and `sd.linalg.MatrixFreeBICGSTAB` (BiCGSTAB, any non-singular A), with A given
as a `LinearOperator` over a user kernel `matvec(x, Ax)` (Taichi's `ti.linalg` names and
signatures).

Why kernels, not scipy: A exists only as the user's kernel, and x / b are fields on the device;
every vector operation here is a small kernel in spirad's own language (axpy updates, dot
products reduced in the kernel), so the solvers run on every arch that runs the user's kernel and
no vector leaves the device except the scalars that steer the iteration. The work vectors are
fields of one `FieldsBuilder` tree shaped like b, kept for the next solve of that shape (`_Work`)
until the next `init()`.

Convergence, as Taichi's: CG stops when |r| < tol, BiCGSTAB when |r| < tol (absolute residual
norms), both after at most `maxiter` iterations; the return value says whether it converged.
"""
# no `from __future__ import annotations`: the kernels below annotate with a closure variable (dt)

import contextlib
import math
import threading

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradRuntimeError, SpiradTypeError

from ..runtime import state as _state
from ..data.fields_builder import FieldsBuilder
from ..data.field import Field, field, i as _i, ij as _ij, ijk as _ijk
from ..kernel import kernel
from ..lang import cast, grouped
from ..types import template


class LinearOperator:
    """A linear map given by a kernel `matvec(x, Ax)` that writes A x into `Ax` (both fields of
    one shape)."""

    def __init__(self, matvec_kernel):
        self._matvec = matvec_kernel

    def matvec(self, x, Ax) -> None:
        """Ax = A x (runs the kernel)."""
        if x.shape != Ax.shape:
            raise SpiradRuntimeError(f"Dimension mismatch x.shape{x.shape} != Ax.shape{Ax.shape}.")
        self._matvec(x, Ax)


class _Kernels:
    """The vector kernels of one value type (f32 or f64): scalars cross the kernel boundary in
    the fields' own type, so an f32 solve needs no 64-bit floats (Metal)."""

    def __init__(self, dt):
        @kernel
        def dot(p: template(), q: template()) -> dt:
            """Σ p[I] q[I]."""
            s = cast(0.0, dt)
            for I in grouped(p):
                s += p[I] * q[I]
            return s

        @kernel
        def axpy(y: template(), a: dt, x: template()):
            """y += a x."""
            for I in grouped(y):
                y[I] += a * x[I]

        @kernel
        def xpay(y: template(), x: template(), a: dt):
            """y = x + a y."""
            for I in grouped(y):
                y[I] = x[I] + a * y[I]

        @kernel
        def lin2(out: template(), x: template(), a: dt, y: template()):
            """out = x + a y."""
            for I in grouped(out):
                out[I] = x[I] + a * y[I]

        @kernel
        def bicg_p(p: template(), r: template(), beta: dt, omega: dt, v: template()):
            """p = r + beta (p - omega v)."""
            for I in grouped(p):
                p[I] = r[I] + beta * (p[I] - omega * v[I])

        @kernel
        def copy(dst: template(), src: template()):
            for I in grouped(dst):
                dst[I] = src[I]

        self.dot, self.axpy, self.xpay, self.lin2 = dot, axpy, xpay, lin2
        self.bicg_p, self.copy = bicg_p, copy


_KERNELS: dict = {}


def _kernels(dt) -> _Kernels:
    k = _KERNELS.get(dt)
    if k is None:
        k = _KERNELS[dt] = _Kernels(dt)
    return k


class _Work:
    """The work fields of one solve: one FieldsBuilder tree shaped like b. Returned to `_POOL`
    after the solve and reused by the next solve of the same shape, type and method, so the
    vector kernels and the user's matvec see the same fields again and are not recompiled
    (fresh fields every solve: a recompile of every kernel, 1.7 s per 64x64 CG solve on the
    CPU). A solve takes its set out of the pool while it runs: two threads never share one."""

    def __init__(self, shape, dtype, names):
        axes = {1: _i, 2: _ij, 3: _ijk}[len(shape)]
        fb = FieldsBuilder()
        self.fields = [field(dtype) for _ in names]
        fb.dense(axes, shape).place(*self.fields)
        self.tree = fb.finalize()


_POOL: dict = {}  # (epoch, shape, dtype, method) -> [_Work]; an init() makes a new epoch
_POOL_LOCK = threading.Lock()


@contextlib.contextmanager
def _work_fields(b, x, names, what):
    """Work fields shaped like b (from the pool, or new) and the kernels of b's dtype."""
    if not isinstance(b, Field) or not isinstance(x, Field):
        raise SpiradTypeError(f"{what}(A, b, x): b and x must be scalar fields")
    if b.dtype != x.dtype:
        raise SpiradTypeError(f"Dtype mismatch b.dtype({b.dtype}) != x.dtype({x.dtype}).")
    if b.dtype not in (T.f32, T.f64) or b.comp_shape or x.comp_shape:
        raise SpiradTypeError(f"Not supported dtype: {b.dtype}")
    if b.shape != x.shape:
        raise SpiradRuntimeError(f"Dimension mismatch b.shape{b.shape} != x.shape{x.shape}.")
    if len(b.shape) not in (1, 2, 3):
        raise SpiradRuntimeError(f"{what} only support 1D, 2D, 3D inputs; your inputs is "
                                 f"{len(b.shape)}-D.")
    key = (_state.current().epoch, tuple(b.shape), b.dtype, what)
    with _POOL_LOCK:
        for k in [k for k in _POOL if k[0] != key[0]]:
            del _POOL[k]  # fields of an earlier init(): gone with it
        free = _POOL.setdefault(key, [])
        work = free.pop() if free else None
    if work is None:
        work = _Work(b.shape, b.dtype, names)
    try:
        yield work.fields, _kernels(b.dtype)
    except BaseException:
        work.tree.destroy()  # an error inside the solve (the user's matvec): not reused
        raise
    with _POOL_LOCK:
        if _state.current().epoch == key[0]:
            _POOL.setdefault(key, []).append(work)


def MatrixFreeCG(A, b, x, tol=1e-6, maxiter=5000, quiet=True) -> bool:  # noqa: N802 (Taichi's)
    """Solve A x = b by conjugate gradients (A symmetric positive definite, a LinearOperator);
    x holds the initial guess and receives the solution. True when |r| < tol was reached."""
    with _work_fields(b, x, "r p Ap Ax".split(), "MatrixFreeCG") as ((r, p, Ap, Ax), k):
        A.matvec(x, Ax)
        k.lin2(r, b, -1.0, Ax)            # r = b - A x
        k.copy(p, r)
        rr = k.dot(r, r)
        if not quiet:
            print(f">>> Initial residual = {rr:e}")
        for it in range(int(maxiter)):
            if math.sqrt(rr) < tol:
                break
            A.matvec(p, Ap)
            pAp = k.dot(p, Ap)
            if pAp == 0.0:               # p = 0: nothing left to reduce (or A is singular)
                break
            alpha = rr / pAp
            k.axpy(x, alpha, p)
            k.axpy(r, -alpha, Ap)
            rr_new = k.dot(r, r)
            if not quiet:
                print(f">>> Iter = {it + 1:4}, Residual = {math.sqrt(rr_new):e}")
            k.xpay(p, r, rr_new / rr)     # p = r + beta p
            rr = rr_new
        ok = math.sqrt(rr) < tol
        if not quiet:
            print(">>> Conjugate Gradient method " + ("converged." if ok else
                  f"failed to converge in {maxiter} iterations: Residual = {math.sqrt(rr):e}"))
        return ok


def MatrixFreeBICGSTAB(A, b, x, tol=1e-6, maxiter=5000, quiet=True) -> bool:  # noqa: N802
    """Solve A x = b by BiCGSTAB (A any non-singular LinearOperator); x holds the initial guess
    and receives the solution. True when |r| < tol was reached; False also on a breakdown
    (r · r0 = 0)."""
    names = "r r0 p v s t Ax".split()
    with _work_fields(b, x, names, "MatrixFreeBICGSTAB") as ((r, r0, p, v, s, t, Ax), k):
        A.matvec(x, Ax)
        k.lin2(r, b, -1.0, Ax)            # r = b - A x
        k.copy(r0, r)
        rr = k.dot(r, r)
        if not quiet:
            print(f">>> Initial residual = {rr:e}")
        rho_old = alpha = omega = 1.0
        for it in range(int(maxiter)):
            if math.sqrt(rr) < tol:
                break
            rho = k.dot(r0, r)
            if rho == 0.0:
                if not quiet:
                    print(">>> BICGSTAB failed because r @ r0 = 0.")
                return False
            if it == 0:
                k.copy(p, r)
            else:
                k.bicg_p(p, r, (rho / rho_old) * (alpha / omega), omega, v)
            A.matvec(p, v)
            r0v = k.dot(r0, v)
            if r0v == 0.0:
                return False             # breakdown: r0 ⟂ A p
            alpha = rho / r0v
            k.lin2(s, r, -alpha, v)       # s = r - alpha v
            A.matvec(s, t)
            tt = k.dot(t, t)
            omega = k.dot(t, s) / tt if tt != 0.0 else 0.0
            k.axpy(x, alpha, p)
            k.axpy(x, omega, s)
            k.lin2(r, s, -omega, t)       # r = s - omega t
            rr = k.dot(r, r)
            rho_old = rho
            if not quiet:
                print(f">>> Iter = {it + 1:4}, Residual = {math.sqrt(rr):e}")
            if omega == 0.0 and math.sqrt(rr) >= tol:
                return False             # stagnation: t ⟂ s
        ok = math.sqrt(rr) < tol
        if not quiet:
            print(">>> BICGSTAB " + ("converged." if ok else
                  f"failed to converge in {maxiter} iterations: Residual = {math.sqrt(rr):e}"))
        return ok
