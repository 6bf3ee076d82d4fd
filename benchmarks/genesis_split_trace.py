"""Where a Genesis step's time goes on the CPU, per kernel and per range task: which launches
split, how long they take split and unsplit, and how many iterations the calling thread ran.

Per kernel (every launch from Python, the kernel class's `__call__` wrapped): calls and the wall
time of a launch, median / fastest. Per range task (loops `passes/independent_loops` made
parallel: `SPIRAD_INDEPENDENT_LOOPS=1`, the default here): its source line, its launches split
by measured time (`work_estimate.Adaptive`) or by the static threshold of a task with atomics,
each launch's range, wall time, and the caller's share of a split launch's iterations. The
kernel's time less its range tasks' is its serial tasks and launch path.

    PYTHONPATH=$PWD:$PWD/spirad/compat/quadrants_shim:$PWD/benchmarks GS_ENABLE_NDARRAY=0 \\
        nice -n 5 /work/venv-genesis/bin/python benchmarks/genesis_split_trace.py franka \\
        --n-envs 256 --priority -10

`--priority P` sets every thread of the process to nice P once the scene is built (the build
under the caller's nice, the timed steps under P; pool threads started later inherit it).
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import time

import compile_knobs
from genesis_scene import built_stepping_scene


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scene")
    ap.add_argument("--n-envs", type=int, default=256)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--priority", type=int, default=None)
    ap.add_argument("--top", type=int, default=12, help="kernels listed (by total time)")
    ap.add_argument("--build-id", help="as genesis_scene.py --build-id")
    compile_knobs.add_arguments(ap)
    a = ap.parse_args()
    os.environ.setdefault("SPIRAD_INDEPENDENT_LOOPS", "1")
    import genesis as gs
    import quadrants as qd
    compile_knobs.apply(a)
    compile_knobs.use_build_id(a.build_id)
    from llvm_codegen.cpu_runtime import CpuRuntime
    from spirad import options
    from spirad.backends import cpu, work_estimate
    from spirad.kernel import Kernel

    tasks = {}  # id(Adaptive) or id(task function) -> (kernel, task index, source line, kind)
    programs = collections.defaultdict(list)  # kernel -> [(task index, kind, line, how run)]
    orig_build = cpu.CpuBackend._build

    def build(self, tl, abi, blob):
        p = orig_build(self, tl, abi, blob)
        for ti, t in enumerate(tl.tasks):
            where = f"{os.path.basename(t.loc.filename)}:{t.loc.lineno}" if t.loc else "?"
            d = (tl.name, ti, where)
            how = t.kind
            if ti < len(p.adaptive) and p.adaptive[ti] is not None:
                how = "adaptive"
                tasks[id(p.adaptive[ti])] = d + (how,)
            elif t.kind == "range":
                ms = p.min_split[ti]
                how = (f"atomics, split from {ms}" if ms is not None and ms < work_estimate.NEVER
                       else "atomics, never split") + (", 1t variant" if p.fns_1t[ti] else "")
                tasks[id(p.fns[ti])] = d + (how,)
            if how.startswith("atomics") and os.environ.get("TRACE_ATOMICS"):
                from kernel_ir.nodes import walk
                from kernel_ir.ops import ATOMICS
                seen = collections.Counter(
                    (x.op.name, str(x.arg.buffer)[:60],
                     f"{os.path.basename(x.loc.filename)}:{x.loc.lineno}" if x.loc else "?")
                    for x in walk(t.body) if x.op in ATOMICS)
                how += " " + "; ".join(f"{k} x{c}" for k, c in seen.most_common(4))
            programs[tl.name].append((ti, where, how))
        return p
    cpu.CpuBackend._build = build

    on = [False]
    launches = collections.defaultdict(list)  # task -> [(n, split, wall s, caller ran)]
    spans, gaps = [], []  # the end of each split launch; the time from one to the next
    orig_arun, orig_unsplit = work_estimate.Adaptive.run, work_estimate.Adaptive.unsplit

    def arun(self, run, fn, bufs, addr, b, e):
        if not on[0]:
            return orig_arun(self, run, fn, bufs, addr, b, e)
        n = e - b
        split = n >= self.min_split and n * self.per_iteration >= work_estimate.SPLIT_SECONDS
        got = [n]

        def counted(*args):
            got[0] = run(*args)
            return got[0]
        t0 = time.perf_counter()
        orig_arun(self, counted, fn, bufs, addr, b, e)
        t1 = time.perf_counter()
        launches[tasks.get(id(self), ("?", 0, "?", "adaptive"))].append(
            (n, split, t1 - t0, got[0]))
        if split:
            if spans:
                gaps.append(t0 - spans[-1])
            spans.append(t1)

    def unsplit(self, n, seconds, clk=None):
        if on[0]:
            launches[tasks.get(id(self), ("?", 0, "?", "adaptive"))].append((n, False, seconds, n))
        return orig_unsplit(self, n, seconds, clk)
    work_estimate.Adaptive.run, work_estimate.Adaptive.unsplit = arun, unsplit

    orig_rt_run = CpuRuntime.run

    def rt_run(self, fn, bufs, args, begin, end, parallel=True, min_split=None):
        d = tasks.get(id(fn)) if on[0] else None
        if d is None:
            return orig_rt_run(self, fn, bufs, args, begin, end, parallel, min_split)
        t0 = time.perf_counter()
        ran = orig_rt_run(self, fn, bufs, args, begin, end, parallel, min_split)
        n = end - begin
        launches[d].append((n, ran < n, time.perf_counter() - t0, ran))
        return ran
    CpuRuntime.run = rt_run

    kernels = collections.defaultdict(list)
    plain = Kernel.__call__
    depth = [0]

    def timed(self, *args, **kwargs):
        if depth[0] or not on[0]:
            return plain(self, *args, **kwargs)
        depth[0] = 1
        t0 = time.perf_counter()
        try:
            return plain(self, *args, **kwargs)
        finally:
            kernels[getattr(self, "__name__", None) or self.fn.__name__].append(
                time.perf_counter() - t0)
            depth[0] = 0
    Kernel.__call__ = timed

    gs.init(backend=gs.cpu, logging_level="warning", precision="32", seed=0)
    scene = built_stepping_scene(gs, qd, a.scene, a.n_envs)
    if a.priority is not None:
        for tid in os.listdir("/proc/self/task"):
            os.setpriority(os.PRIO_PROCESS, int(tid), a.priority)
    for _ in range(a.warm):
        scene.step()
    on[0] = True
    steps = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        scene.step()
        steps.append(time.perf_counter() - t0)
    on[0] = False
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    us = lambda v: f"{1e6 * v:9.1f}"  # noqa: E731
    print(f"{a.scene} n_envs {a.n_envs} ndarray {gs.use_ndarray} independent loops "
          f"{int(bool(options.get('SPIRAD_INDEPENDENT_LOOPS')))} [load {load}]: step median / fastest "
          f"{us(statistics.median(steps))} / {us(min(steps))} us, {a.steps} steps after {a.warm}")
    total = {k: sum(v) for k, v in kernels.items()}
    if gaps:
        g = sorted(gaps)
        print(f"  from one split launch to the next (us): p10 {us(g[len(g) // 10])} median "
              f"{us(g[len(g) // 2])} p90 {us(g[9 * len(g) // 10])} ({len(g)})")
    print("  kernel calls median fastest (us), share of kernel time")
    allk = sum(total.values())
    for k in sorted(total, key=total.get, reverse=True)[:a.top]:
        v = kernels[k]
        print(f"  {k:34s} {len(v):5d} {us(statistics.median(v))} {us(min(v))}  "
              f"{100 * total[k] / allk:5.1f} %")
        for ti, where, how in programs.get(k, ()):
            print(f"      task {ti}: {where} {how}")
    print("  range task (kernel, task, line, kind): launches, split, n, "
          "split median / fastest, unsplit median / fastest (us), caller's share split")
    for d in sorted(launches, key=lambda d: -sum(x[2] for x in launches[d])):
        v = launches[d]
        sp = [x for x in v if x[1]]
        un = [x for x in v if not x[1]]
        ns = sorted({x[0] for x in v})
        f = lambda xs: (f"{us(statistics.median(x[2] for x in xs))} / {us(min(x[2] for x in xs))}"  # noqa: E731
                        if xs else f"{'-':>9s} / {'-':>9s}")
        share = statistics.median(x[3] / x[0] for x in sp) if sp else float("nan")
        print(f"  {d[0][:34]:34s} {d[1]:2d} {d[2]:22s} {d[3]:26s} {len(v):4d} {len(sp):4d} "
              f"{ns[0] if len(ns) == 1 else ns} {f(sp)} {f(un)} {share:.2f}")


if __name__ == "__main__":
    main()
