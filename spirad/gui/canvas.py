"""The GUI's raster canvas: a float32 RGB image indexed [x, y] with y up (Taichi's image layout),
and numpy rasterizers for Taichi's 2-D primitives that draw thousands of items per call with no
Python loop over the items.

Each primitive follows Taichi 1.7.4's CPU canvas (`taichi/ui/gui/gui.h`, `gui.cpp`), so a program
draws the same picture on both:
- circle: centre at `pos * res`; pixel (i, j) is sampled at its corner (i, j); coverage
  `clamp(radius - distance, 0, 1)`, a one-pixel anti-aliased rim;
- line: a capsule of half-width `radius` around the segment, pixels sampled at their centres
  (i + 0.5, j + 0.5), coverage `clamp(radius - distance, 0, 1)`;
- triangle: the pixels whose centres lie inside (edges included), no anti-aliasing.
A zero-length line is a disk (Taichi divides by its length and draws NaNs).

Items are composited in call order, `dest = (1 - coverage) dest + coverage colour` (Taichi's
`lerp`: an opaque pixel gets the colour exactly) one item after the other, exactly as Taichi's loop over items does — also where anti-aliased rims overlap:
`_composite` sorts the contributions to a pixel by item and folds them in closed form.
"""
from __future__ import annotations

import numpy as np

_BATCH = 1 << 20        # candidate pixels expanded at once: bounds the memory of one call
_LINE_CHUNK = 16.0      # long lines are split into pieces of this many pixels (smaller boxes)


class Canvas:
    """The picture as three float32 planes `(3, width, height)`, [x, y] with y up; `img` is the
    `(width, height, 3)` view of them. Values are in [0, 1] (clipped when written out)."""

    def __init__(self, res: tuple):
        self.width, self.height = int(res[0]), int(res[1])
        self.planes = np.zeros((3, self.width, self.height), np.float32)

    @property
    def img(self) -> np.ndarray:
        return np.moveaxis(self.planes, 0, -1)

    def clear(self, rgb) -> None:
        self.planes[...] = np.asarray(rgb, np.float32)[:, None, None]

    # -- primitives: positions in [0, 1]^2 (y up), sizes in pixels, colours (n, 3) floats --------

    def circles(self, pos: np.ndarray, radius: np.ndarray, colors: np.ndarray) -> None:
        cx, cy = pos[:, 0] * self.width, pos[:, 1] * self.height
        ok = np.isfinite(cx) & np.isfinite(cy) & np.isfinite(radius) & (radius > 0)
        cx, cy, r, colors = cx[ok], cy[ok], radius[ok], colors[ok]
        x0, x1 = self._span(np.ceil(cx - r), np.floor(cx + r), self.width)
        y0, y1 = self._span(np.ceil(cy - r), np.floor(cy + r), self.height)

        def cover(item, px, py):
            d2 = (px - cx[item]) ** 2 + (py - cy[item]) ** 2
            return np.clip(r[item] - np.sqrt(d2), 0.0, 1.0)

        self._draw(x0, x1, y0, y1, cover, colors)

    def lines(self, begin: np.ndarray, end: np.ndarray, radius: np.ndarray,
              colors: np.ndarray) -> None:
        ax, ay = begin[:, 0] * self.width, begin[:, 1] * self.height
        bx, by = end[:, 0] * self.width, end[:, 1] * self.height
        ok = (np.isfinite(ax) & np.isfinite(ay) & np.isfinite(bx) & np.isfinite(by)
              & np.isfinite(radius) & (radius > 0))
        ax, ay, bx, by, r, colors = ax[ok], ay[ok], bx[ok], by[ok], radius[ok], colors[ok]
        length = np.hypot(bx - ax, by - ay)
        safe = np.where(length > 0, length, 1.0)
        dx = np.where(length > 0, (bx - ax) / safe, 1.0)
        dy = np.where(length > 0, (by - ay) / safe, 0.0)
        # long lines are split into pieces; a pixel belongs to the piece its projection falls in
        pieces = np.maximum(1, np.ceil(length / _LINE_CHUNK)).astype(np.int64)
        line = np.repeat(np.arange(len(ax)), pieces)
        k = np.arange(len(line)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        t0 = length[line] * k / pieces[line]
        t1 = length[line] * (k + 1) / pieces[line]
        pax, pay = ax[line] + dx[line] * t0, ay[line] + dy[line] * t0
        pbx, pby = ax[line] + dx[line] * t1, ay[line] + dy[line] * t1
        ri = np.ceil(r[line] + 0.5)
        x0, x1 = self._span(np.floor(np.minimum(pax, pbx) + 0.5) - ri,
                            np.floor(np.maximum(pax, pbx) + 0.5) + ri, self.width)
        y0, y1 = self._span(np.floor(np.minimum(pay, pby) + 0.5) - ri,
                            np.floor(np.maximum(pay, pby) + 0.5) + ri, self.height)
        inv = pieces / safe

        def cover(piece, px, py):
            i = line[piece]
            qx, qy = px + 0.5 - ax[i], py + 0.5 - ay[i]
            u = dx[i] * qy - dy[i] * qx             # across the line
            v = dx[i] * qx + dy[i] * qy             # along it
            owner = np.minimum((np.clip(v, 0.0, length[i]) * inv[i]).astype(np.int64),
                               pieces[i] - 1)
            along = np.where(v > 0, np.maximum(0.0, v - length[i]), v)
            alpha = np.clip(r[i] - np.sqrt(u * u + along * along), 0.0, 1.0)
            return np.where(owner == k[piece], alpha, 0.0)

        self._draw(x0, x1, y0, y1, cover, colors[line])

    def triangles(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, colors: np.ndarray) -> None:
        s = np.array([self.width, self.height], np.float64)
        a, b, c = a * s, b * s, c * s
        ok = np.isfinite(a).all(1) & np.isfinite(b).all(1) & np.isfinite(c).all(1)
        a, b, c, colors = a[ok], b[ok], c[ok], colors[ok]
        lo = np.minimum(np.minimum(a, b), c)
        hi = np.maximum(np.maximum(a, b), c)
        x0, x1 = self._span(np.floor(lo[:, 0]), np.ceil(hi[:, 0]) - 1, self.width)
        y0, y1 = self._span(np.floor(lo[:, 1]), np.ceil(hi[:, 1]) - 1, self.height)
        edges = [(a, b), (b, c), (c, a)]

        def cover(item, px, py):
            # Taichi: inside when cross(pixel - p, q - p) <= 0 has one sign for all three edges
            side = [(px + 0.5 - p[item, 0]) * (q[item, 1] - p[item, 1])
                    - (py + 0.5 - p[item, 1]) * (q[item, 0] - p[item, 0]) <= 0 for p, q in edges]
            return ((side[0] == side[1]) & (side[0] == side[2])).astype(np.float32)

        self._draw(x0, x1, y0, y1, cover, colors)

    def blend_mask(self, x0: int, y0: int, alpha: np.ndarray, rgb) -> None:
        """Blend `rgb` with coverage `alpha` (a (w, h) array, [x, y]) placed at pixel (x0, y0)."""
        w, h = alpha.shape
        xa, ya = max(0, -x0), max(0, -y0)
        xb, yb = min(w, self.width - x0), min(h, self.height - y0)
        if xa >= xb or ya >= yb:
            return
        a = alpha[None, xa:xb, ya:yb].astype(np.float32)
        region = self.planes[:, x0 + xa:x0 + xb, y0 + ya:y0 + yb]
        region[...] = region * (1 - a) + np.asarray(rgb, np.float32)[:, None, None] * a

    # -- the shared machinery ------------------------------------------------------------------

    @staticmethod
    def _span(lo: np.ndarray, hi: np.ndarray, size: int):
        """Clip inclusive pixel ranges to [0, size - 1] (as int64; empty where lo > hi)."""
        lo = np.clip(lo, -1, size).astype(np.int64)
        hi = np.clip(hi, -1, size).astype(np.int64)
        return np.maximum(lo, 0), np.minimum(hi, size - 1)

    def _draw(self, x0, x1, y0, y1, cover, colors) -> None:
        """Ask `cover(item, px, py)` for the coverage of every pixel of every item's box and
        composite the result. Boxes of one (bucketed) size are expanded together by
        broadcasting: item (m, 1, 1), px (m, W, 1), py (m, 1, H)."""
        bw, bh = np.maximum(x1 - x0 + 1, 0), np.maximum(y1 - y0 + 1, 0)
        live = np.flatnonzero((bw > 0) & (bh > 0))
        if len(live) == 0:
            return
        bucket_w, bucket_h = _bucket(bw[live]), _bucket(bh[live])
        shape_key = bucket_w * (int(bucket_h.max()) + 1) + bucket_h
        order = np.argsort(shape_key, kind="stable")
        cuts = np.flatnonzero(np.diff(shape_key[order])) + 1
        lins, items, alphas = [], [], []
        for group in np.split(order, cuts):
            W, H = int(bucket_w[group[0]]), int(bucket_h[group[0]])
            step = max(1, _BATCH // (W * H))
            for g0 in range(0, len(group), step):
                item = live[group[g0:g0 + step]]
                px = (x0[item][:, None] + np.arange(W)[None, :])[:, :, None]
                py = (y0[item][:, None] + np.arange(H)[None, :])[:, None, :]
                inside = (px <= x1[item][:, None, None]) & (py <= y1[item][:, None, None])
                it = item[:, None, None]
                alpha = cover(it, px.astype(np.float64), py.astype(np.float64))
                keep = (alpha > 0) & inside
                lin = px * self.height + py
                lins.append(np.broadcast_to(lin, keep.shape)[keep])
                items.append(np.broadcast_to(it, keep.shape)[keep])
                alphas.append(np.broadcast_to(alpha, keep.shape)[keep].astype(np.float32))
        self._composite(np.concatenate(lins), np.concatenate(items), np.concatenate(alphas),
                        colors.astype(np.float32))

    def _composite(self, lin, item, alpha, colors) -> None:
        """dest = (1 - alpha) dest + alpha colours[item] for every contribution, in item order
        per pixel (pixels are `x * height + y`)."""
        if len(lin) == 0:
            return
        flat = self.planes.reshape(3, -1)
        rgb = [np.ascontiguousarray(colors[:, ch]) for ch in range(3)]
        opaque = alpha >= 1
        if opaque.any():   # what lies under a later opaque contribution is never seen: drop it
            top = np.full(flat.shape[1], -1, np.int64)
            np.maximum.at(top, lin[opaque], item[opaque])
            seen = item >= top[lin]
            lin, item, alpha = lin[seen], item[seen], alpha[seen]
        hits = np.bincount(lin, minlength=flat.shape[1])
        one = hits[lin] == 1
        if one.any():      # pixels touched once: one lerp each
            p, i, a = lin[one], item[one], alpha[one]
            for ch in range(3):
                plane = flat[ch]
                plane[p] = plane[p] * (1 - a) + rgb[ch][i] * a
        if one.all():
            return
        lin, item, alpha = lin[~one], item[~one], alpha[~one]
        # sort the rest by (pixel, item); the alpha rides along in the low 16 bits
        item_bits = max(1, int(item.max()).bit_length())
        if int(lin.max()).bit_length() + item_bits + 16 <= 62:
            key = (lin << item_bits | item) << 16 | np.round(alpha * 65535).astype(np.int64)
            key.sort()
            alpha = (key & 0xFFFF).astype(np.float64) * (1 / 65535)
            key >>= 16
            item = key & ((1 << item_bits) - 1)
            lin = key >> item_bits
        else:
            order = np.lexsort((item, lin))
            lin, item, alpha = lin[order], item[order], alpha[order].astype(np.float64)
        first = np.r_[True, lin[1:] != lin[:-1]]
        starts = np.flatnonzero(first)
        last = np.r_[starts[1:], len(lin)] - 1
        seg = np.cumsum(first) - 1
        # ((d (1-a1) + c1 a1) (1-a2) + c2 a2) ... = d prod(1-a) + sum c_k a_k prod_{j>k}(1-a_j)
        lt = np.log(np.maximum(1.0 - alpha, 1e-12))
        cs = np.cumsum(lt)
        weight = alpha * np.exp(cs[last][seg] - cs)
        keep_dest = np.exp(cs[last] - cs[starts] + lt[starts])
        p = lin[starts]
        for ch in range(3):
            plane = flat[ch]
            acc = np.bincount(seg, weights=rgb[ch][item] * weight, minlength=len(starts))
            plane[p] = plane[p] * keep_dest + acc


def _bucket(size: np.ndarray) -> np.ndarray:
    """Round box sizes up so few distinct shapes remain: exact to 16, then multiples of 4 to 64,
    then of 16 (at most a quarter of a box is padding)."""
    return np.where(size <= 16, size, np.where(size <= 64, (size + 3) // 4 * 4,
                                               (size + 15) // 16 * 16))
