"""Which of Genesis' serialised loops spirad runs in parallel on the CPU, and why the others
stay serial (passes/independent_loops): builds `genesis_scene.py`'s scene with the offline
cache off (every kernel compiled: several minutes), steps it, and prints per top-level
serialised loop its kernel, source line and the pass's decision.

    PYTHONPATH=$PWD:$PWD/spirad/compat/quadrants_shim:$PWD/benchmarks GS_ENABLE_NDARRAY=0 \\
        /work/venv-genesis/bin/python benchmarks/genesis_independent_loops.py box --n-envs 256
"""
from __future__ import annotations

import argparse
import collections
import os


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scene")
    ap.add_argument("--n-envs", type=int, default=256)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    os.environ["SPIRAD_OFFLINE_CACHE"] = "0"
    os.environ["SPIRAD_INDEPENDENT_LOOPS"] = "1"  # the pass runs only when switched on
    from spirad.compile import driver
    from passes.independent_loops import explain
    from spirad.backends.work_estimate import worth_splitting
    seen = collections.OrderedDict()
    parallelise = driver.parallelise

    def recording(k, worth=None, lanes=False, aliases=None):
        for loc, why in explain(k, worth_splitting, aliases):
            where = f"{os.path.basename(loc.filename)}:{loc.lineno}" if loc else "?"
            seen[(k.name, where)] = why
        return parallelise(k, worth, lanes, aliases)
    driver.parallelise = recording
    import genesis as gs
    import quadrants as qd
    from genesis_scene import built_stepping_scene
    gs.init(backend=gs.cpu, logging_level="warning", precision="32", seed=0)
    scene = built_stepping_scene(gs, qd, a.scene, a.n_envs)
    for _ in range(a.steps):
        scene.step()
    par = sum(why is None for why in seen.values())
    print(f"{a.scene} n_envs {a.n_envs} ndarray {gs.use_ndarray}: {len(seen)} serialised "
          f"top-level loops compiled, {par} parallel")
    print("| kernel | loop | decision |")
    print("|---|---|---|")
    for (name, where), why in seen.items():
        print(f"| {name} | {where} | {'parallel' if why is None else 'serial: ' + why} |")


if __name__ == "__main__":
    main()
