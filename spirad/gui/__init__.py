"""`sd.GUI`, Taichi's 2-D GUI: numpy drawing, a Tk window where there is a display, PNG / GIF
files everywhere (docs/gui.md). Imports nothing but numpy until a window opens."""
from .gui import GUI, EType, hex_to_rgb, rgb_to_hex

__all__ = ["GUI", "EType", "hex_to_rgb", "rgb_to_hex"]
