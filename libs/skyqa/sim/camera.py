"""Pose convention, pinhole intrinsics, rays and projection.

World frame: ENU (x east, y north, z up), metres. Body/camera frame: x forward, y left,
z up. A pose (x, y, z, yaw, pitch, roll) in degrees means: yaw counter-clockwise from +x
about +z (yaw 90 looks north), pitch positive nose up (pitch -90 looks straight down), roll
positive right side down. ``R = Rz(yaw) @ Ry(-pitch) @ Rx(roll)`` maps body to world.

Images: row 0 at the top, column 0 at the left; intrinsics from the horizontal FOV with
square pixels and the principal point at the image centre.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
F32 = NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Pose:
    x: float
    y: float
    z: float
    yaw_deg: float = 0.0
    pitch_deg: float = 0.0
    roll_deg: float = 0.0

    @property
    def position(self) -> F64:
        return np.array([self.x, self.y, self.z], dtype=np.float64)

    def rotation(self) -> F64:
        return rotation_matrix(self.yaw_deg, self.pitch_deg, self.roll_deg)


@dataclass(frozen=True, slots=True)
class Intrinsics:
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @classmethod
    def from_fov(cls, width: int, height: int, hfov_deg: float) -> Intrinsics:
        if width <= 0 or height <= 0:
            raise ValueError(f"image size must be positive, got {width}x{height}")
        if not 1.0 <= hfov_deg <= 170.0:
            raise ValueError(f"horizontal FOV must be within [1, 170] degrees, got {hfov_deg}")
        fx = (width / 2.0) / np.tan(np.radians(hfov_deg) / 2.0)
        return cls(width, height, float(fx), float(fx), width / 2.0, height / 2.0)

    def half_fov_deg(self) -> tuple[float, float]:
        """Horizontal and vertical half field of view, in degrees."""
        return (
            math.degrees(math.atan(self.width / (2 * self.fx))),
            math.degrees(math.atan(self.height / (2 * self.fy))),
        )

    def as_dict(self) -> dict[str, float]:
        return {
            "width": self.width,
            "height": self.height,
            "fx": self.fx,
            "fy": self.fy,
            "cx": self.cx,
            "cy": self.cy,
        }


def rotation_matrix(yaw_deg: float, pitch_deg: float, roll_deg: float) -> F64:
    y, p, r = np.radians([yaw_deg, -pitch_deg, roll_deg])
    cz, sz = np.cos(y), np.sin(y)
    cy, sy = np.cos(p), np.sin(p)
    cx, sx = np.cos(r), np.sin(r)
    rz = np.array([[cz, -sz, 0.0], [sz, cz, 0.0], [0.0, 0.0, 1.0]])
    ry = np.array([[cy, 0.0, sy], [0.0, 1.0, 0.0], [-sy, 0.0, cy]])
    rx = np.array([[1.0, 0.0, 0.0], [0.0, cx, -sx], [0.0, sx, cx]])
    result: F64 = rz @ ry @ rx
    return result


def look_at(eye: F64, target: F64) -> tuple[float, float]:
    """Yaw and pitch (degrees) of a camera at ``eye`` looking at ``target``."""
    d = np.asarray(target, dtype=np.float64) - np.asarray(eye, dtype=np.float64)
    yaw = float(np.degrees(np.arctan2(d[1], d[0])))
    pitch = float(np.degrees(np.arctan2(d[2], np.hypot(d[0], d[1]))))
    return yaw, pitch


@lru_cache(maxsize=16)
def _camera_directions(k: Intrinsics) -> F32:
    """Per-pixel ray directions in the camera frame (forward component 1), row-major."""
    u = (np.arange(k.width, dtype=np.float32) + 0.5 - k.cx) / k.fx
    v = (np.arange(k.height, dtype=np.float32) + 0.5 - k.cy) / k.fy
    uu, vv = np.meshgrid(u, v)
    dirs = np.stack([np.ones_like(uu), -uu, -vv], axis=-1).reshape(-1, 3)
    dirs.setflags(write=False)
    return dirs


def camera_rays(pose: Pose, k: Intrinsics) -> F32:
    """Rays ``(H*W, 6)`` as origin + direction, for Open3D ``cast_rays``.

    Directions are not normalised: their forward component is 1, so the hit distance
    ``t_hit`` Open3D returns is the planar depth directly.
    """
    dirs = _camera_directions(k) @ pose.rotation().T.astype(np.float32)
    rays = np.empty((dirs.shape[0], 6), dtype=np.float32)
    rays[:, :3] = pose.position.astype(np.float32)
    rays[:, 3:] = dirs
    return rays


def project(points: F64, pose: Pose, k: Intrinsics) -> tuple[F64, F64]:
    """World points ``(N, 3)`` to pixel coordinates ``(N, 2)`` and planar depth ``(N,)``."""
    local = (np.asarray(points, dtype=np.float64) - pose.position) @ pose.rotation()
    depth = local[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        px = k.cx - k.fx * local[:, 1] / depth
        py = k.cy - k.fy * local[:, 2] / depth
    return np.stack([px, py], axis=-1), depth


def project_box(lo: F64, hi: F64, pose: Pose, k: Intrinsics, margin_px: float = 0.0) -> tuple[F64, bool]:
    """Pixel box ``[x0, y0, x1, y1]`` of an axis-aligned 3D box's eight corners, and whether
    every corner is in front of the camera and at least ``margin_px`` inside the frame."""
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    px, d = project(corners, pose, k)
    inside = bool(
        np.all(d > 0.1)
        and np.all(px[:, 0] >= margin_px)
        and np.all(px[:, 0] <= k.width - margin_px)
        and np.all(px[:, 1] >= margin_px)
        and np.all(px[:, 1] <= k.height - margin_px)
    )
    return np.r_[px.min(axis=0), px.max(axis=0)], inside


def unproject(depth: F32, pose: Pose, k: Intrinsics) -> F64:
    """Planar depth image ``(H, W)`` back to world points ``(H*W, 3)`` (NaN where depth is inf)."""
    dirs = _camera_directions(k).astype(np.float64) @ pose.rotation().T
    d = np.asarray(depth, dtype=np.float64).reshape(-1, 1)
    d = np.where(np.isfinite(d), d, np.nan)
    return pose.position + dirs * d
