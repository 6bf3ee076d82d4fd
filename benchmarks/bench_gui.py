"""sd.GUI drawing speed: CPU milliseconds per call on a 512 x 512 canvas (process time, so a busy
machine inflates it less), for the item counts simulations draw per frame.

    python benchmarks/bench_gui.py
"""
import time

import numpy as np

import spirad as sd
from target_info import print_target  # benchmarks/target_info.py


def per_call(f, n=10) -> float:
    f()
    t = time.process_time()
    for _ in range(n):
        f()
    return (time.process_time() - t) / n * 1e3


def main():
    print_target()
    gui = sd.GUI("bench", (512, 512), background_color=0x112233, show_gui=False)
    rng = np.random.default_rng(0)
    pos = rng.random((1000, 2))
    b = rng.random((1000, 2))
    e = b + rng.normal(0, 0.03, (1000, 2))
    img = rng.random((512, 512, 3)).astype(np.float32)
    cases = [
        ("1000 circles, radius 1.5", lambda: gui.circles(pos, radius=1.5, color=0xFF8800)),
        ("1000 circles, radius 7", lambda: gui.circles(pos, radius=7, color=0xFF8800)),
        ("10000 circles, radius 1.5", lambda: gui.circles(rng.random((10000, 2)), radius=1.5)),
        ("1000 lines (~15 px), radius 2", lambda: gui.lines(b, e, radius=2, color=0x00FF00)),
        ("10 lines across the canvas, radius 1", lambda: gui.lines(b[:10] * 0, b[:10] * 0 + 1)),
        ("1000 triangles (~10 px)", lambda: gui.triangles(b, e, b + 0.02, color=0x0000FF)),
        ("text, 40 characters, 15 px", lambda: gui.text("x" * 40, (0.1, 0.5))),
        ("set_image 512 x 512 float RGB", lambda: gui.set_image(img)),
        ("show(file): 512 x 512 PNG", lambda: gui.show("/tmp/spirad_bench_gui.png")),
    ]
    print(f"{'call':<40} {'ms (CPU)':>9}")
    for name, f in cases:
        print(f"{name:<40} {per_call(f):9.2f}")


if __name__ == "__main__":
    main()
