"""Per-kernel times of a Genesis step, with whatever `quadrants` the interpreter imports (the
real Quadrants or spirad's shim): `qd.init(kernel_profiler=True)` added to Genesis' init, the
scene of `genesis_scene.py` built and warmed up, the profiler cleared, then `--steps` steps and
the profiler's table printed (both print Taichi's table: per kernel the count and total / mean
time; on the CPU each launch timed alone on the host).

    PYTHONPATH=$PWD:$PWD/spirad/compat/quadrants_shim:$PWD/benchmarks \\
        GS_ENABLE_NDARRAY=1 python benchmarks/genesis_kernel_profile.py box --n-envs 256
    PYTHONPATH=$PWD/benchmarks GS_ENABLE_NDARRAY=1 /work/venv-genesis/bin/python \\
        benchmarks/genesis_kernel_profile.py box --n-envs 256          # Quadrants
"""
from __future__ import annotations

import argparse
import time


import compile_knobs
from genesis_scene import add_init_keywords, built_stepping_scene


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scene")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--n-envs", type=int, default=0)
    ap.add_argument("--qd-init", nargs="*", metavar="KEY=JSON", default=[],
                    help="more keywords for Genesis' qd.init, e.g. check_bounds=false (spirad: "
                    "drops its default bounds checks)")
    compile_knobs.add_arguments(ap)
    a = ap.parse_args()
    import genesis as gs
    import quadrants as qd
    if "spirad" in str(getattr(qd, "__file__", "")):
        compile_knobs.apply(a)
    add_init_keywords(qd, ["kernel_profiler=true"] + a.qd_init)
    gs.init(backend=gs.cpu, logging_level="warning", precision="32", seed=0)
    scene = built_stepping_scene(gs, qd, a.scene, a.n_envs)
    for _ in range(a.warm):
        scene.step()
    qd.profiler.clear_kernel_profiler_info()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        scene.step()
    print(f"{a.scene} n_envs {a.n_envs} ndarray {gs.use_ndarray} {' '.join(a.qd_init)}: "
          f"{1e3 * (time.perf_counter() - t0) / a.steps:.3f} ms per step (profiled)")
    qd.profiler.print_kernel_profiler_info()


if __name__ == "__main__":
    main()
