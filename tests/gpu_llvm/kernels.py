"""A set of kernels that covers what the GPU lowering must get right: plain forward kernels
(math in f32 and f64, atomics, ints, 2-D, serial code) and reverse-mode kernels whose adstacks
live in the heaps (float, f64 and int stacks, while loops). `run_all()` runs each on the current
arch and checks it against numpy / float64 central differences; `capture()` records every
program the backend compiles (its `device_code`: what was assembled for each target)."""
from __future__ import annotations

import contextlib

import numpy as np

import spirad as sd
from tests.autodiff.gradutil import arr, central_diff

ND = sd.types.ndarray()
N = 700  # more iterations than the emulated grid has threads: the grid stride runs


@sd.kernel
def k_axpy(a: sd.f32, x: ND, y: ND):
    for i in x:
        y[i] = a * x[i] + y[i]


@sd.kernel
def k_math32(x: ND, y: ND):
    for i in x:
        v = x[i]
        y[i] = (sd.sin(v) + sd.cos(v) + sd.tan(v * 0.5) + sd.tanh(v) + sd.asin(v * 0.5)
                + sd.acos(v * 0.5) + sd.atan2(v, 1.5) + sd.exp(v) + sd.log(v + 1.5)
                + sd.sqrt(v + 1.0) + sd.rsqrt(v + 1.0) + sd.pow(v + 1.0, 1.7) + sd.abs(v - 0.5)
                + sd.min(v, 0.3) + sd.max(v, 0.3) + sd.floor(v * 7.0))


def r_math(v):
    return (np.sin(v) + np.cos(v) + np.tan(v * 0.5) + np.tanh(v) + np.arcsin(v * 0.5)
            + np.arccos(v * 0.5) + np.arctan2(v, 1.5) + np.exp(v) + np.log(v + 1.5)
            + np.sqrt(v + 1.0) + 1 / np.sqrt(v + 1.0) + np.power(v + 1.0, 1.7) + np.abs(v - 0.5)
            + np.minimum(v, 0.3) + np.maximum(v, 0.3) + np.floor(v * 7.0))


@sd.kernel
def k_atomics(x: ND, total: ND, hist: ND):
    for i in x:
        total[0] += x[i]
        hist[i % 4] += 1


@sd.kernel
def k_ints(a: ND, out: ND):
    for i, j in a:
        v = a[i, j]
        out[i, j] = (v // 3) * 7 + v % 5 - (v << 2) + (v >> 1) + i * j


@sd.kernel
def k_serial(x: ND, out: ND, n: sd.i32):
    for _ in range(1):           # nested: a serial task (thread 0 of a one-thread grid)
        s = 0.0
        for k in range(n):
            s += x[k] * k
        out[0] = s


@sd.kernel
def k_loop_grad(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        for k in range(n):
            v = sd.sin(v) * 0.9 + 0.01 * k
        y[i] = v


@sd.kernel
def k_while_grad(x: ND, y: ND):
    for i in x:
        v = x[i]
        k = 0
        while k < i % 5 + 1:
            v = v * v * 0.5 + sd.exp(-v) * 0.25
            k += 1
        y[i] = v


@sd.kernel
def k_nested_grad(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        for j in range(n):
            for k in range(j):
                v = v * 0.8 + sd.cos(v + k * 0.1) * 0.3
        y[i] = v


def _loop_ref(x, n):
    v = x.copy()
    for k in range(n):
        v = np.sin(v) * 0.9 + 0.01 * k
    return v


def _while_ref(x):
    out = x.copy()
    for i in range(x.size):
        v = x[i]
        for _ in range(i % 5 + 1):
            v = v * v * 0.5 + np.exp(-v) * 0.25
        out[i] = v
    return out


def _nested_ref(x, n):
    v = x.copy()
    for j in range(n):
        for k in range(j):
            v = v * 0.8 + np.cos(v + k * 0.1) * 0.3
    return v


def _close(got, want, fp):
    tol = 2e-5 if fp == sd.f32 else 1e-11
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)


def run_forward(fp=sd.f32):
    rng = np.random.default_rng(0)
    xs = rng.uniform(0.05, 0.95, N)
    x, y = arr(fp, xs), arr(fp, np.ones(N))
    k_axpy(2.0, x, y)
    _close(y.to_numpy(), 2.0 * xs.astype(fp.np) + 1.0, fp)
    k_math32(x, y)
    _close(y.to_numpy(), r_math(xs.astype(fp.np).astype(np.float64)), fp)
    total, hist = arr(fp, np.zeros(1)), arr(sd.i32, np.zeros(4, np.int32))
    k_atomics(x, total, hist)
    np.testing.assert_allclose(total.to_numpy()[0], xs.astype(fp.np).sum(), rtol=1e-4)
    np.testing.assert_array_equal(hist.to_numpy(), np.bincount(np.arange(N) % 4))
    ai = rng.integers(-1000, 1000, (13, 61)).astype(np.int32)
    a, out = arr(sd.i32, ai), arr(sd.i32, np.zeros_like(ai))
    k_ints(a, out)
    ii, jj = np.meshgrid(np.arange(13), np.arange(61), indexing="ij")
    np.testing.assert_array_equal(out.to_numpy(),
                                  (ai // 3) * 7 + ai % 5 - (ai << 2) + (ai >> 1) + ii * jj)
    o = arr(fp, np.zeros(1))
    k_serial(x, o, 50)
    _close(o.to_numpy()[0], float(np.sum(xs.astype(fp.np)[:50] * np.arange(50))), fp)


def run_grads(fp=sd.f64):
    rng = np.random.default_rng(1)
    n = 40  # small: central differences per element
    xs = rng.uniform(0.1, 0.9, n)
    w = rng.uniform(0.5, 1.5, n)
    cases = [(k_loop_grad, (7,), lambda v: _loop_ref(v, 7)),
             (k_while_grad, (), _while_ref),
             (k_nested_grad, (5,), lambda v: _nested_ref(v, 5))]
    for kern, extra, ref in cases:
        x, y = arr(fp, xs, needs_grad=True), arr(fp, np.zeros(n), needs_grad=True)
        kern(x, y, *extra)
        _close(y.to_numpy(), ref(xs), fp)
        y.grad.from_numpy(w.astype(fp.np))
        kern.grad(x, y, *extra)
        want = central_diff(ref, xs, w)
        np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-6, atol=1e-8)


@contextlib.contextmanager
def capture():
    """Every GpuProgram the LLVM GPU backends compile inside the block, appended to a list."""
    from spirad.backends import llvm_gpu
    progs = []
    orig = llvm_gpu.LlvmGpuBackend.compile

    def compile(self, tl, abi):
        p = orig(self, tl, abi)
        progs.append(p)
        return p
    llvm_gpu.LlvmGpuBackend.compile = compile
    try:
        yield progs
    finally:
        llvm_gpu.LlvmGpuBackend.compile = orig
