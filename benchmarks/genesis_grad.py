"""Genesis' differentiable runs on spirad or Quadrants; prints the loss, the gradients and the times.

    python benchmarks/genesis_grad.py [--example push|rigid] [--horizon N] [--out grad.json]
    python benchmarks/genesis_grad.py --compare A.json B.json

push (after Genesis' examples/differentiable_push.py, without cameras and with a short horizon):
an MPM elastic box pushed by a rigid stick, the loss the squared distance of the box to a goal,
gradients with respect to the stick's velocities and the box's initial position and velocity.

rigid (test_differentiable_rigid of Genesis' tests/test_grad.py, one optimisation step, without
its use_contact_island=False, which 1.4.5 refuses): the rigid solver alone, a free box under
gravity (0, 0, -1), no collision and no constraint, `horizon` steps of dt 1e-2, the loss the L1
distance of its final position and quaternion to a goal, gradients with respect to its initial
position and quaternion (set through `set_pos` / `set_quat`). Its gradients are +-1 and 0 (the
box only falls); `--spin` also gives the box an initial velocity of all six dofs (a third leaf,
set through `set_dofs_velocity`) and a tilted initial quaternion, so the final pose depends
nonlinearly on the leaves: gradients through the solver's rotation integration.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from genesis_scene import add_init_keywords  # benchmarks/genesis_scene.py
from target_info import print_target  # benchmarks/target_info.py


def push(a, gs, torch, tensor):
    """The MPM box pushed by the stick: (build seconds, forward, loss, {name: leaf tensor})."""
    scene = gs.Scene(
        sim_options=gs.options.SimOptions(dt=2e-3, substeps=10, requires_grad=True),
        mpm_options=gs.options.MPMOptions(lower_bound=(0.0, -1.0, 0.0), upper_bound=(1.0, 1.0, 0.55)),
        show_viewer=False)
    scene.add_entity(gs.morphs.URDF(file="urdf/plane/plane.urdf", fixed=True))
    stick = scene.add_entity(material=gs.materials.Tool(friction=8.0),
                             morph=gs.morphs.Mesh(file="meshes/stirrer.obj", scale=0.6,
                                                  pos=(0.5, 0.5, 0.05), euler=(90.0, 0.0, 0.0)))
    box = scene.add_entity(material=gs.materials.MPM.Elastic(rho=500),
                           morph=gs.morphs.Box(lower=(0.2, 0.1, 0.05), upper=(0.4, 0.3, 0.15)))
    t0 = time.perf_counter()
    scene.build()
    build = time.perf_counter() - t0
    v_list = [tensor([[0.0, 1.0, 0.0]], True) for _ in range(a.horizon)]
    scene.reset()
    stick.set_position(tensor([[0.3, 0.1, 0.28]], True))
    pos0 = tensor([0.3, 0.3, 0.1], True)
    box.set_position(pos0)
    vel0 = tensor([0.0, -1.0, 0.0], True)
    box.set_velocity(vel0)
    t1 = time.perf_counter()
    for v in v_list:
        stick.set_velocity(vel=v)
        scene.step()
    goal = tensor([0.5, 0.8, 0.05])
    loss = torch.pow(box.get_state().pos - goal, 2).sum()
    return build, time.perf_counter() - t1, loss, {"pos0": pos0, "vel0": vel0, "v": v_list}


def rigid(a, gs, torch, tensor):
    """Genesis' rigid differentiable test, one step: (build seconds, forward, loss, leaves)."""
    scene = gs.Scene(
        sim_options=gs.options.SimOptions(dt=1e-2, substeps=1, requires_grad=True,
                                          gravity=(0, 0, -1)),
        rigid_options=gs.options.RigidOptions(
            enable_collision=False, enable_self_collision=False, enable_joint_limit=False,
            disable_constraint=True, use_hibernation=False),
        show_viewer=False)
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0), size=(0.1, 0.1, 0.2)))
    goal_pos = tensor([0.7, 1.0, 0.05])
    goal_quat = tensor([0.3, 0.2, 0.1, 0.9])
    goal_quat = goal_quat / torch.norm(goal_quat, dim=-1, keepdim=True)
    t0 = time.perf_counter()
    scene.build()
    build = time.perf_counter() - t0
    init_pos = tensor([0.3, 0.1, 0.28], True)
    init_quat = tensor([0.9, 0.1, -0.2, 0.3] if a.spin else [1.0, 0.0, 0.0, 0.0], True)
    leaves = {"pos0": init_pos, "quat0": init_quat}
    t1 = time.perf_counter()
    scene.reset()
    box.set_pos(init_pos)
    box.set_quat(init_quat)
    if a.spin:
        leaves["dofs_vel0"] = tensor([0.2, -0.1, 0.3, 1.5, -2.0, 0.7], True)
        box.set_dofs_velocity(leaves["dofs_vel0"])
    for _ in range(a.horizon):
        scene.step()
    state = box.get_state()
    loss = torch.abs(state.pos - goal_pos).sum() + torch.abs(state.quat - goal_quat).sum()
    return build, time.perf_counter() - t1, loss, leaves


def compare(path_a, path_b):
    """The loss and every gradient of two runs: the largest relative difference of one component
    (to the larger magnitude of the two) and of each gradient as a vector (to B's norm)."""
    import numpy as np
    a, b = (json.load(open(p)) for p in (path_a, path_b))
    out = {"example": a["example"], "loss": [a["loss"], b["loss"]],
           "loss_rel": abs(a["loss"] - b["loss"]) / abs(b["loss"])}
    for key in sorted(k for k in a if k.startswith("grad_")):
        x, y = np.asarray(a[key], np.float64).ravel(), np.asarray(b[key], np.float64).ravel()
        scale = np.maximum(np.maximum(np.abs(x), np.abs(y)), 1e-30)
        out[key] = {"component_rel": float(np.max(np.abs(x - y) / scale)),
                    "norm_rel": float(np.linalg.norm(x - y) / np.linalg.norm(y))}
    print(json.dumps(out))


def main():
    # Genesis' rigid solver reads link poses its kernels also write, in elements other threads
    # could write as far as spirad can prove (Genesis' data keeps them apart): Quadrants'
    # behaviour, a warning instead of spirad's compile error (no effect on Quadrants)
    os.environ.setdefault("SPIRAD_AD_OVERWRITTEN_READS", "warn")
    ap = argparse.ArgumentParser()
    ap.add_argument("--example", choices=("push", "rigid"), default="push")
    ap.add_argument("--horizon", type=int, help="steps (push: 5, rigid: 100, Genesis' test)")
    ap.add_argument("--spin", action="store_true", help="rigid: an initial velocity of all six "
                    "dofs (a leaf) and a tilted initial quaternion")
    ap.add_argument("--qd-init", nargs="*", metavar="KEY=JSON", default=[],
                    help="keywords added to Genesis' qd.init call (genesis_scene.py --qd-init)")
    ap.add_argument("--out")
    ap.add_argument("--precision", default="32", help="gs.init(precision=...): 64 for a reference")
    ap.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"))
    a = ap.parse_args()
    if a.compare:
        return compare(*a.compare)
    a.horizon = a.horizon or {"push": 5, "rigid": 100}[a.example]
    print_target()
    import torch
    import genesis as gs
    import quadrants as qd
    add_init_keywords(qd, a.qd_init)
    gs.init(backend=gs.cpu, precision=a.precision, logging_level="warning")

    def tensor(x, grad=False):  # Genesis 1.4.5 has no gs.tensor: torch tensors on its device
        return torch.tensor(x, dtype=gs.tc_float, device=gs.device, requires_grad=grad)

    build, fwd, loss, leaves = (push if a.example == "push" else rigid)(a, gs, torch, tensor)
    t2 = time.perf_counter()
    loss.backward()
    bwd = time.perf_counter() - t2
    res = {"example": a.example, "horizon": a.horizon, "spin": a.spin, "qd_init": a.qd_init, "precision": a.precision, "quadrants": qd.__file__, "build_s": build,
           "forward_s": fwd, "backward_s": bwd, "loss": float(loss.detach())}
    for name, leaf in leaves.items():
        res["grad_" + name] = ([v.grad.tolist() for v in leaf] if isinstance(leaf, list)
                               else leaf.grad.tolist())
    print(json.dumps(res))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
