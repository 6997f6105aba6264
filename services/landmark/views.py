"""Validity of a rendered view, measured on the instance mask (exact 2D box, visible ratio).

The rendered instance id of a fused candidate is found by projecting the candidate's points
into the view and voting with the ids under the points whose depth matches the rendered depth,
so it works whether fused instance ids are the simulator's or connected components.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from skyqa import keys, media
from skyqa.contracts import RgbView
from skyqa.sim import Intrinsics, Pose, project
from skyqa.v1 import render_pb2

from services.landmark.config import CollectConfig
from services.landmark.plan import PlannedCandidate, PlannedView

DEPTH_MATCH_M = 0.6
MAX_VOTERS = 4000


def rendered_instance(
    points: NDArray[np.float64],
    pose: Pose,
    k: Intrinsics,
    instance: NDArray[np.uint32],
    depth: NDArray[np.float32],
) -> int:
    step = max(1, len(points) // MAX_VOTERS)
    px, d = project(points[::step], pose, k)
    ok = (d > 0.1) & (px[:, 0] >= 0) & (px[:, 0] < k.width) & (px[:, 1] >= 0) & (px[:, 1] < k.height)
    cols, rows = px[ok, 0].astype(int), px[ok, 1].astype(int)
    seen = np.abs(depth[rows, cols] - d[ok]) < DEPTH_MATCH_M
    ids = instance[rows[seen], cols[seen]]
    ids = ids[ids > 0]
    if ids.size == 0:
        return 0
    values, counts = np.unique(ids, return_counts=True)
    return int(values[np.argmax(counts)])


def projected_area(cand: PlannedCandidate, pose: Pose, k: Intrinsics) -> float:
    """Pixel area of the candidate's projected 3D box, clipped to the frame."""
    lo, hi = np.array(cand.bbox_3d.min), np.array(cand.bbox_3d.max)
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    px, d = project(corners, pose, k)
    if np.any(d <= 0.1):
        return float(k.width * k.height)
    x0, x1 = np.clip([px[:, 0].min(), px[:, 0].max()], 0, k.width)
    y0, y1 = np.clip([px[:, 1].min(), px[:, 1].max()], 0, k.height)
    return float(max(0.0, x1 - x0) * max(0.0, y1 - y0))


def measure_view(
    cand: PlannedCandidate,
    view: PlannedView,
    points: NDArray[np.float64],
    result: render_pb2.ViewResult,
    seg_png: bytes,
    depth_png: bytes,
    k: Intrinsics,
    cfg: CollectConfig,
) -> RgbView:
    c = view.camera
    pose = Pose(c.x, c.y, c.z, c.yaw_deg, c.pitch_deg, c.roll_deg)
    _, instance = media.decode_segmentation(seg_png)
    depth = media.decode_depth(depth_png)
    rid = rendered_instance(points, pose, k, instance, depth)
    stat = next((s for s in result.instances if s.instance_id == rid), None) if rid else None
    box = [stat.x0, stat.y0, stat.x1, stat.y1] if stat else [0, 0, 0, 0]
    pixels = int(stat.pixels) if stat else 0
    area = projected_area(cand, pose, k)
    ratio = round(min(1.0, pixels / area), 4) if area > 0 else 0.0
    inside = stat is not None and box[0] > 0 and box[1] > 0 and box[2] < k.width and box[3] < k.height
    least = cfg.box_pixels_here()
    box_valid = stat is not None and pixels >= least and inside
    reason = ""
    if stat is None:
        reason = "target_not_visible"
    elif pixels < least:
        reason = "too_few_pixels"
    elif not inside:
        reason = "box_touches_frame"
    elif view.mode == "orbit" and ratio < cfg.min_visible_ratio_2d:
        reason = "mostly_occluded"
    return RgbView(
        view_id=view.view_id,
        path=keys.release_path(result.rgb.key),
        segmentation_path=keys.release_path(result.segmentation.key),
        mode="topdown" if view.mode == "topdown" else "orbit",
        label=view.direction,
        view_direction=view.direction,
        yaw_deg=view.yaw_deg,
        pitch_deg=c.pitch_deg,
        pitch_offset_deg=view.pitch_offset_deg,
        camera=c,
        bbox_2d_xyxy=box,
        bbox_2d_xywh=[box[0], box[1], box[2] - box[0], box[3] - box[1]],
        bbox_2d_image_size=[k.width, k.height],
        bbox_2d_valid=box_valid,
        visible_pixels=pixels,
        visible_ratio=ratio,
        rendered_instance_id=rid,
        is_valid=reason == "",
        invalid_reason=reason,
    )
