"""Root states: a grid over the scene with several headings per cell, kept where the capsule
stands clear of the scene (Reasoning-Structured Videos: a 2 m grid, 8 yaws, capsule-overlap
filtered), and the tests a planned path is placed with.

Against the simulator's own geometry the planner asks what the renderer will ask: a root is
kept by :func:`overlaps` without a margin (the renderer's root check) and a path by
:func:`runs_clear`, which runs :func:`execute`, the renderer's own sweep. Against a map that
may have holes (the fused cloud) it can only keep a margin (:func:`path_clear`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from skyqa.actions.motion import Clearance, execute, overlaps
from skyqa.actions.space import Kinematics, Root, wrap_deg

# the capsule hovers this far above the ground, not touching it. More than the 5-6 cm road tops
# of the procedural cities: the ground under a root is the lowest point of a 4 m map cell, so a
# root over a road beside the kerb was 5 cm above the ground and exactly touching the road top,
# a contact that float rounding decided (2168 of 34410 cells of procedural_9191_8; 10 at 0.1 m)
GROUND_GAP_M = 0.1


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


def runs_clear(kin: Kinematics, actions: list[str], root: Root, scene: Clearance) -> bool:
    """Whether the renderer, executing ``actions`` from ``root`` through ``scene``, records the
    root clear and no step blocked: the same call on the same geometry as the renderer's, so a
    path kept here is not routed to ``random_walk/`` for a collision when it is rendered."""
    ran = execute(kin, actions, root, scene)
    return ran.root_clear and not any(s.collision for s in ran.steps)
