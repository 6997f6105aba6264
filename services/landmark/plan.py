"""Which views to render for each candidate: the first good pitch variant per ring direction."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel
from skyqa.contracts import Bbox3D, CameraPose
from skyqa.contracts.landmarks import CARDINALS, DIAGONALS, RING, RING_OFFSETS
from skyqa.sim import Pose

from services.landmark.candidates import Candidate, Collected
from services.landmark.config import CollectConfig
from services.landmark.orbit import (
    camera_distance,
    framed,
    framing_rng,
    look_at_point,
    orbit_pose,
    topdown_pose,
)
from services.landmark.visibility import neighbour_boxes, occluded_by_neighbours, visible_points


class PlannedView(BaseModel):
    view_id: str
    direction: str
    mode: str
    yaw_deg: float  # the ring yaw (landmark yaw + offset); the camera yaw is in ``camera``
    pitch_offset_deg: float
    camera: CameraPose
    visible_points: int


class PlannedCandidate(BaseModel):
    key: str
    class_id: int
    class_name: str
    instance_numeric_id: int
    center_3d: list[float]
    bbox_3d: Bbox3D
    point_count: int
    views: list[PlannedView]


class LandmarkPlan(BaseModel):
    run_id: str
    scene_id: str
    backend: str
    source_pcd: str
    cloud_npy: str
    filters: dict[str, object]
    input_points: int
    valid_points: int
    candidate_pairs: int
    dropped_small_instances: int
    dropped_view_insufficient: int
    candidates: list[PlannedCandidate]
    scan: dict[str, Any]  # the scan request the plan was made for, as protobuf JSON


def _pose(p: Pose) -> CameraPose:
    return CameraPose(
        x=round(p.x, 4),
        y=round(p.y, 4),
        z=round(p.z, 4),
        yaw_deg=round(p.yaw_deg, 4),
        pitch_deg=round(p.pitch_deg, 4),
    )


def plan_candidate(
    c: Candidate,
    cloud_xyz: NDArray[np.float64],
    cloud_keys: NDArray[np.int64],
    key_of: int,
    cfg: CollectConfig,
) -> PlannedCandidate | None:
    size = c.size
    distance = camera_distance(size, cfg)
    # context cloud: everything but the target near it (UAV-DualCog's radius and z band)
    radius = max(25.0, 8.0 * float(np.linalg.norm(size)), 1.5 * distance)
    band = max(15.0, 6.0 * float(size[2]))
    near = (np.hypot(cloud_xyz[:, 0] - c.center[0], cloud_xyz[:, 1] - c.center[1]) < radius) & (
        np.abs(cloud_xyz[:, 2] - c.center[2]) < band + distance
    )
    context_sel = near & (cloud_keys != key_of)
    context = cloud_xyz[context_sel]
    nb_radius = max(cfg.neighbour_radius_min_m, 1.5 * distance)
    nb_sel = context_sel & (
        np.hypot(cloud_xyz[:, 0] - c.center[0], cloud_xyz[:, 1] - c.center[1]) < nb_radius
    )
    boxes = list(neighbour_boxes(cloud_xyz[nb_sel], cloud_keys[nb_sel], cfg.neighbour_min_points).values())
    target = look_at_point(c.center, c.aabb_min, size, cfg)
    chosen: dict[str, PlannedView] = {}
    for direction in (*CARDINALS, *DIAGONALS):
        if len(chosen) >= cfg.views_count:
            break
        ring_yaw = c.yaw_deg + RING_OFFSETS[direction]
        rng = framing_rng(cfg.seed, str(c.key), direction)
        scale = float(rng.uniform(*cfg.distance_scale_range))
        for offset in cfg.pitch_offsets_deg:
            pose = orbit_pose(c.center, c.aabb_min, size, ring_yaw, offset, cfg, scale)
            if cfg.framing:
                pose = framed(pose, c.aabb_min, c.aabb_max, cfg, rng)
            if occluded_by_neighbours(pose.position, target, boxes, cfg.occlusion_depth_margin_m):
                continue
            seen, ratio = visible_points(pose, c.points, context, cfg)
            if seen >= cfg.min_visible_points and ratio >= cfg.min_visible_ratio:
                chosen[direction] = PlannedView(
                    view_id="",
                    direction=direction,
                    mode="orbit",
                    yaw_deg=round(_wrap(ring_yaw), 4),
                    pitch_offset_deg=offset,
                    camera=_pose(pose),
                    visible_points=seen,
                )
                break
    if len(chosen) < cfg.min_keep:
        return None
    views = [chosen[d] for d in RING if d in chosen]
    if cfg.add_topdown:
        pose = topdown_pose(c.center, c.aabb_min, c.aabb_max, c.yaw_deg, cfg)
        views.append(
            PlannedView(
                view_id="",
                direction="topdown",
                mode="topdown",
                yaw_deg=round(c.yaw_deg, 4),
                pitch_offset_deg=0.0,
                camera=_pose(pose),
                visible_points=0,
            )
        )
    for i, v in enumerate(views):
        v.view_id = f"view_{i:02d}_{v.direction}"
    r: Callable[[Iterable[float]], list[float]] = lambda a: [round(float(x), 4) for x in a]  # noqa: E731
    return PlannedCandidate(
        key=c.key,
        class_id=c.class_id,
        class_name=c.class_name,
        instance_numeric_id=c.instance_numeric_id,
        center_3d=r(c.center),
        bbox_3d=Bbox3D(
            min=r(c.aabb_min),
            max=r(c.aabb_max),
            size=r(size),
            yaw_deg=c.yaw_deg,
            extent=r(c.extent),
        ),
        point_count=len(c.points),
        views=views,
    )


def instance_key(class_id: Any, instance_id: Any) -> Any:
    """One integer per (class, instance) pair, so a candidate can exclude exactly itself."""
    return class_id * 1_000_000 + instance_id


def _wrap(deg: float) -> float:
    return (deg + 180.0) % 360.0 - 180.0


def plan_all(
    collected: Collected, cloud: NDArray[np.void], cfg: CollectConfig
) -> tuple[list[PlannedCandidate], int]:
    xyz = np.stack([cloud["x"], cloud["y"], cloud["z"]], -1).astype(np.float64)
    keys = instance_key(cloud["class_id"].astype(np.int64), cloud["instance_id"].astype(np.int64))
    keys[cloud["instance_id"] == 0] = -1
    planned, dropped = [], 0
    for c in collected.candidates:
        p = plan_candidate(c, xyz, keys, instance_key(c.class_id, c.instance_numeric_id), cfg)
        if p is None:
            dropped += 1
        else:
            planned.append(p)
    return planned, dropped
