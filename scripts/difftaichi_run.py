"""Dev harness (not run in CI): one DiffTaichi example, unchanged, under Taichi or spirad.

    python scripts/difftaichi_run.py --impl spirad|taichi --arch cpu --iters 3 \
        --out result.json --workdir /tmp/run-dir path/to/difftaichi/examples/wave.py [args]

`--impl spirad` imports the file's `taichi` as spirad (spirad.compat.taichi_alias) and forces
`--arch` on its `ti.init`; `--impl taichi` (run it with a Python that has Taichi) forces the arch
and turns Taichi's offline cache off, so compile time is measured. The example's directory is
copied to `--workdir` (the outputs it writes land there). Both sides: `random` / numpy seeded,
`ti.GUI` and `cv2.imshow` / `imwrite` replaced by no-ops (equal work, no display needed). The
optimisation is cut after `--iters` iterations: each `ti.ad.Tape` exit (each
`ti.ad.clear_all_gradients` call after the first, for diffmpm3d) records the loss and the time
since start. `--set-weights weights:0.01` (diffmpm3d) gives both sides the same initial weights; `--save` keeps
arrays of a program that has no Tape (Taichi's `jacobian.py`: `--save jacobian_fwd,jacobian_rev`). docs/coming_from_taichi.md has the table these runs gave."""
import argparse, json, os, random, runpy, sys, time, shutil

p = argparse.ArgumentParser()
p.add_argument("--impl", choices=["taichi", "spirad"], required=True)
p.add_argument("--arch", default="cpu")
p.add_argument("--iters", type=int, default=3)
p.add_argument("--out", required=True)
p.add_argument("--workdir", required=True)
p.add_argument("--dump", default="")
p.add_argument("--profile", action="store_true", help="kernel profiler on; its table printed at the end")
p.add_argument("--set-weights", default="",
               help="NAME:SCALE[,...]: at the first clear_all_gradients call, overwrite these fields "
                    "with seeded normal values x SCALE (the same on both sides: diffmpm3d draws its "
                    "weights with ti.randn, whose stream differs between Taichi and spirad)")
p.add_argument("--threads", type=int, default=0, help="cpu_max_num_threads (0: the default)")
p.add_argument("--save", default="", help="NAME[,...]: numpy arrays among the script's globals "
               "saved to OUT.npz when it ends (programs without a Tape: Taichi's jacobian.py)")
p.add_argument("script")
p.add_argument("args", nargs=argparse.REMAINDER)
ns = p.parse_args()
ns.out = os.path.abspath(ns.out)  # the run changes directory

os.environ.setdefault("MPLBACKEND", "Agg")
T0 = time.perf_counter()
C0 = time.process_time()  # CPU time of every thread: the fair measure on a loaded machine
if ns.impl == "spirad":
    from spirad.compat import taichi_alias, run_as_taichi
    taichi_alias.install()
    run_as_taichi.force_arch(ns.arch)
    import spirad as ti
else:
    import taichi as ti
    import functools
    _init = ti.init
    @functools.wraps(_init)
    def _forced(_a=None, **kw):
        kw.pop("arch", None)
        kw["offline_cache"] = False
        return _init(arch=getattr(ti, ns.arch), **kw)
    ti.init = _forced


if ns.profile or ns.threads:  # both sides: the profiler (its table at the end), threads
    import functools as _ft
    _init0 = ti.init
    @_ft.wraps(_init0)
    def _profiled(*a, **kw):
        if ns.profile:
            kw["kernel_profiler"] = True
        if ns.threads:
            kw["cpu_max_num_threads"] = ns.threads
        return _init0(*a, **kw)
    ti.init = _profiled


class GUIStub:  # both sides: no window, no drawing (the GUI is another helper's work)
    def __init__(self, *a, **k): self.running = True
    def __getattr__(self, name): return lambda *a, **k: None
ti.GUI = GUIStub
if not hasattr(ti, "rgb_to_hex") or ns.impl == "spirad":
    ti.rgb_to_hex = lambda c: 0
import cv2
cv2.imshow = lambda *a, **k: None
cv2.waitKey = lambda *a, **k: -1
cv2.imwrite = lambda *a, **k: True

random.seed(0)
import numpy as np
np.random.seed(0)

rec = {"impl": ns.impl, "arch": ns.arch, "losses": [], "times": [], "cpu": []}


class Stop(BaseException):
    pass


def boundary(loss_value):
    if ns.dump and not rec["losses"]:
        g = sys.modules["__main__"].__dict__
        np.savez(ns.out + ".npz", **{n: g[n].to_numpy() for n in ns.dump.split(",")})
    rec["losses"].append(float(loss_value))
    rec["times"].append(time.perf_counter() - T0)
    rec["cpu"].append(time.process_time() - C0)
    if len(rec["losses"]) >= ns.iters:
        raise Stop()


Tape = ti.ad.Tape
_exit = Tape.__exit__
def tape_exit(self, *exc):
    r = _exit(self, *exc)
    if exc and exc[0] is None:
        boundary(self.loss[None])
    return r
Tape.__exit__ = tape_exit
_clear = ti.ad.clear_all_gradients
ncalls = [0]
def set_weights():
    g = sys.modules["__main__"].__dict__
    rng = np.random.RandomState(1)
    for item in ns.set_weights.split(","):
        name, scale = item.split(":")
        f = g[name]
        f.from_numpy((rng.standard_normal(f.shape) * float(scale)).astype(np.float32))


def clear_all(*a, **k):
    ncalls[0] += 1
    if ncalls[0] == 1 and ns.set_weights:
        set_weights()
    if ncalls[0] > 1:
        boundary(sys.modules["__main__"].__dict__["loss"][None])
    return _clear(*a, **k)
ti.ad.clear_all_gradients = clear_all

script = os.path.abspath(ns.script)
os.makedirs(ns.workdir, exist_ok=True)
src_dir = os.path.dirname(script)
for f in os.listdir(src_dir):
    if not os.path.exists(os.path.join(ns.workdir, f)) and os.path.isfile(os.path.join(src_dir, f)):
        shutil.copy(os.path.join(src_dir, f), ns.workdir)
os.chdir(ns.workdir)
sys.path.insert(0, ns.workdir)
sys.argv = [script] + ns.args
status = "done"
try:
    g = runpy.run_path(os.path.join(ns.workdir, os.path.basename(script)), run_name="__main__")
    if ns.save:
        np.savez(ns.out[:-5] + ".npz", **{n: np.asarray(g[n]) for n in ns.save.split(",")})
except Stop:
    status = "capped"
except SystemExit as e:
    status = f"exit {e.code}"
except BaseException as e:
    import traceback
    traceback.print_exc()
    status = f"error {type(e).__name__}: {str(e)[:2000]}"
rec["status"] = status
if ns.profile:
    ti.profiler.print_kernel_profiler_info()
rec["total"] = time.perf_counter() - T0
rec["cpu_total"] = time.process_time() - C0
json.dump(rec, open(ns.out, "w"), indent=1)
print("HARNESS", json.dumps({k: rec[k] for k in ("status", "losses", "times", "cpu")}))
