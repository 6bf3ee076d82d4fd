"""Genesis scene builds on spirad and Quadrants side by side: cold (an empty offline cache) and
warm (the same cache again), each system in its own processes, alternating by round.

    python benchmarks/genesis_build_compare.py [--rounds 1] [--scenes box franka]
        [--modes field ndarray] [--systems quadrants spirad [NAME@DIR ...]] [--n-envs N]

Each (scene, array mode) runs, per system, `genesis_scene.py SCENE --steps 2` twice with a
fresh private cache directory (SPIRAD_CACHE_DIR, Quadrants' QD_OFFLINE_CACHE_FILE_PATH): the
first run is the cold build, the second the warm one; nobody else's cache is read or cleared.
Round 2 runs the systems in reverse order (`paired.alternate`'s rule). A system `NAME@DIR` is
another spirad checkout (e.g. `before@/tmp/before`, an export of main before a change). Prints, per run, the load average before it, `scene.build()` wall time, its CPU time
(all threads; less sensitive to the load than the wall time) and the first step's time (the
kernels a step launches first compile there), each with its CPU time, then a table of medians
over rounds. On a shared machine the wall times follow the load (a process gets its share of the
cores: 2 of load 10 is a fifth), so the CPU times are the comparison that holds.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_one(py, root, scene, ndarray, cache, timeout, n_envs=0):
    """One build (`root`: a spirad checkout, None: Quadrants) with cache dir `cache`."""
    env = dict(os.environ, GS_ENABLE_NDARRAY="1" if ndarray else "0")
    env.pop("PYTHONPATH", None)
    if root is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [root, os.path.join(root, "spirad", "compat", "quadrants_shim"), HERE])
        env["SPIRAD_CACHE_DIR"] = cache
        env.pop("SPIRAD_OFFLINE_CACHE", None)
    else:
        env["PYTHONPATH"] = HERE
        env["QD_OFFLINE_CACHE_FILE_PATH"] = cache
    out = os.path.join(cache, "result.json")
    load = os.getloadavg()[0]
    r = subprocess.run([py, os.path.join(HERE, "genesis_scene.py"), scene, "--steps", "2",
                        "--n-envs", str(n_envs), "--out", out], env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit(f"{root or 'quadrants'} {scene} ndarray={ndarray} failed:\n"
                         f"{r.stderr[-3000:]}")
    with open(out) as f:
        res = json.load(f)
    os.remove(out)
    return {"load": load, "build_s": res["build_s"], "build_cpu_s": res.get("build_cpu_s"),
            "first_step_s": res.get("first_step_s"), "first_step_cpu_s": res.get("first_step_cpu_s"),
            "pos": res["positions"][max(res["positions"], key=int)]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--scenes", nargs="+", default=["box", "franka"])
    ap.add_argument("--modes", nargs="+", choices=("field", "ndarray"),
                    default=["field", "ndarray"])
    ap.add_argument("--systems", nargs="+", default=["quadrants", "spirad"],
                    help="quadrants, spirad (this checkout) and NAME@DIR (another checkout)")
    ap.add_argument("--python", default="/work/venv-genesis/bin/python")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out", help="write every run as JSON")
    ap.add_argument("--n-envs", type=int, default=0, help="batched environments (0: one, "
                    "unbatched; spirad runs Genesis' heaviest environment loop in SIMD lanes "
                    "from 16, which its cold build pays for)")
    a = ap.parse_args()
    roots = {s: (None if s == "quadrants" else ROOT if s == "spirad" else s.split("@", 1)[1])
             for s in a.systems}
    runs = {}
    for r in range(a.rounds):
        for scene in a.scenes:
            for mode in a.modes:
                for system in (a.systems if r % 2 == 0 else a.systems[::-1]):
                    cache = tempfile.mkdtemp(prefix="genesis-build-")
                    try:
                        for kind in ("cold", "warm"):
                            res = run_one(a.python, roots[system], scene, mode == "ndarray",
                                          cache, a.timeout, a.n_envs)
                            runs.setdefault((scene, mode, system, kind), []).append(res)
                            print(f"round {r + 1} {scene} {mode} {system} {kind}: build "
                                  f"{res['build_s']:.1f} s (CPU {res['build_cpu_s']:.1f} s), "
                                  f"first step {res['first_step_s']:.1f} s (CPU "
                                  f"{res['first_step_cpu_s']:.1f} s), load {res['load']:.1f}",
                                  flush=True)
                    finally:
                        shutil.rmtree(cache, ignore_errors=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({" ".join(k): v for k, v in runs.items()}, f)
    med = lambda k, f: statistics.median(x[f] for x in runs[k])  # noqa: E731
    print(f"\nmedians over {a.rounds} round(s), n_envs {a.n_envs}: build + first step, wall s "
          f"(CPU s) [load]")
    print("| scene, array mode | " + " | ".join(f"{s} {k}" for s in a.systems
                                               for k in ("cold", "warm")) + " |")
    print("|---|" + "---|" * (2 * len(a.systems)))
    for scene in a.scenes:
        for mode in a.modes:
            cells = []
            for s in a.systems:
                for k in ("cold", "warm"):
                    key = (scene, mode, s, k)
                    cells.append(f"{med(key, 'build_s'):.1f} + {med(key, 'first_step_s'):.1f} "
                                 f"({med(key, 'build_cpu_s'):.1f} + "
                                 f"{med(key, 'first_step_cpu_s'):.1f}) [{med(key, 'load'):.1f}]")
            print(f"| {scene}, {mode} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
