"""When a mission video shows its landmark: one rule for the renderer that measures it, the
mission planner that estimates it before rendering and QC that re-derives it from the stored
segmentation frames.

A frame shows the landmark when its instance pixels cover at least ``MIN_VISIBLE_SHARE`` of
the frame (0.2 %: about 25x25 px at 640x480, 56x56 px at 1440x1080). A *sighting* is a run of
such frames; a gap shorter than ``MIN_SIGHTING_SEC`` does not split a sighting (a lamp post
passing in front) and a run shorter than it is not one (a corner at the frame edge for two
frames). The visible count is the number of sightings. A count is *robust* when it stays the
same with the share threshold and the duration each scaled by ``RULE_MARGIN`` either way; rows
whose count is not robust are dropped, since a viewer could fairly answer either way.

UAV-DualCog decides visibility on a grid sampled over the landmark's box faces
(``GRID_N`` x ``GRID_N`` per face, a sample visible when its depth is at most the occluder
depth + ``DEPTH_MARGIN_M``; visible when ``MIN_VISIBLE_POINTS`` samples, ``MIN_VISIBLE_RATIO``
of all and a ``MIN_BBOX_PX`` span are visible). That grid counts samples in empty air inside
a tree's box as seen and misses a roof that fills the frame from 2 m above, so skyqa reports
the grid statistics per frame for compatibility and decides on instance pixels.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

GRID_N = 8
MIN_VISIBLE_POINTS = 16
MIN_VISIBLE_RATIO = 0.08
MIN_BBOX_PX = 4
DEPTH_MARGIN_M = 0.2
MIN_VISIBLE_SHARE = 0.002
MIN_SIGHTING_SEC = 0.5
RULE_MARGIN = 1.5


def runs(flags: Sequence[bool]) -> list[tuple[int, int]]:
    """Runs of True as inclusive (start, end) index pairs."""
    out: list[tuple[int, int]] = []
    start = None
    for i, f in enumerate([*flags, False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            out.append((start, i - 1))
            start = None
    return out


def frame_visible(pixels: int, width: int, height: int) -> bool:
    # the same comparison as sightings() makes on a share, so a frame's flag and its sighting agree
    return pixels / (width * height) >= MIN_VISIBLE_SHARE


def sightings(
    shares: Sequence[float],
    fps: float,
    min_share: float = MIN_VISIBLE_SHARE,
    min_sec: float = MIN_SIGHTING_SEC,
) -> list[tuple[int, int]]:
    """Inclusive (start, end) frames of each sighting, from per-frame instance-pixel shares."""
    frames = max(1, round(min_sec * fps))
    merged: list[list[int]] = []
    for a, b in runs([s >= min_share for s in shares]):
        if merged and a - merged[-1][1] - 1 < frames:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged if b - a + 1 >= frames]


def count_is_robust(shares: Sequence[float], fps: float, margin: float = RULE_MARGIN) -> bool:
    """The sighting count is the same under every threshold and duration within the margin."""
    counts = {
        len(sightings(shares, fps, MIN_VISIBLE_SHARE * a, MIN_SIGHTING_SEC * b))
        for a, b in itertools.product((1 / margin, 1.0, margin), repeat=2)
    }
    return len(counts) == 1


def box_surface_grid(
    center: NDArray[np.float64], size: NDArray[np.float64], n: int = GRID_N
) -> NDArray[np.float64]:
    """``6*n*n`` samples at cell centres of the box faces."""
    s = (np.arange(n) + 0.5) / n - 0.5
    u, v = (a.ravel() for a in np.meshgrid(s, s))
    faces = []
    for axis in range(3):
        a, b = [k for k in range(3) if k != axis]
        for side in (-0.5, 0.5):
            f = np.zeros((n * n, 3))
            f[:, axis] = side
            f[:, a], f[:, b] = u, v
            faces.append(f)
    out: NDArray[np.float64] = center + np.concatenate(faces) * size
    return out
