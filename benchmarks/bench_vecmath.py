"""CPU math: vecmath (our polynomial bodies) against libm / LLVM intrinsics, in one run.

    python benchmarks/bench_vecmath.py [--n 1048576] [--reps 7] [--fns sin cos ...] [--spmd]

For every function and precision three kernels run on `arch=cpu`, each compiled three times:
SPIRAD_CPU_VECMATH=0 (libm only), unset (auto: libm calls carrying vecmath vector variants) and
=1 (inline: vecmath scalar bodies), all timed alternately in this process:
  map:   y[i] = f(x[i])                         (LLVM vectorises the loop)
  chain: v = x[i]; 16 times v = f(v) * a + b    (a static loop: LLVM unrolls it, vectorises)
  loop:  the same with the trip count read from a field (a dependent scalar chain, like kernel b)
Printed per kernel: the libm min (median) ms, then the ratios of the min times auto / libm and
inline / libm (below 1: faster than libm). `llvm_codegen.math_policy` explains the default.
"""
import argparse
import os
import statistics
import time

import numpy as np

import spirad as sd
from target_info import print_target  # benchmarks/target_info.py

# name -> (input range, chain scale a, chain offset b) keeping the chain inside the domain
FNS = {
    "sin": ((-10, 10), 1.0, 0.5), "cos": ((-10, 10), 1.0, 0.5), "tan": ((-1.2, 1.2), 0.3, 0.1),
    "exp": ((-5, 5), 0.1, -0.5), "log": ((0.1, 10), 0.5, 2.0), "tanh": ((-3, 3), 1.5, 0.1),
    "asin": ((-1, 1), 0.6, 0.1), "acos": ((-1, 1), 0.5, -0.2), "atan2": ((-3, 3), 1.0, 0.2),
    "pow": ((0.1, 3), 0.7, 0.6),
}


MODES = {"libm": "0", "auto": "auto", "inline": "1"}


def build(name, dt, n, mode: str):
    os.environ["SPIRAD_CPU_VECMATH"] = MODES[mode]
    lo_hi, a, b = FNS[name]
    x = sd.field(dt, shape=n)
    y = sd.field(dt, shape=n)
    nsteps = sd.field(sd.i32, shape=())
    nsteps[None] = 16
    x.from_numpy(np.random.default_rng(0).uniform(*lo_hi, n).astype(np.float32 if dt == sd.f32 else np.float64))

    if name == "atan2":
        @sd.func
        def f(v):
            return sd.atan2(v, 0.75)
    elif name == "pow":
        @sd.func
        def f(v):
            return v ** 1.37
    else:
        f = getattr(sd, name)

    @sd.kernel
    def kmap():
        for i in x:
            y[i] = f(x[i])

    @sd.kernel
    def kchain():
        for i in x:
            v = x[i]
            for s in range(16):
                v = f(v) * a + b
            y[i] = v

    @sd.kernel
    def kloop():
        for i in x:
            v = x[i]
            for s in range(nsteps[None]):
                v = f(v) * a + b
            y[i] = v

    def run(k):
        def f():
            k()
            sd.sync()
        f()  # compile now, with this SPIRAD_CPU_VECMATH
        return f

    fns = {"map": run(kmap), "chain": run(kchain), "loop": run(kloop)}
    return fns, y.to_numpy()


def timeit(fns, reps):
    """Alternate the callables `reps` times; per callable (min, median) seconds."""
    ts = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            ts[k].append(time.perf_counter() - t0)
    return {k: (min(v), statistics.median(v)) for k, v in ts.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--fns", nargs="*", default=list(FNS))
    p.add_argument("--spmd", action="store_true",
                   help="leave the SPMD lane lowering on (default: off, so the math lowering "
                        "modes are compared in the scalar task loop)")
    args = p.parse_args()
    if not args.spmd:
        os.environ["SPIRAD_CPU_SPMD"] = "0"
    print_target()
    sd.init(arch=sd.cpu)
    print(f"N={args.n}, reps={args.reps}: libm min (median) ms, then min-time ratios auto/libm "
          "and inline/libm (below 1: faster than libm)")
    for prec, dt in (("f32", sd.f32), ("f64", sd.f64)):
        for name in args.fns:
            fns = {}
            for mode in MODES:
                built, _ = build(name, dt, args.n, mode)
                fns.update({(mode, k): f for k, f in built.items()})
            res = timeit(fns, args.reps)
            line = f"{name:5s} {prec}"
            for k in ("map", "chain", "loop"):
                base = res[("libm", k)][0]
                line += f" | {k} libm {base * 1e3:7.2f} ({res[('libm', k)][1] * 1e3:7.2f})"
                for mode in ("auto", "inline"):
                    line += f" {mode} {res[(mode, k)][0] / base:4.2f}"
            print(line, flush=True)
    os.environ.pop("SPIRAD_CPU_VECMATH", None)


if __name__ == "__main__":
    main()
