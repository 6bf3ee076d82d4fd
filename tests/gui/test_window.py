"""sd.GUI in a real window on a virtual X screen (Xvfb): the window's pixels, read back by
`xwd` from the X server, equal the expected picture, and Tk's input arrives as Taichi's events.

Needs the Debian packages xvfb and x11-apps (scripts/install.sh, .ci/run) and tkinter. Where
SPIRAD_REQUIRE_ARCHS is set (the CI run), a missing piece fails the test instead of skipping it."""
import json
import os
import select
import shutil
import subprocess
import sys

import pytest

from tests.gui.images import assert_close
from tests.gui.xwd import read_xwd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _missing() -> str | None:
    for tool, package in (("Xvfb", "xvfb"), ("xwd", "x11-apps")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt install {package})"
    try:
        import tkinter  # noqa: F401
    except ImportError:
        return "tkinter is not installed (apt install python3-tk)"
    return None


@pytest.fixture
def display():
    """A fresh Xvfb server; its display name (':N', the number chosen by the server)."""
    reason = _missing()
    if reason:
        if os.environ.get("SPIRAD_REQUIRE_ARCHS"):
            pytest.fail(f"the window test cannot run: {reason}")
        pytest.skip(reason)
    r, w = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", "640x480x24",
                             "-nolisten", "tcp"], pass_fds=(w,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    os.close(w)
    try:
        number = b""
        while not number.endswith(b"\n"):
            ready, _, _ = select.select([r], [], [], 30)
            chunk = os.read(r, 16) if ready else b""
            assert chunk, "Xvfb did not start"
            number += chunk
        yield ":" + number.decode().strip()
    finally:
        os.close(r)
        proc.terminate()
        proc.wait(timeout=30)


def test_window_shows_the_picture_and_reports_input(display, tmp_path):
    env = dict(os.environ, DISPLAY=display, PYTHONPATH=ROOT + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    env.pop("WAYLAND_DISPLAY", None)
    env.pop("SPIRAD_GUI_SHOW", None)
    shot = tmp_path / "window.xwd"
    r = subprocess.run([sys.executable, os.path.join(HERE, "window_child.py"), str(shot)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    from spirad.gui.image_io import read_png
    assert_close(read_xwd(str(shot)), read_png(os.path.join(HERE, "expected", "scene.png")),
                 "window screenshot")
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    events = [(e["type"], e["key"]) for e in lines if "type" in e]
    assert events == [("Move", "Motion"), ("Press", "LMB"), ("Release", "LMB"), ("Move", "Wheel"),
                      ("Press", "Shift_L"), ("Press", "a"), ("Press", " "), ("Press", "Escape"),
                      ("Release", "Shift_L"), ("Press", "WMClose")], events
    by_key = {e["key"]: e for e in lines if "type" in e}
    assert by_key["LMB"]["pos"] == [32 / 320, (240 - 1 - 24) / 240]    # y up, in [0, 1]
    assert by_key["Wheel"]["delta"] == [0, -120]
    assert by_key["a"]["modifier"] == ["Shift"] and by_key["Escape"]["pos"] == by_key["LMB"]["pos"]
    assert lines[-2] == {"running": False, "cursor": by_key["LMB"]["pos"]}
    assert "Window close button clicked" in lines[-1]["raised"]
