"""Dev harness (not run in CI): the DiffTaichi table of docs/coming_from_taichi.md.

    python scripts/difftaichi_table.py --examples DIR --taichi-python PY \
        [--programs wave,diffmpm] [--archs cpu,vulkan] [--iters 3] [--out DIR] [--timeout S]

Runs each program of DiffTaichi's `examples/` (DIR: the files extracted from
taichi-dev/difftaichi, unchanged) with `scripts/difftaichi_run.py` under spirad and under Taichi
(PY: a Python with Taichi 1.7.4), one after the other per program and arch, and prints a
markdown row per (program, arch): iterations, the largest relative difference of the losses,
spirad / Taichi time with compile included (from the start of the process to the end of the
last iteration both ran) and per iteration with compile excluded (the mean over the iterations
after the first), as wall time and as CPU time of all threads (the fair measure on a shared
machine). Results are kept as JSON in --out, and a program whose JSON
is there already is not run again (delete it to re-run).

Both sides run with Python bytecode caching on (`PYTHONDONTWRITEBYTECODE` dropped) after
spirad's packages are byte-compiled once (`prepare_bytecode`): an installed package ships its
.pyc files, as Taichi's does here, so compiling spirad's ~170 modules from source (~1.7 s of CPU)
is not part of what the table calls compile time.

Taichi 1.7.4's vulkan backend needs `TI_DEFAULT_GPU_BLOCK_DIM=1024` in the environment on
lavapipe for `wave`, `smoke_taichi` and `diffmpm_simple` (its dispatches otherwise pass
maxComputeWorkGroupCount; docs/coming_from_taichi.md): set it for those vulkan rows.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

PACKAGES = ("spirad", "kernel_ir", "passes", "sizer", "spirv_codegen", "gfx_runtime", "llvm_codegen",
            "shaders")  # pyproject.toml's packages
WARM = "import numpy, cv2, matplotlib.pyplot"  # what the examples and the harness import

PROGRAMS = ["mass_spring", "mass_spring_simple", "rigid_body", "billiards", "electric",
            "diffmpm", "diffmpm_simple", "diffmpm3d", "smoke_taichi", "wave"]
ITERS = {"diffmpm3d": 2}  # its first iteration alone takes minutes
ARGS = {"mass_spring": ["0", "train"], "rigid_body": ["0", "train"]}  # their command lines
# harness options per program (difftaichi_run.py): diffmpm3d draws its weights with ti.randn,
# whose stream differs between Taichi and spirad: both sides get the same seeded weights
HARNESS = {"diffmpm3d": ["--set-weights", "weights:0.01"]}


def run(impl, python, prog, arch, iters, args, out, timeout):
    path = os.path.join(out, f"{prog}_{arch}_{impl}.json")
    if os.path.exists(path):
        return json.load(open(path))
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: .pyc kept (prepare_bytecode)
    if impl == "spirad":
        env["PYTHONPATH"] = os.path.dirname(here)
        cache = os.path.join(out, f"cache_{prog}_{arch}")
        shutil.rmtree(cache, ignore_errors=True)  # an empty offline cache: compile counted
        env["SPIRAD_CACHE_DIR"] = cache
    cmd = [python, os.path.join(here, "difftaichi_run.py"), "--impl", impl, "--arch", arch,
           "--iters", str(iters), *HARNESS.get(prog, []), "--out", path,
           "--workdir", os.path.join(out, f"w_{prog}_{impl}"),
           os.path.join(args.examples, prog + ".py")] + ARGS.get(prog, [])
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        log = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        log = f"timeout after {timeout} s\n{e.stdout or ''}"
    open(path[:-5] + ".log", "w").write(log)
    if not os.path.exists(path):
        json.dump({"status": "error: " + log.strip().splitlines()[-1][:300] if log.strip() else
                   "error", "losses": [], "times": [], "cpu": []}, open(path, "w"))
    return json.load(open(path))


def prepare_bytecode(taichi_python):
    """Byte-compile spirad's packages and warm both Pythons' bytecode of what the examples
    import, so that no timed run compiles Python source."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q"] +
                   [os.path.join(root, d) for d in PACKAGES], env=env, check=False)
    for python, mod in ((sys.executable, "import spirad"), (taichi_python, "import taichi")):
        subprocess.run([python, "-c", f"{WARM}; {mod}"], check=False, capture_output=True,
                       env=dict(env, PYTHONPATH=root) if mod == "import spirad" else env)


def per_iteration(v):
    return (v[-1] - v[0]) / (len(v) - 1) if len(v) > 1 else float("nan")


def row(prog, arch, s, t, t_cpu=None):
    """The table row; where Taichi fails on `arch` and spirad runs, spirad against Taichi's
    cpu run (`t_cpu`), said so in the row."""
    note = ""
    if s["losses"] and not t["losses"] and t_cpu is not None and t_cpu["losses"]:
        why = t["status"].split("]")[-1].strip(" :")[:60]  # Taichi's message, not its location
        note = f" (vs Taichi cpu: Taichi {arch} fails: {why})"
        t = t_cpu
    n = min(len(s["losses"]), len(t["losses"]))
    if not n:
        why = s["status"] if not s["losses"] else "Taichi: " + t["status"]
        return f"| {prog} | {arch} | — | {why[:160]} | | |"
    rel = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(s["losses"][:n], t["losses"][:n]))
    fmt = lambda r, k: f"{r[k][n - 1]:.1f} s"  # noqa: E731
    return (f"| {prog} | {arch} | {n} | {rel:.1e}{note} | {fmt(s, 'times')} / {fmt(t, 'times')} "
            f"(CPU {fmt(s, 'cpu')} / {fmt(t, 'cpu')}) | "
            f"{per_iteration(s['times'][:n]):.2f} s / {per_iteration(t['times'][:n]):.2f} s "
            f"(CPU {per_iteration(s['cpu'][:n]):.2f} s / {per_iteration(t['cpu'][:n]):.2f} s) |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--examples", required=True)
    p.add_argument("--taichi-python", required=True)
    p.add_argument("--programs", default=",".join(PROGRAMS))
    p.add_argument("--archs", default="cpu,vulkan")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--out", default="difftaichi_table")
    p.add_argument("--timeout", type=int, default=3600)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    prepare_bytecode(args.taichi_python)
    rows = []
    for prog in args.programs.split(","):
        for arch in args.archs.split(","):
            iters = min(args.iters, ITERS.get(prog, args.iters))
            s = run("spirad", sys.executable, prog, arch, iters, args, args.out, args.timeout)
            t = run("taichi", args.taichi_python, prog, arch, iters, args, args.out, args.timeout)
            cpu = os.path.join(args.out, f"{prog}_cpu_taichi.json")
            t_cpu = json.load(open(cpu)) if arch != "cpu" and os.path.exists(cpu) else None
            rows.append(row(prog, arch, s, t, t_cpu))
            print(rows[-1], flush=True)
    print("\n| program | arch | iterations | largest rel. diff (vs Taichi) | spirad / Taichi time, "
          "compile included | spirad / Taichi per iteration, compile excluded |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
