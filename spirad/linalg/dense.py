"""`sd.solve(A, b)` in kernels (Taichi's `ti.solve`): x with A x = b for a small square matrix
A (a local or field element) and a vector b.

Gaussian elimination with partial pivoting, unrolled for the static size n (Taichi has n = 2
and 3; any n works here, within the unrolling cap): at step i the row with the largest |A[j, i]|
(j >= i) is swapped up (a run-time choice made with branches on locals, so the program is the
same for every matrix), rows below are eliminated, then back substitution. Written in the kernel
language, so every arch runs it and both modes of autodiff differentiate it like any code of
ifs and arithmetic (the derivative of the pivot choice is zero, as in Taichi). A singular
matrix (a zero pivot) fails the `assert` under `debug=True`; without it the result holds
inf / nan, as Taichi's does.
"""
from __future__ import annotations

from ..func import func
from ..lang import abs as _abs, static, static_assert
from ..data.matrix import Matrix, Vector


@func
def solve(A, b, dt=None):
    """x with A x = b (A an n x n matrix, b an n-vector) by Gaussian elimination with partial
    pivoting; `dt` is the value type (default: the default float type)."""
    n = static(A.n)
    static_assert(A.n == A.m and A.m == b.n, "solve(A, b) needs a square A and a b of A's size")
    M = Matrix.zero(static(float if dt is None else dt), n, n + 1)
    for r in static(range(n)):
        for c in static(range(n)):
            M[r, c] = A[r, c]
        M[r, n] = b[r]
    for i in static(range(n)):
        p = i
        best = _abs(M[i, i])
        for j in static(range(i + 1, n)):
            if _abs(M[j, i]) > best:
                p = j
                best = _abs(M[j, i])
        assert best != 0.0, "Matrix is singular in linear solve."
        for j in static(range(i + 1, n)):
            if p == j:
                for c in static(range(i, n + 1)):
                    M[i, c], M[j, c] = M[j, c], M[i, c]
        for j in static(range(i + 1, n)):
            f = M[j, i] / M[i, i]
            M[j, i] = 0.0
            for c in static(range(i + 1, n + 1)):
                M[j, c] -= f * M[i, c]
    x = Vector.zero(static(float if dt is None else dt), n)
    for i in static(range(n - 1, -1, -1)):
        s = M[i, n]
        for c in static(range(i + 1, n)):
            s -= M[i, c] * x[c]
        x[i] = s / M[i, i]
    return x

