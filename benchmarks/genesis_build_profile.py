"""Where a Genesis `scene.build()` spends its compile time on spirad: per phase and per kernel.

    SPIRAD_CACHE_DIR=$(mktemp -d) GS_ENABLE_NDARRAY=0 \\
    PYTHONPATH=$PWD:$PWD/spirad/compat/quadrants_shim:$PWD/benchmarks \\
        /work/venv-genesis/bin/python benchmarks/genesis_build_profile.py box [--out prof.json]

A private, empty SPIRAD_CACHE_DIR gives a cold build without touching anyone's warm cache
(`SPIRAD_OFFLINE_CACHE=0` too, but then the cache write is not measured). The compile pipeline's
functions (spirad/compile/driver.py, the CPU backend, the CPU runtime, the offline cache) are
wrapped with timers for this process only; each phase's time (CPU time of the process) is its own (a phase called inside
another is subtracted from the outer one), so the phases add up to the compile time. Prints the
build time, the time of each phase summed over all kernels, and the kernels that took longest
with their LLVM IR size (bytes of text before optimisation), number of tasks and IR nodes
before / after loop versioning. `--pin-build-id`, `--fresh KERNEL` and `--versioning` (see
`compile_knobs.py`) recompile one kernel after a compiler edit, or under another versioning
budget, while the others load from the cache a first run filled:

    ... genesis_build_profile.py box --pin-build-id base             # once: fills the cache
    ... genesis_build_profile.py box --pin-build-id base --fresh kernel_detection
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import time

import compile_knobs
from genesis_scene import build_scene


class Timers:
    """Exclusive time per (kernel, phase): a stack of running phases; a phase's time stops
    while a phase inside it runs."""

    def __init__(self):
        self.t = collections.defaultdict(float)       # (kernel, phase) -> seconds
        self.info = collections.defaultdict(dict)      # kernel -> {"ir_bytes", "tasks", ...}
        self.stack = []                                # [phase, start, child seconds]
        self.kernel = "(outside a kernel)"
        self.cprofile = None   # a kernel's name: its compile runs under cProfile
        self.profiles = []
        self.dump_ir = None    # a directory: each kernel's LLVM IR before optimisation
        self.sort = "tottime"

    def wrap(self, phase, fn):
        timers = self

        def timed(*args, **kwargs):
            timers.stack.append([phase, time.process_time(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                ph, t0, child = timers.stack.pop()
                dt = time.process_time() - t0
                timers.t[(timers.kernel, ph)] += dt - child
                if timers.stack:
                    timers.stack[-1][2] += dt
        timed.__wrapped__ = fn
        return timed


def install(T: Timers):
    """Wrap the pipeline's functions where their callers look them up (module globals)."""
    from spirad.compile import driver, offline_cache
    from spirad.frontend import transformer
    from spirad.backends import cpu
    from llvm_codegen import codegen, cpu_runtime

    fwd = driver._compile_forward

    def compile_forward(kernel, specs, state, *rest):  # rest: shapes, aliases
        outer = T.kernel
        T.kernel = kernel.fn.__name__
        T.info[T.kernel]["compiles"] = T.info[T.kernel].get("compiles", 0) + 1
        try:
            if T.kernel == T.cprofile:
                import cProfile
                prof = cProfile.Profile()
                T.profiles.append(prof)
                return prof.runcall(T.wrap("driver (other)", fwd), kernel, specs, state, *rest)
            return T.wrap("driver (other)", fwd)(kernel, specs, state, *rest)
        finally:
            T.kernel = outer
    driver._compile_forward = compile_forward
    transformer.compile_kernel = T.wrap("frontend (AST -> IR)", transformer.compile_kernel)
    driver.KERNEL_STAGES = tuple((n, T.wrap("pass " + n, f)) for n, f in driver.KERNEL_STAGES)
    driver.TASK_STAGES = tuple((n, T.wrap("pass " + n, f)) for n, f in driver.TASK_STAGES)
    vl = driver.version_loops

    def version_loops(tl, **kwargs):  # the IR nodes before and after: what the copies add
        from kernel_ir.nodes import walk
        out = vl(tl, **kwargs)
        info = T.info[T.kernel]
        for key, x in (("nodes", tl), ("versioned_nodes", out)):
            info[key] = info.get(key, 0) + sum(1 for t in x.tasks for _ in walk(t.body))
        return out
    driver.version_loops = version_loops
    for name in ("offload", "lower_prints", "promote_accumulators", "expand_math",
                 "demote_atomics", "taichi_addresses", "version_loops", "serialise"):
        setattr(driver, name, T.wrap("pass " + name, getattr(driver, name)))
    driver.kernel_abi = T.wrap("kernel_abi", driver.kernel_abi)
    load = offline_cache.load

    def cache_load(key, state):  # `--cprofile K`: K compiles even where the cache has it
        return None if T.kernel == T.cprofile else load(key, state)
    offline_cache.load = T.wrap("offline cache read", cache_load)
    offline_cache.store = T.wrap("offline cache write", offline_cache.store)
    offline_cache.forward_key = T.wrap("offline cache key", offline_cache.forward_key)
    cpu.CpuBackend.compile = T.wrap("backend (other)", cpu.CpuBackend.compile)
    cpu.CpuBackend._one_thread_variants = T.wrap("one-thread variants",
                                                 cpu.CpuBackend._one_thread_variants)
    cpu.CpuBackend._build = T.wrap("JIT link", cpu.CpuBackend._build)
    ct = codegen.compile_tasks

    def compile_tasks(*args, **kwargs):
        prog = ct(*args, **kwargs)
        info = T.info[T.kernel]
        info["ir_bytes"] = info.get("ir_bytes", 0) + len(prog.llvm_ir)
        info["tasks"] = info.get("tasks", 0) + len(prog.tasks)
        if T.dump_ir:
            n = info.get("compiles", 1)
            with open(os.path.join(T.dump_ir, f"{T.kernel}.{n}.ll"), "w") as f:
                f.write(prog.llvm_ir)
        return prog
    codegen.compile_tasks = T.wrap("codegen (IR -> LLVM IR)", compile_tasks)
    cpu_runtime.optimized_module = T.wrap("LLVM optimisation", cpu_runtime.optimized_module)
    cpu_runtime.CpuRuntime.compile_object = T.wrap("machine code",
                                                   cpu_runtime.CpuRuntime.compile_object)


def report(T: Timers, build_s: float, top: int):
    phases = collections.defaultdict(float)
    kernels = collections.defaultdict(float)
    for (k, ph), s in T.t.items():
        phases[ph] += s
        kernels[k] += s
    total = sum(phases.values())
    print(f"compiling: {total:.1f} s CPU ({len(T.info)} kernels)")
    print("\nphase                              seconds   share")
    for ph, s in sorted(phases.items(), key=lambda x: -x[1]):
        print(f"  {ph:32s} {s:8.2f}  {100 * s / max(total, 1e-9):5.1f} %")
    print(f"\nkernels, longest first (top {top}): seconds, LLVM IR KB, tasks, IR nodes before "
          f"-> after loop versioning, and the phases over 1 s")
    for k, s in sorted(kernels.items(), key=lambda x: -x[1])[:top]:
        info = T.info.get(k, {})
        big = ", ".join(f"{ph} {v:.1f}" for (kk, ph), v in sorted(T.t.items(), key=lambda x: -x[1])
                        if kk == k and v >= 1.0)
        print(f"  {k:40s} {s:7.2f} {info.get('ir_bytes', 0) / 1e3:8.0f} {info.get('tasks', 0):4d}"
              f" {info.get('nodes', 0):7d} -> {info.get('versioned_nodes', 0):7d}  {big}")
    return {"build_s": build_s, "compile_s": total, "phases": dict(phases),
            "kernels": {k: {"s": s, **T.info.get(k, {}),
                            "phases": {ph: v for (kk, ph), v in T.t.items() if kk == k}}
                        for k, s in kernels.items()}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scene", choices=("box", "franka"))
    ap.add_argument("--n-envs", type=int, default=0)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out")
    ap.add_argument("--cprofile", metavar="KERNEL", help="compile KERNEL under cProfile, even "
                    "where the offline cache has it (the others load from a warm cache)")
    ap.add_argument("--sort", default="tottime", help="the cProfile table's order (cumulative, ...)")
    ap.add_argument("--dump-ir", metavar="DIR", help="write each kernel's LLVM IR there")
    compile_knobs.add_arguments(ap)
    a = ap.parse_args()
    import genesis as gs
    import quadrants as qd
    if "spirad" not in str(getattr(qd, "__file__", "")):
        raise SystemExit("run with spirad's quadrants shim on PYTHONPATH (see the docstring)")
    T = Timers()
    T.cprofile, T.dump_ir, T.sort = a.cprofile, a.dump_ir, a.sort
    install(T)
    compile_knobs.apply(a, lambda: T.kernel)
    gs.init(backend=gs.cpu, logging_level="warning", precision="32", seed=0)
    scene, _, _ = build_scene(gs, qd, a.scene)
    t0, c0 = time.perf_counter(), time.process_time()
    scene.build(**({"n_envs": a.n_envs} if a.n_envs else {}))
    build, build_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    scene.step()  # kernels first launched by a step compile here
    first_step, first_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"scene.build(): {build:.1f} s, CPU {build_cpu:.1f} s; first scene.step(): "
          f"{first_step:.1f} s, CPU {first_cpu:.1f} s (the tables below include its compiles)")
    res = report(T, build, a.top)
    for prof in T.profiles:
        import pstats
        print(f"\ncProfile of {a.cprofile}'s compile (internal time):")
        st = pstats.Stats(prof)
        st.sort_stats(T.sort).print_stats(40)
        st.print_callers("rewrite.py:.*rebuild")
        st.dump_stats(f"/tmp/{a.cprofile}.pstats")
    res.update(first_step_s=first_step, build_cpu_s=build_cpu, first_step_cpu_s=first_cpu)
    res.update(scene=a.scene, n_envs=a.n_envs, ndarray=bool(gs.use_ndarray),
               load=os.getloadavg()[0])
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
