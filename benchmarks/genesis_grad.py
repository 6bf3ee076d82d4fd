"""A Genesis differentiable run (after its examples/differentiable_push.py, without cameras and
with a short horizon) on spirad or Quadrants: an MPM elastic box pushed by a rigid stick, the loss
the squared distance of the box to a goal, gradients with respect to the stick's velocities and
the box's initial position and velocity. Prints the loss, the gradients and the times.

    python benchmarks/genesis_grad.py [--horizon 5] [--out grad.json]
"""
from __future__ import annotations

import argparse
import json
import os
import time
from target_info import print_target  # benchmarks/target_info.py


def main():
    # Genesis' rigid solver reads link poses its kernels also write, in elements other threads
    # could write as far as spirad can prove (Genesis' data keeps them apart): Quadrants'
    # behaviour, a warning instead of spirad's compile error (no effect on Quadrants)
    os.environ.setdefault("SPIRAD_AD_OVERWRITTEN_READS", "warn")
    ap = argparse.ArgumentParser()
    ap.add_argument("--horizon", type=int, default=5)
    ap.add_argument("--out")
    a = ap.parse_args()
    print_target()
    import torch
    import genesis as gs
    import quadrants as qd
    gs.init(backend=gs.cpu, precision="32", logging_level="warning")
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
    def tensor(x, grad=False):  # Genesis 1.4.5 has no gs.tensor: torch tensors on its device
        return torch.tensor(x, dtype=gs.tc_float, device=gs.device, requires_grad=grad)

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
    fwd = time.perf_counter() - t1
    t2 = time.perf_counter()
    loss.backward()
    bwd = time.perf_counter() - t2
    res = {"quadrants": qd.__file__, "build_s": build, "forward_s": fwd, "backward_s": bwd,
           "loss": float(loss), "grad_pos0": pos0.grad.tolist(), "grad_vel0": vel0.grad.tolist(),
           "grad_v": [v.grad.tolist() for v in v_list]}
    print(json.dumps(res))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
