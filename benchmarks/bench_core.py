"""Core speed numbers, measured in one run (ratios matter; this machine is shared and noisy).

    python benchmarks/bench_core.py [--arch cpu vulkan] [--n 16777216]

Prints, per arch: per-launch overhead of a tiny kernel (median over many launches, flushed
with sync() once per batch and once per launch), first-call compile time of a simple kernel,
and a 16M-element f32 axpy against numpy (`y += a * x`) measured in the same process.
"""

import argparse
import statistics
import time

import numpy as np

import spirad as sd


def _median_time(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bench_arch(arch, n):
    sd.init(arch=arch)
    out = {}
    x = sd.field(sd.f32, shape=())

    @sd.kernel
    def tiny(v: sd.f32):
        x[None] = v

    tiny(1.0)
    sd.sync()
    launches = 2000

    def batch():
        for _ in range(launches):
            tiny(1.0)
        sd.sync()

    def each():
        for _ in range(200):
            tiny(1.0)
            sd.sync()

    out["launch_batched_us"] = _median_time(batch, 5) / launches * 1e6
    out["launch_synced_us"] = _median_time(each, 5) / 200 * 1e6

    a = sd.ndarray(sd.f32, n)
    b = sd.ndarray(sd.f32, n)

    @sd.kernel
    def axpy(alpha: sd.f32, xs: sd.types.ndarray(), ys: sd.types.ndarray()):
        for i in range(xs.shape[0]):
            ys[i] = alpha * xs[i] + ys[i]

    t0 = time.perf_counter()
    axpy.compile((2.0, a, b))
    out["compile_ms"] = (time.perf_counter() - t0) * 1e3

    rng = np.random.default_rng(0)
    xs = rng.random(n, dtype=np.float32)
    ys = rng.random(n, dtype=np.float32)
    a.from_numpy(xs)
    b.from_numpy(ys)
    axpy(2.0, a, b)
    sd.sync()
    got = b.to_numpy()
    assert np.allclose(got, 2.0 * xs + ys, rtol=1e-6), "axpy result is wrong"

    def run():
        axpy(2.0, a, b)
        sd.sync()

    out["axpy_ms"] = _median_time(run, 7) * 1e3
    yn, xn = ys.copy(), xs.copy()

    def np_axpy():
        yn.__iadd__(np.float32(2.0) * xn)

    out["numpy_axpy_ms"] = _median_time(np_axpy, 7) * 1e3
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", nargs="*", default=["cpu", "vulkan"])
    p.add_argument("--n", type=int, default=16 * 1024 * 1024)
    args = p.parse_args()
    from spirad.backends import arch_available
    results = {}
    for arch in args.arch:
        if not arch_available(arch):
            print(f"{arch}: not available, skipped")
            continue
        results[arch] = r = bench_arch(arch, args.n)
        print(f"[{arch}] per-launch overhead: {r['launch_batched_us']:.1f} us batched, "
              f"{r['launch_synced_us']:.1f} us with sync() after each launch")
        print(f"[{arch}] first-call compile (axpy): {r['compile_ms']:.1f} ms")
        print(f"[{arch}] axpy n={args.n}: {r['axpy_ms']:.2f} ms vs numpy {r['numpy_axpy_ms']:.2f} ms "
              f"(spirad/numpy time ratio {r['axpy_ms'] / r['numpy_axpy_ms']:.2f})")
    if "cpu" in results and "vulkan" in results:
        c, v = results["cpu"], results["vulkan"]
        print(f"[vulkan vs cpu] axpy time ratio {v['axpy_ms'] / c['axpy_ms']:.2f}, "
              f"batching speed-up on vulkan: {v['launch_synced_us'] / v['launch_batched_us']:.1f}x")


if __name__ == "__main__":
    main()
