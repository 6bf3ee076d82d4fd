"""spirad demo: a 2-D heat-diffusion step and a particle bounce, then reverse-mode gradients
through a loop whose trip count differs per element, on every available backend, checked against
numpy and central differences.

    python examples/demo.py            # cpu, and vulkan when lavapipe / a GPU is present
    python examples/demo.py --arch cpu
"""
import argparse
import time

import numpy as np

import spirad as sd


def run(arch, n=128, steps=50):
    sd.init(arch=arch)
    u = sd.field(sd.f32, shape=(n, n))
    v = sd.field(sd.f32, shape=(n, n))
    pos = sd.Vector.field(2, sd.f32, shape=1024)
    vel = sd.Vector.field(2, sd.f32, shape=1024)

    @sd.kernel
    def diffuse(k: sd.f32):
        for i, j in u:
            if 0 < i < n - 1 and 0 < j < n - 1:
                lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
                v[i, j] = u[i, j] + k * lap
            else:
                v[i, j] = u[i, j]

    @sd.kernel
    def copy_back():
        for I in sd.grouped(u):
            u[I] = v[I]

    @sd.kernel
    def advance(dt: sd.f32):
        for p in pos:
            vel[p] += sd.Vector([0.0, -9.8]) * dt
            pos[p] += vel[p] * dt
            if pos[p].y < 0.0:
                pos[p].y = -pos[p].y
                vel[p].y = -vel[p].y * 0.9

    rng = np.random.default_rng(1)
    u0 = rng.random((n, n), dtype=np.float32)
    p0 = rng.random((1024, 2), dtype=np.float32)
    u.from_numpy(u0)
    pos.from_numpy(p0)
    t0 = time.perf_counter()
    for _ in range(steps):
        diffuse(0.2)
        copy_back()
        advance(1e-3)
    sd.sync()
    elapsed = time.perf_counter() - t0

    ref = u0.astype(np.float64)
    for _ in range(steps):
        nxt = ref.copy()
        nxt[1:-1, 1:-1] = ref[1:-1, 1:-1] + 0.2 * (ref[:-2, 1:-1] + ref[2:, 1:-1] + ref[1:-1, :-2]
                                                   + ref[1:-1, 2:] - 4 * ref[1:-1, 1:-1])
        ref = nxt
    pr, vr = p0.astype(np.float64), np.zeros((1024, 2))
    for _ in range(steps):
        vr[:, 1] += -9.8 * 1e-3
        pr += vr * 1e-3
        below = pr[:, 1] < 0
        pr[below, 1] *= -1
        vr[below, 1] *= -0.9
    err_u = np.abs(u.to_numpy() - ref).max()
    err_p = np.abs(pos.to_numpy() - pr).max()
    print(f"[{arch:6s}] {steps} steps of heat diffusion ({n}x{n}) + 1024 particles in "
          f"{elapsed * 1e3:.1f} ms; max error vs numpy: heat {err_u:.2e}, particles {err_p:.2e}")
    assert err_u < 1e-4 and err_p < 1e-4, "result disagrees with numpy"


def grad_demo(arch, n=256):
    # f64 where the backend has it (Metal has none: f32, against the same float64 reference)
    fp = sd.f32 if arch == "metal" else sd.f64
    sd.init(arch=arch, default_fp=fp)
    x = sd.field(fp, shape=n, needs_grad=True)
    steps = sd.field(sd.i32, shape=n)
    loss = sd.field(fp, shape=(), needs_grad=True)

    @sd.kernel
    def simulate():
        for i in x:
            v = x[i]
            for s in range(steps[i]):          # run-time trip count: the adstack carries v
                v = sd.sin(v) * 0.9 + 0.2 * v
            loss[None] += v * v

    rng = np.random.default_rng(2)
    xs = rng.random(n)
    st = rng.integers(0, 40, n).astype(np.int32)
    x.from_numpy(xs)
    steps.from_numpy(st)
    with sd.ad.Tape(loss=loss):
        simulate()
    g = x.grad.to_numpy()

    def f(v, k):
        for _ in range(k):
            v = np.sin(v) * 0.9 + 0.2 * v
        return v * v
    eps = 1e-6
    fd = np.array([(f(xs[i] + eps, st[i]) - f(xs[i] - eps, st[i])) / (2 * eps) for i in range(n)])
    err = np.abs(g - fd).max()
    print(f"[{arch:6s}] d(loss)/dx through loops of 0..39 trips ({fp.name}): max error vs central "
          f"differences {err:.1e}")
    assert err < (1e-6 if fp == sd.f64 else 1e-3 * max(1.0, np.abs(fd).max())), "gradient disagrees with central differences"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", nargs="*", default=None)
    args = p.parse_args()
    from spirad.backends import arch_available
    # metal / cuda / amdgpu are available on their hardware, or emulated with SPIRAD_*_EMULATE=1
    archs = args.arch or [a for a in ("cpu", "vulkan", "metal", "cuda", "amdgpu") if arch_available(a)]
    for a in archs:
        run(a)
    for a in archs:
        grad_demo(a)


if __name__ == "__main__":
    main()
