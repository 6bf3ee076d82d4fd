"""sd.GUI off screen (no window, as in CI's shell): every primitive against Taichi 1.7.4's own
picture of the same scene and against a literal transcription of Taichi's pixel loops; images in
and out; events and frames; the files (PNG, GIF)."""
import io
import os
import sys

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs
from spirad.gui.image_io import gif_bytes, png_bytes, read_image, read_png, to_rows

from tests.gui.images import assert_close
from tests.gui.scene import BACKGROUND, RES, draw_scene, draw_text

EXPECTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected")


def offscreen(res=RES, bg=BACKGROUND):
    return sd.GUI("test", res, background_color=bg, show_gui=False)


def rows_of(gui):
    return to_rows(gui.canvas.img)


def test_scene_matches_taichi(tmp_path):
    """Taichi 1.7.4 drew expected/scene_taichi.png from the same calls (make_expected.py)."""
    gui = offscreen()
    draw_scene(gui)
    gui.show(str(tmp_path / "scene.png"))
    assert_close(read_png(str(tmp_path / "scene.png")),
                 read_png(os.path.join(EXPECTED, "scene_taichi.png")), "scene vs Taichi",
                 level=8, max_bad=0.0005, max_mean=0.1)


def test_scene_with_text_matches_expected(tmp_path):
    gui = offscreen()
    draw_scene(gui)
    draw_text(gui)
    path = tmp_path / "deep" / "folder" / "scene.png"   # show(file) makes the folders
    gui.show(str(path))
    assert_close(read_png(str(path)), read_png(os.path.join(EXPECTED, "scene.png")), "scene")


def test_a_wrong_picture_fails_the_comparison():
    gui = offscreen()
    draw_scene(gui)
    gui.circle((0.3, 0.3), 0x00FF00, 12)    # one extra disk
    with pytest.raises(AssertionError, match="differ by more than"):
        assert_close(rows_of(gui), read_png(os.path.join(EXPECTED, "scene_taichi.png")), "x",
                     level=8, max_bad=0.0005, max_mean=0.1)


# -- Taichi's pixel loops, transcribed (taichi/ui/gui/gui.h, gui.cpp), as the oracle ------------

def _lerp(img, i, j, a, rgb):
    img[i, j] = img[i, j] + (np.asarray(rgb) - img[i, j]) * a


def ref_circle(img, pos, r, rgb):
    w, h = img.shape[:2]
    cx, cy = pos[0] * w, pos[1] * h
    for i in range(max(0, int(np.ceil(cx - r))), min(int(np.floor(cx + r)), w - 1) + 1):
        for j in range(max(0, int(np.ceil(cy - r))), min(int(np.floor(cy + r)), h - 1) + 1):
            _lerp(img, i, j, np.clip(r - np.hypot(cx - i, cy - j), 0, 1), rgb)


def ref_line(img, a, b, r, rgb):
    w, h = img.shape[:2]
    a, b = np.array(a) * (w, h), np.array(b) * (w, h)
    length = np.hypot(*(b - a))
    d = (b - a) / length
    t = np.array([-d[1], d[0]])
    ri = int(np.ceil(r + 0.5))
    lo = np.maximum(np.minimum((a + 0.5).astype(int), (b + 0.5).astype(int)) - ri, 0)
    hi = np.minimum(np.maximum((a + 0.5).astype(int), (b + 0.5).astype(int)) + ri, (w - 1, h - 1))
    for i in range(lo[0], hi[0] + 1):
        for j in range(lo[1], hi[1] + 1):
            p = np.array([i + 0.5, j + 0.5]) - a
            u, v = t @ p, d @ p
            if v > 0:
                v = max(0.0, v - length)
            _lerp(img, i, j, np.clip(r - np.hypot(u, v), 0, 1), rgb)


def ref_triangle(img, a, b, c, rgb):
    w, h = img.shape[:2]
    a, b, c = (np.array(p) * (w, h) for p in (a, b, c))
    cross = lambda p, q: p[0] * q[1] - p[1] * q[0]  # noqa: E731
    lo, hi = np.minimum(np.minimum(a, b), c), np.maximum(np.maximum(a, b), c)
    for i in range(int(np.floor(lo[0])), int(np.ceil(hi[0]))):
        for j in range(int(np.floor(lo[1])), int(np.ceil(hi[1]))):
            p = np.array([i + 0.5, j + 0.5])
            s = [cross(p - a, b - a) <= 0, cross(p - b, c - b) <= 0, cross(p - c, a - c) <= 0]
            if s[0] == s[1] == s[2] and 0 <= i < w and 0 <= j < h:
                img[i, j] = rgb


def test_primitives_equal_taichis_loops():
    """Overlapping anti-aliased circles and lines (a line long enough to be split into pieces,
    one of zero width at an end), triangles of both windings, clipped at the borders."""
    rng = np.random.default_rng(7)
    res = (48, 36)
    ref = np.zeros(res + (3,))
    gui = offscreen(res, 0x000000)
    pos, rad = rng.random((40, 2)) * 1.2 - 0.1, rng.uniform(0.5, 6, 40)
    cols = rng.integers(0, 1 << 24, 40)
    rgb = np.stack([(cols >> 16) & 255, (cols >> 8) & 255, cols & 255], 1) / 255.0
    for k in range(40):
        ref_circle(ref, pos[k], rad[k], rgb[k])
    gui.circles(pos, radius=rad, color=cols)
    ends = [((0.02, 0.1), (0.98, 0.9), 2.5), ((0.9, 0.05), (0.1, 0.5), 1.0),
            ((-0.1, 0.6), (0.5, 0.62), 3.0), ((0.3, 0.95), (0.31, 0.2), 0.7)]
    for a, b, r in ends:
        ref_line(ref, a, b, r, sd.hex_to_rgb(0xFF7F3F))
        gui.line(a, b, radius=r, color=0xFF7F3F)
    tris = [((0.1, 0.1), (0.6, 0.2), (0.3, 0.7)), ((0.9, 0.9), (0.5, 0.95), (0.7, 0.3)),
            ((-0.2, 0.5), (0.4, 1.3), (0.2, 0.4))]
    for a, b, c in tris:
        ref_triangle(ref, a, b, c, sd.hex_to_rgb(0x33CC66))
        gui.triangle(a, b, c, color=0x33CC66)
    np.testing.assert_allclose(gui.canvas.img, ref, atol=2e-4)


def test_batched_calls_composite_in_order():
    """One `circles` call of overlapping rims equals one `circle` call per item."""
    rng = np.random.default_rng(3)
    pos, rad = 0.4 + 0.2 * rng.random((60, 2)), rng.uniform(1, 9, 60)
    cols = rng.integers(0, 1 << 24, 60)
    a, b = offscreen((64, 64)), offscreen((64, 64))
    a.circles(pos, radius=rad, color=cols)
    for k in range(60):
        b.circle(pos[k], int(cols[k]), rad[k])
    np.testing.assert_allclose(a.canvas.img, b.canvas.img, atol=2e-4)


def test_nan_and_zero_length_items_are_skipped_or_dots():
    gui = offscreen((32, 32), 0)
    gui.circles(np.array([[np.nan, 0.5], [0.5, np.inf]]), radius=3)
    gui.line((np.nan, 0), (0.5, 0.5), radius=3)
    assert gui.canvas.img.max() == 0
    gui.line((0.5, 0.5), (0.5, 0.5), radius=3)     # Taichi draws NaNs here; spirad a dot
    assert 12 < (gui.canvas.img[:, :, 0] > 0.5).sum() < 28   # about pi * 2.5^2


# -- arguments ------------------------------------------------------------------------------

def test_colors_and_hex_helpers():
    assert sd.rgb_to_hex((0.4, 0.6, 0.6)) == 0x669999           # Taichi 1.7.4: 6723993
    assert sd.rgb_to_hex((1.3, -0.2, 0.5)) == 0xFF007F           # clipped, truncated
    assert sd.hex_to_rgb(0x336699) == (0.2, 0.4, 0.6)
    gui = offscreen((8, 8), 0x102030)
    assert np.allclose(gui.canvas.img[0, 0], [0x10 / 255, 0x20 / 255, 0x30 / 255])
    with pytest.raises(ValueError, match="color must be an int"):
        gui.circles(np.zeros((3, 2)), color=np.array([1, 2]))
    with pytest.raises(ValueError, match="palette_indices must lie in"):
        gui.circles(np.zeros((2, 2)), palette=[0xFF0000], palette_indices=[0, 1])
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        gui.circles(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="palette must be used together"):
        gui.circles(np.zeros((2, 2)), palette=[0xFF0000])


def test_point_forms():
    """Points as lists, tuples, (2,) / (2, 1) arrays, sd.Vector; positions as spirad fields."""
    a = offscreen((40, 40), 0)
    b = offscreen((40, 40), 0)
    a.line((0.1, 0.2), [0.8, 0.9], radius=2)
    b.line(np.array([[0.1], [0.2]]), sd.Vector([0.8, 0.9]), radius=2)
    np.testing.assert_array_equal(a.canvas.img, b.canvas.img)
    sd.init(arch=sd.cpu)
    f = sd.Vector.field(2, sd.f32, shape=5)
    pts = np.random.default_rng(0).random((5, 2)).astype(np.float32)
    f.from_numpy(pts)
    a.circles(f, radius=3)
    b.circles(pts, radius=3)
    np.testing.assert_array_equal(a.canvas.img, b.canvas.img)


def test_set_image_forms():
    w, h = 6, 4
    gui = offscreen((w, h))
    ramp = np.linspace(0, 1, w * h, dtype=np.float32).reshape(w, h)
    gui.set_image(ramp)                                       # grey
    assert np.allclose(gui.canvas.img, ramp[:, :, None])
    gui.set_image((ramp * 255).astype(np.uint8)[:, :, None] * np.ones(3, np.uint8))  # uint8 RGB
    assert np.allclose(gui.canvas.img, np.floor(ramp * 255)[:, :, None] / 255, atol=1e-6)
    rg = np.stack([ramp, 1 - ramp], 2)
    gui.set_image(rg)                                         # RG: blue 0
    assert np.allclose(gui.canvas.img, np.dstack([ramp, 1 - ramp, 0 * ramp]))
    gui.set_image(np.dstack([ramp, ramp, ramp, ramp]).astype(np.float64))   # RGBA
    assert gui.get_image().shape == (w, h, 4) and np.allclose(gui.get_image()[:, :, 3], 1)
    sd.init(arch=sd.cpu)
    field = sd.Vector.field(3, sd.f32, shape=(w, h))
    field.from_numpy(np.dstack([ramp, ramp * 0.5, 1 - ramp]))
    gui.set_image(field)
    assert np.allclose(gui.canvas.img, np.dstack([ramp, ramp * 0.5, 1 - ramp]))
    with pytest.raises(ValueError, match="does not match the GUI resolution"):
        gui.set_image(np.zeros((h, w)))
    with pytest.raises(ValueError, match="not supported in GUI.set_image"):
        gui.set_image(np.zeros((w, h), np.int32))


@test_archs()
def test_fields_and_ndarrays_of_every_arch(arch):
    """Positions, colours and images straight from device memory (through to_numpy)."""
    w, h = 16, 12
    img = sd.Vector.field(3, sd.f32, shape=(w, h))
    pts = sd.ndarray(sd.f32, (4, 2))
    col = sd.field(sd.u32, shape=4)

    @sd.kernel
    def fill(pts: sd.types.ndarray(ndim=2)):
        for i, j in img:
            img[i, j] = sd.Vector([i / w, j / h, 0.5])
        for k in range(4):
            pts[k, 0] = 0.2 + 0.2 * k
            pts[k, 1] = 0.5
            col[k] = sd.u32(0xFF0000 >> (4 * k))

    fill(pts)
    gui = offscreen((w, h))
    gui.set_image(img)
    ramp = np.dstack([*np.meshgrid(np.arange(w) / w, np.arange(h) / h, indexing="ij"),
                      np.full((w, h), 0.5)])
    assert np.allclose(gui.canvas.img, ramp)
    gui.circles(pts, radius=1.0, color=col)
    want = offscreen((w, h))
    want.set_image(ramp.astype(np.float32))
    want.circles(np.array([[0.2, 0.5], [0.4, 0.5], [0.6, 0.5], [0.8, 0.5]]), radius=1.0,
                 color=np.array([0xFF0000 >> (4 * k) for k in range(4)]))
    np.testing.assert_allclose(gui.canvas.img, want.canvas.img, atol=1e-6)


def test_fast_gui_img_is_taichis_packed_words():
    """`GUI(fast_gui=True).img`: one word 0xRRGGBB per pixel, rows from the top, floats
    scaled by 255 and truncated in their own precision (a u8 colour c stored as c / 255 gives c
    back, as Taichi's conversion kernel does)."""
    w, h = 3, 2
    gui = sd.GUI("t", res=(w, h), show_gui=False, fast_gui=True)
    rgb = np.zeros((w, h, 3), np.uint8)
    rgb[2, 1] = (1, 2, 3)            # x = 2, y = 1: the top row (y up), last column
    rgb[0, 0] = (255, 0, 128)        # bottom-left
    gui.set_image(rgb)
    assert gui.img.dtype == np.uint32 and gui.img.shape == (w * h,)
    assert gui.img[0 * w + 2] == 0x010203 and gui.img[1 * w + 0] == 0xFF0080
    assert np.count_nonzero(gui.img) == 2
    for dt in (np.float32, np.float64):
        for c in (0, 32, 64, 128, 255):
            gui.set_image(np.full((w, h, 4), dt(c) / dt(255), dt))
            assert (gui.img == (c << 16) + (c << 8) + c).all()
    with pytest.raises(ValueError, match="fast_gui=True"):
        gui.set_image(np.zeros((w, h), np.float32))
    assert sd.GUI("t", res=(w, h), show_gui=False).img.shape == (w, h, 4)


def test_image_layout_is_x_y_with_y_up(tmp_path):
    """img[x, y]: x to the right, y up; the PNG's first row is the top of the window."""
    img = np.zeros((4, 3, 3), np.float32)
    img[3, 2] = (1, 0, 0)        # top right
    img[0, 0] = (0, 1, 0)        # bottom left
    gui = offscreen((4, 3), 0x000000)
    gui.set_image(img)
    gui.show(str(tmp_path / "a.png"))
    rows = read_png(str(tmp_path / "a.png"))
    assert tuple(rows[0, 3]) == (255, 0, 0) and tuple(rows[2, 0]) == (0, 255, 0)
    assert gui.frame == 1 and gui.canvas.img.max() == 0     # show() cleared the canvas


def test_text_hangs_from_pos():
    gui = offscreen((100, 50), 0)
    gui.text("Ag", (0.1, 0.8), font_size=18, color=0xFFFFFF)
    ink = np.argwhere(gui.canvas.img[:, :, 0] > 0.5)
    # top-left at (10 + 2, 40): 7 of the 9 rows above the baseline, the 'g' below it
    assert ink[:, 0].min() == 12 and ink[:, 1].max() == 39 and ink[:, 1].min() >= 22
    gui.text("", (0.5, 0.5))                         # nothing to draw
    gui.text("off", (2.0, 2.0))                      # outside: clipped away


# -- frames, events, windows ------------------------------------------------------------------

def test_no_display_draws_off_screen(monkeypatch, tmp_path):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    if sys.platform in ("darwin", "win32"):
        monkeypatch.setenv("SPIRAD_GUI_SHOW", "0")
    with pytest.warns(RuntimeWarning, match="drawing off screen"):
        gui = sd.GUI("headless", 64)
    assert not gui.show_gui and gui.res == (64, 64) and gui.fps_limit == 60
    gui.circle((0.5, 0.5), radius=10)
    gui.show(str(tmp_path / "f.png"))
    assert gui.running and not gui.get_event() and not gui.get_event(sd.GUI.ESCAPE)
    with pytest.raises(RuntimeError, match="no window is open"):
        gui.get_key_event()
    gui.running = False
    assert not gui.running
    gui.fps_limit = None
    assert gui.fps_limit is None
    gui.close()


def test_widgets_are_refused():
    gui = offscreen()
    with pytest.raises(sd.SpiradNotSupportedError, match="slider"):
        gui.slider("r", 0, 1)


def test_event_filter():
    ev = sd.GUI.Event()
    ev.type, ev.key = sd.GUI.PRESS, sd.GUI.ESCAPE
    f = sd.GUI.EventFilter
    assert f(sd.GUI.ESCAPE).match(ev) and f(sd.GUI.PRESS).match(ev)
    assert f((sd.GUI.PRESS, sd.GUI.ESCAPE)).match(ev) and f([sd.GUI.PRESS, sd.GUI.ESCAPE]).match(ev)
    assert not f((sd.GUI.RELEASE, sd.GUI.ESCAPE)).match(ev) and not f("a").match(ev)


# -- files --------------------------------------------------------------------------------------

def test_png_round_trip_and_filters(tmp_path):
    rng = np.random.default_rng(0)
    for c in (1, 3, 4):
        rows = rng.integers(0, 256, (7, 5, c)).astype(np.uint8)
        p = tmp_path / f"c{c}.png"
        p.write_bytes(png_bytes(rows))
        assert np.array_equal(read_png(str(p)), rows)
    PIL = pytest.importorskip("PIL.Image")
    rows = (np.add.outer(np.arange(20), np.arange(30))[:, :, None] * [3, 5, 7] % 256).astype(np.uint8)
    PIL.fromarray(rows).save(tmp_path / "pil.png", optimize=True)   # Sub / Up / Avg / Paeth rows
    assert np.array_equal(read_png(str(tmp_path / "pil.png")), rows)


def test_tools_imwrite_imread(tmp_path):
    img = np.random.default_rng(1).random((9, 6, 3)).astype(np.float32)
    sd.tools.imwrite(img, str(tmp_path / "x.png"))
    back = sd.tools.imread(str(tmp_path / "x.png"))
    assert back.shape == (9, 6, 3) and np.array_equal(back, (img * 255).astype(np.uint8))
    assert sd.tools.imread(str(tmp_path / "x.png"), channels=4).shape == (9, 6, 4)
    assert sd.tools.imresize(back, 18, 12).shape == (18, 12, 3)
    with pytest.raises(ValueError, match="use a .png"):
        sd.tools.imwrite(img, str(tmp_path / "x.tiff"))


def test_gif_frames_decode(tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(2)
    few = rng.integers(0, 4, (30, 40, 1)) * np.array([[[60, 20, 90]]])       # 4 colours: exact
    many = rng.integers(0, 256, (30, 40, 3))                                   # median cut
    frames = [few.astype(np.uint8), many.astype(np.uint8)]
    im = PIL.open(io.BytesIO(gif_bytes(frames, fps=10)))
    assert im.n_frames == 2 and im.info["duration"] == 100
    im.seek(0)
    assert np.array_equal(np.asarray(im.convert("RGB")), frames[0])
    im.seek(1)
    assert np.abs(np.asarray(im.convert("RGB")).astype(int) - frames[1]).mean() < 24


def test_video_manager_collects_frames(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "")          # no ffmpeg: the GIF still comes, with a warning
    video = sd.tools.VideoManager(str(tmp_path), framerate=5, automatic_build=False)
    gui = offscreen((31, 20), 0)           # odd width: the last column is dropped
    for k in range(3):
        gui.circle((0.2 + 0.3 * k, 0.5), 0xFF0000, 5)
        video.write_frame(gui.get_image())
        gui.show()
    assert sorted(os.listdir(video.get_frame_directory())) == ["000000.png", "000001.png",
                                                               "000002.png"]
    with pytest.warns(RuntimeWarning, match="ffmpeg"):
        video.make_video(gif=True, mp4=True)
    data = (tmp_path / "video.gif").read_bytes()
    assert data[:6] == b"GIF89a" and data[6:10] == bytes([30, 0, 20, 0])
    assert read_image(str(tmp_path / "frames" / "000001.png")).shape == (20, 30, 4)   # RGBA


def test_difftaichi_call_forms(tmp_path):
    """The GUI calls of DiffTaichi's examples, with their argument forms (written here, not
    copied): positional colour and radius, numpy-int colours from rgb_to_hex, lists and (2, 1)
    arrays as points, uint32 colour arrays, `show(file=None)`, a positional background."""
    gui = sd.GUI("Mass Spring Robot", (128, 128), 0xFFFFFF, show_gui=False)   # background 3rd
    x, y = 0.25, 0.5
    color = sd.rgb_to_hex((0.5 + 0.3, 0.5 - abs(0.3), 0.5 - 0.3))        # a numpy integer
    gui.circle((x, y), color, 7)                                              # pos, color, radius
    gui.circle([0.75, 0.5], 0xccaa44, 12 // 2)                                # a list, an int radius
    gui.line(begin=(0, 0.1), end=(1, 0.1), color=0x0, radius=3)
    gui.line(np.array([[0.1], [0.9]]), np.array([[0.9], [0.9]]), color=0x000000, radius=2)
    particles = np.random.default_rng(0).random((300, 2)) * 0.2 + 0.4
    colors = np.empty(300, dtype=np.uint32)
    colors[:] = 0x111111
    gui.circles(pos=particles, color=colors, radius=1.5)
    gui.show(file=None)                                   # off screen: only clears
    assert np.all(gui.canvas.img == 1.0)
    gui.circle((x, y), color, 7)
    gui.circle([0.75, 0.5], 0xccaa44, 12 // 2)
    gui.line(begin=(0, 0.1), end=(1, 0.1), color=0x0, radius=3)
    gui.line(np.array([[0.1], [0.9]]), np.array([[0.9], [0.9]]), color=0x000000, radius=2)
    gui.show(str(tmp_path / "mass_spring" / "final0" / "0001.png"))
    rows = read_png(str(tmp_path / "mass_spring" / "final0" / "0001.png"))
    assert tuple(rows[128 - 64, 32]) == (0xCC, 0x33, 0x33)   # opaque: the exact colour
    assert tuple(rows[128 - 64, 96]) == (0xCC, 0xAA, 0x44)
    assert tuple(rows[128 - 13, 64]) == (0, 0, 0) and tuple(rows[128 - 116, 64]) == (0, 0, 0)
