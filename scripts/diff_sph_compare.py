"""Dev harness (not run in CI): Taichi's `diff_sph` example (python/taichi/examples/autodiff/diff_sph)
stepped by its own kernels under Taichi or spirad, its state saved for comparison.

    python scripts/diff_sph_compare.py --impl spirad|taichi --arch cpu|metal|vulkan \
        --mode infer|train [--frames 10] [--steps 6] --out state.npz path/to/diff_sph.py
    python scripts/diff_sph_compare.py --compare a.npz b.npz

Why a driver and not the example itself: its interactive mode loops `while window.running` in a
GGUI window, which Taichi opens only where there is a display, and its training mode runs 7
epochs of 28 batches of 127 steps over 2055 particles (hours on a CPU). The driver imports the
example unchanged (its module code builds the fields, networks and kernels; `main()` is not
called) and runs the bodies of `main()`'s two loops with the example's own kernels:
- infer: BATCH_SIZE 1, the pretrained networks, `--frames` frames of the interactive loop (4
  substeps each), `pos_vis_buffer` (every particle's position) saved after each frame;
- train: BATCH_SIZE 16, the first training batch (seeded as the example seeds it), `--steps`
  steps under `ti.ad.Tape` (the example runs 128), from the same seeded initial weights on both
  sides (the example draws them with `ti.random`, whose stream differs), the loss and the gradients of both layers'
  weights and biases saved, then `optimizer.step()` and the weights after it.
Both sides run with bounds checks off (`check_bounds=False` on spirad, Taichi's default): the
example's `Linear._forward` writes `output[model, t, k, i]` for every hidden unit i, past the
layer's `n_output` columns (into the next time step's row, which the next step overwrites);
spirad's default check stops that launch with `SpiradOutOfBoundsError`. `--steps` stays under
118 so that no write falls past the end of `fc2.output` (Taichi would write into whatever field
follows it).
"""
import argparse
import functools
import os
import runpy
import sys
import time

import numpy as np


def _load(ns):
    if ns.impl == "spirad":
        from spirad.compat import run_as_taichi, taichi_alias
        taichi_alias.install()
        run_as_taichi.force_arch(ns.arch)
        run_as_taichi.force_init_keywords({"check_bounds": False})
        import spirad as ti
    else:
        import taichi as ti
        init = ti.init

        @functools.wraps(init)
        def forced(_a=None, **kw):
            kw.pop("arch", None)
            kw["offline_cache"] = False
            return init(arch=getattr(ti, ns.arch), **kw)
        ti.init = forced
    sys.argv = [ns.script] + (["--train"] if ns.mode == "train" else [])
    sys.path.insert(0, os.path.dirname(os.path.abspath(ns.script)))
    return ti, runpy.run_path(ns.script, run_name="diff_sph")


def infer(ti, g, frames: int) -> dict:
    """main()'s interactive loop without the window: target at (0.25, 0.5, 0.25)."""
    g["initialize_fluid_particle"](0, g["F_pos"], g["N_fluid"])
    tc = g["target_centers"]
    tc[0][0], tc[0][1], tc[0][2] = 0.25, 0.50, 0.25
    out = {}
    substeps = g["substeps"]
    for f in range(frames):
        g["fill_input_states"](0)
        g["initialize_target_particle"](0, g["F_pos"], g["N_target"], 0)
        g["fc1"].clear()
        g["fc2"].clear()
        for i in range(1, substeps):
            for name in ("initialize_density", "update_density", "update_pressure"):
                g[name](i - 1)
            g["fc1"].forward(i - 1, g["input_states"])
            g["fc2"].forward(i - 1, g["fc1"].output)
            for name in ("controller_output", "apply_force", "update_force"):
                g[name](i - 1)
            g["advance"](i)
            g["boundary_handle"](i)
        g["copy_to_vis"](substeps - 1, 0)
        g["copy_back"](substeps - 1)
        out[f"pos_{f}"] = g["pos_vis_buffer"].to_numpy()
    return out


def train(ti, g, steps: int, perturb: str = "") -> dict:
    """The first batch of main()'s training loop, `steps` steps under the Tape."""
    if not 2 <= steps <= 118:
        raise SystemExit("--steps must be in 2..118 (see the module docstring)")
    g["fill_target_centers"](0, g["training_data"])
    g["fill_input_states"](0)
    g["initialize_fluid_particle"](0, g["F_pos"], g["N_fluid"])
    g["initialize_dists"]()
    g["initialize_target_particle"](0, g["F_pos"], g["N_target"], 0)
    fc1, fc2 = g["fc1"], g["fc2"]
    rng = np.random.RandomState(1)   # weights_init draws with ti.random: streams differ
    for layer in (fc1, fc2):
        w = layer.weights1
        q1 = np.sqrt(6 / layer.n_input) * 0.01
        w.from_numpy(((rng.random_sample(w.shape) * 2 - 1) * q1).astype(np.float32))
    if perturb:   # "fc2.bias1:0,31:0.01": a finite-difference probe of one parameter
        name, index, eps = perturb.split(":")
        layer, attr = name.split(".")
        w = getattr(g[layer], attr)
        idx = tuple(int(k) for k in index.split(","))
        w[idx] = w[idx] + float(eps)
    fc1.clear()
    fc2.clear()
    with ti.ad.Tape(loss=g["loss"]):
        for i in range(1, steps):
            for name in ("initialize_density", "update_density", "update_pressure"):
                g[name](i - 1)
            fc1.forward(i - 1, g["input_states"])
            fc2.forward(i - 1, fc1.output)
            for name in ("controller_output", "apply_force", "update_force"):
                g[name](i - 1)
            g["advance"](i)
            g["boundary_handle"](i)
            if i % g["substeps"] == 0:
                g["copy_to_output_buffer"](i, 0)
            g["compute_dist"](i)
        g["compute_loss"](g["steps"] - 1)
    out = {"loss": np.array(g["loss"][None])}
    for k, layer in enumerate((fc1, fc2), 1):
        for name, w in zip(("weights", "bias"), layer.parameters()):
            out[f"fc{k}_{name}_grad"] = w.grad.to_numpy()
    out["jet_force_grad"] = g["F_jet_force"].grad.to_numpy()
    g["optimizer"].step()
    for k, layer in enumerate((fc1, fc2), 1):
        for name, w in zip(("weights", "bias"), layer.parameters()):
            out[f"fc{k}_{name}_after_step"] = w.to_numpy()
    return out


def compare(a_path: str, b_path: str) -> None:
    a, b = np.load(a_path), np.load(b_path)
    worst = 0.0
    for k in sorted(a.files):
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        d = float(np.max(np.abs(x - y))) if x.size else 0.0
        scale = float(np.max(np.abs(y))) if y.size else 0.0
        rel = d / scale if scale else d
        worst = max(worst, rel)
        print(f"{k:28s} max |diff| {d:.3e}  (largest |value| {scale:.3e}, relative {rel:.2e})")
    print(f"largest relative difference: {worst:.2e}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--impl", choices=["taichi", "spirad"])
    p.add_argument("--arch", default="cpu")
    p.add_argument("--mode", choices=["infer", "train"], default="infer")
    p.add_argument("--frames", type=int, default=10)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--perturb", default="", metavar="LAYER.PARAM:I,J:EPS",
                   help="train: add EPS to one parameter first (a finite-difference probe of "
                        "its gradient, e.g. fc2.bias1:0,31:0.01)")
    p.add_argument("--out")
    p.add_argument("--compare", nargs=2, metavar="NPZ")
    p.add_argument("script", nargs="?")
    ns = p.parse_args()
    if ns.compare:
        return compare(*ns.compare)
    if not (ns.impl and ns.out and ns.script):
        p.error("--impl, --out and the script are needed (or --compare A B)")
    os.environ.setdefault("MPLBACKEND", "Agg")
    ns.script = os.path.abspath(ns.script)
    t0 = time.perf_counter()
    ti, g = _load(ns)
    t1 = time.perf_counter()
    out = infer(ti, g, ns.frames) if ns.mode == "infer" else train(ti, g, ns.steps, ns.perturb)
    t2 = time.perf_counter()
    np.savez(ns.out, **out)
    print(f"diff_sph {ns.mode} on {ns.impl} {ns.arch}: setup {t1 - t0:.1f} s, run {t2 - t1:.1f} s"
          + (f", loss {float(out['loss']):.9g}" if "loss" in out else ""))


if __name__ == "__main__":
    main()
