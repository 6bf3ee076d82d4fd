"""`sd.GUI`: Taichi's 2-D GUI (`ti.GUI`, Taichi 1.7.4's `python/taichi/ui/gui.py`) with the same
names, arguments, defaults and pictures, so Taichi programs that draw run unchanged.

Coordinates are normalized, [0, 1]^2 with the origin at the lower left and y up; sizes (`radius`,
`font_size`) are pixels; colours are 0xRRGGBB integers, or per-item integer arrays. The picture is
drawn by numpy (`canvas.py`), shown in a Tk window where there is a display (`window.py`) and
written to PNG by `show(file)` (`image_io.py`) everywhere; with no display (or
`show_gui=False`, or `SPIRAD_GUI_SHOW=0`) nothing opens and the same calls draw off screen.
"""
from __future__ import annotations

import enum
import math
import numbers
import time
import warnings
from collections import deque

import numpy as np

from kernel_ir.errors import SpiradNotSupportedError, SpiradValueError

from .canvas import Canvas
from .font import text_mask
from .image_io import to_rows, write_image
from . import window as _window


class EType(enum.Enum):
    """Event types (Taichi's `ti.GUI.PRESS`, `RELEASE`, `MOTION`)."""
    Move = "Move"
    Press = "Press"
    Release = "Release"


def rgb_to_hex(c) -> int:
    """(r, g, b) floats in [0, 1] -> 0xRRGGBB (each channel `int(x * 255)` clipped to 0..255).
    Arrays of shape (3, n) give n colours."""
    def to255(x):
        return np.clip(np.int32(np.asarray(x) * 255), 0, 255)
    return (to255(c[0]) << 16) + (to255(c[1]) << 8) + to255(c[2])


def hex_to_rgb(color) -> tuple:
    """0xRRGGBB -> (r, g, b) floats in [0, 1]."""
    r, g, b = (color >> 16) & 0xFF, (color >> 8) & 0xFF, color & 0xFF
    return r / 255, g / 255, b / 255


def _host(a):
    """numpy data of a spirad field / ndarray (to_numpy), or of anything np.asarray takes."""
    from ..data.field import _HostArray
    return a.to_numpy() if isinstance(a, _HostArray) else a


def _points(a, name: str, n=None) -> np.ndarray:
    """(n, 2) float64 positions from (n, 2) or (n, 2, 1) data."""
    p = np.asarray(_host(a), np.float64)
    if p.ndim == 3 and p.shape[2] == 1:
        p = p[:, :, 0]
    if p.ndim != 2 or p.shape[1] != 2 or (n is not None and p.shape[0] != n):
        want = f"({n}, 2)" if n is not None else "(n, 2)"
        raise SpiradValueError(f"{name} must be an array of shape {want}, got shape {p.shape}")
    return p


def _point(a, name: str) -> np.ndarray:
    """One position: a 2-sequence (list, tuple, array of shape (2,) or (2, 1), sd.Vector)."""
    p = np.asarray(_host(a), np.float64).reshape(-1)
    if p.shape != (2,):
        raise SpiradValueError(f"{name} must have 2 coordinates, got {np.asarray(a).shape}")
    return p[None, :]


def _colors(color, n: int, name: str = "color") -> np.ndarray:
    """(n, 3) float32 RGB from one 0xRRGGBB integer or an array of n of them."""
    if isinstance(color, (numbers.Integral, np.integer)):
        c = np.full(n, int(color), np.int64)
    else:
        c = np.asarray(_host(color))
        if c.dtype.kind not in "uif" or c.shape != (n,):
            raise SpiradValueError(f"{name} must be an int (e.g. 0x956333) or an integer array of shape "
                             f"({n},), got {color!r:.80}")
        c = c.astype(np.int64)
    rgb = np.stack([(c >> 16) & 255, (c >> 8) & 255, c & 255], axis=1)
    return rgb.astype(np.float32) / 255.0


def _radii(radius, n: int) -> np.ndarray:
    if isinstance(radius, numbers.Number):
        return np.full(n, float(radius))
    r = np.asarray(_host(radius), np.float64)
    if r.shape != (n,):
        raise SpiradValueError(f"radius must be a number or an array of shape ({n},), got shape {r.shape}")
    return r


def _fast_words(a: np.ndarray) -> np.ndarray:
    """Taichi's fast-GUI pixel words of an RGB(A) image `a` (w, h, 3 | 4) of u8 or floats:
    floats scaled by 255 in their own precision and truncated into [0, 255], as Taichi's
    conversion kernel does, so a u8 colour c stored as c / 255 gives c back."""
    if a.ndim != 3 or a.shape[2] not in (3, 4) or a.dtype not in (np.uint8, np.float32, np.float64):
        raise SpiradValueError(f"GUI(fast_gui=True).set_image takes an RGB / RGBA image of u8, f32 "
                               f"or f64 (w, h, 3 | 4), got {a.dtype} of shape {a.shape}")
    if a.dtype == np.uint8:
        c = a[:, :, :3].astype(np.uint32)
    else:
        scaled = a[:, :, :3] * a.dtype.type(255)
        c = np.clip(np.trunc(scaled), 0, 255).astype(np.uint32)
    words = (c[..., 0] << 16) + (c[..., 1] << 8) + c[..., 2]   # [x, y], y up
    return words[:, ::-1].T.reshape(-1)                         # row j from the top: j * w + x


class GUI:
    """Taichi's 2-D GUI. `GUI(name='Taichi', res=512, background_color=0x0, show_gui=True,
    fullscreen=False, fast_gui=False)`; `res` is (width, height) or one int for a square."""

    Event = None  # set below (Taichi's `ti.GUI.Event`)

    # event keys (Taichi's names)
    SHIFT, ALT, CTRL, ESCAPE, RETURN, TAB, BACKSPACE = ("Shift", "Alt", "Control", "Escape",
                                                        "Return", "Tab", "BackSpace")
    SPACE, UP, DOWN, LEFT, RIGHT, CAPSLOCK = " ", "Up", "Down", "Left", "Right", "Caps_Lock"
    LMB, MMB, RMB, EXIT, WHEEL, MOVE = "LMB", "MMB", "RMB", "WMClose", "Wheel", "Motion"
    # event types
    MOTION, PRESS, RELEASE = EType.Move, EType.Press, EType.Release

    def __init__(self, name="Taichi", res=512, background_color=0x0, show_gui=True,
                 fullscreen=False, fast_gui=False):
        self.name = name
        if isinstance(res, numbers.Number):
            res = (res, res)
        self.res = (int(res[0]), int(res[1]))
        if self.res[0] <= 0 or self.res[1] <= 0:
            raise SpiradValueError(f"res must be positive, got {res}")
        self.fast_gui = bool(fast_gui)   # `img` is then Taichi's packed 0xRRGGBB words
        self._fast_img = np.zeros(self.res[0] * self.res[1], np.uint32) if self.fast_gui else None
        self.canvas = Canvas(self.res)
        self.background_color = background_color
        self.key_pressed = set()
        self.event = None
        self.frame = 0
        self._events = deque()
        self._cursor = (0.0, 0.0)
        self._should_close = 0
        self._frame_delta_limit = 1.0 / 60   # Taichi's default: at most 60 frames a second
        self._last_frame = 0.0
        self._window = None
        if show_gui:
            reason = _window.unavailable_reason()
            if reason is None:
                self._window = _window.TkWindow(name, self.res, self._input, self._close_request,
                                                fullscreen=bool(fullscreen))
            else:
                warnings.warn(f"sd.GUI({name!r}): {reason}; drawing off screen (gui.show(file) "
                              f"still writes images)", RuntimeWarning, stacklevel=2)
        self.clear()

    # -- lifetime ----------------------------------------------------------------------------

    def __enter__(self):
        """`with sd.GUI(...) as gui:` closes the window at the end of the block."""
        return self

    def __exit__(self, e_type, val, tb):
        """Close the window."""
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        """Close the window (if any). Drawing and `show(file)` keep working off screen."""
        if self._window is not None:
            self._window.close()
            self._window = None

    @property
    def show_gui(self) -> bool:
        """Whether a window is open."""
        return self._window is not None

    # -- drawing ----------------------------------------------------------------------------

    def clear(self, color=None) -> None:
        """Fill the canvas with `color` (default: the background colour)."""
        color = self.background_color if color is None else color
        self.canvas.clear(_colors(color, 1)[0])

    def circle(self, pos, color=0xFFFFFF, radius=1) -> None:
        """One circle at `pos`, `radius` in pixels."""
        self.canvas.circles(_point(pos, "pos"), np.array([float(radius)]), _colors(color, 1))

    def circles(self, pos, radius=1, color=0xFFFFFF, palette=None, palette_indices=None) -> None:
        """Circles at `pos` (n, 2); `radius` a number or (n,) array; `color` an int or (n,)
        array, or `palette` (a list of ints) indexed by `palette_indices` (n,)."""
        pos = _points(pos, "pos")
        n = len(pos)
        if palette is not None:
            if palette_indices is None:
                raise SpiradValueError("palette must be used together with palette_indices")
            ind = np.asarray(_host(palette_indices))
            if ind.dtype.kind not in "ui" or ind.shape != (n,):
                raise SpiradValueError(f"palette_indices must be an integer array of shape ({n},), "
                                 f"got {ind.dtype} of shape {ind.shape}")
            if n and (ind.min() < 0 or ind.max() >= len(palette)):
                raise SpiradValueError(f"palette_indices must lie in [0, {len(palette)}) (the palette's "
                                 f"length), got [{ind.min()}, {ind.max()}]")
            colors = _colors(np.asarray(palette, np.int64)[ind], n)
        else:
            colors = _colors(color, n)
        self.canvas.circles(pos, _radii(radius, n), colors)

    def line(self, begin, end, radius=1, color=0xFFFFFF) -> None:
        """One line; `radius` is its half-width in pixels (round caps)."""
        self.canvas.lines(_point(begin, "begin"), _point(end, "end"), np.array([float(radius)]),
                          _colors(color, 1))

    def lines(self, begin, end, radius=1, color=0xFFFFFF) -> None:
        """Lines from `begin` (n, 2) to `end` (n, 2); `radius` / `color` one or per line."""
        begin = _points(begin, "begin")
        n = len(begin)
        end = _points(end, "end", n)
        self.canvas.lines(begin, end, _radii(radius, n), _colors(color, n))

    def triangle(self, a, b, c, color=0xFFFFFF) -> None:
        """One filled triangle."""
        self.canvas.triangles(_point(a, "a"), _point(b, "b"), _point(c, "c"), _colors(color, 1))

    def triangles(self, a, b, c, color=0xFFFFFF) -> None:
        """Filled triangles with corners `a`, `b`, `c` (each (n, 2)); `color` one or per item."""
        a = _points(a, "a")
        n = len(a)
        self.canvas.triangles(a, _points(b, "b", n), _points(c, "c", n), _colors(color, n))

    def rect(self, topleft, bottomright, radius=1, color=0xFFFFFF) -> None:
        """The outline of the axis-aligned rectangle with these corners."""
        (x0, y0), (x1, y1) = _point(topleft, "topleft")[0], _point(bottomright, "bottomright")[0]
        corners = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
        self.canvas.lines(corners, np.roll(corners, -1, axis=0), np.full(4, float(radius)),
                          _colors(color, 4))

    @staticmethod
    def _arrow_to_lines(orig, major, tip_scale=0.2, angle=45):
        a = math.radians(180 - angle)
        c, s = math.cos(a), math.sin(a)
        minor1 = np.stack([major[:, 0] * c - major[:, 1] * s, major[:, 0] * s + major[:, 1] * c], 1)
        minor2 = np.stack([major[:, 0] * c + major[:, 1] * s, -major[:, 0] * s + major[:, 1] * c], 1)
        end = orig + major
        return [(orig, end), (end, end + minor1 * tip_scale), (end, end + minor2 * tip_scale)]

    def arrows(self, orig, direction, radius=1, color=0xFFFFFF, **kwargs) -> None:
        """Arrows from `orig` (n, 2) along `direction` (n, 2); `tip_scale=0.2`, `angle=45`."""
        orig = _points(orig, "orig")
        direction = _points(direction, "direction", len(orig))
        for begin, end in self._arrow_to_lines(orig, direction, **kwargs):
            self.lines(begin, end, radius, color)

    def arrow(self, orig, direction, radius=1, color=0xFFFFFF, **kwargs) -> None:
        """One arrow from `orig` along `direction`."""
        self.arrows(_point(orig, "orig"), _point(direction, "direction"), float(radius), color,
                    **kwargs)

    def text(self, content, pos, font_size=15, color=0xFFFFFF) -> None:
        """`content` (may hold newlines) with its top-left corner at `pos`, `font_size` pixels
        high (the built-in bitmap font, `font.py`)."""
        mask = text_mask(str(content), float(font_size))
        if mask.size == 0:
            return
        x, y = _point(pos, "pos")[0] * self.res
        self.canvas.blend_mask(int(x) + 2, int(y) - mask.shape[1], mask, _colors(color, 1)[0])

    # -- images ------------------------------------------------------------------------------

    def cook_image(self, img) -> np.ndarray:
        """`img` as float32 (w, h, 4) in [0, 1] (Taichi's GUI image): unsigned integers scaled
        from their range, floats as they are; grey, RG, RGB or RGBA."""
        img = np.asarray(_host(img))
        if img.dtype.kind == "u":
            img = img.astype(np.float32) * np.float32(1 / np.iinfo(img.dtype).max)
        elif img.dtype.kind == "f":
            img = img.astype(np.float32)
        else:
            raise SpiradValueError(f"Data type {img.dtype} not supported in GUI.set_image: use floats "
                             f"in [0, 1] or unsigned integers")
        if img.ndim == 2:
            img = img[..., None]
        if img.ndim != 3 or img.shape[2] not in (1, 2, 3, 4):
            raise SpiradValueError(f"GUI.set_image: an image must be grey (w, h), RG, RGB or RGBA "
                             f"(w, h, 2 | 3 | 4), got shape {img.shape}")
        if img.shape[2] == 1:
            img = np.repeat(img, 4, axis=2)
        elif img.shape[2] < 4:
            img = np.concatenate([img, np.zeros(img.shape[:2] + (4 - img.shape[2],), np.float32)], 2)
        if img.shape[:2] != self.res:
            raise SpiradValueError(f"GUI.set_image: image resolution {img.shape[:2]} does not match "
                             f"the GUI resolution {self.res} (images are indexed [x, y])")
        return np.ascontiguousarray(img)

    def set_image(self, img) -> None:
        """Replace the canvas with `img`: a numpy array or spirad field / ndarray indexed [x, y]
        (y up) of shape (w, h), (w, h, 2 | 3 | 4), or a vector field of shape (w, h)."""
        self.canvas.img[...] = self.cook_image(img)[:, :, :3]
        if self.fast_gui:
            self._fast_img[:] = _fast_words(np.asarray(_host(img)))

    @property
    def img(self) -> np.ndarray:
        """The image last shown, as Taichi's GUI keeps it: with `fast_gui=True` one uint32 word
        0xRRGGBB per pixel, rows from the top (index `row * width + x`); otherwise float32
        (w, h, 4) RGBA indexed [x, y], y up."""
        return self._fast_img if self.fast_gui else self.get_image()

    def get_image(self) -> np.ndarray:
        """The canvas as float32 (w, h, 4) RGBA, [x, y] with y up (alpha 1)."""
        out = np.ones(self.res + (4,), np.float32)
        out[:, :, :3] = self.canvas.img
        return out

    def contour(self, scalar_field, normalize=False) -> None:
        """Show a scalar field with matplotlib's 'plasma' colour map (resampled bilinearly to
        the window); matplotlib must be installed."""
        try:
            from matplotlib import cm
        except ImportError:
            raise RuntimeError("GUI.contour needs matplotlib (pip install matplotlib)") from None
        f = np.asarray(_host(scalar_field), np.float64)
        if f.shape != self.res:
            u = np.linspace(0, f.shape[0] - 1, self.res[0])[:, None]
            v = np.linspace(0, f.shape[1] - 1, self.res[1])[None, :]
            i0, j0 = np.floor(u).astype(int), np.floor(v).astype(int)
            i1, j1 = np.minimum(i0 + 1, f.shape[0] - 1), np.minimum(j0 + 1, f.shape[1] - 1)
            fu, fv = u - i0, v - j0
            f = ((f[i0, j0] * (1 - fu) + f[i1, j0] * fu) * (1 - fv)
                 + (f[i0, j1] * (1 - fu) + f[i1, j1] * fu) * fv)
        if normalize:
            lo, hi = f.min(), f.max()
            f = (f - lo) / (hi - lo) if hi > lo else np.zeros_like(f)
        self.set_image(cm.plasma(f))

    @staticmethod
    def _field_base(w, h, bound):
        x = np.linspace(bound / w, 1 - bound / w, w)
        y = np.linspace(bound / h, 1 - bound / h, h)
        return np.stack(np.meshgrid(x, y, indexing="ij"), -1).reshape(w * h, 2)

    def point_field(self, radius, color=0xFFFFFF, bound=0.5) -> None:
        """A grid of circles whose radii are the (w, h) array `radius`."""
        radius = np.asarray(_host(radius), np.float64)
        if radius.ndim != 2:
            raise SpiradValueError(f"point_field: radius must be a 2-d array, got shape {radius.shape}")
        self.circles(self._field_base(*radius.shape, bound), radius=radius.reshape(-1), color=color)

    def arrow_field(self, direction, radius=1, color=0xFFFFFF, bound=0.5, **kwargs) -> None:
        """A grid of arrows along the (w, h, 2) array `direction`."""
        d = np.asarray(_host(direction), np.float64)
        if d.ndim != 3 or d.shape[2] != 2:
            raise SpiradValueError(f"arrow_field: direction must have shape (w, h, 2), got {d.shape}")
        self.arrows(self._field_base(d.shape[0], d.shape[1], bound), d.reshape(-1, 2),
                    radius=radius, color=color, **kwargs)

    def vector_field(self, vector_field, arrow_spacing=5, color=0xFFFFFF) -> None:
        """Arrows for every `arrow_spacing`-th vector of a (nx, ny, 2) field; the longest
        one-tenth of the window."""
        v = np.asarray(_host(vector_field), np.float64)
        nx, ny = v.shape[:2]
        scale = 0.1 / (np.linalg.norm(v, axis=-1).max() + 1e-16)
        x, y = np.arange(0, 1, arrow_spacing / nx), np.arange(0, 1, arrow_spacing / ny)
        begin = np.dstack(np.meshgrid(x, y)).reshape(-1, 2, order="F")
        incr = (v[::arrow_spacing, ::arrow_spacing] * scale).reshape(-1, 2, order="C")
        self.arrows(begin, incr, radius=1, color=color)

    # -- frames ------------------------------------------------------------------------------

    def show(self, file=None) -> None:
        """Show the frame in the window (at most `fps_limit` frames a second) and/or write it
        to `file` (.png; .jpg / .bmp with Pillow; folders are created); then clear the canvas."""
        if self._window is not None:
            self._update()
        if file:
            write_image(str(file), to_rows(self.canvas.img))
        self.frame += 1
        self.clear()

    def _update(self) -> None:
        if self._frame_delta_limit:
            wait = self._last_frame + self._frame_delta_limit - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
        self._last_frame = time.perf_counter()
        if self._should_close:
            self._should_close += 1
            if self._should_close > 5:
                raise RuntimeError("Window close button clicked, exiting... (use `while "
                                   "gui.running` to exit gracefully)")
        self._window.present(to_rows(self.canvas.img))
        if self.frame % 10 == 0 and self.frame:
            self._window.set_title(self.name)

    @property
    def fps_limit(self):
        """The most frames a second `show()` displays (None: no limit); 60 by default."""
        return None if not self._frame_delta_limit else 1 / self._frame_delta_limit

    @fps_limit.setter
    def fps_limit(self, value):
        self._frame_delta_limit = 0 if value is None else 1 / value

    # -- events ------------------------------------------------------------------------------

    def _input(self, kind: str, key: str, x, y, delta) -> None:
        """A window's input callback: x, y in window pixels, y down (None for keys)."""
        if x is None:   # a key: Taichi gives the last mouse position
            pos = self._cursor
        else:
            w, h = self.res
            pos = self._cursor = (x / w, (h - 1 - y) / h)
        e = GUI.Event()
        e.type = {"press": EType.Press, "release": EType.Release, "move": EType.Move}[kind]
        e.key, e.pos, e.delta = key, pos, tuple(delta)
        self._events.append(e)

    def _close_request(self) -> None:
        e = GUI.Event()
        e.type, e.key, e.pos, e.delta = EType.Press, GUI.EXIT, self._cursor, (0, 0)
        self._events.append(e)
        self._should_close += 1

    def has_key_event(self) -> bool:
        """Whether an input event is waiting."""
        if not self._events and self._window is not None:
            self._window.poll()
        return bool(self._events)

    def get_key_event(self):
        """The next input event (waits for one while the window is open)."""
        while not self._events:
            if self._window is None:
                raise RuntimeError("GUI.get_key_event: no window is open, so no event can come "
                                   "(check gui.has_key_event() or use get_event())")
            self._window.poll()
            time.sleep(0.005)
        e = self._events.popleft()
        e.modifier = [m for m in ("Shift", "Alt", "Control") if self.is_pressed(m)]
        if e.type == EType.Press:
            self.key_pressed.add(e.key)
        else:
            self.key_pressed.discard(e.key)
        return e

    def get_events(self, *e_filter):
        """Yield the waiting events that match the filter (keys, types, (type, key) pairs)."""
        f = EventFilter(*e_filter) if e_filter else None
        while self.has_key_event():
            e = self.get_key_event()
            if f is None or f.match(e):
                yield e

    def get_event(self, *e_filter) -> bool:
        """Pop waiting events until one matches; keep it in `gui.event` and return True."""
        for e in self.get_events(*e_filter):
            self.event = e
            return True
        return False

    def is_pressed(self, *keys) -> bool:
        """Whether any of `keys` is held (as seen by the events read so far)."""
        for key in keys:
            if key in ("Shift", "Alt", "Control") and (key + "_L" in self.key_pressed
                                                       or key + "_R" in self.key_pressed):
                return True
            if key in self.key_pressed:
                return True
        return False

    def get_cursor_pos(self) -> tuple:
        """The mouse position in [0, 1]^2 (origin lower left, y up)."""
        if self._window is not None:
            self._window.poll()
        return self._cursor

    @property
    def running(self) -> bool:
        """False once the window's close button was pressed or `running = False` was set."""
        return not self._should_close

    @running.setter
    def running(self, value):
        if value:
            self._should_close = 0
        elif not self._should_close:
            self._should_close = 1

    # -- widgets -----------------------------------------------------------------------------

    def slider(self, text, minimum, maximum, step=1):
        """Not supported (Taichi's widget): raises, naming what to use instead."""
        raise SpiradNotSupportedError("GUI.slider is not supported by sd.GUI: read keys with "
                                  "gui.get_event() and show the value with gui.text()")

    def label(self, text):
        """Not supported (Taichi's widget): raises, naming what to use instead."""
        raise SpiradNotSupportedError("GUI.label is not supported by sd.GUI: show values with gui.text()")

    def button(self, text, event_name=None):
        """Not supported (Taichi's widget): raises, naming what to use instead."""
        raise SpiradNotSupportedError("GUI.button is not supported by sd.GUI: read keys or clicks "
                                  "with gui.get_event()")


class Event:
    """One input event: `type` (PRESS, RELEASE, MOTION), `key`, `pos` (in [0, 1]^2),
    `modifier` (held 'Shift' / 'Alt' / 'Control'), `delta` (wheel)."""

    def __init__(self):
        self.type = None
        self.modifier = None
        self.pos = None
        self.key = None
        self.delta = None

    def __repr__(self):
        return f"GUI.Event(type={self.type}, key={self.key!r}, pos={self.pos})"


class EventFilter:
    """Matches events by key, by type, or by (type, key) pairs."""

    def __init__(self, *e_filter):
        self.filter = {tuple(e) if isinstance(e, list) else e for e in e_filter}

    def match(self, e) -> bool:
        return (e.type, e.key) in self.filter or e.type in self.filter or e.key in self.filter


GUI.Event = Event
GUI.EventFilter = EventFilter
