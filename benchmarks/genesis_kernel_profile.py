"""Per-kernel times of a Genesis step, with whatever `quadrants` the interpreter imports (the
real Quadrants or spirad's shim): `qd.init(kernel_profiler=True)` added to Genesis' init, the
scene of `genesis_scene.py` built and warmed up, the profiler cleared, then `--steps` steps and
the profiler's table printed (both print Taichi's table: per kernel the count and total / mean
time; on the CPU each launch timed alone on the host).

    PYTHONPATH=$PWD:$PWD/spirad/compat/quadrants_shim:$PWD/benchmarks \\
        GS_ENABLE_NDARRAY=1 python benchmarks/genesis_kernel_profile.py box --n-envs 256
    PYTHONPATH=$PWD/benchmarks GS_ENABLE_NDARRAY=1 /work/venv-genesis/bin/python \\
        benchmarks/genesis_kernel_profile.py box --n-envs 256          # Quadrants

With --split no profiler runs: a step's time is split into the kernel calls and the rest (Genesis'
Python between them and each system's launch path outside the kernel call) by timing every
kernel call (the kernel class's `__call__` wrapped, the same way in both systems: spirad's
`Kernel`, Quadrants' `QuadrantsCallable`; a call inside a call counted once). Per step: wall
time and thread CPU time (`time.thread_time`: a 2-core machine at load 5 takes the CPU away
from a step for milliseconds, which wall time counts and CPU time does not), the CPU time inside
kernel calls and outside; per kernel: the median and fastest call (CPU time, launch path
included) and the median over 20-step blocks of the step's CPU time (a box falls freely for its
first steps, with no contact for the solver: those steps, and every kernel's fastest launch, are
several times cheaper than a step in contact).
"""
from __future__ import annotations

import argparse
import collections
import statistics
import time


import compile_knobs
from genesis_scene import add_init_keywords, built_stepping_scene


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scene")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warm", type=int, default=5,
                    help="steps before the timed ones; the box falls freely for ~40 steps (no "
                    "contact, kernels 4-6x cheaper, every fastest launch there): --warm 60 "
                    "times steps in contact")
    ap.add_argument("--n-envs", type=int, default=0)
    ap.add_argument("--qd-init", nargs="*", metavar="KEY=JSON", default=[],
                    help="more keywords for Genesis' qd.init, e.g. check_bounds=false (spirad: "
                    "drops its default bounds checks)")
    ap.add_argument("--split", action="store_true",
                    help="no profiler: each step's CPU time inside the kernel calls and outside")
    ap.add_argument("--read-state", action="store_true",
                    help="with --split: read the entity's positions after every step, untimed, as "
                    "genesis_compare.py does (box: get_pos, Franka: get_qpos)")
    compile_knobs.add_arguments(ap)
    a = ap.parse_args()
    import genesis as gs
    import quadrants as qd
    if "spirad" in str(getattr(qd, "__file__", "")):
        compile_knobs.apply(a)
    add_init_keywords(qd, ([] if a.split else ["kernel_profiler=true"]) + a.qd_init)
    gs.init(backend=gs.cpu, logging_level="warning", precision="32", seed=0)
    scene = built_stepping_scene(gs, qd, a.scene, a.n_envs)
    for _ in range(a.warm):
        scene.step()
    if a.split:
        return split(a, gs, qd, scene)
    qd.profiler.clear_kernel_profiler_info()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        scene.step()
    print(f"{a.scene} n_envs {a.n_envs} ndarray {gs.use_ndarray} {' '.join(a.qd_init)}: "
          f"{1e3 * (time.perf_counter() - t0) / a.steps:.3f} ms per step (profiled)")
    qd.profiler.print_kernel_profiler_info()


def _kernel_class(qd):
    """The class whose `__call__` every kernel launch from Python goes through."""
    if "spirad" in str(getattr(qd, "__file__", "")):
        import sys
        return sys.modules["spirad.kernel"].Kernel  # (`spirad.kernel` the attribute: the decorator)
    from quadrants.lang._quadrants_callable import QuadrantsCallable
    return QuadrantsCallable


def split(a, gs, qd, scene):
    """`--split`: per step, thread CPU time in kernel calls and outside (module doc)."""
    cls = _kernel_class(qd)
    plain = cls.__call__
    clock = time.thread_time
    inside = [0.0, 0]  # this step's CPU time in kernel calls, nesting depth
    per_kernel = collections.defaultdict(list)

    def timed(self, *args, **kwargs):
        if inside[1]:
            return plain(self, *args, **kwargs)
        inside[1] = 1
        t = clock()
        try:
            return plain(self, *args, **kwargs)
        finally:
            dt = clock() - t
            inside[0] += dt
            inside[1] = 0
            name = getattr(self, "__name__", None) or self.fn.__name__
            per_kernel[name].append(dt)

    read = None
    if a.read_state:  # (rigid scenes: the entity is the last one added, after the plane)
        ent = scene.entities[-1]
        read = ent.get_qpos if a.scene == "franka" else ent.get_pos
    cls.__call__ = timed
    steps = []  # (wall, cpu, cpu in kernel calls)
    try:
        for _ in range(a.steps):
            inside[0] = 0.0
            t, c = time.perf_counter(), clock()
            scene.step()
            steps.append((time.perf_counter() - t, clock() - c, inside[0]))
            if read is not None:
                cls.__call__ = plain
                read()
                cls.__call__ = timed
    finally:
        cls.__call__ = plain
    ms = lambda v: f"{1e3 * v:.3f}"  # noqa: E731
    med = lambda i: statistics.median(s[i] for s in steps)  # noqa: E731
    low = lambda i: min(s[i] for s in steps)  # noqa: E731
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"{a.scene} n_envs {a.n_envs} ndarray {gs.use_ndarray} {' '.join(a.qd_init)} "
          f"{'read state between steps ' if read else ''}"
          f"[load {load}], ms per step, median / fastest of {a.steps} after {a.warm}:\n"
          f"  wall {ms(med(0))} / {ms(low(0))}, CPU {ms(med(1))} / {ms(low(1))}, "
          f"CPU in kernel calls {ms(med(2))} / {ms(low(2))}, outside "
          f"{ms(statistics.median(s[1] - s[2] for s in steps))} / "
          f"{ms(min(s[1] - s[2] for s in steps))}")
    blocks = [statistics.median(s[1] for s in steps[i:i + 20]) for i in range(0, len(steps), 20)]
    print("  CPU per step, median of each 20 steps: " + " ".join(ms(b) for b in blocks))
    print("  kernel: calls, CPU ms median / fastest (launch path included)")
    for name, ts in sorted(per_kernel.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"    {name:32s} {len(ts):5d}  {ms(statistics.median(ts))} / {ms(min(ts))}")
    print(f"    {'(sum of medians / fastest)':32s} {'':5s}  "
          f"{ms(sum(statistics.median(ts) for ts in per_kernel.values()))} / "
          f"{ms(sum(min(ts) for ts in per_kernel.values()))}")


if __name__ == "__main__":
    main()
