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

Confidence: a pixel's residual is measured in CIELAB (ΔE to the nearest shading of a colour), so
the lead of the best name over the next is a perceptual difference; below
``skyqa.vocab.colours.NAMING_MARGIN_DE`` the shade is not named (its family word, or nothing).
An object whose pixels split between two colour families (``TWO_TONE``) gets no single word.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from skyqa.sim.classes import COLOURS
from skyqa.sim.daylight import AMBIENT, SUNLIGHT
from skyqa.sim.mesh import WINDOW
from skyqa.vocab.colours import NAMING_MARGIN_DE, ColourCall, call_from_costs, family_of, srgb_to_lab

NAMES = list(COLOURS)
_ALBEDO = np.array([COLOURS[n] for n in NAMES], dtype=np.float32)
RESIDUAL_CAP_DE = 20.0  # a pixel that fits no shading of a colour costs this much (ΔE), not more
FIT_DE = 8.0  # a pixel this close (ΔE) to a colour's shading is explained by it
TWO_TONE = 1 / 3  # second family's share of the explained pixels, against the first's
MAX_PIXELS = 20_000
MIN_SIDE_PX = 4  # inside the line and its fringe, the narrowest box a colour is read from
_BINS = 8  # per channel, for the figure/ground histograms


def _line_px(h: int, w: int) -> int:
    """Width of the red box's line as the labeller package draws it (1/160 of the short side)."""
    return max(2, round(min(h, w) / 160))


def _runs(line: NDArray[np.bool_], min_len: int) -> list[tuple[int, int]]:
    """(start, end exclusive) of the runs of True in ``line`` at least ``min_len`` long."""
    padded = np.concatenate([[False], line, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True) if b - a >= min_len]


def red_box(img: NDArray[np.uint8]) -> tuple[int, int, int, int] | None:
    """Inner edges (x0, y0, x1, y1) of the drawn red box, or None if there is none; the line
    and its JPEG fringe (reddish pixels a thin object's box is mostly made of) are left out,
    so the edges of a box thinner than them cross (x1 <= x0 or y1 <= y0).

    The box is found as a closed red rectangle outline, not as the extent of every red pixel:
    a red car or roof elsewhere in the view is as red as the line and would stretch the box
    over background. Among closed outlines a hollow one wins (the drawn box around an object
    of another colour); a filled one (the box around a red object) otherwise."""
    px = img.astype(np.int16)
    # JPEG's chroma subsampling smears a 2 px line where it straddles a block row: reddish,
    # not pure red; one pixel of growth closes the corners it rounds off
    core = (px[:, :, 0] > 120) & (px[:, :, 0] - np.maximum(px[:, :, 1], px[:, :, 2]) > 60)
    red = core.copy()
    red[1:] |= core[:-1]
    red[:-1] |= core[1:]
    red[:, 1:] |= core[:, :-1]
    red[:, :-1] |= core[:, 1:]
    h, w = red.shape
    line = _line_px(h, w)
    inset = line + 2  # the line, its growth and its JPEG fringe
    best: tuple[bool, int, tuple[int, int, int, int]] | None = None
    for row in np.flatnonzero(red.sum(axis=1) >= 4):
        y = int(row)
        for xs, xe in _runs(red[y], 4):
            # both sides run down from this row, and a bottom line closes them
            for yb in range(y + 3, h):
                if not (red[yb, xs] and red[yb, xe - 1]):
                    break
            else:
                yb = h
            yb -= 1
            if yb - y < 3 or red[yb, xs:xe].mean() < 0.9:
                continue
            inner = red[y + inset : yb - inset + 1, xs + inset : xe - inset]
            # a box around a thin object is all outline: hollow, with nothing inside
            hollow = inner.size == 0 or float(inner.mean()) < 0.5
            key = (hollow, (xe - xs) * (yb - y + 1), (xs, y, xe, yb + 1))
            if best is None or key[:2] > best[:2]:
                best = key
    if best is None:
        return None
    xs, y0, xe, y1 = best[2]
    return (xs + inset, y0 + inset, xe - inset, y1 - inset)


def figure_and_ring(img: NDArray[np.uint8]) -> tuple[NDArray[np.float32], NDArray[np.float32], float]:
    """Pixels inside the box, pixels of a ring around it (as floats in [0, 1]), and the box's
    height/width ratio; the whole image and no ring when there is no box."""
    h, w = img.shape[:2]
    box = red_box(img)
    if box is None:
        whole = (img.reshape(-1, 3) / 255).astype(np.float32)
        return whole, np.zeros((0, 3), np.float32), h / max(1, w)
    x0, y0, x1, y1 = box
    if min(x1 - x0, y1 - y0) < MIN_SIDE_PX:
        # a box this thin holds the line's JPEG bleed, not the object: no colour to read
        empty = np.zeros((0, 3), np.float32)
        return empty, empty, (y1 - y0) / max(1, x1 - x0)
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
    """(pixels, albedos) RGB distance of each pixel to the nearest shading of each albedo (by
    default every named colour)."""
    return _nearest_shading(px, albedo)[0]


def _nearest_shading(
    px: NDArray[np.float32], albedo: NDArray[np.float32]
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """RGB distances (pixels, albedos) and the nearest shaded colours (pixels, albedos, 3)."""
    a = albedo * AMBIENT  # (K, 3): in shadow
    s = albedo * SUNLIGHT  # (K, 3): added by full sun
    diff = px[:, None, :] - a[None, :, :]
    lam = np.clip((diff * s[None]).sum(-1) / (s * s).sum(-1)[None], 0.0, 1.0)
    nearest = a[None] + lam[..., None] * s[None]
    dist: NDArray[np.float32] = np.linalg.norm(px[:, None, :] - nearest, axis=-1).astype(np.float32)
    return dist, nearest.astype(np.float32)


def shading_residuals_lab(
    px: NDArray[np.float32], albedo: NDArray[np.float32] = _ALBEDO
) -> NDArray[np.float32]:
    """(pixels, albedos) CIELAB ΔE of each pixel to the nearest shading of each albedo: how
    different a person would find the pixel from that colour under the light it is in."""
    _, nearest = _nearest_shading(px, albedo)
    out: NDArray[np.float32] = np.linalg.norm(
        srgb_to_lab(px)[:, None, :] - srgb_to_lab(nearest), axis=-1
    ).astype(np.float32)
    return out


def _not_window(px: NDArray[np.float32]) -> NDArray[np.bool_]:
    """Window glass on facades is part of a building but no colour of it."""
    out: NDArray[np.bool_] = shading_residuals(px, WINDOW[None])[:, 0] > 0.03
    return out


@dataclass(frozen=True)
class ObjectColour:
    """What the figure pixels of all views say about the object's colour."""

    costs: dict[str, float]  # per palette name: mean capped ΔE of the figure pixels to its shading
    shares: dict[str, float]  # per colour family: share of the figure pixels it explains best

    @property
    def two_tone(self) -> bool:
        """A second colour family explains at least ``TWO_TONE`` as many figure pixels as the
        first: a roof over walls, a cab before a box, a pole under a panel. Which part a person
        names is not in the pixels, so no single colour word is sure."""
        top = sorted(self.shares.values(), reverse=True)
        return len(top) > 1 and top[0] > 0 and top[1] >= TWO_TONE * top[0]

    def call(self, margin: float = NAMING_MARGIN_DE) -> ColourCall:
        """The colour word (:func:`skyqa.vocab.colours.call_from_costs`), none for a two-tone object."""
        call = call_from_costs(self.costs, margin)
        return replace(call, word=None) if self.two_tone else call


def measure_colour(views: list[tuple[NDArray[np.float32], NDArray[np.float32]]]) -> ObjectColour | None:
    """Per-name costs and per-family shares of the figure pixels of every view (each view counts
    the same, however many pixels its box holds), or None when no view has figure pixels."""
    cost = np.zeros(len(NAMES), np.float64)
    share = np.zeros(len(NAMES), np.float64)
    total = 0.0
    for inside, ring in views:
        inside, ring = _thin(inside), _thin(ring)
        weight = figure_weights(inside, ring) * _not_window(inside)
        if weight.sum() <= 0:
            continue
        w = weight / weight.sum()
        res = shading_residuals_lab(inside)
        cost += w @ np.minimum(res, RESIDUAL_CAP_DE)
        fits = res.min(axis=1) < FIT_DE
        share += np.bincount(res.argmin(axis=1)[fits], weights=w[fits], minlength=len(NAMES))
        total += 1.0
    if total == 0:
        return None
    families: dict[str, float] = {}
    for n, v in zip(NAMES, share / total, strict=True):
        families[family_of(n)] = families.get(family_of(n), 0.0) + float(v)
    return ObjectColour({n: float(c) for n, c in zip(NAMES, cost / total, strict=True)}, families)
