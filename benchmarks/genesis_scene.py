"""Genesis on spirad vs Quadrants: build a headless scene, step it, record positions and times.

    python benchmarks/genesis_scene.py SCENE [--steps 50] [--n-envs N] [--out result.json]
    python benchmarks/genesis_scene.py --compare spirad.json quadrants.json

Scenes (each our own small headless scene, one per Genesis solver family):
  box, franka   rigid: plane + a falling box / plane + Franka under position control
  mpm           an MPM elastic cube dropped on the MPM domain's floor
  sph           a block of SPH liquid falling in a box-shaped domain
  pbd           a block of PBD liquid (density and viscosity constraints)
  fem           an FEM elastic cube (explicit solver) falling on the FEM floor
  sf            stable fluid: one smoke jet (a `@qd.data_oriented` class, as Genesis' smoke
                example does) injecting density and velocity into a 32^3 grid
  coupled       rigid + SPH: a box falling into SPH liquid (Genesis' legacy coupler)

Runs with whatever `quadrants` module the interpreter imports: the real Quadrants (a venv with
`quadrants==1.3.3`) or spirad through its re-export module (`spirad/compat/quadrants_shim` on
PYTHONPATH; docs/quadrants.md). Array mode: Genesis' own switch, `GS_ENABLE_NDARRAY=0` for fields
(its default is ndarrays; the particle solvers use fields either way). Times: `scene.build()`
(compilation included) and the mean / median of `scene.step()` after the first (warm) step.
Positions of every env (rigid: the box's position or Franka's joint positions; particle solvers:
every particle; FEM: every vertex; SF: the smoke density of every cell) are recorded every
`--record-every` steps and after the last; `--compare` prints the largest absolute difference.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

SCENES = ("box", "franka", "mpm", "sph", "pbd", "fem", "sf", "coupled")
FRANKA_TARGET = [0.5, -0.3, 0.2, -2.0, 0.1, 1.6, 0.7, 0.02, 0.02]


def _numpy(x):
    return np.asarray(x.cpu() if hasattr(x, "cpu") else x, np.float64)


def _smoke_jet(qd, gs):
    """A fixed smoke jet for the stable-fluid solver (the interface Genesis' SF solver calls:
    `get_factor` = how much of a cell the jet fills, `get_tan_dir` = the impulse direction)."""

    @qd.data_oriented
    class Jet:
        def __init__(self, centre, radius):
            self.centre = qd.Vector(centre)
            self.radius = radius

        @qd.func
        def get_tan_dir(self, t: float):
            return qd.Vector([qd.cos(t), 0.0, qd.sin(t)], dt=gs.qd_float)

        @qd.func
        def get_factor(self, i: int, j: int, k: int, dx: float, t: float):
            p = qd.Vector([i, j, k], dt=gs.qd_float) * dx
            factor = 0.0
            if (p - self.centre).norm(gs.EPS) < self.radius:
                factor = 1.0
            return factor

    return Jet(centre=[0.5, 0.5, 0.5], radius=0.1)


def built_stepping_scene(gs, qd, name, n_envs):
    """`build_scene`'s rigid scene built for `n_envs` environments (None: unbatched), with
    Franka's position target set as the step benchmarks drive it; returns the scene."""
    scene, ent, _ = build_scene(gs, qd, name)
    scene.build(**({"n_envs": n_envs} if n_envs else {}))
    if name == "franka":
        t = np.array(FRANKA_TARGET, np.float32)
        ent.control_dofs_position(np.tile(t, (n_envs, 1)) if n_envs else t)
    return scene


def build_scene(gs, qd, name):
    """The scene, and a function returning the positions to compare (an array per call)."""
    if name in ("box", "franka"):
        scene = gs.Scene(show_viewer=False)
        scene.add_entity(gs.morphs.Plane())
        if name == "box":
            ent = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.6), size=(0.2, 0.2, 0.2),
                                                 euler=(10.0, 15.0, 0.0)))
            return scene, ent, lambda: _numpy(ent.get_pos())
        ent = scene.add_entity(gs.morphs.MJCF(file="xml/franka_emika_panda/panda.xml"))
        return scene, ent, lambda: _numpy(ent.get_qpos())
    sim = gs.options.SimOptions(dt=2e-3, substeps=5)
    if name == "mpm":
        scene = gs.Scene(sim_options=sim, show_viewer=False, mpm_options=gs.options.MPMOptions(
            lower_bound=(-0.3, -0.3, 0.0), upper_bound=(0.3, 0.3, 0.6), grid_density=32))
        ent = scene.add_entity(material=gs.materials.MPM.Elastic(),
                               morph=gs.morphs.Box(pos=(0.0, 0.0, 0.25), size=(0.12, 0.12, 0.12),
                                                   euler=(10.0, 15.0, 0.0)))
    elif name == "sph":
        scene = gs.Scene(sim_options=sim, show_viewer=False, sph_options=gs.options.SPHOptions(
            lower_bound=(-0.3, -0.3, 0.0), upper_bound=(0.3, 0.3, 0.6), particle_size=0.02))
        ent = scene.add_entity(material=gs.materials.SPH.Liquid(sampler="regular"),
                               morph=gs.morphs.Box(pos=(0.0, 0.0, 0.2), size=(0.16, 0.16, 0.16)))
    elif name == "pbd":
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3), show_viewer=False,
                         pbd_options=gs.options.PBDOptions(
                             lower_bound=(0.0, 0.0, 0.0), upper_bound=(0.6, 0.6, 0.6),
                             particle_size=0.02, max_density_solver_iterations=10,
                             max_viscosity_solver_iterations=1))
        ent = scene.add_entity(material=gs.materials.PBD.Liquid(sampler="regular", rho=1.0,
                                                                density_relaxation=1.0,
                                                                viscosity_relaxation=0.0),
                               morph=gs.morphs.Box(lower=(0.2, 0.2, 0.1), upper=(0.36, 0.36, 0.3)))
    elif name == "fem":
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=5), show_viewer=False,
                         fem_options=gs.options.FEMOptions(floor_height=0.0))
        ent = scene.add_entity(material=gs.materials.FEM.Elastic(E=1e5, nu=0.4, rho=1000.0),
                               morph=gs.morphs.Box(pos=(0.0, 0.0, 0.2), size=(0.1, 0.1, 0.1),
                                                   euler=(10.0, 15.0, 0.0)))
        return scene, ent, lambda: _numpy(ent.get_state().pos)
    elif name == "sf":
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2), show_viewer=False,
                         sf_options=gs.options.SFOptions(res=32, solver_iters=50, decay=0.025))
        solver = scene.sim.sf_solver
        solver.set_jets([_smoke_jet(qd, gs)])
        return scene, None, lambda: _numpy(solver.grid.q.to_numpy())
    elif name == "coupled":
        scene = gs.Scene(sim_options=sim, show_viewer=False, sph_options=gs.options.SPHOptions(
            lower_bound=(-0.3, -0.3, 0.0), upper_bound=(0.3, 0.3, 0.8), particle_size=0.02))
        scene.add_entity(gs.morphs.Plane())
        ent = scene.add_entity(material=gs.materials.SPH.Liquid(sampler="regular"),
                               morph=gs.morphs.Box(pos=(0.0, 0.0, 0.1), size=(0.3, 0.3, 0.16)))
        cube = scene.add_entity(material=gs.materials.Rigid(needs_coup=True, coup_friction=0.0),
                                morph=gs.morphs.Box(pos=(0.0, 0.0, 0.45), size=(0.1, 0.1, 0.1),
                                                    euler=(30.0, 40.0, 0.0)))
        return scene, ent, lambda: np.concatenate([_numpy(ent.get_particles_pos()).reshape(-1),
                                                   _numpy(cube.get_pos()).reshape(-1)])
    else:
        raise ValueError(name)
    return scene, ent, lambda: _numpy(ent.get_particles_pos())


def add_init_keywords(qd, pairs):
    """Genesis unchanged: its `qd.init` call gets these KEY=JSON keywords on top of its own (e.g.
    Quadrants' `fast_math=false`: Genesis passes `fast_math=not debug`)."""
    if not pairs:
        return
    extra = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in pairs)}
    init = qd.init

    def init_with_extra(*args, **kwargs):
        return init(*args, **{**kwargs, **extra})
    qd.init = init_with_extra


def graph_step(sd, scene):
    """`scene.step` captured once in an `sd.Graph` (at the first call) and replayed after: only
    faithful where a step launches the same kernels with the same arguments every time and no
    host value decides what it launches (then the positions equal the eager run's: `--graph`
    records them, `--compare` checks)."""
    g = sd.Graph()

    def step():
        if g.launches == 0:
            with g.capture():
                scene.step()
        else:
            g.replay()
    return step


def run(a):
    import genesis as gs
    import quadrants as qd
    if "spirad" in str(getattr(qd, "__file__", "")):  # Quadrants' venv may not see spirad
        from target_info import print_target  # benchmarks/target_info.py
        print_target()
        from compile_knobs import use_build_id
        use_build_id(a.build_id)
    add_init_keywords(qd, a.qd_init)
    gs.init(backend=getattr(gs, a.backend), logging_level="warning", precision="32", seed=0,
            debug=a.debug)
    scene, ent, positions = build_scene(gs, qd, a.scene)
    t0, c0 = time.perf_counter(), time.process_time()
    scene.build(**({"n_envs": a.n_envs} if a.n_envs else {}))
    build = time.perf_counter() - t0
    build_cpu = time.process_time() - c0  # all threads: less sensitive to the load than build
    snaps, steps, traj = {}, [], []
    step = scene.step
    if a.graph:
        import spirad
        step = graph_step(spirad, scene)
    first_cpu = None
    for k in range(a.steps):
        if a.scene == "franka" and k == 0:
            target = np.array(FRANKA_TARGET, np.float32)
            ent.control_dofs_position(np.tile(target, (a.n_envs, 1)) if a.n_envs else target)
        t, c = time.perf_counter(), time.process_time()
        step()
        steps.append(time.perf_counter() - t)
        if first_cpu is None:
            first_cpu = time.process_time() - c
        if a.scene in ("box", "franka"):  # rigid: every step (the coordinator's check reads "traj")
            traj.append(positions().ravel().tolist())
        if (k + 1) % a.record_every == 0 or k + 1 == a.steps:
            snaps[str(k + 1)] = positions().astype(np.float32).ravel().tolist()
    res = {"scene": a.scene, "n_envs": a.n_envs, "quadrants": getattr(qd, "__file__", "?"),
           "qd_init": a.qd_init,
           "graph": a.graph,
           "ndarray": bool(gs.use_ndarray), "build_s": build, "build_cpu_s": build_cpu,
           "step_ms_mean": 1e3 * float(np.mean(steps[1:])),
           "step_ms_median": 1e3 * float(np.median(steps[1:])),
           "first_step_s": steps[0], "first_step_cpu_s": first_cpu,  # the kernels a step
           # launches first compile here
           "positions": snaps}
    if traj:
        res["traj"] = traj
    if "spirad" in str(res["quadrants"]):  # spirad's offline cache: programs loaded / compiled
        from spirad.compile import offline_cache
        res["offline_cache"] = dict(offline_cache.stats)
    last = np.asarray(snaps[str(a.steps)])
    print(json.dumps({k: v for k, v in res.items() if k not in ("positions", "traj")}))
    print("final: %d values, mean %.6g, first %s" % (last.size, last.mean(), last[:6].tolist()))
    if not np.isfinite(last).all():
        raise SystemExit("non-finite positions")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f)


def compare(path_a, path_b):
    """The largest absolute difference between two runs' positions, and their times."""
    a, b = (json.load(open(p)) for p in (path_a, path_b))
    keys = sorted(set(a["positions"]) & set(b["positions"]), key=int)
    if not keys:
        raise SystemExit("no common recorded step")
    diff = 0.0
    for k in keys:
        x, y = np.asarray(a["positions"][k]), np.asarray(b["positions"][k])
        if x.shape != y.shape:
            raise SystemExit(f"step {k}: {x.shape} values vs {y.shape}")
        diff = max(diff, float(np.max(np.abs(x - y))))
    if "traj" in a and "traj" in b:  # rigid scenes: every step
        n = min(len(a["traj"]), len(b["traj"]))
        diff = max(diff, float(np.max(np.abs(np.asarray(a["traj"][:n]) - np.asarray(b["traj"][:n])))))
    print(json.dumps({"scene": a["scene"], "n_envs": a.get("n_envs"), "ndarray": a["ndarray"],
                      "steps_compared": keys[-1], "values": len(a["positions"][keys[-1]]),
                      "max_abs_diff": diff,
                      "build_s": [round(a["build_s"], 2), round(b["build_s"], 2)],
                      "step_ms_median": [round(a["step_ms_median"], 3),
                                         round(b["step_ms_median"], 3)]}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scene", nargs="?", choices=SCENES)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--n-envs", type=int, default=0,
                    help="scene.build(n_envs=N); 0 (default) builds without the batch dimension")
    ap.add_argument("--record-every", type=int, default=10)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--debug", action="store_true", help="gs.init(debug=True): bounds checks "
                    "that name the source line (and Genesis' own checks)")
    ap.add_argument("--qd-init", nargs="*", metavar="KEY=JSON", default=[],
                    help="keywords added to Genesis' qd.init call, e.g. fast_math=false "
                    "cpu_max_num_threads=1 (values in JSON)")
    ap.add_argument("--graph", action="store_true", help="spirad only: capture the first step "
                    "in an sd.Graph and replay it (graph_step)")
    ap.add_argument("--out")
    ap.add_argument("--build-id", help="spirad: key the offline cache by this build id instead "
                    "of the sources' (`offline_cache.build_id()` printed before an edit that "
                    "changes no compiled code: the kernels load as compiled before it)")
    ap.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"))
    a = ap.parse_args()
    if a.compare:
        compare(*a.compare)
    elif a.scene:
        run(a)
    else:
        ap.error("a scene or --compare")


if __name__ == "__main__":
    main()
