"""Forward and reverse-mode timings at N = 1,048,576 threads, spirad vs Quadrants in one run.

    python benchmarks/bench_autodiff.py [--arch cpu vulkan] [--n 1048576] [--reps 3]

Workloads (a dynamic loop whose trip count is read from a field, loop-carried values on the adstack):
  (a)   v = v * 0.95 + 0.01 over 256 iterations
  (b16) four loop-carried values updated with sin/cos over 16 iterations
  (b256) the same over 256 iterations
When `quadrants` (==1.3.3, the optional `bench` extra) is importable, the same kernels run on it
in this process and the time ratios spirad/quadrants are printed (below 1: spirad faster).
Gradients of the two systems are compared on a few elements as a sanity check. Where Quadrants
fails at N (its Vulkan sizer stops at a few hundred thousand threads on lavapipe), both systems
run again at the largest power-of-two N it handles (down to N/16), so every ratio is measured in
the same run.
"""
import argparse
import statistics
import time

import numpy as np

WORKLOADS = (("a", 256), ("b16", 16), ("b256", 256))


def build(lib, n):
    """The benchmark kernels written once against the shared Taichi-style API of `lib`."""
    x = lib.field(lib.f32, shape=n, needs_grad=True)
    y = lib.field(lib.f32, shape=n, needs_grad=True)
    nsteps = lib.field(lib.i32, shape=())

    @lib.kernel
    def ka():
        for i in x:
            v = x[i]
            for s in range(nsteps[None]):
                v = v * 0.95 + 0.01
            y[i] = v

    @lib.kernel
    def kb():
        for i in x:
            a = x[i]
            b = a * 0.5
            c = a * 0.25
            d = a * 0.125
            for s in range(nsteps[None]):
                a2 = lib.sin(b) * 0.9 + 0.1 * a
                b2 = lib.cos(c) * 0.9 + 0.1 * b
                c2 = lib.sin(d) * 0.9 + 0.1 * c
                d2 = lib.cos(a) * 0.9 + 0.1 * d
                a = a2
                b = b2
                c = c2
                d = d2
            y[i] = a + b + c + d

    return x, y, nsteps, {"a": ka, "b16": kb, "b256": kb}


def median_ms(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def run(lib, arch, n, reps):
    lib.init(arch=getattr(lib, arch), ad_stack_experimental_enabled=True)
    x, y, nsteps, kernels = build(lib, n)
    x.from_numpy(np.linspace(0.1, 0.9, n, dtype=np.float32))
    out = {}
    for name, steps in WORKLOADS:
        k = kernels[name]
        nsteps[None] = steps

        def fwd():
            k()
            lib.sync()

        def grad():
            y.grad.fill(1.0)
            x.grad.fill(0.0)
            k.grad()
            lib.sync()

        fwd()
        grad()  # compile
        out[name] = (median_ms(fwd, reps), median_ms(grad, reps), x.grad.to_numpy()[:: n // 8].copy())
    return out


def compare(lib_a, lib_b, arch, n, reps):
    """Both systems at `n` threads: (ours, theirs or None, failure message or None)."""
    ours = run(lib_a, arch, n, reps)
    if lib_b is None:
        return ours, None, None
    try:
        return ours, run(lib_b, arch, n, reps), None
    except Exception as e:  # Quadrants' own limits (e.g. its Vulkan sizer at large N)
        return ours, None, str(e).strip().splitlines()[0][:160]


def report(arch, n, ours, theirs, failure):
    for name, _ in WORKLOADS:
        f, g, gv = ours[name]
        line = f"[{arch:6s} {name:5s} N={n:7d}] spirad fwd {f:8.1f} ms  grad {g:8.1f} ms"
        if failure is not None:
            line += f" | quadrants failed: {failure}"
        if theirs is not None:
            qf, qg, qgv = theirs[name]
            agree = np.allclose(gv, qgv, rtol=1e-3, atol=1e-4)
            line += (f" | quadrants fwd {qf:8.1f} ms  grad {qg:8.1f} ms"
                     f" | ratio fwd {f / qf:5.2f} grad {g / qg:5.2f}"
                     f" | gradients agree: {agree}")
        print(line, flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", nargs="*", default=["cpu", "vulkan"])
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    import spirad as sd
    from spirad.backends import arch_available
    try:
        import quadrants as qd
    except ImportError:
        qd = None
        print("quadrants not installed (pip install 'quadrants==1.3.3'): spirad numbers only")
    for arch in args.arch:
        if not arch_available(arch):
            print(f"{arch}: not available in spirad, skipped")
            continue
        n = args.n
        ours, theirs, failure = compare(sd, qd, arch, n, args.reps)
        report(arch, n, ours, theirs, failure)
        # where Quadrants cannot run this size, compare both at the largest power-of-two size
        # it handles (down to N/16), in this same process run
        while failure is not None and n > args.n // 16:
            n //= 2
            ours, theirs, failure = compare(sd, qd, arch, n, args.reps)
            if failure is None:
                report(arch, n, ours, theirs, failure)


if __name__ == "__main__":
    main()
