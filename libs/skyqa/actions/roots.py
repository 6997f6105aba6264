"""Root states: a grid over the scene with several headings per cell, kept where the capsule
stands clear of the scene (Reasoning-Structured Videos: a 2 m grid, 8 yaws, capsule-overlap
filtered)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from skyqa.actions.motion import Clearance, execute, overlaps
from skyqa.actions.space import Kinematics, Root, wrap_deg

GROUND_GAP_M = 0.05  # the capsule hovers this far above the ground, not touching it


def grid_roots(
    kin: Kinematics,
    scene: Clearance,
    extent: tuple[float, float, float, float],
    ground_z: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    spacing_m: float = 2.0,
    yaws: int = 8,
    altitude_m: float | None = None,
    margin_m: float = 0.0,
) -> list[Root]:
    """Every clear root: cells of ``spacing_m`` over ``extent`` (x0, x1, y0, y1), ``yaws``
    headings each (multiples of the yaw step), the capsule centre at street level (standing on
    the ground) or ``altitude_m`` above the ground."""
    x0, x1, y0, y1 = extent
    xs = np.arange(np.ceil(x0 / spacing_m) * spacing_m, x1 + 1e-9, spacing_m)
    ys = np.arange(np.ceil(y0 / spacing_m) * spacing_m, y1 + 1e-9, spacing_m)
    if not len(xs) or not len(ys):
        return []
    gx, gy = np.meshgrid(xs, ys, indexing="xy")
    xy = np.column_stack([gx.ravel(), gy.ravel()])
    lift = kin.capsule.half_height_m + GROUND_GAP_M if altitude_m is None else altitude_m
    z = ground_z(xy) + lift
    centres = np.column_stack([xy, z])
    clear = ~overlaps(scene, centres, kin.capsule, margin_m)
    # headings must be whole yaw steps: ``yaws`` of them when the yaw step divides them evenly,
    # else every heading of the nearest coarser grid
    stride = max(1, kin.n // yaws)
    headings = [wrap_deg(k * stride * kin.space.yaw_deg) for k in range(kin.n // stride)]
    return [
        Root(round(float(x), 6), round(float(y), 6), round(float(zc), 6), yaw)
        for x, y, zc in centres[clear]
        for yaw in headings
    ]


def path_clear(kin: Kinematics, actions: list[str], root: Root, scene: Clearance, margin_m: float) -> bool:
    """Whether the body, moved through nothing, keeps ``margin_m`` beyond its capsule from the
    scene at every frame (a plan on a map that the real scene may still block)."""
    frames = execute(kin, actions, root, None).frames
    centres = np.unique(np.array([f[:3] for f in frames]), axis=0)
    return not bool(overlaps(scene, centres, kin.capsule, margin_m).any())
