"""Matrix-free Krylov solvers: `sd.linalg.MatrixFreeCG` (conjugate gradients, A symmetric
positive definite) and `sd.linalg.MatrixFreeBICGSTAB` (BiCGSTAB, any non-singular A), with A given
as a `LinearOperator` over a user kernel `matvec(x, Ax)` (Taichi's `ti.linalg` names and
signatures).

Why kernels, not scipy: A exists only as the user's kernel, and x / b are fields on the device;
every vector operation here is a small kernel in spirad's own language (axpy updates, dot
products reduced in the kernel), so the solvers run on every arch that runs the user's kernel and
no vector leaves the device except the scalars that steer the iteration. The work vectors are
fields of one `FieldsBuilder` tree shaped like b, freed when the solve returns.

Convergence, as Taichi's: CG stops when |r| < tol, BiCGSTAB when |r| < tol (absolute residual
norms), both after at most `maxiter` iterations; the return value says whether it converged.
"""
# no `from __future__ import annotations`: the kernels below annotate with a closure variable (dt)

import math

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradRuntimeError, SpiradTypeError

from ..fields_builder import FieldsBuilder
from ..field import Field, field, i as _i, ij as _ij, ijk as _ijk
from ..kernel import kernel
from ..lang import cast, grouped
from ..types import template


class LinearOperator:
    """A linear map given by a kernel `matvec(x, Ax)` that writes A x into `Ax` (both fields of
    one shape)."""

    def __init__(self, matvec_kernel):
        self._matvec = matvec_kernel

    def matvec(self, x, Ax) -> None:
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


def _work_fields(b, x, names, what):
    """Work fields shaped like b (one FieldsBuilder tree) and the solver dtype."""
    if not isinstance(b, Field) or not isinstance(x, Field):
        raise SpiradTypeError(f"{what}(A, b, x): b and x must be scalar fields")
    if b.dtype != x.dtype:
        raise SpiradTypeError(f"Dtype mismatch b.dtype({b.dtype}) != x.dtype({x.dtype}).")
    if b.dtype not in (T.f32, T.f64) or b.comp_shape or x.comp_shape:
        raise SpiradTypeError(f"Not supported dtype: {b.dtype}")
    if b.shape != x.shape:
        raise SpiradRuntimeError(f"Dimension mismatch b.shape{b.shape} != x.shape{x.shape}.")
    axes = {1: _i, 2: _ij, 3: _ijk}.get(len(b.shape))
    if axes is None:
        raise SpiradRuntimeError(f"{what} only support 1D, 2D, 3D inputs; your inputs is "
                                 f"{len(b.shape)}-D.")
    fb = FieldsBuilder()
    fs = [field(b.dtype) for _ in names]
    fb.dense(axes, b.shape).place(*fs)
    return fb.finalize(), fs, _kernels(b.dtype)


def MatrixFreeCG(A, b, x, tol=1e-6, maxiter=5000, quiet=True) -> bool:  # noqa: N802 (Taichi's)
    """Solve A x = b by conjugate gradients (A symmetric positive definite, a LinearOperator);
    x holds the initial guess and receives the solution. True when |r| < tol was reached."""
    tree, (r, p, Ap, Ax), k = _work_fields(b, x, "r p Ap Ax".split(), "MatrixFreeCG")
    try:
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
    finally:
        tree.destroy()


def MatrixFreeBICGSTAB(A, b, x, tol=1e-6, maxiter=5000, quiet=True) -> bool:  # noqa: N802
    """Solve A x = b by BiCGSTAB (A any non-singular LinearOperator); x holds the initial guess
    and receives the solution. True when |r| < tol was reached; False also on a breakdown
    (r · r0 = 0)."""
    names = "r r0 p v s t Ax".split()
    tree, (r, r0, p, v, s, t, Ax), k = _work_fields(b, x, names, "MatrixFreeBICGSTAB")
    try:
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
    finally:
        tree.destroy()
