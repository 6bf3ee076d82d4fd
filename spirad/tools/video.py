"""`sd.tools.VideoManager` (Taichi's `ti.tools.VideoManager`): frames written as PNG files, then
an animated GIF (our own coder, `spirad/gui/image_io.py`: no extra package) and an MP4 (through
the `ffmpeg` program, as in Taichi, when it is on PATH).

    video = sd.tools.VideoManager(output_dir="out", framerate=24, automatic_build=False)
    for frame in range(60):
        ...                                 # draw with a GUI, or compute an image
        video.write_frame(gui.get_image())  # any Taichi-layout image ([x, y], y up)
    video.make_video(gif=True, mp4=False)   # out/video.gif
"""
from __future__ import annotations

import os
import shutil
import subprocess
import warnings

from kernel_ir.errors import SpiradValueError

from ..gui.image_io import gif_bytes, read_image, to_rows, write_image
from .image import _host

FRAME_FN_TEMPLATE = "%06d.png"
FRAME_DIR = "frames"


class VideoManager:
    """Collects frames in `output_dir/frames/` and turns them into `output_dir/video.gif` /
    `video.mp4` (`video_filename` renames them). With `automatic_build` the videos are rebuilt
    after 4, 8, 16, ... frames, as in Taichi."""

    def __init__(self, output_dir, video_filename=None, width=None, height=None,
                 post_processor=None, framerate=24, automatic_build=True):
        if (width is None) != (height is None):
            raise SpiradValueError("VideoManager: give both width and height, or neither")
        self.width, self.height = width, height
        self.directory = str(output_dir)
        self.frame_directory = os.path.join(self.directory, FRAME_DIR)
        os.makedirs(self.frame_directory, exist_ok=True)
        self.video_filename = video_filename
        self.next_video_checkpoint = 4
        self.framerate = framerate
        self.post_processor = post_processor
        self.frame_counter = 0
        self.frame_fns = []
        self.automatic_build = automatic_build

    def get_output_filename(self, suffix: str) -> str:
        """The path of the video file with `suffix` ('.mp4', '.gif')."""
        name = "video" if not self.video_filename else os.path.splitext(self.video_filename)[0]
        return os.path.join(self.directory, name + suffix)

    def get_frame_directory(self) -> str:
        """The directory the frames are written to."""
        return self.frame_directory

    def write_frame(self, img) -> None:
        """Write one frame (a Taichi-layout image); an odd width / height loses its last
        column / row, as in Taichi (MP4's colour format needs even sizes)."""
        img = _host(img)
        img = img[: img.shape[0] // 2 * 2, : img.shape[1] // 2 * 2]
        if self.post_processor:
            img = self.post_processor.process(img)
        if self.width is None:
            self.width, self.height = img.shape[0], img.shape[1]
        fn = FRAME_FN_TEMPLATE % self.frame_counter
        self.frame_fns.append(fn)
        write_image(os.path.join(self.frame_directory, fn), to_rows(img))
        self.frame_counter += 1
        if self.automatic_build and self.frame_counter % self.next_video_checkpoint == 0:
            self.make_video()
            self.next_video_checkpoint *= 2

    def write_frames(self, images) -> None:
        """Write several frames (`write_frame` for each)."""
        for img in images:
            self.write_frame(img)

    def clean_frames(self) -> None:
        """Delete the frames this manager wrote."""
        for fn in self.frame_fns:
            path = os.path.join(self.frame_directory, fn)
            if os.path.exists(path):
                os.remove(path)

    def make_video(self, mp4=True, gif=True) -> None:
        """Build `video.gif` (always possible) and `video.mp4` (when `ffmpeg` is on PATH)."""
        paths = [os.path.join(self.frame_directory, fn) for fn in self.frame_fns]
        if not paths:
            raise SpiradValueError("VideoManager.make_video: no frame was written")
        if gif:
            with open(self.get_output_filename(".gif"), "wb") as f:
                f.write(gif_bytes([read_image(p) for p in paths], fps=self.framerate))
        if mp4:
            ffmpeg = shutil.which("ffmpeg")
            if ffmpeg is None:
                warnings.warn("VideoManager: ffmpeg is not on PATH, so no .mp4 was made (the "
                              ".gif and the PNG frames were)", RuntimeWarning, stacklevel=2)
                return
            subprocess.run([ffmpeg, "-loglevel", "error", "-y", "-framerate", str(self.framerate),
                            "-i", os.path.join(self.frame_directory, FRAME_FN_TEMPLATE),
                            "-s:v", f"{self.width}x{self.height}", "-c:v", "libx264",
                            "-pix_fmt", "yuv420p", self.get_output_filename(".mp4")], check=True)
