"""Launches, gradients and host reads from several Python threads (architecture §8, `spirad.runtime.guard`):
the results equal the serial ones, nothing deadlocks, and a Tape records only its own thread's
launches."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, test_archs

THREADS = 6
ROUNDS = 4


def _run_threads(work, n=THREADS, timeout=120):
    errors = []

    def body(t):
        try:
            work(t)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=body, args=(t,), daemon=True) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout)
    assert not any(th.is_alive() for th in threads), "a thread is blocked (deadlock)"
    if errors:
        raise errors[0]


@test_archs()
def test_threads_forward_equal_serial(arch):
    n = 40000 if arch == "cpu" else 2048  # cpu: above the pool's split size (several workers)

    @sd.kernel
    def axpy(a: sd.f32, x: sd.types.ndarray(), y: sd.types.ndarray()):
        for i in x:
            y[i] = a * x[i] + y[i]

    xs = [sd.ndarray(sd.f32, n) for _ in range(THREADS)]
    ys = [sd.ndarray(sd.f32, n) for _ in range(THREADS)]
    for t in range(THREADS):
        xs[t].from_numpy(np.full(n, t + 1, np.float32))
    wrong = []

    def work(t):
        for r in range(ROUNDS):
            axpy(float(r + 1), xs[t], ys[t])
            sd.sync()
            got = ys[t].to_numpy()
            want = (t + 1) * sum(range(1, r + 2))
            if not np.all(got == want):
                wrong.append((t, r))
    _run_threads(work)
    assert not wrong


@test_archs()
def test_threads_launch_with_their_own_scalars(arch):
    """Four threads relaunch one kernel with their own scalars (their row, a running count)
    without syncing: on the SPIR-V backends each launch's argument bytes go to the arena of the
    batch being recorded (`gfx_runtime.vulkan.arguments`); every element is checked."""
    threads, launches = 4, 300
    z = sd.field(sd.i32, shape=(threads, launches))

    @sd.kernel
    def put(row: sd.i32, k: sd.i32, v: sd.i32):
        for i in range(1):
            z[row, k] = v

    def work(row):
        for k in range(launches):
            put(row, k, 1000 * row + k)
    _run_threads(work, n=threads)
    want = 1000 * np.arange(threads)[:, None] + np.arange(launches)[None, :]
    np.testing.assert_array_equal(z.to_numpy(), want)


@test_archs()
def test_threads_grad_with_adstack(arch):
    """Concurrent `kernel.grad` of a kernel with a dynamic loop (automatic adstack sizing):
    each thread's gradients equal the serial ones, and no spurious overflow is raised."""
    n = 64

    @sd.kernel
    def power(x: sd.types.ndarray(), k: sd.types.ndarray(), y: sd.types.ndarray()):
        for i in x:
            v = x[i]
            for _ in range(k[i]):
                v = sd.sin(v) + 0.5 * v
            y[i] = v

    rng = np.random.default_rng(0)
    xs, ks, ys = [], [], []
    for t in range(THREADS):
        x = sd.ndarray(sd.f32, n, needs_grad=True)
        x.from_numpy(rng.uniform(-1, 1, n).astype(np.float32))
        k = sd.ndarray(sd.i32, n)
        k.from_numpy(rng.integers(1, 4 + 2 * t, n).astype(np.int32))
        y = sd.ndarray(sd.f32, n, needs_grad=True)
        xs.append(x), ks.append(k), ys.append(y)

    def one(t):
        xs[t].grad.fill(0)
        ys[t].grad.fill(1)
        power(xs[t], ks[t], ys[t])
        power.grad(xs[t], ks[t], ys[t])
        return ys[t].to_numpy(), xs[t].grad.to_numpy()

    serial = [one(t) for t in range(THREADS)]
    wrong = []

    def work(t):
        for _ in range(ROUNDS):
            y, g = one(t)
            if not (np.array_equal(y, serial[t][0]) and np.array_equal(g, serial[t][1])):
                wrong.append(t)
    _run_threads(work)
    assert not wrong


@test_archs(archs=EVERY_ARCH)
def test_threads_fields_and_tape(arch):
    """Field kernels under per-thread Tapes: each Tape records only its thread's launches
    (clear_gradients=False: a Tape's entry clears every field's gradient, also other threads')."""
    n = 16
    xs = [sd.field(sd.f32, n, needs_grad=True) for _ in range(4)]
    losses = [sd.field(sd.f32, (), needs_grad=True) for _ in range(4)]

    @sd.kernel
    def sq(x: sd.template(), loss: sd.template()):
        for i in x:
            loss[None] += x[i] * x[i]

    for t in range(4):
        xs[t].from_numpy(np.arange(n, dtype=np.float32) * (t + 1))
    barrier = threading.Barrier(4)

    def work(t):
        for _ in range(3):
            xs[t].grad.fill(0)
            with sd.ad.Tape(loss=losses[t], clear_gradients=False) as tape:
                barrier.wait(30)
                sq(xs[t], losses[t])
            assert len(tape.calls) == 1
            g = xs[t].grad.to_numpy()
            assert np.allclose(g, 2 * np.arange(n) * (t + 1)), (t, g)
    _run_threads(work, 4)


def test_tape_active_is_per_thread():
    sd.init(arch=sd.cpu)
    seen = []
    loss = sd.field(sd.f32, (), needs_grad=True)
    with sd.ad.Tape(loss=loss):
        th = threading.Thread(target=lambda: seen.append(sd.ad.Tape.active))
        th.start()
        th.join()
        assert sd.ad.Tape.active is not None
    assert seen == [None]


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
