"""Core speed numbers, measured in one run (ratios matter; this machine is shared and noisy).

    python benchmarks/bench_core.py [--arch cpu vulkan] [--n 16777216]

Prints, per arch: per-launch overhead of a tiny kernel (median over many launches, flushed
with sync() once per batch and once per launch), first-call compile time of a simple kernel,
and a 16M-element f32 axpy against numpy (`y += a * x`) measured in the same process; on the CPU
the launch overhead with numpy-array arguments next to sd.ndarray ones; and the first call
(forward + grad of a kernel with a dynamic loop, in a fresh process) with a cold and a warm
offline compile cache (`spirad.compile.offline_cache`, a temporary cache directory).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import spirad as sd
from target_info import print_target  # benchmarks/target_info.py


def _median_time(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


FIRST_CALL = """
import sys, time
t0 = time.perf_counter()
import spirad as sd
sd.init(arch=sys.argv[1])
x = sd.field(sd.f32, shape=1024, needs_grad=True)

@sd.kernel
def k(n: sd.i32, a: sd.types.ndarray()):
    for i in x:
        s = x[i]
        for _ in range(n):
            s = sd.sin(s) * 0.9 + 0.1 * s
        a[i] = s

a = sd.ndarray(sd.f32, 1024, needs_grad=True)
t1 = time.perf_counter()
k(4, a)
k.grad(4, a)
sd.sync()
print((time.perf_counter() - t1) * 1e3)
"""


def first_call_ms(arch, cache_dir):
    """First forward + grad call in a fresh process (import and init not counted)."""
    env = dict(os.environ, SPIRAD_CACHE_DIR=cache_dir)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    script = os.path.join(cache_dir, "first_call.py")  # kernels need a source file
    with open(script, "w") as f:
        f.write(FIRST_CALL)
    r = subprocess.run([sys.executable, script, arch], env=env, capture_output=True,
                       text=True, check=True)
    return float(r.stdout.strip().splitlines()[-1])


def numpy_arg_overhead_us():
    """Per-launch time of a tiny ndarray kernel with numpy vs sd.ndarray arguments (CPU)."""
    sd.init(arch="cpu")

    @sd.kernel
    def inc(a: sd.types.ndarray(), b: sd.types.ndarray()):
        for i in a:
            b[i] = a[i] + 1.0

    out = {}
    for name, args in (("sd", (sd.ndarray(sd.f32, 8), sd.ndarray(sd.f32, 8))),
                       ("numpy", (np.zeros(8, np.float32), np.zeros(8, np.float32)))):
        inc(*args)

        def batch():
            for _ in range(2000):
                inc(*args)
        out[name] = _median_time(batch, 7) / 2000 * 1e6
    return out


def bench_arch(arch, n):
    sd.init(arch=arch, offline_cache=False)  # compile times below are real compiles
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
    print_target()
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
        with tempfile.TemporaryDirectory() as d:
            cold = first_call_ms(arch, d)
            warm = first_call_ms(arch, d)
        print(f"[{arch}] first call (forward + grad, fresh process): cold cache {cold:.0f} ms, "
              f"warm cache {warm:.0f} ms (cold/warm {cold / warm:.1f}x)")
    if "cpu" in results:
        o = numpy_arg_overhead_us()
        print(f"[cpu] per-launch with numpy arguments {o['numpy']:.1f} us vs sd.ndarray "
              f"{o['sd']:.1f} us (+{o['numpy'] - o['sd']:.1f} us)")
    if "cpu" in results and "vulkan" in results:
        c, v = results["cpu"], results["vulkan"]
        print(f"[vulkan vs cpu] axpy time ratio {v['axpy_ms'] / c['axpy_ms']:.2f}, "
              f"batching speed-up on vulkan: {v['launch_synced_us'] / v['launch_batched_us']:.1f}x")


if __name__ == "__main__":
    main()
