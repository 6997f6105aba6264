"""Occlusion-aware view selection before rendering (UAV-DualCog's two tests).

1. Instance-level ray test: the ray from the eye to the target centre must not enter a
   neighbour's yaw-aligned box more than a margin before it reaches the target.
2. Point-visibility test: target points projected into a square image must survive a
   min-depth buffer built from the other points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage
from skyqa.geometry import pca_yaw_deg
from skyqa.sim import Intrinsics, Pose, project

from services.landmark.config import CollectConfig


@dataclass(frozen=True)
class OBB:
    center: NDArray[np.float64]
    half: NDArray[np.float64]
    yaw_deg: float


def neighbour_boxes(points: NDArray[np.float64], ids: NDArray[np.int64], min_points: int) -> dict[int, OBB]:
    boxes: dict[int, OBB] = {}
    for iid in np.unique(ids):
        pts = points[ids == iid]
        if iid <= 0 or len(pts) < min_points:
            continue
        yaw = pca_yaw_deg(pts[:, :2])
        c, s = math.cos(math.radians(yaw)), math.sin(math.radians(yaw))
        local = (pts[:, :2] - pts[:, :2].mean(axis=0)) @ np.array([[c, -s], [s, c]])
        lo = np.r_[local.min(axis=0), pts[:, 2].min()]
        hi = np.r_[local.max(axis=0), pts[:, 2].max()]
        mid_local = (lo + hi) / 2
        center_xy = pts[:, :2].mean(axis=0) + np.array([[c, -s], [s, c]]) @ mid_local[:2]
        boxes[int(iid)] = OBB(np.r_[center_xy, mid_local[2]], np.maximum((hi - lo) / 2, 0.2), yaw)
    return boxes


def ray_hits_obb(origin: NDArray[np.float64], direction: NDArray[np.float64], box: OBB) -> float | None:
    """Entry distance of the ray into the box (slab test in the box frame), or None."""
    c, s = math.cos(math.radians(box.yaw_deg)), math.sin(math.radians(box.yaw_deg))
    rot = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])  # world -> box
    o = rot @ (origin - box.center)
    d = rot @ direction
    t_near, t_far = -math.inf, math.inf
    for axis in range(3):
        if abs(d[axis]) < 1e-12:
            if abs(o[axis]) > box.half[axis]:
                return None
            continue
        t1 = (-box.half[axis] - o[axis]) / d[axis]
        t2 = (box.half[axis] - o[axis]) / d[axis]
        t_near, t_far = max(t_near, min(t1, t2)), min(t_far, max(t1, t2))
    if t_near > t_far or t_far < 0:
        return None
    return max(t_near, 0.0)


def occluded_by_neighbours(
    eye: NDArray[np.float64], target: NDArray[np.float64], boxes: list[OBB], margin: float
) -> bool:
    v = target - eye
    dist = float(np.linalg.norm(v))
    direction = v / dist
    return any((t := ray_hits_obb(eye, direction, b)) is not None and t < dist - margin for b in boxes)


def visible_points(
    pose: Pose, target: NDArray[np.float64], context: NDArray[np.float64], cfg: CollectConfig
) -> tuple[int, float]:
    size = cfg.visibility_image_size
    k = Intrinsics.from_fov(size, size, cfg.camera_fov_deg)
    buf = np.full((size, size), np.inf)
    if len(context):
        px, depth = project(context, pose, k)
        ok = (depth > 0.1) & (px[:, 0] >= 0) & (px[:, 0] < size) & (px[:, 1] >= 0) & (px[:, 1] < size)
        cols, rows = px[ok, 0].astype(int), px[ok, 1].astype(int)
        np.minimum.at(buf, (rows, cols), depth[ok])
    n = cfg.visibility_neighbour_px
    nearest = ndimage.minimum_filter(buf, size=2 * n + 1, mode="constant", cval=np.inf)
    px, depth = project(target, pose, k)
    ok = (depth > 0.1) & (px[:, 0] >= 0) & (px[:, 0] < size) & (px[:, 1] >= 0) & (px[:, 1] < size)
    cols, rows = px[ok, 0].astype(int), px[ok, 1].astype(int)
    visible = int(np.count_nonzero(nearest[rows, cols] >= depth[ok] - cfg.occlusion_depth_margin_m))
    return visible, visible / max(1, len(target))
