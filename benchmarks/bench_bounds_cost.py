"""What the default bounds check costs: bench_autodiff's rows with and without it, paired.

    python benchmarks/bench_bounds_cost.py [--arch cpu] [--rounds 6] [--reps 5] [--n 1048576]

The default (no `debug`) build checks every field / ndarray access cheaply (docs/reliability.md);
`sd.init(check_bounds=False)` drops the checks. On a shared, noisy machine one process of each
says little (a previous session measured row "a grad" at 1.8x paired, about equal unpaired), so
this runs the two builds in *alternating processes*, `--rounds` times each (checks, no checks,
then no checks, checks, ...), each process timing every row `--reps` times (bench_autodiff's
kernels and calls, `--settle` seconds of idle before each; min per process), and prints per row
the median over rounds of each build's min and the ratio of those medians, with the spread of
the per-round ratios. Rows `cpu` are process CPU time (all worker threads) rather than wall
time: work other programs take from this one's cores shows in wall time only, so on a loaded
machine they are the steadier measure of what the check adds.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import paired  # noqa: E402  (benchmarks/paired.py)


def child(args):
    sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this checkout's spirad, not another one
    import bench_autodiff as ba
    import spirad as sd
    checks = args.child == "checks"
    init = sd.init

    def init_with(*a, **kw):  # TaichiLike calls sd.init itself
        return init(*a, check_bounds=checks, **kw)
    sd.init = init_with
    system = ba.TaichiLike(sd, args.arch, args.n, "spirad")
    out = {}
    for name, steps in ba.WORKLOADS:
        if name not in args.workloads:
            continue
        system.prepare(name, steps)
        t = {k: [] for k in ("fwd", "grad", "fwd cpu", "grad cpu")}
        for _ in range(args.reps):
            for k in ("fwd", "grad"):
                time.sleep(args.settle)
                t0, c0 = time.perf_counter(), time.process_time()
                getattr(system, k)()
                t[k].append((time.perf_counter() - t0) * 1e3)
                t[k + " cpu"].append((time.process_time() - c0) * 1e3)
        out[name] = {k: min(v) for k, v in t.items()}
    print("RESULT " + json.dumps(out), flush=True)


def run_one(args, build):
    return paired.child_result([sys.executable, __file__, "--child", build, "--arch", args.arch,
                                "--n", str(args.n), "--reps", str(args.reps),
                                "--settle", str(args.settle), "--workloads", *args.workloads])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="cpu")
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--settle", type=float, default=0.05)
    p.add_argument("--workloads", nargs="*", default=["a", "b16", "b256", "mix16", "mix256"])
    p.add_argument("--child", choices=("checks", "nochecks"))
    args = p.parse_args()
    if args.child:
        return child(args)
    runs = paired.alternate(args.rounds, "checks", "nochecks", lambda b: run_one(args, b))
    print(f"{args.arch} N={args.n}: {args.rounds} rounds of alternating processes, "
          f"{args.reps} reps each; min ms per process, median over rounds")
    paired.print_ratios(args.arch, args.workloads, ("fwd", "grad", "fwd cpu", "grad cpu"), runs,
                        "checks", "nochecks")


if __name__ == "__main__":
    main()
