"""(op, dtypes, inputs) cases covering every non-adstack IR op on every dtype it takes.

Inputs avoid what the IR leaves undefined (int division by zero, negative int POW exponents,
shift amounts that are negative), and include the special values whose semantics the code
generator makes explicit (NaN, ±inf, ±0, INT_MIN / -1, wrapping float->int casts).
"""
from __future__ import annotations

import numpy as np

from kernel_ir.dtypes import f32, f64, i32, i64, u1, u32
from kernel_ir.ops import Op

N = 97
_rs = np.random.RandomState(1234)

SPECIAL_F = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, -7.0, float("inf"), float("-inf"),
             float("nan"), 1e30, -1e-30, 100.0]


def fvals(dt, lo=-10.0, hi=10.0, special=True, n=N):
    v = list(_rs.uniform(lo, hi, n))
    if special:
        v[: len(SPECIAL_F)] = SPECIAL_F
    return np.array(v, dtype=dt.np)


def ivals(dt, n=N):
    info = np.iinfo(dt.np)
    v = list(_rs.randint(-1000 if dt.kind == "i" else 0, 1000, n))
    edge = [0, 1, 2, 7, int(info.max), int(info.min), int(info.max) - 1]
    if dt.kind == "i":
        edge += [-1, -2, -7]
    v[: len(edge)] = edge
    return np.array(v, dtype=dt.np)


def bvals(n=N):
    return _rs.randint(0, 2, n).astype(np.bool_)


def values(dt):
    return fvals(dt) if dt.kind == "f" else bvals() if dt == u1 else ivals(dt)


FLOAT = (f32, f64)
INT = (i32, i64, u32)
ALLT = FLOAT + INT + (u1,)

UNARY_DOMAIN = {
    Op.SIN: (-10, 10), Op.COS: (-10, 10), Op.TAN: (-1.5, 1.5), Op.TANH: (-12, 12),
    Op.ASIN: (-1.1, 1.1), Op.ACOS: (-1.1, 1.1), Op.EXP: (-50, 50), Op.LOG: (-1, 100),
    Op.SQRT: (-1, 100), Op.RSQRT: (-1, 100), Op.FLOOR: (-10, 10), Op.ABS: (-10, 10),
    Op.NEG: (-10, 10),
}
TRANSCENDENTAL = {Op.SIN, Op.COS, Op.TAN, Op.TANH, Op.ASIN, Op.ACOS, Op.EXP, Op.LOG, Op.POW,
                  Op.ATAN2}


def unary_cases():
    out = []
    for op, (lo, hi) in UNARY_DOMAIN.items():
        for dt in FLOAT:
            v = fvals(dt, lo, hi)
            if op in (Op.SIN, Op.COS, Op.TAN):
                v[13] = 1000.0  # accuracy is only promised on sane arguments (not 1e30)
            out.append((op, (dt,), dt, [v]))
    for op in (Op.NEG, Op.ABS, Op.NOT, Op.BIT_NOT):
        for dt in INT:
            out.append((op, (dt,), dt, [ivals(dt)]))
    for op in (Op.NOT, Op.BIT_NOT):
        out.append((op, (u1,), u1, [bvals()]))
    return out


def binary_cases():
    out = []
    arith = (Op.ADD, Op.SUB, Op.MUL, Op.MIN, Op.MAX)
    cmps = (Op.CMP_LT, Op.CMP_LE, Op.CMP_GT, Op.CMP_GE, Op.CMP_EQ, Op.CMP_NE)
    for dt in FLOAT:
        a, b = fvals(dt), fvals(dt)[::-1].copy()
        b[5] = a[5]
        for op in arith + (Op.DIV, Op.FLOORDIV, Op.MOD) + cmps:
            out.append((op, (dt, dt), u1 if op in cmps else dt, [a, b]))
        out.append((Op.ATAN2, (dt, dt), dt, [a, b]))
        pa = np.concatenate([fvals(dt, -3, 3, special=False, n=60),
                             np.array([0, 0, 0, -2, -2, -2, 1, np.nan, 2, -0.0], dtype=dt.np)])
        pb = np.concatenate([np.round(fvals(dt, -4, 4, special=False, n=60) * 2) / 2,
                             np.array([2, -1, 0, 3, 2, 0.5, np.nan, 0, np.inf, 3], dtype=dt.np)])
        out.append((Op.POW, (dt, dt), dt, [pa.astype(dt.np), pb.astype(dt.np)]))
    for dt in INT:
        a, b = ivals(dt), ivals(dt)[::-1].copy()
        for op in arith + (Op.AND, Op.OR, Op.XOR) + cmps:
            out.append((op, (dt, dt), u1 if op in cmps else dt, [a, b]))
        nz = np.where(b == 0, 3, b).astype(dt.np)
        if dt.kind == "i":
            nz[3] = -1  # INT_MIN / -1 pairs with a[5]? keep a -1 divisor in the mix
            a2 = a.copy()
            a2[3] = np.iinfo(dt.np).min
        else:
            a2 = a
        for op in (Op.DIV, Op.FLOORDIV, Op.MOD):
            out.append((op, (dt, dt), dt, [a2, nz]))
        sh = (_rs.randint(0, dt.bits + 4, N)).astype(dt.np)
        for op in (Op.SHL, Op.SHR):
            out.append((op, (dt, dt), dt, [a, sh]))
        pb = _rs.randint(0, 40, N).astype(dt.np)
        pa = _rs.randint(-5 if dt.kind == "i" else 0, 6, N).astype(dt.np)
        out.append((Op.POW, (dt, dt), dt, [pa, pb]))
    a, b = bvals(), bvals()
    for op in (Op.AND, Op.OR, Op.XOR, Op.CMP_EQ, Op.CMP_NE, Op.CMP_LT, Op.MIN, Op.MAX, Op.ADD):
        out.append((op, (u1, u1), u1, [a, b]))
    return out


def cast_cases():
    out = []
    for src in ALLT:
        for dst in ALLT:
            if src == dst:
                continue
            if src.kind == "f":
                v = fvals(src, -1e3, 1e3)
                big = [3e9, -3e9, 5e9, 1e20, -1e20, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 32 - 1,
                       4294967296.0 * 3 + 5, -0.9, 0.9, -1.0]
                v[16:16 + len(big)] = big
                v = v.astype(src.np)
            else:
                v = values(src)
            out.append((Op.CAST, (src,), dst, [v]))
    return out


def select_cases():
    return [(Op.SELECT, (u1, dt, dt), dt, [bvals(), values(dt), values(dt)[::-1].copy()])
            for dt in ALLT]


def all_cases():
    return unary_cases() + binary_cases() + cast_cases() + select_cases()


def case_id(c):
    op, ins, out, _ = c
    return f"{op.name}-{'-'.join(d.name for d in ins)}-{out.name}"


def tolerance(op, dt):
    """(rtol, atol) against the interpreter (numpy)."""
    if dt == f64:
        return (1e-14, 1e-15) if op in TRANSCENDENTAL else (0, 0)
    if dt == f32:
        if op == Op.POW or op == Op.EXP:
            return (1e-5, 1e-6)
        return (2e-6, 2e-7) if op in TRANSCENDENTAL else (0, 0)
    return (0, 0)
