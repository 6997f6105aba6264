"""Instances: connected components when the sensor gives none, and per-instance statistics."""

from __future__ import annotations

from typing import TypedDict

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage


def connected_instances(
    points: NDArray[np.floating],
    semantic: NDArray[np.integer],
    voxel: float,
    min_points: int,
    stuff: set[int],
) -> NDArray[np.uint32]:
    """26-connected flood fill per class over ``voxel`` cells (UAV-DualCog's instance rule).

    Components with fewer than ``min_points`` points, and stuff classes, get instance 0.
    """
    out = np.zeros(len(points), dtype=np.uint32)
    next_id = 1
    structure = np.ones((3, 3, 3), dtype=bool)
    for cls in np.unique(semantic):
        if cls == 0 or int(cls) in stuff:
            continue
        sel = np.flatnonzero(semantic == cls)
        idx = np.floor(np.asarray(points)[sel] / voxel).astype(np.int64)
        lo = idx.min(axis=0)
        idx -= lo
        shape = tuple(int(v) + 1 for v in idx.max(axis=0))
        grid = np.zeros(shape, dtype=bool)
        grid[idx[:, 0], idx[:, 1], idx[:, 2]] = True
        labels, _ = ndimage.label(grid, structure=structure)
        comp = labels[idx[:, 0], idx[:, 1], idx[:, 2]]
        counts = np.bincount(comp)
        for c in np.unique(comp):
            if c == 0 or counts[c] < min_points:
                continue
            out[sel[comp == c]] = next_id
            next_id += 1
    return out


def pca_yaw_deg(xy: NDArray[np.floating]) -> float:
    """Angle of the principal axis of the XY covariance, in (-90, 90] degrees."""
    if len(xy) < 3:
        return 0.0
    cov = np.cov(np.asarray(xy, dtype=np.float64).T)
    w, v = np.linalg.eigh(cov)
    major = v[:, int(np.argmax(w))]
    yaw = float(np.degrees(np.arctan2(major[1], major[0])))
    if yaw <= -90.0:
        yaw += 180.0
    elif yaw > 90.0:
        yaw -= 180.0
    return round(yaw, 3)


def oriented_extent(points: NDArray[np.floating], yaw_deg: float) -> tuple[float, float, float]:
    """Length along ``yaw_deg``, width across it, and height of ``points`` (N, 3)."""
    pts = np.asarray(points, dtype=np.float64)
    if len(pts) == 0:
        return (0.0, 0.0, 0.0)
    yaw = np.radians(yaw_deg)
    along = pts[:, 0] * np.cos(yaw) + pts[:, 1] * np.sin(yaw)
    across = -pts[:, 0] * np.sin(yaw) + pts[:, 1] * np.cos(yaw)
    return (float(np.ptp(along)), float(np.ptp(across)), float(np.ptp(pts[:, 2])))


class InstanceStats(TypedDict):
    center: list[float]
    aabb_min: list[float]
    aabb_max: list[float]
    size: list[float]
    yaw_deg: float
    point_count: int


def instance_stats(points: NDArray[np.floating], instance: NDArray[np.integer]) -> dict[int, InstanceStats]:
    """Centre (mean), AABB, size, PCA yaw and point count of every instance id > 0."""
    out: dict[int, InstanceStats] = {}
    ids = np.asarray(instance)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    bounds = np.flatnonzero(np.diff(sorted_ids)) + 1
    for group in np.split(order, bounds):
        iid = int(ids[group[0]])
        if iid == 0:
            continue
        p = np.asarray(points, dtype=np.float64)[group]
        lo, hi = p.min(axis=0), p.max(axis=0)
        out[iid] = {
            "center": [round(float(v), 4) for v in p.mean(axis=0)],
            "aabb_min": [round(float(v), 4) for v in lo],
            "aabb_max": [round(float(v), 4) for v in hi],
            "size": [round(float(v), 4) for v in hi - lo],
            "yaw_deg": pca_yaw_deg(p[:, :2]),
            "point_count": len(group),
        }
    return out
