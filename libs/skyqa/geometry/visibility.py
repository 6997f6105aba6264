"""When a mission frame shows its landmark: one rule for the renderer that measures it and the
mission planner that estimates it before rendering.

UAV-DualCog's rule: the landmark's box surface is sampled as a ``GRID_N`` x ``GRID_N`` grid on
each of its 6 faces; a sample is visible when it projects into the frame and its depth is at
most the rendered depth + ``DEPTH_MARGIN_M``; the landmark is visible when at least
``MIN_VISIBLE_POINTS`` samples and ``MIN_VISIBLE_RATIO`` of all samples are visible and the
visible samples span at least ``MIN_BBOX_PX``. skyqa adds: a landmark whose instance pixels
cover ``MIN_PIXEL_SHARE`` of the frame is visible whatever its grid says (flying low over a
roof puts most samples out of frame while the roof fills the picture).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

GRID_N = 8
MIN_VISIBLE_POINTS = 16
MIN_VISIBLE_RATIO = 0.08
MIN_BBOX_PX = 4
MIN_PIXEL_SHARE = 0.05
DEPTH_MARGIN_M = 0.2


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
