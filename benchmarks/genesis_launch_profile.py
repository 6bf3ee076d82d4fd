"""Where a Genesis step spends its host time on spirad: launches per step, and host µs per launch
split by phase of the launch path (docs/performance.md).

    PYTHONPATH=$PWD:$PWD/spirad/compat/quadrants_shim:$PWD/benchmarks \\
        GS_ENABLE_NDARRAY=0 python benchmarks/genesis_launch_profile.py box [--steps 300]

Builds the scene of `genesis_scene.py`, warms it up, then (1) times `scene.step()` (median),
(2) counts launches per step (and per kernel), (3) records one step's launches and times each
phase of the launch path alone, in a loop over that launch's real arguments (best of 5 rounds of
400 calls: a loaded machine adds time, never removes it), summed over the step and divided by
its launches. Phases (host µs per launch):

  total       the whole launch, `kernel(*args)`
  keywords    keyword arguments bound to positions (`Kernel.bind`)
  repeat      the check that the arguments are the last launch's, reusing its plan
              (`Kernel._repeat`); when it fails, the three phases below run instead
  foreign     numpy / torch arguments and grad-less views (`Kernel._foreign_args`)
  flatten     dataclass arguments flattened into their ndarrays (`Kernel._expand`)
  bind        the launch plan: same arguments / new scalars / new plan (`Kernel._plan`)
  sizing      the adstack sizing-cache check (`sizing_cache.evaluate`; adjoints only)
  dispatch    the backend's launch minus the native calls (buffer table, task loop, status);
              for a repeated launch, the backend's record run minus the native calls (the
              interrupt check, the runtime's lock, the status word)
  native      the task functions (the runtime's `run`, or the direct ctypes calls of one-task
              serial programs and repeated launches: ctypes call + kernel body)
(total, dispatch and native are timed around the real launches of the steps instead: a kernel
rerun on its own output does other work than a step's)
  generations write generations bumped (`launch._bump`; since 2026-12-07 marked: one dict
              store per launch, counted when read, `runtime.write_marks`)
  rest        total minus the above (`__call__`, `_run`, lock, guard, materialize check)

With --graph the first step is captured in an `sd.Graph` and replayed: the step time, launches
replayed per step and how many of them the backend replayed itself.
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import json
import sys
import time

import numpy as np

from genesis_scene import built_stepping_scene


def _best_us(fn, reps=400, rounds=5) -> float:
    """µs per call of `fn`: the best of `rounds` rounds of `reps` calls (a loaded machine adds
    time, never removes it)."""
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter_ns()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter_ns() - t) / reps / 1e3)
    return best


def phases(launches, backend, K, L, sizing_cache) -> dict:
    """Host µs per launch by phase, summed over one step's `launches` [(kernel, args, kwargs)]:
    each phase's function called alone in a loop on the step's real arguments (idempotent
    calls: the same plan comes back; a dispatch reruns the kernel)."""
    out = collections.Counter()
    for k, args, kwargs in launches:
        a1 = k.bind(args, kwargs)
        out["keywords"] += _best_us(lambda: k.bind(args, kwargs)) if kwargs else 0.0
        repeat = getattr(k, "_repeat", None)  # (absent before 2026-12-06: compare runs)
        p = None if repeat is None else repeat(a1, K.FORWARD)
        if p is not None:  # the last launch's arguments again: no conversion, flattening, plan
            out["repeat"] += _best_us(lambda: k._repeat(a1, K.FORWARD))
        else:
            a2, copies = k._foreign_args(a1)
            out["foreign"] += _best_us(lambda: k._foreign_args(a1))
            a3 = k._expand(a2) if k._has_structs else a2
            out["flatten"] += _best_us(lambda: k._expand(a2)) if k._has_structs else 0.0
            p = k._plan(a3, K.FORWARD)
            out["bind"] += _best_us(lambda: k._plan(a3, K.FORWARD))
        c = p.compiled
        if c.sizing is not None:
            out["sizing"] += _best_us(lambda: sizing_cache.evaluate(c.sizing, p.args,
                                                                    measure=L.measure))
        out["generations"] += _best_us(lambda: L._bump(p))
    n = len(launches)
    return {ph: round(v / n, 2) for ph, v in out.items()}


def _closure_cells(fn) -> dict:
    return dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))


def _wrap_records(kernels, timing) -> list:
    """Since 2026-12-07 (second change) a repeated launch runs closures: `launch.eager_entry`'s
    entry calls the backend's `run`, which calls the task functions. Their closure cells are
    swapped for timed wrappers (`dispatch`: the backend's run; `native`: the ctypes calls);
    returns what restores them."""
    undo = []
    for k in kernels:
        f = getattr(k, "_fast", None)
        if f is None or len(f) < 4 or f[2] is None:
            continue
        cell = _closure_cells(f[2]).get("run")
        if cell is None:
            continue
        run = cell.cell_contents
        inner = _closure_cells(run)
        if "fn" in inner:  # one task: one call
            undo.append((inner["fn"], inner["fn"].cell_contents))
            inner["fn"].cell_contents = timing("native", inner["fn"].cell_contents)
        else:
            undo.append((inner["calls"], inner["calls"].cell_contents))
            inner["calls"].cell_contents = tuple((timing("native", c[0]),) + tuple(c[1:])
                                                 for c in inner["calls"].cell_contents)
        undo.append((cell, run))
        cell.cell_contents = timing("dispatch", run)
    return undo


def _timed_eager_run(backend, timing):
    """Before that, the backend's `eager_run(entry)`: the same work, its task calls timed."""
    import spirad.backends.cpu as C

    def eager_run(self, entry):
        program, calls, bufs, addr, (_, argbuf), checked = entry
        for fn, b, e in calls:
            if self.rt.cancelled():
                return
            with self.rt.calls_lock():
                timing("native", fn)(bufs, addr, b, e, C._WORKER0)
            if checked and program.status_word.value:
                self._status(program, argbuf, None)
    return timing("dispatch", eager_run)


def timed_launches(step, steps, K, backend, kernels) -> dict:
    """µs per launch of the whole launch, of the backend's dispatch and of the native calls,
    timed around the real launches of `steps` steps (a kernel rerun on its own output would
    not do the work a step does): per step the sums, the median over steps, divided by the
    launches of a step. One perf_counter_ns pair per wrapped call; an inner wrapper's own cost
    lands in the outer phase (about 0.1 µs)."""
    acc = collections.Counter()
    clock = time.perf_counter_ns
    orig = (K.Kernel.__call__, type(backend).launch, backend.rt.run,
            getattr(type(backend), "eager_run", None))  # (absent before 2026-12-07, and after)

    def timing(name, fn):
        def wrapped(*a, **k):
            t0 = clock()
            try:
                return fn(*a, **k)
            finally:
                acc[name] += clock() - t0
                acc[name + "#"] += 1
        return wrapped
    K.Kernel.__call__ = timing("total", orig[0])
    type(backend).launch = timing("dispatch", orig[1])
    backend.rt.run = timing("native", orig[2])
    undo = []
    if orig[3] is not None:  # a repeated launch: the backend's record run (`eager_run`)
        type(backend).eager_run = _timed_eager_run(backend, timing)
    else:
        undo = _wrap_records(kernels, timing)
    per_step = []
    try:
        for _ in range(steps):
            acc.clear()
            step()
            per_step.append((acc["total"], acc["dispatch"] - acc["native"], acc["native"],
                             acc["total#"]))
    finally:
        K.Kernel.__call__, type(backend).launch = orig[:2]
        if orig[3] is not None:
            type(backend).eager_run = orig[3]
        for cell, value in undo:
            cell.cell_contents = value
        del backend.rt.run  # the instance attribute: the class's method again
    med = np.median(np.asarray(per_step, np.float64), axis=0)
    n = max(med[3], 1)
    return {"total": round(med[0] / n / 1e3, 2), "dispatch": round(med[1] / n / 1e3, 2),
            "native": round(med[2] / n / 1e3, 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scene", choices=("box", "franka"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--n-envs", type=int, default=0)
    ap.add_argument("--graph", action="store_true", help="capture one step in an sd.Graph and "
                    "replay it (genesis_scene.graph_step): step time and replayed launches")
    a = ap.parse_args()
    import genesis as gs
    import quadrants as qd
    if "spirad" not in str(getattr(qd, "__file__", "")):
        sys.exit("run with spirad's quadrants shim on PYTHONPATH")
    import spirad
    import importlib
    K = importlib.import_module("spirad.kernel")  # `spirad.kernel` is also the decorator
    L = importlib.import_module("spirad.runtime.launch")
    gs.init(backend=gs.cpu, logging_level="warning", precision="32", seed=0)
    scene = built_stepping_scene(gs, qd, a.scene, a.n_envs)
    step = scene.step
    if a.graph:
        from genesis_scene import graph_step
        step = graph_step(spirad, scene)
    for _ in range(20):
        step()

    def timed():
        ts = []
        for _ in range(a.steps):
            t0 = time.perf_counter_ns()
            step()
            ts.append(time.perf_counter_ns() - t0)
        return float(np.median(ts)) / 1e3

    step_us = timed()
    per_kernel = collections.Counter()
    orig_call = K.Kernel.__call__

    def counting(self, *args, **kwargs):  # one launch per call (no kernel here launches others)
        per_kernel[self.fn.__name__] += 1
        return orig_call(self, *args, **kwargs)
    K.Kernel.__call__ = counting
    try:
        for _ in range(a.steps):
            step()
    finally:
        K.Kernel.__call__ = orig_call
    launches = sum(per_kernel.values()) / a.steps
    if a.graph:  # replays: how many launches, how many of them in the backend's own replay
        G = importlib.import_module("spirad.launch_graph")
        r0, n0 = G.stats.replayed_launches, G.stats.native_launches
        for _ in range(a.steps):
            step()
        print(json.dumps({"scene": a.scene, "ndarray": bool(gs.use_ndarray), "n_envs": a.n_envs,
                          "graph": True, "step_us_median": round(step_us, 1),
                          "replayed_launches_per_step": (G.stats.replayed_launches - r0) / a.steps,
                          "of_them_native": (G.stats.native_launches - n0) / a.steps}))
        return
    from spirad.runtime import state as S
    recorded = []
    orig_call = K.Kernel.__call__

    def recording(self, *args, **kwargs):
        recorded.append((self, args, kwargs))
        return orig_call(self, *args, **kwargs)
    K.Kernel.__call__ = recording
    try:
        step()
    finally:
        K.Kernel.__call__ = orig_call
    rows = phases(recorded, S.backend(), K, L, L.sizing_cache)
    rows.update(timed_launches(step, a.steps, K, S.backend(), {k for k, _, _ in recorded}))
    rows["rest"] = round(rows["total"] - sum(v for ph, v in rows.items() if ph != "total"), 2)
    res = {"scene": a.scene, "ndarray": bool(gs.use_ndarray), "n_envs": a.n_envs,
           "graph": a.graph, "step_us_median": round(step_us, 1),
           "launches_per_step": launches,
           "kernels": dict(per_kernel.most_common()),
           "us_per_launch_by_phase": rows,
           "spirad_share_of_step": round(rows["total"] * len(recorded) / step_us, 2)}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
