"""Genesis on spirad vs Quadrants: build a headless scene, step it, print positions and times.

    python benchmarks/genesis_scene.py box|franka [--steps 50] [--out result.json]

Runs with whatever `quadrants` module the interpreter imports: the real Quadrants (a venv with
`quadrants==1.3.3`) or spirad through its re-export module (`spirad/compat/quadrants_shim` on
PYTHONPATH; docs/quadrants.md). Array mode: Genesis' own switch, `GS_ENABLE_NDARRAY=0` for fields
(its default is ndarrays). Times: `scene.build()` (compilation included) and the mean of
`scene.step()` after the first (warm) step.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
from target_info import print_target  # benchmarks/target_info.py


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scene", choices=("box", "franka"))
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--out")
    a = ap.parse_args()
    print_target()
    import genesis as gs
    import quadrants as qd
    gs.init(backend=getattr(gs, a.backend), logging_level="warning", precision="32")
    scene = gs.Scene(show_viewer=False)
    scene.add_entity(gs.morphs.Plane())
    if a.scene == "box":
        ent = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.6), size=(0.2, 0.2, 0.2),
                                             euler=(10.0, 15.0, 0.0)))
    else:
        ent = scene.add_entity(gs.morphs.MJCF(file="xml/franka_emika_panda/panda.xml"))
    t0 = time.perf_counter()
    scene.build()
    build = time.perf_counter() - t0
    traj = []
    steps = []
    for k in range(a.steps):
        if a.scene == "franka" and k == 0:
            ent.control_dofs_position(np.array([0.5, -0.3, 0.2, -2.0, 0.1, 1.6, 0.7, 0.02, 0.02],
                                               np.float32))
        t = time.perf_counter()
        scene.step()
        steps.append(time.perf_counter() - t)
        q = ent.get_qpos() if a.scene == "franka" else ent.get_pos()
        traj.append(np.asarray(q.cpu() if hasattr(q, "cpu") else q, np.float64).ravel().tolist())
    res = {"scene": a.scene, "quadrants": getattr(qd, "__file__", "?"), "ndarray": bool(gs.use_ndarray),
           "build_s": build, "step_ms_mean": 1e3 * float(np.mean(steps[1:])),
           "step_ms_median": 1e3 * float(np.median(steps[1:])), "traj": traj}
    if "spirad" in str(res["quadrants"]):  # spirad's offline cache: programs loaded / compiled
        from spirad import offline_cache
        res["offline_cache"] = dict(offline_cache.stats)
    print(json.dumps({k: v for k, v in res.items() if k != "traj"}))
    print("final", traj[-1])
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
