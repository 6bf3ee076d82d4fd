"""The on-screen half of `sd.GUI`: a Tk window (tkinter, part of CPython) that shows the canvas
and turns Tk's input events into Taichi's.

Why Tk: the GUI is a 2-D bitmap viewer driven by the user's own loop (`while gui.running: ...
gui.show()`), and Tk's `update()` is exactly that — draw, process pending events, return — with
no GPU, driver or event-loop framework in between (wgpu's canvases present through a GPU surface
and schedule frames from their own loop); it ships with CPython on Linux, macOS and Windows
(Debian's system Python: `apt install python3-tk`), and its key names are the X11 keysym names
Taichi reports ("Escape", "Shift_L", "Return", ...).

`unavailable_reason()` says why no window can open here (no display, no tkinter, or
`SPIRAD_GUI_SHOW=0`); the GUI then draws off screen and `show(file)` still writes images.
"""
from __future__ import annotations

import os
import sys

import numpy as np


def unavailable_reason() -> str | None:
    """Why no window can be opened in this process, or None when one can."""
    from .. import options
    if not options.get("SPIRAD_GUI_SHOW"):
        return "SPIRAD_GUI_SHOW=0"
    if sys.platform not in ("darwin", "win32") and not (os.environ.get("DISPLAY")
                                                        or os.environ.get("WAYLAND_DISPLAY")):
        return "no display (DISPLAY is not set)"
    try:
        import tkinter  # noqa: F401
    except ImportError as e:
        return f"tkinter is not installed ({e}; Debian / Ubuntu: apt install python3-tk)"
    return None


class TkWindow:
    """One GUI window. `on_event(kind, key, x, y, delta)` receives input: kind 'press', 'release'
    or 'move'; x, y in window pixels (y down, as Tk gives them), None for keys."""

    _root = None   # one hidden Tk root per process; each window is a Toplevel of it

    def __init__(self, title: str, res: tuple, on_event, on_close, fullscreen: bool = False):
        import tkinter as tk
        self.width, self.height = res
        root = TkWindow._root
        if root is None:
            root = tk.Tk()
            root.withdraw()
            TkWindow._root = root
        self.top = tk.Toplevel(root)
        self.top.title(title)
        self.top.resizable(False, False)
        if fullscreen:
            self.top.attributes("-fullscreen", True)
        self.photo = tk.PhotoImage(master=self.top, width=self.width, height=self.height)
        self.label = tk.Label(self.top, image=self.photo, bd=0, highlightthickness=0,
                              padx=0, pady=0, background="black")
        self.label.pack()
        self._on_event = on_event
        self.top.protocol("WM_DELETE_WINDOW", on_close)
        self.top.bind("<KeyPress>", lambda e: self._key(e, "press"))
        self.top.bind("<KeyRelease>", lambda e: self._key(e, "release"))
        self.label.bind("<ButtonPress>", lambda e: self._button(e, "press"))
        self.label.bind("<ButtonRelease>", lambda e: self._button(e, "release"))
        self.label.bind("<Motion>", lambda e: on_event("move", "Motion", e.x, e.y, (0, 0)))
        self.label.bind("<MouseWheel>", lambda e: on_event("move", "Wheel", e.x, e.y,
                                                           (0, int(e.delta))))
        self.top.focus_force()
        self.closed = False
        root.update()

    def _key(self, e, kind: str) -> None:
        # Taichi reports the unshifted keysym: the character itself for ASCII ('a', ' ', '1'),
        # else the X11 keysym name ('Escape', 'Shift_L', 'Return', 'Up')
        num = e.keysym_num if isinstance(e.keysym_num, int) else 0   # '??' when Tk has none
        key = chr(num).lower() if 0 < num < 128 else e.keysym
        self._on_event(kind, key, None, None, (0, 0))   # keys: at the last mouse position

    def _button(self, e, kind: str) -> None:
        if e.num in (4, 5):   # X11 wheel: buttons 4 / 5, one event per notch
            if kind == "press":
                self._on_event("move", "Wheel", e.x, e.y, (0, 120 if e.num == 4 else -120))
            return
        key = {1: "LMB", 2: "MMB", 3: "RMB"}.get(e.num, f"Button{e.num}")
        self._on_event(kind, key, e.x, e.y, (0, 0))

    def present(self, rows: np.ndarray) -> None:
        """Show uint8 RGB rows (height, width, 3), top row first."""
        h, w = rows.shape[:2]
        self.photo.configure(data=b"P6 %d %d 255\n" % (w, h) + rows.tobytes(), format="PPM")
        self.poll()

    def poll(self) -> None:
        """Draw what changed and run the pending input callbacks."""
        if not self.closed:
            TkWindow._root.update()

    def set_title(self, title: str) -> None:
        if not self.closed:
            self.top.title(title)

    def window_id(self) -> int:
        """The native window id of the picture (an X11 window on Linux), for screenshots."""
        return int(self.label.winfo_id())

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.top.destroy()
            TkWindow._root.update()
        except Exception:   # the interpreter is shutting down, or Tk is gone
            pass
