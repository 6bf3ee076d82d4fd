"""The per-task sizing cache: no sizing on repeated launches with unchanged inputs, exactly one
after any write to a bound's source (host write or kernel write); SPIRAD_DEBUG_ADSTACK output."""
import numpy as np
import pytest

import spirad as sd
from spirad.runtime import sizing_cache
from tests.support.archs import EVERY_ARCH, exactly, test_archs

N = 8


def _setup():
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    y = sd.field(sd.f64, shape=N, needs_grad=True)
    steps = sd.field(sd.i32, shape=N)

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            for s in range(steps[i]):
                v = sd.sin(v) + 0.5 * v
            y[i] = v

    @sd.kernel
    def bump(extra: sd.i32):
        for i in steps:
            steps[i] = steps[i] + extra

    return x, y, steps, k, bump


def _ref_grad(xs, st):
    g = np.ones_like(xs)
    v = xs.copy()
    for i in range(N):
        for _ in range(st[i]):
            g[i] *= np.cos(v[i]) + 0.5
            v[i] = np.sin(v[i]) + 0.5 * v[i]
    return g


def _sizings():
    return sizing_cache.stats.host_evaluations + sizing_cache.stats.gpu_dispatches


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_cache_hits_and_invalidation(arch):
    x, y, steps, k, bump = _setup()
    xs = np.linspace(0.1, 0.8, N)
    x.from_numpy(xs)
    steps.from_numpy(np.arange(N, dtype=np.int32))

    def grad_and_check():
        k()
        y.grad.fill(1.0)
        x.grad.fill(0.0)
        before = _sizings()
        k.grad()
        np.testing.assert_allclose(x.grad.to_numpy(), _ref_grad(xs, steps.to_numpy()), rtol=1e-10)
        return _sizings() - before

    assert grad_and_check() == 1          # first launch: sized once
    assert grad_and_check() == 0          # unchanged inputs: cache hit
    assert grad_and_check() == 0
    steps[3] = 17                          # element assignment from Python
    assert grad_and_check() == 1
    steps.fill(5)                          # fill
    assert grad_and_check() == 1
    steps.from_numpy(np.full(N, 2, np.int32))  # from_numpy
    assert grad_and_check() == 1
    bump(3)                                # a kernel that writes the bound's source
    assert grad_and_check() == 1
    assert grad_and_check() == 0
    y.fill(0.0)                            # writes to unrelated fields keep the entry
    assert grad_and_check() == 0


@test_archs(archs=exactly("cpu"), default_fp=sd.f64, adstack_cache=False)
def test_cache_off_sizes_every_launch(arch):
    x, y, steps, k, bump = _setup()
    steps.fill(3)
    k()
    before = _sizings()
    for _ in range(3):
        k.grad()
    assert _sizings() - before == 3


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_trip_counts_changing_every_launch(arch):
    x, y, steps, k, bump = _setup()
    xs = np.linspace(0.1, 0.8, N) * 0.3
    x.from_numpy(xs)
    for n in (16, 17, 18, 64, 1000, 16):
        steps.fill(n)
        k()
        y.grad.fill(1.0)
        x.grad.fill(0.0)
        k.grad()
        np.testing.assert_allclose(x.grad.to_numpy(), _ref_grad(xs, np.full(N, n)), rtol=1e-9)


def test_debug_output(capfd, monkeypatch):
    monkeypatch.setenv("SPIRAD_DEBUG_ADSTACK", "1")
    sd.init(arch="cpu", default_fp=sd.f64)
    x, y, steps, k, bump = _setup()
    steps.fill(4)
    k()
    y.grad.fill(1.0)
    k.grad()
    err = capfd.readouterr().err
    assert "[spirad adstack] launch of k_grad" in err
    assert "bytecode" in err and "FIELD_LOAD" in err
    assert "sizes [" in err and "stride_float" in err and "heaps: float" in err
    monkeypatch.delenv("SPIRAD_DEBUG_ADSTACK")
    sd.init(arch="cpu")
