"""Orbit camera poses around a candidate, from its box (UAV-DualCog's formulas)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
from numpy.typing import NDArray
from skyqa.sim import Intrinsics, Pose, look_at, project_box

from services.landmark.config import CollectConfig

FRAME_MARGIN = 0.02  # of the image width, between the landmark's box and the frame
FRAMING_TRIES = 24


def camera_distance(size: NDArray[np.float64], cfg: CollectConfig) -> float:
    half = math.radians(cfg.camera_fov_deg) / 2.0
    diag_xy = float(np.hypot(size[0], size[1]))
    diag_3d = float(np.linalg.norm(size))
    fit: float = max(
        1.0,
        0.5 * diag_xy / math.tan(half),
        0.5 * size[2] / math.tan(half),
        0.5 * max(diag_3d, 1.0) / math.sin(half),
    )
    return max(cfg.camera_distance_min_m, fit * cfg.camera_distance_scale)


def look_at_point(
    center: NDArray[np.float64], aabb_min: NDArray[np.float64], size: NDArray[np.float64], cfg: CollectConfig
) -> NDArray[np.float64]:
    return np.array([center[0], center[1], aabb_min[2] + cfg.look_at_z_ratio * size[2]])


def orbit_pose(
    center: NDArray[np.float64],
    aabb_min: NDArray[np.float64],
    size: NDArray[np.float64],
    view_yaw_deg: float,
    pitch_offset_deg: float,
    cfg: CollectConfig,
    distance_scale: float = 1.0,
) -> Pose:
    """Camera that looks along ``view_yaw_deg`` at the landmark, raised by ``pitch_offset_deg``,
    ``distance_scale`` times UAV-DualCog's orbit distance away."""
    distance = camera_distance(size, cfg) * distance_scale
    height = min(
        cfg.height_max_m,
        max(
            cfg.height_min_m, cfg.height_base_m + cfg.height_obj_scale * size[2] + cfg.height_scale * distance
        ),
    )
    target = look_at_point(center, aabb_min, size, cfg)
    yaw = math.radians(view_yaw_deg)
    forward = np.array([math.cos(yaw), math.sin(yaw)])
    eye = np.array([center[0] - forward[0] * distance, center[1] - forward[1] * distance, center[2] + height])
    if pitch_offset_deg:
        # raise the elevation angle at a constant orbit radius
        rel = eye - target
        radius = float(np.linalg.norm(rel))
        elevation = math.degrees(math.atan2(rel[2], float(np.hypot(rel[0], rel[1]))))
        elevation = min(80.0, max(5.0, elevation + pitch_offset_deg))
        e = math.radians(elevation)
        eye = target + np.array([-forward[0] * math.cos(e), -forward[1] * math.cos(e), math.sin(e)]) * radius
    cam_yaw, cam_pitch = look_at(eye, target)
    return Pose(float(eye[0]), float(eye[1]), float(eye[2]), cam_yaw, cam_pitch, 0.0)


def framing_rng(seed: int, key: str, direction: str) -> np.random.Generator:
    digest = hashlib.sha256(f"framing:{seed}:{key}:{direction}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def framed(
    pose: Pose,
    aabb_min: NDArray[np.float64],
    aabb_max: NDArray[np.float64],
    cfg: CollectConfig,
    rng: np.random.Generator,
) -> Pose:
    """Turn the camera by a seeded yaw and pitch so the landmark sits somewhere else than the
    image centre, with its whole 3D box still ``FRAME_MARGIN`` inside the frame.

    Orbit views that always centre the landmark let a constant box answer the grounding half
    of every self-aware row; rejection sampling over the turns that keep the box in frame puts
    the landmark anywhere it fits. No turn fits for a landmark that fills the frame: then the
    view stays centred.
    """
    k = Intrinsics.from_fov(cfg.image_width, cfg.image_height, cfg.camera_fov_deg)
    half_h, half_v = k.half_fov_deg()
    margin = FRAME_MARGIN * k.width
    for _ in range(FRAMING_TRIES):
        dyaw, dpitch = rng.uniform(-half_h, half_h), rng.uniform(-half_v, half_v)
        turned = Pose(pose.x, pose.y, pose.z, pose.yaw_deg + dyaw, pose.pitch_deg + dpitch, pose.roll_deg)
        if project_box(aabb_min, aabb_max, turned, k, margin)[1]:
            return turned
    return pose


def topdown_pose(
    center: NDArray[np.float64],
    aabb_min: NDArray[np.float64],
    aabb_max: NDArray[np.float64],
    yaw_deg: float,
    cfg: CollectConfig,
) -> Pose:
    """Straight down from ``camera_distance`` above the top, image up along the landmark's yaw."""
    size = aabb_max - aabb_min
    distance = camera_distance(size, cfg)
    return Pose(float(center[0]), float(center[1]), float(aabb_max[2] + distance), yaw_deg, -90.0, 0.0)
