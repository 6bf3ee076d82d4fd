"""`sd.ui` (Taichi's GGUI, `ti.ui`) off screen: the camera's projection against its geometry,
painter's order, shading, the window's frames, images and widgets, and a Taichi GGUI program
(the shape of Taichi's diff_sph example) run unchanged through `run_as_taichi`."""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import spirad as sd
from spirad.gui.image_io import read_png

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RES = (64, 48)


@pytest.fixture
def window(monkeypatch):
    monkeypatch.setenv("SPIRAD_GUI_SHOW", "0")
    return sd.ui.Window("t", RES, show_window=False)


def camera(pos=(0.0, 0.0, 3.0), lookat=(0.0, 0.0, 0.0), fov=60.0):
    cam = sd.ui.Camera()
    cam.position(*pos)
    cam.lookat(*lookat)
    cam.up(0.0, 1.0, 0.0)
    cam.fov(fov)
    return cam


def lit_pixels(img, color, tol=0.02):
    return np.argwhere(np.all(np.abs(img[:, :, :3] - np.asarray(color)) < tol, axis=2))


def draw(window, cam, centers, radius, colors, lights=((0.0, 0.0, 10.0), (1.0, 1.0, 1.0)),
         ambient=(0.0, 0.0, 0.0)):
    scene = window.get_scene()
    scene.set_camera(cam)
    scene.ambient_light(ambient)
    if lights:
        scene.point_light(*lights)
    scene.particles(np.asarray(centers, np.float32), radius=radius,
                    per_vertex_color=np.asarray(colors, np.float32))
    window.get_canvas().scene(scene)
    return window.get_image_buffer_as_numpy()


def test_projection_follows_the_camera_geometry(window):
    """A particle at the look-at point lands at the picture's centre; one at the top of the
    vertical field of view at the top edge; one to the camera's right to the right."""
    cam = camera(fov=60.0)
    d = 3.0
    top = d * math.tan(math.radians(30.0))
    proj = __import__("spirad.gui.scene_render", fromlist=["Projector"]).Projector(cam, RES)
    xy, depth, px = proj(np.array([[0.0, 0.0, 0.0], [0.0, top, 0.0], [0.5, 0.0, 0.0]]))
    np.testing.assert_allclose(xy[0], [0.5, 0.5], atol=1e-12)
    np.testing.assert_allclose(xy[1], [0.5, 1.0], atol=1e-12)
    assert xy[2, 0] > 0.5 and abs(xy[2, 1] - 0.5) < 1e-12
    np.testing.assert_allclose(depth, [d, d, d])
    # pixels per world unit: half the picture's height spans tan(fov / 2) * depth
    np.testing.assert_allclose(px, RES[1] / 2 / top)


def test_particle_disc_has_the_projected_radius(window):
    cam = camera(fov=60.0)
    r = 0.3
    img = draw(window, cam, [[0.0, 0.0, 0.0]], r, [[1.0, 1.0, 1.0]])
    lit = lit_pixels(img, (1.0, 1.0, 1.0), tol=0.3)
    expected = r * RES[1] / 2 / (3.0 * math.tan(math.radians(30.0)))   # pixels
    width = lit[:, 0].max() - lit[:, 0].min() + 1
    assert abs(width - 2 * expected) <= 2, (width, 2 * expected)
    assert abs(lit[:, 0].mean() - RES[0] / 2) <= 1 and abs(lit[:, 1].mean() - RES[1] / 2) <= 1


@pytest.mark.parametrize("near_first", [True, False])
def test_nearer_particle_hides_the_farther_one(window, near_first):
    """Painter's order by depth, whatever order the particles come in."""
    near, far = ([0.0, 0.0, 1.0], [1.0, 0.0, 0.0]), ([0.0, 0.0, -1.0], [0.0, 1.0, 0.0])
    items = [near, far] if near_first else [far, near]
    img = draw(window, camera(), [p for p, _ in items], 0.4, [c for _, c in items])
    centre = img[RES[0] // 2, RES[1] // 2, :3]
    np.testing.assert_allclose(centre, [1.0, 0.0, 0.0], atol=1e-6)


def test_shading_by_the_point_light_and_the_ambient(window):
    """Facing a light behind the camera: colour * (ambient + light); a light behind the particle
    adds nothing."""
    col = [0.5, 0.25, 1.0]
    lit = draw(window, camera(), [[0.0, 0.0, 0.0]], 0.4, [col],
               lights=((0.0, 0.0, 10.0), (0.6, 0.6, 0.6)), ambient=(0.2, 0.2, 0.2))
    np.testing.assert_allclose(lit[RES[0] // 2, RES[1] // 2, :3], np.minimum(np.multiply(col, 0.8), 1),
                               atol=1e-6)
    window.show()
    dark = draw(window, camera(), [[0.0, 0.0, 0.0]], 0.4, [col],
                lights=((0.0, 0.0, -10.0), (0.6, 0.6, 0.6)), ambient=(0.2, 0.2, 0.2))
    np.testing.assert_allclose(dark[RES[0] // 2, RES[1] // 2, :3], np.multiply(col, 0.2), atol=1e-6)


def test_particles_from_a_vector_field_and_mesh_and_lines(window):
    sd.init(arch=sd.cpu)
    pos = sd.Vector.field(3, sd.f32, shape=2)
    pos.from_numpy(np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0]], np.float32))
    scene = window.get_scene()
    scene.set_camera(camera())
    scene.point_light((0.0, 0.0, 10.0), (1.0, 1.0, 1.0))
    scene.particles(pos, radius=0.15, color=(0.0, 0.0, 1.0))
    tri = np.array([[-1.0, 0.5, 0.0], [-0.5, 0.5, 0.0], [-0.75, 0.9, 0.0]], np.float32)
    scene.mesh(tri, color=(0.0, 1.0, 0.0))
    scene.lines(np.array([[-1.0, -0.5, 0.0], [1.0, -0.5, 0.0]], np.float32), width=4,
                color=(1.0, 0.0, 0.0))
    window.get_canvas().scene(scene)
    img = window.get_image_buffer_as_numpy()
    assert len(lit_pixels(img, (0.0, 0.0, 1.0), 0.05)) > 0
    assert len(lit_pixels(img, (0.0, 1.0, 0.0), 0.05)) > 0
    assert len(lit_pixels(img, (1.0, 0.0, 0.0), 0.3)) > 0


def test_frames_images_and_widgets(window, tmp_path, monkeypatch):
    window.get_canvas().set_background_color((0.0, 0.5, 0.0))
    f = tmp_path / "out" / "frame.png"
    window.save_image(str(f))
    rows = read_png(str(f))
    assert rows.shape == (RES[1], RES[0], 3) and abs(int(rows[0, 0, 1]) - 127) <= 1
    assert window.get_image_buffer_as_numpy().shape == RES + (4,)
    assert window.get_window_shape() == RES
    gui = window.get_gui()
    with gui.sub_window("panel", 0.1, 0.1, 0.2, 0.2) as w:
        w.text("hello")
        assert w.slider_float("x", 0.3, 0.0, 1.0) == 0.3
        assert w.checkbox("c", True) is True
        assert w.button("b") is False
    assert window.get_events(sd.ui.PRESS) == [] and not window.get_event()
    assert not window.is_pressed(sd.ui.SPACE, "w")
    cam = camera()
    cam.track_user_inputs(window, movement_speed=0.1, hold_key=sd.ui.RMB)  # nothing held
    assert cam.position_xyz == (0.0, 0.0, 3.0)
    assert window.running
    window.running = False
    assert not window.running


def test_window_stops_after_spirad_gui_frames(monkeypatch):
    monkeypatch.setenv("SPIRAD_GUI_SHOW", "0")
    monkeypatch.setenv("SPIRAD_GUI_FRAMES", "3")
    w = sd.ui.Window("t", RES)
    n = 0
    while w.running:
        w.show()
        n += 1
        assert n <= 3
    assert n == 3 and w.frames == 3


def test_clear_errors(window):
    scene = window.get_scene()
    with pytest.raises(sd.SpiradValueError, match="no camera"):
        window.get_canvas().scene(scene)
    with pytest.raises(sd.SpiradValueError, match="3-vectors"):
        scene.particles(np.zeros((4, 2), np.float32), radius=0.1)
    with pytest.raises(sd.SpiradNotSupportedError, match="sd.GUI"):
        window.get_canvas().circles(np.zeros((1, 2), np.float32), radius=0.1)


GGUI_PROGRAM = textwrap.dedent('''
    import taichi as ti
    arch = ti.vulkan if ti._lib.core.with_vulkan() else ti.cuda
    ti.init(arch=arch)
    n = 64
    pos = ti.Vector.field(3, float, shape=n)
    col = ti.Vector.field(3, float, shape=n)
    a = ti.field(float, shape=(4, 4))

    @ti.kernel
    def step(t: ti.i32):
        for i in pos:
            pos[i] = ti.Vector([0.1 + 0.8 * (i % 8) / 7, 0.1 + 0.8 * (i // 8) / 7, 0.5 + 0.01 * t])
            col[i] = ti.Vector([1.0, 0.5, 0.0])
        for i in range(6):   # past the last axis (not the field): Taichi writes on, spirad
            a[0, i] = 1.0    # checks unless told not to

    window = ti.ui.Window("GGUI", (96, 96), show_window=True)
    scene, canvas, gui = window.get_scene(), window.get_canvas(), window.get_gui()
    camera = ti.ui.Camera()
    camera.position(0.5, 0.5, 2.0)
    camera.lookat(0.5, 0.5, 0.5)
    camera.up(0.0, 1.0, 0.0)
    camera.fov(60)
    t = 0
    while window.running:
        with gui.sub_window("Panel", 0.05, 0.05, 0.2, 0.2) as w:
            w.text("Space: pause")
            x = w.slider_float("X", 0.25, 0.05, 0.45)
        step(t)
        for e in window.get_events(ti.ui.PRESS):
            pass
        camera.track_user_inputs(window, movement_speed=0.02, hold_key=ti.ui.RMB)
        scene.set_camera(camera)
        scene.point_light((2.0, 2.0, 2.0), color=(1.0, 1.0, 1.0))
        scene.particles(pos, radius=0.05, per_vertex_color=col)
        canvas.scene(scene)
        window.save_image(f"frames/{t:04}.png")
        window.show()
        t += 1
    print("frames", t)
''')


def test_run_as_taichi_runs_a_ggui_program_unchanged(tmp_path):
    """Off screen, `--init check_bounds=false` (the program writes past a field, as Taichi's
    diff_sph does) and SPIRAD_GUI_FRAMES ending its `while window.running` loop."""
    (tmp_path / "prog.py").write_text(GGUI_PROGRAM)
    env = dict(os.environ, PYTHONPATH=REPO, SPIRAD_GUI_FRAMES="2", SPIRAD_GUI_SHOW="0")
    cmd = [sys.executable, "-m", "spirad.compat.run_as_taichi", "--arch", "cpu"]
    r = subprocess.run(cmd + ["--init", "check_bounds=false", "prog.py"], capture_output=True,
                       text=True, env=env, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "frames 2"
    rows = read_png(str(tmp_path / "frames" / "0001.png"))
    r, g, b = (rows[:, :, k].astype(int) for k in range(3))
    orange = (r > 40) & (r > g) & (g > b)
    assert orange.sum() > 64 * 9, "the 64 particles were not drawn"
    r = subprocess.run(cmd + ["prog.py"], capture_output=True, text=True, env=env, timeout=300,
                       cwd=tmp_path)
    assert r.returncode != 0 and "SpiradOutOfBoundsError" in r.stderr, r.stderr[-2000:]
    r = subprocess.run(cmd + ["--init", "check_bounds", "prog.py"], capture_output=True,
                       text=True, env=env, timeout=300, cwd=tmp_path)
    assert r.returncode != 0 and "give KEY=JSON" in r.stderr
