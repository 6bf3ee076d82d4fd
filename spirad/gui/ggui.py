"""`sd.ui`: Taichi's 3-D GUI (GGUI, `ti.ui`: Window, Scene, Camera, Canvas, the imgui panel) with
Taichi 1.7.4's names and defaults, drawn off screen, so a Taichi program that trains or simulates
inside a `ti.ui.Window` runs unchanged (docs/gui.md).

Taichi draws GGUI with Vulkan into a GLFW window (or off screen with `show_window=False`). Here
the scene is drawn by numpy onto `sd.GUI`'s raster canvas (`scene_render.py`: flat-shaded
particles, meshes and lines, painter's order), shown in the same Tk window as `sd.GUI` where
there is a display and `show_window=True`, and written to PNG by `window.save_image(file)`
everywhere. The imgui widgets are not drawn: off screen nobody can move them, so `slider_float`,
`checkbox`, `color_edit_3` return the value they are given and `button` returns False.

Off screen `window.running` stays True, as in Taichi, until the program sets it False; a program
that loops `while window.running` forever (an interactive viewer) ends after
`SPIRAD_GUI_FRAMES` frames where that is set (`show()` calls; spirad.options).
"""
from __future__ import annotations

import contextlib
import warnings
from collections import deque

import numpy as np

from kernel_ir.errors import SpiradNotSupportedError, SpiradValueError

from . import scene_render
from . import window as _window
from .canvas import Canvas as _Raster
from .image_io import to_rows, write_image

__all__ = ["ALT", "BACKSPACE", "CAPSLOCK", "CTRL", "DOWN", "ESCAPE", "LEFT", "LMB", "MMB",
           "PRESS", "RELEASE", "RETURN", "RIGHT", "RMB", "SHIFT", "SPACE", "TAB", "UP", "Camera",
           "Canvas", "Event", "Gui", "ProjectionMode", "Scene", "Window"]

# keys and event types (Taichi's `ti.ui` constants)
SHIFT, ALT, CTRL, ESCAPE, RETURN, TAB, BACKSPACE = ("Shift", "Alt", "Control", "Escape", "Return",
                                                    "Tab", "BackSpace")
SPACE, UP, DOWN, LEFT, RIGHT, CAPSLOCK = " ", "Up", "Down", "Left", "Right", "CapsLock"
LMB, MMB, RMB = "LMB", "MMB", "RMB"
PRESS, RELEASE = "Press", "Release"


class ProjectionMode:
    """`camera.projection_mode(ti.ui.ProjectionMode.Perspective | Orthogonal)`."""
    Perspective = "perspective"
    Orthogonal = "orthogonal"


def _xyz(v, name: str) -> tuple:
    a = np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, np.float64).reshape(-1)
    if a.shape != (3,):
        raise SpiradValueError(f"{name} must have 3 components, got {np.asarray(v).shape}")
    return tuple(float(x) for x in a)


def _vec3(x, y, z):
    from ..data.matrix import Vector
    return Vector([float(x), float(y), float(z)])


def _rows3(data, name: str, n=None) -> np.ndarray:
    """(n, 3) float64 from a 3-vector field / ndarray / numpy array."""
    a = np.asarray(data.to_numpy() if hasattr(data, "to_numpy") else data, np.float64)
    a = a.reshape(-1, 3) if a.ndim >= 1 and a.shape[-1] == 3 else a
    if a.ndim != 2 or a.shape[1] != 3 or (n is not None and len(a) != n):
        raise SpiradValueError(f"{name} must be a field of {'%d ' % n if n else ''}3-vectors, got "
                               f"shape {np.asarray(a).shape}")
    return a


class Camera:
    """GGUI's camera: `position`, `lookat`, `up`, `fov` (degrees, vertical), `z_near`, `z_far`,
    `projection_mode`, `left` / `right` / `top` / `bottom` (orthographic), `curr_position` /
    `curr_lookat` / `curr_up` (vectors), `track_user_inputs(window, ...)`."""

    def __init__(self):
        self.fov_degrees, self.near, self.far = 45.0, 0.1, 1000.0
        self.mode = ProjectionMode.Perspective
        self.ortho = [-1.0, 1.0, -1.0, 1.0]
        self.position(0.0, 0.0, 0.0)
        self.lookat(0.0, 0.0, 1.0)
        self.up(0.0, 1.0, 0.0)
        self.last_mouse_x = self.last_mouse_y = None

    def position(self, x, y, z):
        """Set where the camera is."""
        self.position_xyz = (float(x), float(y), float(z))
        self.curr_position = _vec3(x, y, z)

    def lookat(self, x, y, z):
        """Set the point the camera looks at."""
        self.lookat_xyz = (float(x), float(y), float(z))
        self.curr_lookat = _vec3(x, y, z)

    def up(self, x, y, z):
        """Set the camera's up direction."""
        self.up_xyz = (float(x), float(y), float(z))
        self.curr_up = _vec3(x, y, z)

    def fov(self, fov):
        """Vertical field of view in degrees (perspective; 45 by default)."""
        self.fov_degrees = float(fov)

    def projection_mode(self, mode):
        """`ProjectionMode.Perspective` (the default) or `ProjectionMode.Orthogonal`."""
        if mode not in (ProjectionMode.Perspective, ProjectionMode.Orthogonal):
            raise SpiradValueError(f"projection mode must be ti.ui.ProjectionMode.Perspective or "
                                   f"Orthogonal, got {mode!r}")
        self.mode = mode

    def left(self, v):
        """Orthographic view volume: left edge."""
        self.ortho[0] = float(v)

    def right(self, v):
        """Orthographic view volume: right edge."""
        self.ortho[1] = float(v)

    def bottom(self, v):
        """Orthographic view volume: bottom edge."""
        self.ortho[2] = float(v)

    def top(self, v):
        """Orthographic view volume: top edge."""
        self.ortho[3] = float(v)

    def z_near(self, v):
        """Near clipping distance (0.1 by default)."""
        self.near = float(v)

    def z_far(self, v):
        """Far clipping distance (1000 by default)."""
        self.far = float(v)

    def get_view_matrix(self):
        """4x4 world-to-view matrix, row major (numpy)."""
        return scene_render.view_matrix(self.position_xyz, self.lookat_xyz, self.up_xyz)

    def get_projection_matrix(self, aspect):
        """4x4 projection matrix for a width / height `aspect`, row major (numpy)."""
        return scene_render.projection_matrix(self, float(aspect))

    def track_user_inputs(self, window, movement_speed=1.0, yaw_speed=2.0, pitch_speed=2.0,
                          hold_key=None):
        """Move with w / s / a / d / e / q held (forward, back, left, right, up, down); off
        screen no key is ever held, so the camera stays where it is. (Mouse-look is not
        followed: the picture is for watching a run.)"""
        front = np.subtract(self.lookat_xyz, self.position_xyz)
        front /= max(np.linalg.norm(front), 1e-12)
        up = np.asarray(self.up_xyz)
        left = np.cross(up, front)
        step = np.zeros(3)
        for key, d in (("w", front), ("s", -front), ("a", left), ("d", -left), ("e", up),
                       ("q", -up)):
            if window.is_pressed(key):
                step += d * movement_speed
        self.position(*(np.asarray(self.position_xyz) + step))
        self.lookat(*(np.asarray(self.position_xyz) + front))



def _groups(n_vertices, indices, vertex_offset, vertex_count, index_offset, index_count, k):
    """(m, k) vertex indices of the triangles (k = 3) or segments (k = 2) Taichi's `mesh` /
    `lines` draw: consecutive vertices from `vertex_offset` (`vertex_count` of them), or the
    index field / array `indices` from `index_offset` (`index_count` of them) shifted by
    `vertex_offset`; a trailing incomplete group is dropped."""
    v0 = int(vertex_offset)
    if indices is None:
        idx = np.arange(v0, n_vertices if vertex_count is None else v0 + int(vertex_count))
    else:
        idx = np.asarray(indices.to_numpy() if hasattr(indices, "to_numpy") else indices,
                         np.int64).reshape(-1)
        i0 = int(index_offset)
        idx = idx[i0:len(idx) if index_count is None else i0 + int(index_count)] + v0
    return idx[: len(idx) // k * k].reshape(-1, k)

class Scene:
    """GGUI's 3-D scene, re-declared every frame: `set_camera`, `particles`, `mesh`, `lines`,
    `point_light`, `ambient_light`; drawn by `canvas.scene(scene)`."""

    def __init__(self):
        self.camera = None
        self._items, self._lights, self._ambient = [], [], (0.1, 0.1, 0.1)

    def set_camera(self, camera):
        """The camera the scene is drawn from."""
        if not isinstance(camera, Camera):
            raise SpiradValueError(f"set_camera needs an sd.ui.Camera, got {type(camera).__name__}")
        self.camera = camera

    def point_light(self, pos, color):
        """A point light at `pos` with colour `color` (r, g, b in [0, 1]) for this frame."""
        self._lights.append((_xyz(pos, "pos"), _xyz(color, "color")))

    def ambient_light(self, color):
        """The ambient colour (0.1, 0.1, 0.1 by default)."""
        self._ambient = _xyz(color, "color")

    @staticmethod
    def _colors(n, color, per_vertex_color):
        if per_vertex_color is not None:
            return _rows3(per_vertex_color, "per_vertex_color", n)
        return np.tile(np.asarray(_xyz(color, "color")), (n, 1))

    def particles(self, centers, radius, color=(0.5, 0.5, 0.5), per_vertex_color=None,
                  per_vertex_radius=None, index_offset: int = 0, index_count: int = None):
        """Spheres at the 3-vector field `centers`, `radius` in world units (or a
        `per_vertex_radius` field), one colour or a `per_vertex_color` field."""
        p = _rows3(centers, "centers")
        n = len(p)
        r = (np.asarray(per_vertex_radius.to_numpy() if hasattr(per_vertex_radius, "to_numpy")
                        else per_vertex_radius, np.float64).reshape(n)
             if per_vertex_radius is not None else np.full(n, float(radius)))
        c = self._colors(n, color, per_vertex_color)
        end = n if index_count is None else index_offset + int(index_count)
        sl = slice(int(index_offset), end)
        self._items.append(("particles", (p[sl], r[sl], c[sl])))

    def mesh(self, vertices, indices=None, normals=None, color=(0.5, 0.5, 0.5),
             per_vertex_color=None, two_sided=False, index_offset=0, index_count=None,
             vertex_offset=0, vertex_count=None, show_wireframe=False):
        """Triangles over the 3-vector field `vertices` (consecutive triples, or the int field
        `indices`), flat shaded; a triangle's colour is the mean of its corners' colours."""
        v = _rows3(vertices, "vertices")
        c = self._colors(len(v), color, per_vertex_color)
        idx = _groups(len(v), indices, vertex_offset, vertex_count, index_offset, index_count, 3)
        self._items.append(("mesh", (v[idx], c[idx].mean(axis=1))))

    def lines(self, vertices, width, indices=None, color=(0.5, 0.5, 0.5),
              per_vertex_color=None, vertex_offset=0, vertex_count=None, index_offset=0,
              index_count=None):
        """Segments between consecutive pairs of `vertices` (or of `indices`), `width` pixels."""
        v = _rows3(vertices, "vertices")
        c = self._colors(len(v), color, per_vertex_color)
        idx = _groups(len(v), indices, vertex_offset, vertex_count, index_offset, index_count, 2)
        self._items.append(("lines", (v[idx], c[idx].mean(axis=1), float(width))))

    def mesh_instance(self, *args, **kwargs):
        """Not drawn off screen: a clear error (use `mesh` once per instance)."""
        raise SpiradNotSupportedError("sd.ui.Scene.mesh_instance is not supported (the off-screen "
                                      "GGUI draws particles, mesh and lines): call scene.mesh "
                                      "once per instance")

    def _next_frame(self):
        self._items, self._lights = [], []


class Canvas:
    """The window's picture: `set_background_color`, `set_image`, `scene(scene)`."""

    def __init__(self, win):
        self._win = win

    def set_background_color(self, color):
        """Fill the picture with `color` (r, g, b in [0, 1]); the background of later frames."""
        self._win._background = _xyz(color, "color")
        self._win._raster.clear(self._win._background)

    def set_image(self, img):
        """Replace the picture with an image ([x, y], y up; (w, h) or (w, h, 3 | 4) floats in
        [0, 1], or a field / ndarray of them) of the window's size."""
        a = np.asarray(img.to_numpy() if hasattr(img, "to_numpy") else img, np.float32)
        if a.ndim == 2:
            a = np.repeat(a[:, :, None], 3, axis=2)
        r = self._win._raster
        if a.shape[:2] != (r.width, r.height) or a.shape[2] < 3:
            raise SpiradValueError(f"set_image needs an image of shape ({r.width}, {r.height}, 3 "
                                   f"| 4) (the window's res), got {a.shape}")
        r.planes[...] = np.moveaxis(a[:, :, :3], -1, 0)

    def scene(self, scene):
        """Draw `scene` (its items of this frame) over the picture."""
        if scene.camera is None:
            raise SpiradValueError("canvas.scene: the scene has no camera (scene.set_camera)")
        scene_render.draw(self._win._raster, scene.camera, scene._items, scene._lights,
                          scene._ambient)

    def _two_d(self, what):
        raise SpiradNotSupportedError(f"sd.ui canvas.{what} (2-D drawing in a GGUI window) is not "
                                      f"supported: draw 2-D pictures with sd.GUI")

    def circles(self, *a, **k):
        """Not supported: 2-D drawing is `sd.GUI`'s (a clear error)."""
        self._two_d("circles")

    def lines(self, *a, **k):
        """Not supported: 2-D drawing is `sd.GUI`'s (a clear error)."""
        self._two_d("lines")

    def triangles(self, *a, **k):
        """Not supported: 2-D drawing is `sd.GUI`'s (a clear error)."""
        self._two_d("triangles")


class Gui:
    """The imgui panel. Widgets are not drawn (see the module docstring): each returns the value
    it is given, `button` False, `text` nothing."""

    @contextlib.contextmanager
    def sub_window(self, name, x, y, width, height):
        """`with gui.sub_window(name, x, y, w, h) as w:` — the widgets go on `w`."""
        yield self

    def begin(self, name, x, y, width, height):
        """Start a panel (`end()` closes it)."""

    def end(self):
        """Close the panel `begin` opened."""

    def text(self, text, color=None):
        """A line of text (not drawn)."""

    def checkbox(self, text, old_value):
        """Returns `old_value`."""
        return old_value

    def slider_int(self, text, old_value, minimum, maximum):
        """Returns `old_value`."""
        return old_value

    def slider_float(self, text, old_value, minimum, maximum):
        """Returns `old_value`."""
        return old_value

    def color_edit_3(self, text, old_value):
        """Returns `old_value`."""
        return old_value

    def button(self, text):
        """Returns False (nobody can press it)."""
        return False


class Event:
    """An input event: `type` (`PRESS` / `RELEASE`) and `key`."""

    def __init__(self, type_, key):
        self.type, self.key = type_, key


class Window:
    """`sd.ui.Window(name, res, vsync=False, show_window=True, fps_limit=1000, pos=(100, 100))`:
    Taichi's GGUI window (module docstring: drawn off screen, shown where a window can open)."""

    def __init__(self, name, res, vsync=False, show_window=True, fps_limit=1000,
                 pos=(100, 100)):
        from .. import options
        self.name = name
        self.res = (int(res[0]), int(res[1]))
        if self.res[0] <= 0 or self.res[1] <= 0:
            raise SpiradValueError(f"res must be positive, got {res}")
        self._raster = _Raster(self.res)
        self._background = (0.0, 0.0, 0.0)
        self._scene = Scene()
        self._canvas = Canvas(self)
        self._events, self._pressed = deque(), set()
        self._cursor = (0.5, 0.5)
        self._running = True
        self.frames = 0
        self._frame_limit = options.get("SPIRAD_GUI_FRAMES") or 0
        self.event = None
        self._tk = None
        if show_window:
            reason = _window.unavailable_reason()
            if reason is None:
                self._tk = _window.TkWindow(name, self.res, self._input, self._close)
            else:
                warnings.warn(f"sd.ui.Window({name!r}): {reason}; drawing off screen "
                              f"(window.save_image(file) still writes images)", RuntimeWarning,
                              stacklevel=2)

    # -- lifetime and frames ---------------------------------------------------------------

    @property
    def running(self) -> bool:
        """False once the window was closed, `running = False` was set, or (off screen) after
        `SPIRAD_GUI_FRAMES` frames where that is set."""
        return self._running

    @running.setter
    def running(self, value):
        self._running = bool(value)

    def get_canvas(self) -> Canvas:
        """The window's canvas."""
        return self._canvas

    def get_scene(self) -> Scene:
        """The window's scene."""
        return self._scene

    def get_gui(self) -> Gui:
        """The imgui panel."""
        return Gui()

    GUI = property(get_gui, doc="The imgui panel (Taichi's older name).")

    def show(self):
        """End the frame: show it (where a window is open), then start the next one (the
        picture cleared to the background, the scene emptied)."""
        if self._tk is not None:
            self._tk.present(to_rows(self._raster.img))
        self.frames += 1
        if self._tk is None and self._frame_limit and self.frames >= self._frame_limit:
            self._running = False
        self._raster.clear(self._background)
        self._scene._next_frame()

    def save_image(self, filename):
        """Write the picture drawn so far this frame to `filename` (.png; .jpg / .bmp with
        Pillow)."""
        write_image(str(filename), to_rows(self._raster.img))

    def get_image_buffer_as_numpy(self) -> np.ndarray:
        """The picture so far this frame, (width, height, 4) float32 RGBA, [x, y] with y up."""
        rgb = self._raster.img
        return np.concatenate([rgb, np.ones(rgb.shape[:2] + (1,), np.float32)], axis=2)

    def get_window_shape(self) -> tuple:
        """(width, height)."""
        return self.res

    def destroy(self):
        """Close the window (drawing and save_image keep working off screen)."""
        if self._tk is not None:
            self._tk.close()
            self._tk = None
        self._running = False

    # -- input ------------------------------------------------------------------------------

    def _input(self, kind, key, x, y, delta):
        if x is not None:
            self._cursor = (x / self.res[0], (self.res[1] - 1 - y) / self.res[1])
        if kind == "move":
            return
        if kind == "press":
            self._pressed.add(key)
        else:
            self._pressed.discard(key)
        self._events.append(Event(PRESS if kind == "press" else RELEASE, key))

    def _close(self):
        self._running = False

    def _poll(self):
        if self._tk is not None:
            self._tk.poll()

    def get_events(self, tag=None) -> list:
        """The waiting events (of type `tag`, `PRESS` or `RELEASE`, where given), consumed."""
        self._poll()
        if tag not in (None, PRESS, RELEASE):
            raise SpiradValueError(f"unrecognized event tag {tag!r}: use ti.ui.PRESS or RELEASE")
        out = [e for e in self._events if tag is None or e.type == tag]
        self._events = deque(e for e in self._events if not (tag is None or e.type == tag))
        return out

    def get_event(self, tag=None) -> bool:
        """Pop the next waiting event (of type `tag`) into `window.event`; False if none."""
        self._poll()
        for e in self._events:
            if tag is None or e.type == tag:
                self._events.remove(e)
                self.event = e
                return True
        return False

    def is_pressed(self, *keys) -> bool:
        """Whether any of `keys` is held (never, off screen)."""
        self._poll()
        held = self._pressed
        return any(k in held or (k in (SHIFT, ALT, CTRL) and (k + "_L" in held
                                                              or k + "_R" in held))
                   for k in keys)

    def get_cursor_pos(self) -> tuple:
        """The mouse position in [0, 1]^2 (the centre, off screen)."""
        self._poll()
        return self._cursor
