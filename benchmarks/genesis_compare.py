"""Genesis step times on spirad (eager and with `--graph`) and Quadrants, side by side: every
(scene, array mode) run by each in turn, several rounds, in separate processes.

    python benchmarks/genesis_compare.py [--rounds 3] [--steps 300] [--scenes box franka]
        [--quadrants-python /work/venv-genesis/bin/python] [--n-envs 0] [--first-round 1]
        [--systems quadrants spirad "spirad --graph" "spirad --independent-loops"] [--threads 2]

The order of the systems alternates by round (round 2 runs them backwards; `paired.alternate`'s
rule), so a load that drifts within a round weighs on both sides. Prints per round the load
average, the load at each run, and each run's median step, then per (scene, array mode)
the median over rounds, spirad / Quadrants ratios, and the largest position difference of each
spirad run against Quadrants' (every step of the rigid scenes). Needs a Python with
genesis-world and Quadrants; spirad runs in it through its `quadrants` shim.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SYSTEMS = ("quadrants", "spirad", "spirad --graph")
PARALLEL = "spirad --independent-loops"  # SPIRAD_INDEPENDENT_LOOPS=1 (passes/independent_loops)


def run_one(py, system, scene, ndarray, a, out):
    env = dict(os.environ, GS_ENABLE_NDARRAY="1" if ndarray else "0")
    env.pop("PYTHONPATH", None)
    env.pop("SPIRAD_INDEPENDENT_LOOPS", None)
    env.pop("QD_NUM_THREADS", None)
    if a.threads:  # Genesis' own knob; without it Genesis runs both systems on one CPU thread
        env["QD_NUM_THREADS"] = str(a.threads)
    if system == PARALLEL:
        env["SPIRAD_INDEPENDENT_LOOPS"] = "1"
    if system.startswith("spirad"):
        env["PYTHONPATH"] = os.pathsep.join([ROOT, os.path.join(ROOT, "spirad", "compat",
                                                                "quadrants_shim"), HERE])
    else:
        env["PYTHONPATH"] = HERE
    cmd = [py, os.path.join(HERE, "genesis_scene.py"), scene, "--steps", str(a.steps),
           "--n-envs", str(a.n_envs), "--out", out] + (["--graph"] if "graph" in system else []) + \
        (["--build-id", a.build_id] if a.build_id and system.startswith("spirad") else [])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       timeout=a.timeout)
    if r.returncode != 0:
        raise SystemExit(f"{system} {scene} ndarray={ndarray} failed:\n{r.stderr[-3000:]}")
    with open(out) as f:
        return json.load(f)


def max_diff(x, y):
    import numpy as np
    n = min(len(x["traj"]), len(y["traj"]))
    return float(np.max(np.abs(np.asarray(x["traj"][:n]) - np.asarray(y["traj"][:n]))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--n-envs", type=int, default=0)
    ap.add_argument("--scenes", nargs="+", default=["box", "franka"])
    ap.add_argument("--modes", nargs="+", choices=("field", "ndarray"),
                    default=["field", "ndarray"], help="Genesis' array modes to run")
    ap.add_argument("--systems", nargs="+", choices=SYSTEMS + (PARALLEL,),
                    default=list(SYSTEMS),
                    help="what runs (Quadrants first: the others are compared with it); "
                    f"'{PARALLEL}': spirad with SPIRAD_INDEPENDENT_LOOPS=1")
    ap.add_argument("--first-round", type=int, default=1, help="number the rounds from here "
                    "(the order alternates by round number: a run continuing another's rounds)")
    ap.add_argument("--threads", type=int, default=0,
                    help="QD_NUM_THREADS for every run: Genesis' CPU thread count, which it "
                    "otherwise sets to 1 for both systems (`cpu_max_num_threads=1`: no loop "
                    "is split over threads, passes/independent_loops' included)")
    ap.add_argument("--build-id", help="spirad's runs: genesis_scene.py --build-id (after an "
                    "edit that changes no compiled code)")
    ap.add_argument("--quadrants-python", default="/work/venv-genesis/bin/python")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run (a cold "
                    "offline cache compiles every kernel in the first run)")
    a = ap.parse_args()
    modes = [m == "ndarray" for m in a.modes]
    systems = tuple(a.systems)
    if systems[0] != "quadrants":
        raise SystemExit("--systems: quadrants first (the others are compared with it)")
    times, diffs, loads = {}, {}, []
    tmp = tempfile.mkdtemp()
    for r in range(a.first_round - 1, a.first_round - 1 + a.rounds):
        loads.append(os.getloadavg()[0])
        print(f"round {r + 1}: load {loads[-1]:.2f}", flush=True)
        for scene in a.scenes:
            for ndarray in modes:
                res = {}
                for system in (systems if r % 2 == 0 else systems[::-1]):
                    out = os.path.join(tmp, f"{scene}{int(ndarray)}{system.replace(' ', '')}.json")
                    res[system] = run_one(a.quadrants_python, system, scene, ndarray, a, out)
                    times.setdefault((scene, ndarray, system), []).append(
                        res[system]["step_ms_median"])
                    loads.append(os.getloadavg()[0])
                    print(f"  {scene} {'ndarray' if ndarray else 'field'} {system}: "
                          f"{res[system]['step_ms_median']:.4f} ms (load {loads[-1]:.1f}, build "
                          f"{res[system]['build_s']:.1f} s)", flush=True)
                for system in systems[1:]:
                    d = max_diff(res[system], res["quadrants"])
                    diffs[(scene, ndarray, system)] = max(diffs.get((scene, ndarray, system), 0), d)
                if "spirad --graph" in res and "spirad" in res:  # replayed against eager
                    d = max_diff(res["spirad"], res["spirad --graph"])
                    diffs[(scene, ndarray, "graph-eager")] = max(
                        diffs.get((scene, ndarray, "graph-eager"), 0), d)
    print(f"\nload average over rounds: {min(loads):.2f} to {max(loads):.2f}; medians over "
          f"{a.rounds} rounds, {a.steps} steps, n_envs {a.n_envs}, QD_NUM_THREADS "
          f"{a.threads or 'unset (1)'}")
    others = systems[1:]
    print("| scene, array mode | Quadrants | " + " | ".join(f"{s} | ratio" for s in others) +
          " | largest position difference vs Quadrants (" + " / ".join(others) + ")" +
          (" | graph vs eager |" if "spirad --graph" in others and "spirad" in others else " |"))
    print("|---|---|" + "---|---|" * len(others) + "---|" +
          ("---|" if "spirad --graph" in others and "spirad" in others else ""))
    for scene in a.scenes:
        for ndarray in modes:
            q = statistics.median(times[(scene, ndarray, "quadrants")])
            row = f"| {scene}, {'ndarray' if ndarray else 'field'} | {q:.3f} ms | "
            for s in others:
                t = statistics.median(times[(scene, ndarray, s)])
                row += f"{t:.3f} ms | {t / q:.2f} | "
            row += " / ".join(f"{diffs[(scene, ndarray, s)]:.1e}" for s in others) + " |"
            if (scene, ndarray, "graph-eager") in diffs:
                row += f" {diffs[(scene, ndarray, 'graph-eager')]:.1e} |"
            print(row)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
