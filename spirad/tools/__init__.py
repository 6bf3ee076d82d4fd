"""`sd.tools` (Taichi's `ti.tools`): image files and frame sequences to video / GIF
(docs/gui.md)."""
from .video import VideoManager
from .image import imread, imresize, imshow, imwrite

__all__ = ["VideoManager", "imread", "imresize", "imshow", "imwrite"]
