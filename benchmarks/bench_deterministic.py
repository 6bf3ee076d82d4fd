"""What `sd.init(deterministic=True)` costs: the determinism tests' workload in both modes, paired.

    python benchmarks/bench_deterministic.py [--arch cpu] [--rounds 4] [--reps 5] [--n 1000000]

Rows (tests/support/determinism.py, the kernels the tests check): `sum` a reduction into a local,
`scatter` `bins[idx[i]] += x[i] ** 2` into 61 bins, `grad` an adjoint scattering into
`bins.grad`, `adstack grad` gather_loop's adjoint (an adstack and a scatter into `x.grad`, 4,096
iterations). Each is a launch plus the read-back of its result. Deterministic mode runs each of
these loops in index order (passes/deterministic.py): on one thread on the CPU, in chunks
of 16,383 iterations dispatched one after another on lavapipe.

As bench_bounds_cost does, the two modes run in *alternating processes* (`--rounds` each:
default, deterministic, then deterministic, default, ...), each timing every row `--reps` times
after a warm-up (min per process); printed per row: the median over rounds of each mode's min,
their ratio and the spread of the per-round ratios, for wall time and for process CPU time (all
threads: lavapipe's and the CPU backend's workers)."""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import paired  # noqa: E402  (benchmarks/paired.py)
ROWS = ("sum", "scatter", "grad", "adstack grad")


def child(args):
    sys.path[:0] = [os.path.dirname(HERE)]  # this checkout's spirad and tests, not another one
    import spirad as sd
    from tests.support import determinism as D
    sd.init(arch=args.arch, deterministic=args.child == "deterministic", offline_cache=False)
    w = D.Workload(args.n)
    calls = dict(zip(ROWS, (w.forward_sum, w.scatter, w.gradient, w.adstack_gradient)))
    out = {}
    for name, call in calls.items():
        call()  # compile, warm up
        wall, cpu = [], []
        for _ in range(args.reps):
            time.sleep(args.settle)
            t0, c0 = time.perf_counter(), time.process_time()
            call()
            wall.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
        out[name] = {"wall": min(wall), "cpu": min(cpu)}
    print("RESULT " + json.dumps(out), flush=True)


def run_one(args, mode):
    return paired.child_result([sys.executable, __file__, "--child", mode, "--arch", args.arch,
                                "--n", str(args.n), "--reps", str(args.reps),
                                "--settle", str(args.settle)])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="cpu")
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--settle", type=float, default=0.05)
    p.add_argument("--child", choices=("default", "deterministic"))
    args = p.parse_args()
    if args.child:
        return child(args)
    runs = paired.alternate(args.rounds, "deterministic", "default", lambda m: run_one(args, m))
    print(f"{args.arch} N={args.n}: {args.rounds} rounds of alternating processes, "
          f"{args.reps} reps each; min ms per process, median over rounds")
    paired.print_ratios(args.arch, ROWS, ("wall", "cpu"), runs, "deterministic", "default")


if __name__ == "__main__":
    main()
