"""Regenerate the expected pictures of tests/gui (run from the repository root):

    /path/to/taichi-1.7.4/python tests/gui/make_expected.py taichi   # expected/scene_taichi.png
    python tests/gui/make_expected.py spirad                          # expected/scene.png

scene_taichi.png is Taichi 1.7.4's own picture of `draw_scene` (its CPU canvas, show_gui=False):
the test that spirad draws what Taichi draws. scene.png is spirad's picture of the scene plus
`draw_text`, checked by eye when it changes: the reference of the headless and the window tests.
"""
import os
import sys

from scene import BACKGROUND, RES, draw_scene, draw_text  # this script's directory

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected")

if __name__ == "__main__":
    if sys.argv[1:] == ["taichi"]:
        import taichi as ti
        ti.init(arch=ti.cpu)
        gui = ti.GUI("scene", RES, background_color=BACKGROUND, show_gui=False)
        draw_scene(gui)
        gui.show(os.path.join(HERE, "scene_taichi.png"))
    elif sys.argv[1:] == ["spirad"]:
        sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
        import spirad as sd
        gui = sd.GUI("scene", RES, background_color=BACKGROUND, show_gui=False)
        draw_scene(gui)
        draw_text(gui)
        gui.show(os.path.join(HERE, "scene.png"))
    else:
        sys.exit(__doc__)
