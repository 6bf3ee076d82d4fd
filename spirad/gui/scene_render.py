"""Off-screen drawing of a 3-D scene (`sd.ui.Scene`) onto the 2-D raster canvas of `sd.GUI`
(`canvas.py`): a camera projection, one flat shade per item, and the painter's algorithm.

Why a painter's rasterizer rather than a GPU pipeline: `sd.ui` is Taichi's GGUI where no window
can open (no display, CI, a helper machine); its pictures are for looking at a run, not for
measuring it, and numpy draws the few thousand particles or triangles of an example in
milliseconds with no GPU, driver or shader toolchain. Items are sorted far to near and each is
drawn over the ones behind it (`Canvas` composites in item order), so nearer particles hide
farther ones as a depth buffer would, except where two items cut through each other.

Conventions are GGUI's (Taichi 1.7.4, `python/taichi/ui/camera.py`): a right-handed look-at view
(the camera looks from `position` towards `lookat`, `up` upwards), a perspective projection with
a vertical field of view `fov` in degrees, or an orthographic one; a particle's radius is in
world units. Shading: `colour * (ambient + sum of light colour * max(0, n . l))` with `n` the
unit vector from the item to the camera (a particle's side facing the viewer) or the triangle's
normal turned towards the camera, `l` the unit vector to each point light.
"""
from __future__ import annotations

import numpy as np


def view_matrix(position, lookat, up) -> np.ndarray:
    """4x4 world-to-view matrix (row major): the camera at the origin looking down -z."""
    eye = np.asarray(position, np.float64)
    f = np.asarray(lookat, np.float64) - eye
    f = f / max(np.linalg.norm(f), 1e-12)
    s = np.cross(f, np.asarray(up, np.float64))
    s = s / max(np.linalg.norm(s), 1e-12)
    u = np.cross(s, f)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = s, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def projection_matrix(cam, aspect: float) -> np.ndarray:
    """4x4 view-to-clip matrix (row major, OpenGL depth range), perspective or orthographic."""
    n, fa = cam.near, cam.far
    m = np.zeros((4, 4))
    if cam.mode == "perspective":
        f = 1.0 / np.tan(np.radians(cam.fov_degrees) / 2)
        m[0, 0], m[1, 1] = f / aspect, f
        m[2, 2], m[2, 3] = (fa + n) / (n - fa), 2 * fa * n / (n - fa)
        m[3, 2] = -1.0
    else:
        l, r, b, t = cam.ortho
        m[0, 0], m[1, 1], m[2, 2] = 2 / (r - l), 2 / (t - b), -2 / (fa - n)
        m[0, 3], m[1, 3], m[2, 3] = -(r + l) / (r - l), -(t + b) / (t - b), -(fa + n) / (fa - n)
        m[3, 3] = 1.0
    return m


class Projector:
    """World points -> canvas positions in [0, 1]^2 (y up), view depths, pixel scale."""

    def __init__(self, cam, res: tuple):
        self.cam, self.res = cam, res
        self.view = view_matrix(cam.position_xyz, cam.lookat_xyz, cam.up_xyz)
        self.proj = projection_matrix(cam, res[0] / res[1])

    def __call__(self, p: np.ndarray):
        """(n, 3) points -> ((n, 2) canvas positions, (n,) distance in front of the camera,
        (n,) pixels per world unit at that depth); points behind the near plane get NaN."""
        ph = np.concatenate([p, np.ones((len(p), 1))], axis=1)
        v = ph @ self.view.T
        c = v @ self.proj.T
        depth = -v[:, 2]
        w = c[:, 3]
        with np.errstate(divide="ignore", invalid="ignore"):
            xy = (c[:, :2] / w[:, None] + 1.0) / 2.0
        xy[depth < self.cam.near] = np.nan
        scale = self.proj[1, 1] * self.res[1] / 2.0
        px = scale / depth if self.cam.mode == "perspective" else np.full(len(p), scale)
        return xy, depth, px


def shade(colors: np.ndarray, points: np.ndarray, normals: np.ndarray, lights, ambient):
    """Flat shading: (n, 3) colours lit by the point lights [(pos, colour)] and the ambient."""
    light = np.broadcast_to(np.asarray(ambient, np.float64), points.shape).copy()
    for pos, col in lights:
        l = np.asarray(pos, np.float64) - points
        l /= np.maximum(np.linalg.norm(l, axis=1, keepdims=True), 1e-12)
        light += np.maximum(0.0, np.sum(normals * l, axis=1))[:, None] * np.asarray(col)
    return np.clip(colors * light, 0.0, 1.0).astype(np.float32)


def draw(canvas, cam, items, lights, ambient) -> None:
    """Draw the scene's items ('particles' / 'mesh' / 'lines' tuples) far to near."""
    proj = Projector(cam, (canvas.width, canvas.height))
    eye = np.asarray(cam.position_xyz, np.float64)
    for kind, data in items:   # each call is drawn in order, as GGUI draws its calls
        if kind == "particles":
            centers, radius, colors = data
            xy, depth, px = proj(centers)
            n = eye - centers
            n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
            rgb = shade(colors, centers, n, lights, ambient)
            order = np.argsort(-depth, kind="stable")
            canvas.circles(xy[order], (radius * px)[order], rgb[order])
        elif kind == "mesh":
            tri, colors = data                       # (m, 3, 3) corners, (m, 3) colours
            cen = tri.mean(axis=1)
            n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
            n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
            n *= np.where(np.sum(n * (eye - cen), axis=1) < 0, -1.0, 1.0)[:, None]
            rgb = shade(colors, cen, n, lights, ambient)
            xy = [proj(tri[:, k])[0] for k in range(3)]
            order = np.argsort(-proj(cen)[1], kind="stable")
            keep = order[np.all([np.isfinite(x[order]).all(axis=1) for x in xy], axis=0)]
            canvas.triangles(xy[0][keep], xy[1][keep], xy[2][keep], rgb[keep])
        else:   # lines: (m, 2, 3) segments, (m, 3) colours, width in pixels
            seg, colors, width = data
            a, b = proj(seg[:, 0])[0], proj(seg[:, 1])[0]
            ok = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
            canvas.lines(a[ok], b[ok], np.full(int(ok.sum()), width / 2.0),
                         colors[ok].astype(np.float32))
