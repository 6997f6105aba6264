"""Name the colour of the object in a red box, under any shading.

Two problems make the most frequent pixel colour wrong: the box holds background too, and
shading darkens a face (a dark red wall in shadow is nearest to black, a white one to gray).

Figure and ground: the box is tight around the object, so a colour that is as common in a thin
ring just outside the box as inside it is background; each pixel is weighted by how much more
common its colour is inside.

Shading: under daylight a surface of albedo ``c`` shows ``c * (AMBIENT + SUNLIGHT * lam)``
for some ``lam`` in [0, 1]. Each named colour is fitted to each pixel with its best ``lam``,
and the object's colour is the one whose fits leave the least residual over all its pixels. A
pixel alone cannot tell a gray wall in shade from a dark gray one in sun; the object's shaded
and sunlit faces together can, because only the right albedo reaches both its darkest and its
brightest pixels.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from skyqa.sim.classes import COLOURS
from skyqa.sim.daylight import AMBIENT, SUNLIGHT
from skyqa.sim.mesh import WINDOW

NAMES = list(COLOURS)
_ALBEDO = np.array([COLOURS[n] for n in NAMES], dtype=np.float32)
RESIDUAL_CAP = 0.12  # a pixel that fits no shading of a colour costs this much, not more
MAX_PIXELS = 20_000
_BINS = 8  # per channel, for the figure/ground histograms


def _line_px(h: int, w: int) -> int:
    """Width of the red box's line as the labeller package draws it (1/160 of the short side)."""
    return max(2, round(min(h, w) / 160))


def red_box(img: NDArray[np.uint8]) -> tuple[int, int, int, int] | None:
    """Inner edges (x0, y0, x1, y1) of the drawn red box, or None if there is none; the line
    and its JPEG fringe (reddish pixels a thin object's box is mostly made of) are left out."""
    red = (img[:, :, 0] > 200) & (img[:, :, 1] < 70) & (img[:, :, 2] < 70)
    rows, cols = np.flatnonzero(red.any(axis=1)), np.flatnonzero(red.any(axis=0))
    if len(rows) < 2 or len(cols) < 2:
        return None
    line = _line_px(*img.shape[:2]) + 2
    x0, y0 = int(cols[0]) + line, int(rows[0]) + line
    x1, y1 = int(cols[-1]) - line + 1, int(rows[-1]) - line + 1
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def figure_and_ring(img: NDArray[np.uint8]) -> tuple[NDArray[np.float32], NDArray[np.float32], float]:
    """Pixels inside the box, pixels of a ring around it (as floats in [0, 1]), and the box's
    height/width ratio; the whole image and no ring when there is no box."""
    h, w = img.shape[:2]
    box = red_box(img)
    if box is None:
        whole = (img.reshape(-1, 3) / 255).astype(np.float32)
        return whole, np.zeros((0, 3), np.float32), h / max(1, w)
    x0, y0, x1, y1 = box
    pad = max(4, round(0.15 * max(x1 - x0, y1 - y0)))
    gap = 2 * _line_px(h, w) + 4  # past the line and its fringe on both sides
    outer = np.zeros((h, w), bool)
    outer[max(0, y0 - gap - pad) : y1 + gap + pad, max(0, x0 - gap - pad) : x1 + gap + pad] = True
    outer[max(0, y0 - gap) : y1 + gap, max(0, x0 - gap) : x1 + gap] = False
    inside = (img[y0:y1, x0:x1].reshape(-1, 3) / 255).astype(np.float32)
    ring = (img[outer] / 255).astype(np.float32)
    return inside, ring, (y1 - y0) / max(1, x1 - x0)


def _thin(px: NDArray[np.float32]) -> NDArray[np.float32]:
    return px[:: len(px) // MAX_PIXELS + 1] if len(px) > MAX_PIXELS else px


def _bins(px: NDArray[np.float32]) -> NDArray[np.int64]:
    q = np.minimum((px * _BINS).astype(np.int64), _BINS - 1)
    out: NDArray[np.int64] = (q[:, 0] * _BINS + q[:, 1]) * _BINS + q[:, 2]
    return out


def figure_weights(inside: NDArray[np.float32], ring: NDArray[np.float32]) -> NDArray[np.float32]:
    """Per inside pixel, 1 - (share of its colour bin in the ring / share inside), at least 0."""
    if len(ring) == 0:
        return np.ones(len(inside), np.float32)
    b_in, b_ring = _bins(inside), _bins(ring)
    p_in = np.bincount(b_in, minlength=_BINS**3) / max(1, len(b_in))
    p_ring = np.bincount(b_ring, minlength=_BINS**3) / max(1, len(b_ring))
    ratio = p_ring[b_in] / np.maximum(p_in[b_in], 1e-9)
    out: NDArray[np.float32] = np.clip(1.0 - ratio, 0.0, 1.0).astype(np.float32)
    return out


def shading_residuals(px: NDArray[np.float32], albedo: NDArray[np.float32] = _ALBEDO) -> NDArray[np.float32]:
    """(pixels, albedos) distance of each pixel to the nearest shading of each albedo (by
    default every named colour)."""
    a = albedo * AMBIENT  # (K, 3): in shadow
    s = albedo * SUNLIGHT  # (K, 3): added by full sun
    diff = px[:, None, :] - a[None, :, :]
    lam = np.clip((diff * s[None]).sum(-1) / (s * s).sum(-1)[None], 0.0, 1.0)
    out: NDArray[np.float32] = np.linalg.norm(diff - lam[..., None] * s[None], axis=-1).astype(np.float32)
    return out


def _not_window(px: NDArray[np.float32]) -> NDArray[np.bool_]:
    """Window glass on facades is part of a building but no colour of it."""
    out: NDArray[np.bool_] = shading_residuals(px, WINDOW[None])[:, 0] > 0.03
    return out


def object_colour(views: list[tuple[NDArray[np.float32], NDArray[np.float32]]]) -> tuple[str, float]:
    """The named colour that explains the figure pixels of every view best, and the share of
    the weighted pixels it fits within the cap (how sure it is)."""
    cost = np.zeros(len(NAMES), np.float64)
    fitted = np.zeros(len(NAMES), np.float64)
    total = 0.0
    for inside, ring in views:
        inside, ring = _thin(inside), _thin(ring)
        weight = figure_weights(inside, ring) * _not_window(inside)
        if weight.sum() <= 0:
            continue
        res = np.minimum(shading_residuals(inside), RESIDUAL_CAP)
        # every view counts the same, however many pixels its box holds
        w = weight / weight.sum()
        cost += w @ res
        fitted += w @ (res < RESIDUAL_CAP / 2)
        total += 1.0
    if total == 0:
        return "gray", 0.0
    best = int(np.argmin(cost))
    return NAMES[best], float(fitted[best] / total)
