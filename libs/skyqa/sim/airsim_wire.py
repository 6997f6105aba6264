"""AirSim's wire types as msgpack maps, and its NED frame against skyqa's ENU poses.

AirSim's Python clients send and read their types (``Vector3r``, ``Quaternionr``, ``Pose``,
``ImageRequest``, ``ImageResponse``, ``LidarData``, ``CameraInfo``, ``MultirotorState``) as
msgpack maps of their attributes; these helpers build and read those maps. Frames: AirSim's
world is NED and its bodies x forward, y right, z down; skyqa's world is ENU and its bodies x
forward, y left, z up, so both flip y and z (``S = diag(1, -1, -1)``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from skyqa.sim.camera import Pose, rotation_matrix

F64 = NDArray[np.float64]
S = np.diag([1.0, -1.0, -1.0])


class WireError(ValueError):
    """A request field that is not the AirSim type it should be."""


def vector(x: float, y: float, z: float) -> dict[str, float]:
    return {"x_val": float(x), "y_val": float(y), "z_val": float(z)}


def quaternion(w: float, x: float, y: float, z: float) -> dict[str, float]:
    return {"w_val": float(w), "x_val": float(x), "y_val": float(y), "z_val": float(z)}


MAX_COORDINATE_M = 1e6  # beyond it float32 replies lose the metre and 1e300 overflows them
FOV_RANGE_DEG = (1.0, 170.0)


def _number(m: dict[str, Any], key: str, default: float) -> float:
    value = m.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise WireError(f"{key} must be a finite number, got {value!r}")
    return float(value)


def read_pose(m: Any, what: str = "a pose") -> tuple[F64, tuple[float, float, float, float]]:
    """A ``Pose`` map: NED position and (w, x, y, z) orientation, normalised. Every pose a client
    sends goes through here, so none can hold a value the server cannot send back."""
    if not isinstance(m, dict) or not isinstance(m.get("position"), dict):
        raise WireError(f"{what} is a map with position and orientation")
    p, o = m["position"], m.get("orientation") or {}
    if not isinstance(o, dict):
        raise WireError(f"{what}'s orientation is a map with w_val, x_val, y_val, z_val")
    pos = np.array([_number(p, k, 0.0) for k in ("x_val", "y_val", "z_val")])
    if not np.all(np.abs(pos) < MAX_COORDINATE_M):
        raise WireError(f"{what}'s position must lie within {MAX_COORDINATE_M:g} m of the origin")
    q = np.array([_number(o, "w_val", 1.0), *(_number(o, k, 0.0) for k in ("x_val", "y_val", "z_val"))])
    # finite components of 1e300 square to an infinite norm, which would normalise to zero
    q /= max(1.0, float(np.max(np.abs(q))))
    n = float(np.linalg.norm(q))
    if n < 1e-9:
        raise WireError(f"{what}'s orientation quaternion is zero")
    w, x, y, z = (q / n).tolist()
    return pos, (w, x, y, z)


def read_fov(value: Any) -> float:
    """A field of view in degrees, as ``simSetCameraFov`` sends it."""
    lo, hi = FOV_RANGE_DEG
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= float(value) <= hi:
        raise WireError(f"a camera FOV is {lo:g}..{hi:g} degrees, got {value!r}")
    return float(value)


def quat_matrix(q: tuple[float, float, float, float]) -> F64:
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_quat(r: F64) -> tuple[float, float, float, float]:
    w = math.sqrt(max(0.0, 1.0 + r[0, 0] + r[1, 1] + r[2, 2])) / 2.0
    x = math.copysign(math.sqrt(max(0.0, 1.0 + r[0, 0] - r[1, 1] - r[2, 2])) / 2.0, r[2, 1] - r[1, 2])
    y = math.copysign(math.sqrt(max(0.0, 1.0 - r[0, 0] + r[1, 1] - r[2, 2])) / 2.0, r[0, 2] - r[2, 0])
    z = math.copysign(math.sqrt(max(0.0, 1.0 - r[0, 0] - r[1, 1] + r[2, 2])) / 2.0, r[1, 0] - r[0, 1])
    return w, x, y, z


def enu_pose(position_ned: F64, rotation_ned: F64) -> Pose:
    """The skyqa pose of a body at an NED position with an NED body-to-world rotation."""
    r = S @ rotation_ned @ S
    fx, fy, fz = r[:, 0]
    yaw = math.degrees(math.atan2(fy, fx))
    pitch = math.degrees(math.atan2(fz, math.hypot(fx, fy)))
    m = rotation_matrix(yaw, pitch, 0.0).T @ r
    roll = math.degrees(math.atan2(m[2, 1], m[1, 1]))
    x, y, z = (S @ position_ned).tolist()
    return Pose(x, y, z, yaw, pitch, roll)


def ned_rotation(pose: Pose) -> F64:
    return S @ pose.rotation() @ S


def pose_map(position_ned: F64, rotation_ned: F64) -> dict[str, Any]:
    return {"position": vector(*position_ned.tolist()), "orientation": quaternion(*matrix_quat(rotation_ned))}


def nan_pose() -> dict[str, Any]:
    nan = float("nan")
    return {"position": vector(nan, nan, nan), "orientation": quaternion(nan, nan, nan, nan)}
