"""Run by test_window.py on a virtual screen: open an sd.GUI window, draw the test scene, show
it, screenshot the window with `xwd` (the X server's pixels, not ours), then feed it input
through Tk and print what `get_events` reports, one JSON line per event."""
import json
import os
import subprocess
import sys

import spirad as sd  # noqa: E402
from scene import BACKGROUND, RES, draw_scene, draw_text  # noqa: E402  (this script's directory)

shot = sys.argv[1]
gui = sd.GUI("spirad window test", RES, background_color=BACKGROUND)
assert gui.show_gui, "no window opened"
draw_scene(gui)
draw_text(gui)
gui.show()
gui.show()    # an empty frame, then the scene again: the window shows the latest frame
draw_scene(gui)
draw_text(gui)
gui.show()
w = gui._window
subprocess.run(["xwd", "-silent", "-id", str(w.window_id()), "-out", shot], check=True)
w.label.event_generate("<Motion>", x=32, y=24)
w.label.event_generate("<ButtonPress-1>", x=32, y=24)
w.label.event_generate("<ButtonRelease-1>", x=32, y=24)
w.label.event_generate("<ButtonPress-5>", x=32, y=24)
for keysym in ("Shift_L", "A", "space", "Escape"):
    w.top.event_generate("<KeyPress>", keysym=keysym)
w.top.event_generate("<KeyRelease>", keysym="Shift_L")
w.top.tk.call(w.top.protocol("WM_DELETE_WINDOW"))     # the close button
for e in gui.get_events():
    print(json.dumps({"type": e.type.name, "key": e.key, "pos": e.pos, "delta": e.delta,
                      "modifier": e.modifier}))
print(json.dumps({"running": gui.running, "cursor": gui.get_cursor_pos()}))
try:
    for _ in range(10):
        gui.show()
    print(json.dumps({"raised": None}))
except RuntimeError as e:   # Taichi: a close that the program ignores ends it after 5 frames
    print(json.dumps({"raised": str(e)}))
gui.close()
