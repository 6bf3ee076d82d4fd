"""Ctrl-C during a launch (architecture §8, `spirad.runtime.guard`): the launch is stopped (CPU: its workers
check a cancel flag between pieces) or waited for (GPU backends) before `KeyboardInterrupt`
reaches the caller; nothing writes after control returns; later launches are correct.

Each case runs in a fresh process (the interrupt is a real SIGINT delivered to the main thread
from a timer thread, by `signal.pthread_kill` or `_thread.interrupt_main`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.archs import EVERY_ARCH, arch_or_skip

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r'''
import json, signal, sys, threading, time, _thread
import numpy as np
import spirad as sd

arch, how = sys.argv[1], sys.argv[2]
sd.init(arch=arch)
N = 1 << 17 if arch == "cpu" else 1 << 14
TRIPS = 1000 if arch == "cpu" else 400

@sd.kernel
def slow(x: sd.types.ndarray(), y: sd.types.ndarray(), trips: sd.i32):
    for i in x:
        v = x[i]
        for _ in range(trips):
            v = sd.sin(v) * 0.5 + 0.25
        y[i] = v + 1.0

def want(trips):
    v = np.linspace(0, 1, N)
    for _ in range(trips):
        v = np.sin(v) * 0.5 + 0.25
    return v + 1.0

x = sd.ndarray(sd.f32, N)
x.from_numpy(np.linspace(0, 1, N).astype(np.float32))
y = sd.ndarray(sd.f32, N)
slow(x, y, 1)  # compiled (and a first launch) before the timed one
sd.sync()
y.fill(0)

t0 = time.perf_counter()
slow(x, y, TRIPS)
sd.sync()
full = time.perf_counter() - t0   # one launch without an interrupt
y.fill(0)

go = threading.Event()

def interrupt():
    go.wait()  # counted from the loop's start, not the thread's (slow to start when loaded)
    time.sleep(min(0.2, full / 5))
    if how == "kill":
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    else:
        _thread.interrupt_main()

threading.Thread(target=interrupt, daemon=True).start()
t0 = time.perf_counter()
raised = False
go.set()
try:
    for _ in range(1000):   # the interrupt lands in one of these launches (or their sync)
        slow(x, y, TRIPS)
        sd.sync()
except KeyboardInterrupt:
    raised = True
after = time.perf_counter() - t0
written = int(np.count_nonzero(y.to_numpy()))   # what the interrupted launch wrote
y.fill(-7.0)                                     # the program writes after the interrupt
time.sleep(max(0.3, 2 * full))                   # a late worker chunk would overwrite it
late = int(np.count_nonzero(y.to_numpy() != -7.0))
slow(x, y, 3)                                    # later launches are correct
ok = bool(np.allclose(y.to_numpy(), want(3), rtol=1e-5, atol=1e-5))
print(json.dumps({"raised": raised, "late": late, "ok": ok, "written": written, "n": N,
                  "full": full, "after": after}))
'''


@pytest.mark.parametrize("how", ["kill", "interrupt_main"])
@pytest.mark.parametrize("arch", EVERY_ARCH, ids=[f"arch={a}" for a in EVERY_ARCH])
def test_interrupt_during_launch(tmp_path, arch, how):
    if how == "interrupt_main" and arch not in ("cpu", "vulkan"):
        pytest.skip("one way of interrupting is enough on the other archs")
    arch_or_skip(arch)
    path = tmp_path / "interrupt.py"
    path.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(path), arch, how], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["raised"], out
    assert out["late"] == 0, out    # nothing written after control returned
    assert out["ok"], out           # later launches correct
    if arch == "cpu":
        # stopped, not waited for: the interrupted launch left elements unwritten
        assert out["written"] < out["n"], out
