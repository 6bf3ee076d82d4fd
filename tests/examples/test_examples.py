"""Every example in examples/ runs at a small size (what CI can afford) and does what it says:
the throw optimisation lowers its loss and writes a PNG and an sd.GUI replay (frames, GIF); the
demo checks itself."""
import glob
import os
import subprocess
import sys

import pytest

from tests.support.archs import arch_or_skip

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = {  # example -> arguments of a small run ({out}: a file in the test's tmp dir)
    "demo.py": ["--arch", "cpu"],
    "throw.py": ["--arch", "{arch}", "--iters", "80", "--balls", "4", "--steps", "150",
                 "--out", "{out}/throw.png", "--no-progress", "--video", "{out}/video"],
    "distributed_training.py": ["--steps", "3", "--batch", "16", "--out", "{out}/w.npy"],
}


def test_every_example_has_a_small_run():
    found = {os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "examples", "*.py"))}
    assert found == set(SMALL), "add new examples to SMALL (and remove deleted ones)"


def _run(name, tmp_path, arch="cpu"):
    if name == "throw.py":
        pytest.importorskip("matplotlib")
        pytest.importorskip("tqdm")
    if name == "distributed_training.py":
        pytest.importorskip("torch")
    args = [a.format(out=tmp_path, arch=arch) for a in SMALL[name]]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name), *args], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


@pytest.mark.parametrize("name", sorted(set(SMALL) - {"throw.py"}))
def test_example_runs(name, tmp_path):
    _run(name, tmp_path)


@pytest.mark.parametrize("arch", ["cpu", "vulkan"], ids=["arch=cpu", "arch=vulkan"])
def test_throw_learns_and_draws(arch, tmp_path):
    arch_or_skip(arch)
    out = _run("throw.py", tmp_path, arch)
    line = next(l for l in out.splitlines() if l.startswith("loss: "))
    losses = [float(part.split(": ")[1]) for part in line[len("loss: "):].split(", ")]
    assert losses[-1] < 0.01 * losses[0], line
    png = tmp_path / "throw.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    gif = tmp_path / "video" / "video.gif"        # the sd.GUI replay: 39 frames of 640 x 320
    assert gif.read_bytes()[:6] == b"GIF89a" and len(os.listdir(tmp_path / "video" / "frames")) == 39
