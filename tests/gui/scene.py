"""The test scene: every drawing call of Taichi's 2-D GUI, with the arguments DiffTaichi's
examples use (positional `circle(pos, color, radius)`, per-item colour arrays, palettes, wide
lines). Runs unchanged under Taichi 1.7.4 (`make_expected.py`) and
spirad: `gui` is a `ti.GUI` / `sd.GUI` of RES."""
import numpy as np

RES = (320, 240)
BACKGROUND = 0x203040


def draw_scene(gui):
    rng = np.random.default_rng(1)
    img = np.zeros(RES + (3,), np.float32)
    img[:, :, 0] = np.linspace(0, 1, RES[0])[:, None]
    img[:, :, 2] = np.linspace(0, 1, RES[1])[None, :]
    img[:160] *= 0.3
    gui.set_image(img)
    gui.circles(rng.random((200, 2)), radius=rng.uniform(1, 8, 200),
                color=rng.integers(0, 1 << 24, 200).astype(np.uint32))
    gui.circles(rng.random((50, 2)), radius=4, palette=[0xFF0000, 0x00FF00, 0x0000FF],
                palette_indices=rng.integers(0, 3, 50))
    gui.circle((0.5, 0.5), 0xFFFF00, 30)
    gui.lines(rng.random((30, 2)), rng.random((30, 2)), radius=rng.uniform(0.5, 4, 30),
              color=0xFFFFFF)
    gui.line((0.05, 0.1), (0.95, 0.12), radius=3, color=0x000000)
    gui.line(np.array([0.1, 0.05]), np.array([0.4, 0.3]), color=0x00FFFF, radius=2)
    gui.triangles(rng.random((5, 2)), rng.random((5, 2)), rng.random((5, 2)),
                  color=np.array([0xAA00AA, 0x00AAAA, 0xAAAA00, 0x880000, 0x008800], np.uint32))
    gui.triangle((0.1, 0.8), (0.3, 0.95), (0.2, 0.6), color=0xFF8800)
    gui.rect((0.6, 0.9), (0.9, 0.6), radius=2, color=0x00FF88)
    gui.arrows(rng.random((10, 2)), rng.normal(0, 0.1, (10, 2)), radius=1.5, color=0xFFAAAA)
    gui.arrow((0.1, 0.3), (0.2, 0.1), radius=2, color=0xAAAAFF)


def draw_text(gui):
    """Text: spirad's built-in font (Taichi draws Go-Regular.ttf, so no Taichi picture here)."""
    gui.text("spirad GUI 0.5!", (0.05, 0.98), font_size=20, color=0xFFFFFF)
    gui.text("gjpqy ~ {x}", (0.55, 0.3), font_size=11, color=0x000000)
