"""Compile time against program size: it must grow linearly (architecture §8).

    python benchmarks/bench_compile.py [--arch cpu vulkan] [--sizes 1000 5000 10000]

Prints, per arch, the first call (compile, offline cache off) of a kernel whose `sd.static`
loop unrolls n iterations of `s += x[j % 4] * j` (forward program), the time per unrolled
iteration and the ratio to the smallest size (linear: the ratio of the sizes), then forward +
grad of one statement of n chained terms (`x[0]*1.0 + x[1]*2.0 + ...`, deep expressions).
Before the fix (issue 24): 1k / 2k / 4k / 8k / 20k unrolled iterations took 0.4 / 0.9 / 2.5 /
11.9 / 152 s (quadratic: dead-code elimination marked every store of `s` once per load); 500
chained terms raised a bare RecursionError, 1,500 took 36 s in the adjoint's normalisation.
"""

import argparse
import importlib.util
import os
import sys
import tempfile
import time

import numpy as np

import spirad as sd
from target_info import print_target  # benchmarks/target_info.py


def unrolled(n, arch):
    sd.init(arch=arch, offline_cache=False, static_unroll_limit=max(n, 50_000))
    x = sd.field(sd.f32, 4)

    @sd.kernel
    def k():
        s = 0.0
        for j in sd.static(range(n)):
            s += x[j % 4] * j
        x[0] = s

    t = time.perf_counter()
    k()
    sd.sync()
    return time.perf_counter() - t


def chained(n, arch):
    sd.init(arch=arch, offline_cache=False)
    x = sd.field(sd.f32, 4, needs_grad=True)
    y = sd.field(sd.f32, 4, needs_grad=True)
    src = ("import spirad as sd\nx = y = None\ndef k():\n    for i in x:\n        y[i] = " +
           " + ".join(f"x[{j % 4}] * {j % 3 + 1}.0" for j in range(n)) + "\n")
    path = os.path.join(tempfile.mkdtemp(), f"chain{n}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(f"chain{n}", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    m.x, m.y = x, y
    k = sd.kernel(m.k)
    x.from_numpy(np.ones(4, np.float32))
    t = time.perf_counter()
    k()
    y.grad.fill(1)
    k.grad()
    sd.sync()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", nargs="+", default=["cpu", "vulkan"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[1000, 5000, 10000])
    ap.add_argument("--chains", nargs="+", type=int, default=[500, 1500])
    a = ap.parse_args()
    print_target()
    from spirad.backends import arch_available
    for arch in a.arch:
        if not arch_available(arch):
            print(f"{arch}: not available")
            continue
        base = None
        for n in a.sizes:
            t = unrolled(n, arch)
            base = base or (n, t)
            print(f"{arch:7s} sd.static unroll {n:6d}: {t:7.2f} s  {1e3 * t / n:5.2f} ms/iteration  "
                  f"x{t / base[1]:5.1f} for x{n / base[0]:.0f} the size")
        for n in a.chains:
            print(f"{arch:7s} {n:5d} chained terms, forward + grad: {chained(n, arch):6.2f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
