"""Per-launch overhead of a tiny adstack kernel: forward vs grad, sizing cache on and off.

    python benchmarks/bench_adstack_launch.py [--arch cpu vulkan]

The kernel runs 8 threads with a 2-trip dynamic loop whose trip count is read from a field, so its
adjoint needs sized adstacks on every launch. Medians of many launches with one sync per batch;
forward and grad batches alternate.
Target (issue 5): grad <= 1.5x forward with the cache on.
"""
import argparse
import statistics
import time

import numpy as np

import spirad as sd
from target_info import print_target  # benchmarks/target_info.py


def per_launch_us(fns, launches=500, reps=7):
    """Median per-launch time (us) of each function in `fns`, measured in alternating batches
    (so both see the same machine noise)."""
    ts = [[] for _ in fns]
    for _ in range(reps):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(launches):
                fn()
            sd.sync()
            ts[k].append((time.perf_counter() - t0) / launches)
    return [statistics.median(t) * 1e6 for t in ts]


def run(arch, cache):
    sd.init(arch=arch, adstack_cache=cache)
    x = sd.field(sd.f32, shape=8, needs_grad=True)
    y = sd.field(sd.f32, shape=8, needs_grad=True)
    n = sd.field(sd.i32, shape=())

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            for s in range(n[None]):
                v = sd.sin(v) * 0.9 + 0.1
            y[i] = v

    x.from_numpy(np.linspace(0, 1, 8, dtype=np.float32))
    n[None] = 2
    k()
    k.grad()
    sd.sync()
    return per_launch_us([k, k.grad])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", nargs="*", default=["cpu", "vulkan"])
    args = p.parse_args()
    print_target()
    from spirad.backends import arch_available
    for arch in args.arch:
        if not arch_available(arch):
            print(f"{arch}: not available, skipped")
            continue
        for cache in (True, False):
            f, g = run(arch, cache)
            print(f"[{arch:6s} cache={'on ' if cache else 'off'}] forward {f:7.1f} us  grad {g:7.1f} us  "
                  f"grad/forward {g / f:4.2f}", flush=True)


if __name__ == "__main__":
    main()
