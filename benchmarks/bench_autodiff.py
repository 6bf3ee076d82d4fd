"""Forward and reverse-mode timings, spirad against its peers (Quadrants, Dr.Jit) in one run.

    python benchmarks/bench_autodiff.py [--arch cpu vulkan] [--n 1048576] [--reps 5]

Workloads (a dynamic loop whose trip count is read at run time, loop-carried values on the
adstack):
  (a)      v = v * 0.95 + 0.01 over 256 iterations
  (b16)    issue #17's kernel b: four loop-carried values a=x, b=x/2, c=1-x, d=x*x, each trip
           a += 0.1 sin(b) c; b -= 0.1 sin(a) d; c += 0.1 cos(d); d -= 0.1 sin(c); 16 trips
  (b256)   the same over 256 iterations
  (mix16)  the earlier sin/cos mix (a2 = sin(b) 0.9 + 0.1 a, ...), 16 iterations
  (mix256) the same over 256 iterations
Peers run in this process when importable (the optional `bench` extra): Quadrants (==1.3.3,
same kernels through its Taichi-style API, on every arch) and Dr.Jit (==1.5.0, its LLVM backend,
cpu rows only, 2 threads like ours, written idiomatically: `dr.while_loop` over a `dr.opaque`
trip count with `max_iterations`, `dr.eval` + `dr.sync_thread` inside the timed region; its
grad time includes its forward trace and the backward kernel, ours is the reverse kernel).
A missing peer is printed "not installed" and skipped. Systems are timed alternately, each
repetition running every system once, each timed call after `--settle` seconds (default 0.1)
of idle (Dr.Jit's worker threads spin ~20 ms of CPU after each kernel; back to back, that
time is taken from the next system's run); min and median are printed, and the ratios spirad/peer
of the mins (below 1: spirad faster). Gradients are compared on 8 elements (max relative
difference printed; b256 is chaotic enough that f32 systems differ by ~1e-3 there, both that
close to float64 central differences). Where Quadrants fails at N (its Vulkan sizer stops at a
few hundred thousand threads on lavapipe), it is left out of the rows at N and spirad and it run
again at the largest power-of-two N it handles (down to N/16).
"""
import argparse
import os
import statistics
import time

import numpy as np
from target_info import print_target  # benchmarks/target_info.py

WORKLOADS = (("a", 256), ("b16", 16), ("b256", 256), ("mix16", 16), ("mix256", 256))
KERNEL_OF = {"a": "a", "b16": "b", "b256": "b", "mix16": "mix", "mix256": "mix"}


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
            c = 1.0 - a
            d = a * a
            for s in range(nsteps[None]):
                a = a + 0.1 * lib.sin(b) * c
                b = b - 0.1 * lib.sin(a) * d
                c = c + 0.1 * lib.cos(d)
                d = d - 0.1 * lib.sin(c)
            y[i] = a + b + c + d

    @lib.kernel
    def kmix():
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

    return x, y, nsteps, {"a": ka, "b": kb, "mix": kmix}


class TaichiLike:
    """spirad or Quadrants: one workload at a time, `fwd()` / `grad()` synced, `sample()`."""

    def __init__(self, lib, arch, n, label):
        self.lib, self.label = lib, label
        lib.init(arch=getattr(lib, arch), ad_stack_experimental_enabled=True)
        self.x, self.y, self.nsteps, self.kernels = build(lib, n)
        self.x.from_numpy(np.linspace(0.1, 0.9, n, dtype=np.float32))
        self.n = n

    def prepare(self, name, steps):
        self.k = self.kernels[KERNEL_OF[name]]
        self.nsteps[None] = steps
        self.fwd()
        self.grad()  # compile both

    def fwd(self):
        self.k()
        self.lib.sync()

    def grad(self):
        self.y.grad.fill(1.0)
        self.x.grad.fill(0.0)
        self.k.grad()
        self.lib.sync()

    def sample(self):
        return self.x.grad.to_numpy()[:: self.n // 8].copy()


class DrJit:
    """The same workloads in Dr.Jit's LLVM backend, written the way Dr.Jit is meant to be used."""

    label = "drjit"

    def __init__(self, dr, n, threads):
        from drjit.llvm.ad import Float, UInt32
        self.dr, self.Float, self.UInt32 = dr, Float, UInt32
        dr.set_thread_count(threads)
        self.x = dr.linspace(Float, 0.1, 0.9, n)
        dr.eval(self.x)
        self.n = n
        self.g = None

    def _loop(self, name, x, steps):
        dr, UInt32 = self.dr, self.UInt32
        trips = dr.opaque(UInt32, steps)  # a run-time value: one compiled kernel for all counts
        kernel = KERNEL_OF[name]
        if kernel == "a":
            state = (UInt32(0), self.Float(x))

            def body(i, v):
                return i + 1, v * 0.95 + 0.01
        elif kernel == "b":
            state = (UInt32(0), self.Float(x), x * 0.5, 1.0 - x, x * x)

            def body(i, a, b, c, d):
                a = a + 0.1 * dr.sin(b) * c
                b = b - 0.1 * dr.sin(a) * d
                c = c + 0.1 * dr.cos(d)
                d = d - 0.1 * dr.sin(c)
                return i + 1, a, b, c, d
        else:
            state = (UInt32(0), self.Float(x), x * 0.5, x * 0.25, x * 0.125)

            def body(i, a, b, c, d):
                return (i + 1, dr.sin(b) * 0.9 + 0.1 * a, dr.cos(c) * 0.9 + 0.1 * b,
                        dr.sin(d) * 0.9 + 0.1 * c, dr.cos(a) * 0.9 + 0.1 * d)
        out = dr.while_loop(state, lambda i, *v: i < trips, body, max_iterations=steps)
        return sum(out[1:][1:], out[1]) if len(out) > 2 else out[1]

    def prepare(self, name, steps):
        self.name, self.steps = name, steps
        self.fwd()
        self.grad()

    def fwd(self):
        y = self._loop(self.name, self.x, self.steps)
        self.dr.eval(y)
        self.dr.sync_thread()

    def grad(self):
        dr = self.dr
        x = self.Float(self.x)
        dr.enable_grad(x)
        y = self._loop(self.name, x, self.steps)
        dr.backward_from(y)
        self.g = dr.grad(x)
        dr.eval(self.g)
        dr.sync_thread()

    def sample(self):
        return self.g.numpy()[:: self.n // 8].copy()


def stats(ts):
    return min(ts) * 1e3, statistics.median(ts) * 1e3


def measure(systems, name, steps, reps, settle=0.0):
    """Alternate: each repetition runs every system's fwd, then every system's grad. Each timed
    call starts after `settle` seconds of sleep, so no system's worker threads are still busy
    from the previous call (Dr.Jit's pool keeps spinning ~20 ms of CPU after a kernel, measured
    with getrusage on this machine; on 2 cores that slows whichever system runs next)."""
    for s in systems:
        s.prepare(name, steps)
    t = {(s.label, k): [] for s in systems for k in ("fwd", "grad")}
    for _ in range(reps):
        for k in ("fwd", "grad"):
            for s in systems:
                f = getattr(s, k)
                time.sleep(settle)
                t0 = time.perf_counter()
                f()
                t[(s.label, k)].append(time.perf_counter() - t0)
    return {key: stats(v) for key, v in t.items()}, {s.label: s.sample() for s in systems}


def report(arch, n, name, res, samples, labels):
    ours = samples["spirad"]
    f, fm = res[("spirad", "fwd")]
    g, gm = res[("spirad", "grad")]
    line = f"[{arch:6s} {name:6s} N={n:7d}] spirad fwd {f:8.2f} ({fm:8.2f}) grad {g:8.2f} ({gm:8.2f}) ms"
    for lab in labels[1:]:
        pf, pfm = res[(lab, "fwd")]
        pg, pgm = res[(lab, "grad")]
        theirs = samples[lab]
        rel = float(np.max(np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-6)))
        line += (f" | {lab} fwd {pf:8.2f} ({pfm:8.2f}) grad {pg:8.2f} ({pgm:8.2f})"
                 f" ratio fwd {f / pf:5.2f} grad {g / pg:5.2f} grad rel diff {rel:.1e}")
    print(line, flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", nargs="*", default=["cpu", "vulkan"])
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--workloads", nargs="*", default=[w for w, _ in WORKLOADS])
    p.add_argument("--settle", type=float, default=0.1,
                   help="seconds of idle before each timed call (0: back to back)")
    args = p.parse_args()
    print_target()
    import spirad as sd
    from spirad.backends import arch_available
    try:
        import quadrants as qd
    except ImportError:
        qd = None
        print("quadrants: not installed (pip install 'quadrants==1.3.3')")
    try:
        import drjit as dr
    except ImportError:
        dr = None
        print("drjit: not installed (pip install 'drjit==1.5.0')")
    threads = os.cpu_count() or 1
    for arch in args.arch:
        if not arch_available(arch):
            print(f"{arch}: not available in spirad, skipped")
            continue
        failure = run_arch(sd, qd, dr, arch, args.n, args, threads)
        # where Quadrants cannot run this size, compare spirad and it at the largest power-of-two
        # size it handles (down to N/16), in this same process run
        n = args.n
        while failure and n > args.n // 16:
            n //= 2
            failure = run_arch(sd, qd, None, arch, n, args, threads, quiet_failure=True)


def run_arch(sd, qd, dr, arch, n, args, threads, quiet_failure=False):
    """All workloads on `arch` at `n`; returns True when Quadrants failed (and was left out)."""
    systems = [TaichiLike(sd, arch, n, "spirad")]
    failed = False
    if qd is not None:
        try:
            systems.append(TaichiLike(qd, arch, n, "quadrants"))
        except Exception as e:  # the peer's own limits
            failed = True
            print(f"quadrants failed on {arch} at N={n}: {str(e).strip().splitlines()[0][:160]}")
    if dr is not None and arch == "cpu":
        systems.append(DrJit(dr, n, threads))
    if quiet_failure and (failed or len(systems) == 1):
        return True
    print(f"{arch} N={n}: {', '.join(s.label for s in systems)}; {threads} threads; "
          "min (median) ms")
    steps_of = dict(WORKLOADS)
    for name in args.workloads:
        try:
            res, samples = measure(systems, name, steps_of[name], args.reps, args.settle)
        except Exception as e:
            if not (len(systems) > 1 and systems[1].label == "quadrants"):
                raise
            failed = True
            print(f"quadrants failed on {name} at N={n}: {str(e).strip().splitlines()[0][:160]}; "
                  "left out of the remaining rows")
            systems.pop(1)
            res, samples = measure(systems, name, steps_of[name], args.reps, args.settle)
        report(arch, n, name, res, samples, [s.label for s in systems])
    return failed

if __name__ == "__main__":
    main()
