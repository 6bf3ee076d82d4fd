"""`sd.svd(A)`, `sd.sym_eig(A)`, `sd.eig(A)` and 3x3 `sd.polar_decompose(A)` in kernels
(Taichi's `ti.svd`, ...), with derivatives in both modes.

    U, S, V = sd.svd(A)        # A = U @ S @ V.transpose(), S a diagonal matrix

Conventions (Taichi 1.7.4's): 2x2 — singular values s1 >= s2 >= 0, V a rotation, U = (A's
polar factor) @ V, a reflection when det A < 0 (the polar decomposition with a positive
semi-definite factor, then a Jacobi rotation of it); 3x3 — U and V rotations, s1 >= s2 >= |s3|,
s3 < 0 when det A < 0 (cyclic Jacobi on AᵀA, columns sorted by swapping with a negation as
McAdams et al. do, then U from an orthonormalisation of A V). Eigenvector signs, and therefore
U and V for matrices with repeated singular values, can differ from Taichi's 3x3 (whose
approximate quaternion rotations pick their own).

Derivatives: the decomposition runs on A's value with no derivative flowing through the
algorithm (`Op.STOP_GRAD`); to its results is added the standard first-order term in
Δ = A - stop(A) (zero in value, dΔ = dA): with P = Uᵀ Δ V,

    dS_i = P_ii,  dU = U Ω_U,  dV = V Ω_V,  for i != j (Ω antisymmetric):
    Ω_U[i, j] = (P_ij s_j + P_ji s_i) / (s_j² - s_i²) = sym_ij + anti_ij,  Ω_V[i, j] = sym_ij - anti_ij
    sym_ij = (P_ij + P_ji) / (2 (s_j - s_i)),  anti_ij = (P_ij - P_ji) / (2 (s_i + s_j))

so reverse and forward mode differentiate those linear terms as they differentiate any
expression. Near-equal singular values make `sym` unbounded (U and V are not unique there):
where |s_j - s_i| is under `REL_GAP` times |s_1| the term is left out (0), as is `anti` where
|s_i + s_j| is (rank deficiency). U and V then get bounded derivatives; S and U Vᵀ (the polar
factor: `sym` cancels in it) keep exact ones. A smaller gap would leave huge terms that cancel
in U Vᵀ only to a few digits (f32: 1e-7 / gap). `sym_eig` treats 1 / (l_j - l_i) the same way.
"""
from __future__ import annotations

from kernel_ir.builder import Emit
from kernel_ir.ops import Op

REL_GAP = {32: 1e-3, 64: 1e-8}  # closer values: no derivative term between them
TINY = {32: 1e-30, 64: 1e-300}
SWEEPS = {32: 4, 64: 6}  # cyclic Jacobi sweeps of a 3x3 (quadratic convergence: 1e-16 in 5)


class _M:
    """Arithmetic on IR nodes of one float type (Python numbers become constants)."""

    def __init__(self, b, dt):
        self.e, self.dt = Emit(b), dt

    def c(self, x):
        return self.e.const(float(x), self.dt) if isinstance(x, (int, float)) else x

    def add(self, x, y):
        return self.e.add(self.c(x), self.c(y))

    def sub(self, x, y):
        return self.e.sub(self.c(x), self.c(y))

    def mul(self, x, y):
        return self.e.mul(self.c(x), self.c(y))

    def div(self, x, y):
        return self.e.div(self.c(x), self.c(y))

    def neg(self, x):
        return self.e.neg(self.c(x))

    def sqrt(self, x):
        return self.e.op(Op.SQRT, self.c(x))

    def abs(self, x):
        return self.e.op(Op.ABS, self.c(x))

    def max(self, x, y):
        return self.e.op(Op.MAX, self.c(x), self.c(y))

    def lt(self, x, y):
        return self.e.cmp(Op.CMP_LT, self.c(x), self.c(y))

    def le(self, x, y):
        return self.e.cmp(Op.CMP_LE, self.c(x), self.c(y))

    def eq(self, x, y):
        return self.e.cmp(Op.CMP_EQ, self.c(x), self.c(y))

    def sel(self, cond, x, y):
        return self.e.select(cond, self.c(x), self.c(y))

    def and_(self, x, y):
        return self.e.op(Op.AND, x, y)

    def stop(self, x):
        return self.e.op(Op.STOP_GRAD, self.c(x))

    def dot(self, xs, ys):
        acc = self.mul(xs[0], ys[0])
        for x, y in zip(xs[1:], ys[1:]):
            acc = self.add(acc, self.mul(x, y))
        return acc


def _mat(m, rows):
    """n x n list of lists of nodes."""
    return [list(r) for r in rows]


def _t(a):
    return [list(r) for r in zip(*a)]


def _mm(m, a, b):
    n = len(a)
    return [[m.dot(a[i], [b[k][j] for k in range(n)]) for j in range(n)] for i in range(n)]


# -- 2x2: Taichi's polar decomposition, then a Jacobi rotation of the symmetric factor -----------
def _svd2(m, a):
    (a00, a01), (a10, a11) = a
    zero = m.and_(m.and_(m.eq(a00, 0.0), m.eq(a01, 0.0)), m.and_(m.eq(a10, 0.0), m.eq(a11, 0.0)))
    det = m.sub(m.mul(a00, a11), m.mul(a10, a01))
    neg = m.lt(det, 0.0)
    # B: a multiple of the polar factor (a rotation, or a reflection where det A < 0)
    b00 = m.sel(neg, m.sub(a00, a11), m.add(a00, a11))
    b01 = m.sel(neg, m.add(a01, a10), m.sub(a01, a10))
    b10 = m.sel(neg, m.add(a10, a01), m.sub(a10, a01))
    b11 = m.sel(neg, m.sub(a11, a00), m.add(a11, a00))
    detb = m.abs(m.sub(m.mul(b00, b11), m.mul(b10, b01)))
    k = m.div(1.0, m.sqrt(m.sel(zero, 1.0, detb)))
    r = [[m.sel(zero, 1.0, m.mul(b00, k)), m.sel(zero, 0.0, m.mul(b01, k))],
         [m.sel(zero, 0.0, m.mul(b10, k)), m.sel(zero, 1.0, m.mul(b11, k))]]
    # P = (AᵀA + |det A| I) k: symmetric positive semi-definite, A = R P
    ata = _mm(m, _t(a), a)
    adet = m.abs(det)
    p00 = m.sel(zero, 0.0, m.mul(m.add(ata[0][0], adet), k))
    p01 = m.sel(zero, 0.0, m.mul(ata[0][1], k))
    p11 = m.sel(zero, 0.0, m.mul(m.add(ata[1][1], adet), k))
    # the Jacobi rotation that diagonalises P (the smaller angle), as Taichi picks it
    small = m.le(m.abs(p01), m.mul(m.add(m.abs(p00), m.abs(p11)), 1e-7 if m.dt.bits == 32 else 1e-15))
    tao = m.mul(0.5, m.sub(p00, p11))
    w = m.sqrt(m.add(m.mul(tao, tao), m.mul(p01, p01)))
    den = m.sel(m.lt(0.0, tao), m.add(tao, w), m.sub(tao, w))
    t = m.sel(small, 0.0, m.div(p01, m.sel(small, 1.0, den)))
    c = m.div(1.0, m.sqrt(m.add(m.mul(t, t), 1.0)))
    s = m.neg(m.mul(t, c))
    cs2 = m.mul(m.mul(2.0, c), m.mul(s, p01))
    s1 = m.sel(small, p00, m.add(m.sub(m.mul(m.mul(c, c), p00), cs2), m.mul(m.mul(s, s), p11)))
    s2 = m.sel(small, p11, m.add(m.add(m.mul(m.mul(s, s), p00), cs2), m.mul(m.mul(c, c), p11)))
    swap = m.lt(s1, s2)
    v = [[m.sel(swap, m.neg(s), c), m.sel(swap, c, s)],
         [m.sel(swap, m.neg(c), m.neg(s)), m.sel(swap, m.neg(s), c)]]
    sig = [m.sel(swap, s2, s1), m.sel(swap, s1, s2)]
    return _mm(m, r, v), sig, v


# -- 3x3: cyclic Jacobi on AᵀA, sorted columns of A V, U orthonormalised ----------------------
def _rotate(m, s, v, p, q):
    """One exact Jacobi rotation zeroing s[p][q] (|angle| <= 45 degrees), applied to the
    symmetric s and accumulated into v."""
    spq = s[p][q]
    zero = m.eq(spq, 0.0)
    tau = m.div(m.sub(s[q][q], s[p][p]), m.mul(2.0, m.sel(zero, 1.0, spq)))
    sign = m.sel(m.lt(tau, 0.0), -1.0, 1.0)
    t = m.sel(zero, 0.0, m.div(sign, m.add(m.abs(tau), m.sqrt(m.add(m.mul(tau, tau), 1.0)))))
    c = m.div(1.0, m.sqrt(m.add(m.mul(t, t), 1.0)))
    sn = m.mul(t, c)
    r = 3 - p - q
    new = [row[:] for row in s]
    new[p][p] = m.sub(s[p][p], m.mul(t, spq))
    new[q][q] = m.add(s[q][q], m.mul(t, spq))
    new[p][q] = new[q][p] = m.c(0.0)
    srp = m.sub(m.mul(c, s[r][p]), m.mul(sn, s[r][q]))
    srq = m.add(m.mul(sn, s[r][p]), m.mul(c, s[r][q]))
    new[r][p] = new[p][r] = srp
    new[r][q] = new[q][r] = srq
    nv = [row[:] for row in v]
    for i in range(3):
        nv[i][p] = m.sub(m.mul(c, v[i][p]), m.mul(sn, v[i][q]))
        nv[i][q] = m.add(m.mul(sn, v[i][p]), m.mul(c, v[i][q]))
    return new, nv


def _svd3(m, a):
    s = _mm(m, _t(a), a)
    v = [[m.c(float(i == j)) for j in range(3)] for i in range(3)]
    for _ in range(SWEEPS[m.dt.bits]):
        for p, q in ((0, 1), (0, 2), (1, 2)):
            s, v = _rotate(m, s, v, p, q)
    b = _mm(m, a, v)
    rho = [m.dot([b[k][j] for k in range(3)], [b[k][j] for k in range(3)]) for j in range(3)]
    for i, j in ((0, 1), (0, 2), (1, 2)):  # largest first; a swap negates: det V stays +1
        c = m.lt(rho[i], rho[j])
        for mat in (b, v):
            for row in mat:
                old = row[i]
                row[i] = m.sel(c, row[j], old)
                row[j] = m.sel(c, m.neg(old), row[j])
        rho[i], rho[j] = m.sel(c, rho[j], rho[i]), m.sel(c, rho[i], rho[j])
    col = [[b[k][j] for k in range(3)] for j in range(3)]
    tiny = TINY[m.dt.bits]
    s1 = m.sqrt(rho[0])
    u1 = _unit(m, col[0], s1, [1.0, 0.0, 0.0], tiny)
    d = m.dot(u1, col[1])
    w2 = [m.sub(x, m.mul(d, y)) for x, y in zip(col[1], u1)]
    n2 = m.sqrt(m.dot(w2, w2))
    u2 = _unit(m, w2, n2, _orthogonal(m, u1), m.max(tiny, m.mul(s1, 1e-7 if m.dt.bits == 32 else 1e-15)))
    u3 = [m.sub(m.mul(u1[1], u2[2]), m.mul(u1[2], u2[1])),
          m.sub(m.mul(u1[2], u2[0]), m.mul(u1[0], u2[2])),
          m.sub(m.mul(u1[0], u2[1]), m.mul(u1[1], u2[0]))]
    u = [[u1[i], u2[i], u3[i]] for i in range(3)]
    return u, [s1, m.dot(u2, col[1]), m.dot(u3, col[2])], v


def _unit(m, x, norm, fallback, tiny):
    """x / norm, or `fallback` (a unit vector) where the norm is not above `tiny`."""
    ok = m.lt(tiny, norm)
    inv = m.div(1.0, m.sel(ok, norm, 1.0))
    return [m.sel(ok, m.mul(xi, inv), f) for xi, f in zip(x, fallback)]


def _orthogonal(m, u):
    """A unit vector orthogonal to unit u: u x e where e is the axis of u's smallest component."""
    ax = [m.abs(x) for x in u]
    use0 = m.and_(m.le(ax[0], ax[1]), m.le(ax[0], ax[2]))
    use1 = m.le(ax[1], ax[2])
    e = [m.sel(use0, 1.0, 0.0), m.sel(use0, 0.0, m.sel(use1, 1.0, 0.0)),
         m.sel(use0, 0.0, m.sel(use1, 0.0, 1.0))]
    w = [m.sub(m.mul(u[1], e[2]), m.mul(u[2], e[1])), m.sub(m.mul(u[2], e[0]), m.mul(u[0], e[2])),
         m.sub(m.mul(u[0], e[1]), m.mul(u[1], e[0]))]
    inv = m.div(1.0, m.sqrt(m.dot(w, w)))
    return [m.mul(x, inv) for x in w]


# -- the derivative: the first-order term in A - stop(A) -------------------------------------
def svd(b, dt, a):
    """(U, sigma, V) of the n x n matrix `a` (rows of nodes of type dt), n = 2 or 3, each a list
    of rows; sigma a list of n values. Differentiable (module docstring)."""
    m = _M(b, dt)
    n = len(a)
    a0 = [[m.stop(x) for x in row] for row in a]
    u0, s0, v0 = (_svd2 if n == 2 else _svd3)(m, a0)
    delta = [[m.sub(x, y) for x, y in zip(r, r0)] for r, r0 in zip(a, a0)]
    p = _mm(m, _mm(m, _t(u0), delta), v0)
    floor = m.max(m.mul(m.abs(s0[0]), REL_GAP[dt.bits]), TINY[dt.bits])
    wu = [[m.c(0.0)] * n for _ in range(n)]
    wv = [[m.c(0.0)] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            sym = _ratio(m, m.add(p[i][j], p[j][i]), m.mul(2.0, m.sub(s0[j], s0[i])), floor)
            anti = _ratio(m, m.sub(p[i][j], p[j][i]), m.mul(2.0, m.add(s0[i], s0[j])), floor)
            ou, ov = m.add(sym, anti), m.sub(sym, anti)
            wu[i][j], wu[j][i] = ou, m.neg(ou)
            wv[i][j], wv[j][i] = ov, m.neg(ov)
    du, dv = _mm(m, u0, wu), _mm(m, v0, wv)
    u = [[m.add(x, y) for x, y in zip(r, d)] for r, d in zip(u0, du)]
    v = [[m.add(x, y) for x, y in zip(r, d)] for r, d in zip(v0, dv)]
    s = [m.add(s0[i], p[i][i]) for i in range(n)]
    return u, s, v


def _ratio(m, num, den, floor):
    """num / den, or 0 where |den| < floor (the term of two values too close to tell apart)."""
    small = m.lt(m.abs(den), floor)
    return m.sel(small, 0.0, m.div(num, m.sel(small, 1.0, den)))


# -- symmetric eigen-decomposition: the same scheme ----------------------------------------------
def _sym_eig2(m, a):
    """Taichi's 2x2 closed form: (l1 >= l2), eigenvectors v1 = the normalised first column of
    A - l2 I (its range is l1's eigenspace), v2 of A - l1 I; the second column where the first
    is zero (Taichi divides by 0 there), (0, 1), (1, 0) when A = l I."""
    (a00, a01), (a10, a11) = a
    tr = m.add(a00, a11)
    det = m.sub(m.mul(a00, a11), m.mul(a10, a01))
    gap = m.sqrt(m.max(m.sub(m.mul(tr, tr), m.mul(4.0, det)), 0.0))
    l1, l2 = m.mul(m.add(tr, gap), 0.5), m.mul(m.sub(tr, gap), 0.5)
    cols = []
    for lam, fallback in ((l2, (0.0, 1.0)), (l1, (1.0, 0.0))):
        cols.append(_column_unit(m, [m.sub(a00, lam), a10], [a01, m.sub(a11, lam)], fallback))
    return [l1, l2], [[cols[0][0], cols[1][0]], [cols[0][1], cols[1][1]]]


def _column_unit(m, first, second, fallback):
    """`first` normalised, else `second` where `first` is zero, else `fallback`."""
    n1, n2 = m.sqrt(m.dot(first, first)), m.sqrt(m.dot(second, second))
    use1, use2 = m.lt(0.0, n1), m.lt(0.0, n2)
    inv = m.div(1.0, m.sel(use1, n1, m.sel(use2, n2, 1.0)))
    return [m.sel(use1, m.mul(x, inv), m.sel(use2, m.mul(y, inv), f))
            for x, y, f in zip(first, second, fallback)]


def _sym_eig3(m, a):
    """Cyclic Jacobi; eigenvalues ascending (Taichi's 3x3 order), a swap negating one column."""
    s = [row[:] for row in a]
    v = [[m.c(float(i == j)) for j in range(3)] for i in range(3)]
    for _ in range(SWEEPS[m.dt.bits]):
        for p, q in ((0, 1), (0, 2), (1, 2)):
            s, v = _rotate(m, s, v, p, q)
    lam = [s[0][0], s[1][1], s[2][2]]
    for i, j in ((0, 1), (0, 2), (1, 2)):
        c = m.lt(lam[j], lam[i])
        for row in v:
            old = row[i]
            row[i] = m.sel(c, row[j], old)
            row[j] = m.sel(c, m.neg(old), row[j])
        lam[i], lam[j] = m.sel(c, lam[j], lam[i]), m.sel(c, lam[i], lam[j])
    for k in (0, 2):  # Taichi's signs (Kopp's vectors): along (A - l I) e0 x (A - l I) e1 ...
        c0 = [m.sub(a[0][0], lam[k]), a[1][0], a[2][0]]
        c1 = [a[0][1], m.sub(a[1][1], lam[k]), a[2][1]]
        w = [m.sub(m.mul(c0[1], c1[2]), m.mul(c0[2], c1[1])),
             m.sub(m.mul(c0[2], c1[0]), m.mul(c0[0], c1[2])),
             m.sub(m.mul(c0[0], c1[1]), m.mul(c0[1], c1[0]))]
        flip = m.lt(m.dot(w, [v[i][k] for i in range(3)]), 0.0)
        for i in range(3):
            v[i][k] = m.sel(flip, m.neg(v[i][k]), v[i][k])
    lo, hi = [v[i][0] for i in range(3)], [v[i][2] for i in range(3)]
    mid = [m.sub(m.mul(hi[1], lo[2]), m.mul(hi[2], lo[1])),  # ... the middle one: hi x lo
           m.sub(m.mul(hi[2], lo[0]), m.mul(hi[0], lo[2])),
           m.sub(m.mul(hi[0], lo[1]), m.mul(hi[1], lo[0]))]
    flip = m.lt(m.dot(mid, [v[i][1] for i in range(3)]), 0.0)
    for i in range(3):
        v[i][1] = m.sel(flip, m.neg(v[i][1]), v[i][1])
    return lam, v


def sym_eig(b, dt, a):
    """(eigenvalues, eigenvectors as columns) of the symmetric n x n `a`, differentiable: with
    Q = Vᵀ Δ V (Δ's symmetric part: a change of a_ij counts half for a_ji), dλ_i = Q_ii and
    dV = V Ω, Ω_ij = Q_ij / (λ_j - λ_i) (left out for too close values, as in `svd`)."""
    m = _M(b, dt)
    n = len(a)
    a0 = [[m.stop(x) for x in row] for row in a]
    lam0, v0 = (_sym_eig2 if n == 2 else _sym_eig3)(m, a0)
    d = [[m.sub(x, y) for x, y in zip(r, r0)] for r, r0 in zip(a, a0)]
    delta = [[m.mul(m.add(d[i][j], d[j][i]), 0.5) for j in range(n)] for i in range(n)]
    q = _mm(m, _mm(m, _t(v0), delta), v0)
    scale = lam0[0]
    for x in lam0[1:]:
        scale = m.max(scale, m.abs(x))
    floor = m.max(m.mul(m.abs(scale), REL_GAP[dt.bits]), TINY[dt.bits])
    om = [[m.c(0.0)] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i != j:
                om[i][j] = _ratio(m, q[i][j], m.sub(lam0[j], lam0[i]), floor)
    dv = _mm(m, v0, om)
    vecs = [[m.add(x, y) for x, y in zip(r, d)] for r, d in zip(v0, dv)]
    return [m.add(lam0[i], q[i][i]) for i in range(n)], vecs


def eig2(b, dt, a):
    """Taichi's 2x2 `eig`: eigenvalues as rows (re, im), eigenvectors as columns of 4 numbers
    (re, im of each entry), differentiated through the closed form."""
    m = _M(b, dt)
    (a00, a01), (a10, a11) = a
    tr = m.add(a00, a11)
    det = m.sub(m.mul(a00, a11), m.mul(a10, a01))
    gap = m.sub(m.mul(tr, tr), m.mul(4.0, det))
    real = m.lt(0.0, gap)
    root = m.sqrt(m.abs(gap))
    half = lambda x: m.mul(x, 0.5)  # noqa: E731
    l1 = [half(m.sel(real, m.add(tr, root), tr)), half(m.sel(real, 0.0, root))]
    l2 = [half(m.sel(real, m.sub(tr, root), tr)), half(m.sel(real, 0.0, m.neg(root)))]
    # the first column of A - l I (re, im per entry; the second where the first is zero, the
    # unit vectors where both are: A = l I)
    vecs = []
    for lam, fallback in ((l2, (0.0, 0.0, 1.0, 0.0)), (l1, (1.0, 0.0, 0.0, 0.0))):
        vecs.append(_column_unit(m, [m.sub(a00, lam[0]), m.neg(lam[1]), a10, m.c(0.0)],
                                 [a01, m.c(0.0), m.sub(a11, lam[0]), m.neg(lam[1])], fallback))
    return [l1, l2], [[vecs[0][k], vecs[1][k]] for k in range(4)]


# -- the builtins (frontend/builtins.HANDLERS) ----------------------------------------------------
def _square(v, args, kw, node, name, sizes=(2, 3)):
    from kernel_ir.errors import SpiradNotSupportedError, SpiradTypeError

    from .values import VecVal
    if len(args) not in (1, 2):
        raise v.ctx.error(SpiradTypeError, f"{name}(A, dt=None) takes a matrix", node)
    a = v.rvalue(args[0])
    dt = v.rvalue(args[1]) if len(args) > 1 else kw.get("dt")
    if not isinstance(a, VecVal) or len(a.shape) != 2 or a.shape[0] != a.shape[1]:
        raise v.ctx.error(SpiradTypeError, f"{name} takes a square matrix", node)
    n = a.shape[0]
    if n not in sizes:
        raise v.ctx.error(SpiradNotSupportedError, f"{name} supports "
                          f"{' and '.join(f'{k}x{k}' for k in sizes)} matrices (got {n}x{n})", node)
    if dt is None:
        dt = a.dtype if a.dtype.is_float else v.ctx.default_fp
    rows = [[v.to_node(a.comps[i * n + j], dt) for j in range(n)] for i in range(n)]
    return rows, dt, n


def _vec(rows):
    from .values import VecVal
    n, m = len(rows), len(rows[0])
    return VecVal(tuple(x for r in rows for x in r), (n, m))


def h_svd(v, args, kw, node):
    """`U, S, V = sd.svd(A, dt=None)`: A = U S Vᵀ (module docstring)."""
    rows, dt, n = _square(v, args, kw, node, "svd")
    u, s, w = svd(v.ctx.b, dt, rows)
    zero = v.ctx.b.const(0.0, dt)
    return _vec(u), _vec([[s[i] if i == j else zero for j in range(n)] for i in range(n)]), _vec(w)


def polar3(v, a, node):
    """3x3 `R, S = sd.polar_decompose(A)`: R = U Vᵀ (a rotation), S = V Σ Vᵀ (Taichi's)."""
    rows, dt, n = _square(v, [a], {}, node, "polar_decompose", (3,))
    u, s, w = svd(v.ctx.b, dt, rows)
    m = _M(v.ctx.b, dt)
    r = _mm(m, u, _t(w))
    ws = [[m.mul(w[i][k], s[k]) for k in range(3)] for i in range(3)]
    return _vec(r), _vec(_mm(m, ws, _t(w)))


def h_sym_eig(v, args, kw, node):
    """`values, vectors = sd.sym_eig(A, dt=None)` of a symmetric 2x2 (values descending) or
    3x3 (ascending) matrix, Taichi's orders; eigenvectors are the columns."""
    rows, dt, n = _square(v, args, kw, node, "sym_eig")
    lam, vecs = sym_eig(v.ctx.b, dt, rows)
    from .values import VecVal
    return VecVal(tuple(lam), (n,)), _vec(vecs)


def h_eig(v, args, kw, node):
    """`values, vectors = sd.eig(A, dt=None)` of a 2x2 real matrix, Taichi's complex layout:
    values a 2x2 matrix (rows re, im), vectors 4x2 (columns; re, im per entry)."""
    rows, dt, n = _square(v, args, kw, node, "eig", (2,))
    lam, vecs = eig2(v.ctx.b, dt, rows)
    return _vec(lam), _vec(vecs)
