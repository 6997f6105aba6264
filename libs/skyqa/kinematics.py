"""The kinematic limits every planned flight keeps, stated once, and their measurement.

UAV-DualCog's behaviour tables fly every behaviour at 15-25 m/s (``speed_mps`` in
``skyqa/vocab/behaviors.yaml``), while its constraint reports state ``v_max`` 8 m/s, ``a_max``
10 m/s² and a yaw rate of 120 °/s and never check them. Here the limits follow the tables:

- ``v_max`` 25 m/s, the tables' fastest behaviour speed (a large inspection multirotor's top
  speed is about 23 m/s; the tables set the envelope);
- ``a_max`` 10 m/s², UAV-DualCog's stated value (about a 45° tilt of a multirotor), applied to
  the whole acceleration vector: along the path and across it in turns;
- ``yaw_rate_max`` 120 °/s, UAV-DualCog's body yaw rate;
- ``camera_yaw_rate_max`` and ``camera_pitch_rate_max`` 90 °/s: a stabilised gimbal's controlled
  rate, so a camera-mode switch turning the view 180° takes at least 2 s.

Every trajectory has one yaw per pose, as UAV-DualCog's ``poses.csv``: the camera's yaw, to
which the body turns (the gimbal only tilts), so the body and camera yaw limits both apply to it.
The planner enforces the limits (``services/mission_planner``: landmark missions are retimed,
navigation moves ramp their speed, action programs ease each step) and refuses a trajectory
whose measurement still breaks one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import NDArray

from skyqa.contracts.kinematics import KinematicsCheck

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class Limits:
    v_max: float = 25.0  # m/s
    a_max: float = 10.0  # m/s²
    yaw_rate_max: float = 120.0  # °/s, body
    camera_yaw_rate_max: float = 90.0  # °/s, the camera's yaw in the world
    camera_pitch_rate_max: float = 90.0  # °/s, gimbal tilt

    @property
    def yaw_rate(self) -> float:
        """The yaw rate a pose's one yaw may turn at: body and camera turn together."""
        return min(self.yaw_rate_max, self.camera_yaw_rate_max)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


LIMITS = Limits()
# what a check may exceed a limit by before it counts: float rounding of stored poses, not motion
TOLERANCE = 1e-3


def wrapped(deg: F64) -> F64:
    """Per-step angle changes wrapped to [-180, 180)."""
    out: F64 = (np.diff(np.asarray(deg, dtype=np.float64)) + 180.0) % 360.0 - 180.0
    return out


def measure(
    positions: F64, yaw_deg: F64, pitch_deg: F64, hz: float, limits: Limits = LIMITS
) -> KinematicsCheck:
    """Peak speed (m/s), acceleration (m/s², the second difference of positions, vector norm),
    yaw rate and camera pitch rate (°/s, wrapped) of a path sampled at ``hz``, against ``limits``."""
    if hz <= 0:
        raise ValueError(f"the pose rate must be positive, got {hz}")
    p = np.asarray(positions, dtype=np.float64).reshape(-1, 3)
    dt = 1.0 / hz
    step = np.diff(p, axis=0)
    speed = float(np.linalg.norm(step, axis=1).max() / dt) if len(step) else 0.0
    accel = float(np.linalg.norm(np.diff(step, axis=0), axis=1).max() / dt**2) if len(step) > 1 else 0.0
    turn = wrapped(yaw_deg)
    yaw_rate = float(np.abs(turn).max() / dt) if len(turn) else 0.0
    tilt = np.diff(np.asarray(pitch_deg, dtype=np.float64))
    pitch_rate = float(np.abs(tilt).max() / dt) if len(tilt) else 0.0
    measured = {
        "v_max": speed,
        "a_max": accel,
        "yaw_rate_max": yaw_rate,
        "camera_yaw_rate_max": yaw_rate,
        "camera_pitch_rate_max": pitch_rate,
    }
    bounds = limits.as_dict()
    exceeded = [name for name, value in measured.items() if value > bounds[name] * (1 + TOLERANCE)]
    return KinematicsCheck(
        checked=True,
        max_speed_mps=round(speed, 3),
        max_accel_mps2=round(accel, 3),
        max_yaw_rate_dps=round(yaw_rate, 3),
        max_camera_pitch_rate_dps=round(pitch_rate, 3),
        within_limits=not exceeded,
        exceeded=exceeded,
        limits=bounds,
    )


# the acceleration a planned move ramps at: the frames sample the ramp, the margin covers it
PLANNED_ACCEL = 0.9 * LIMITS.a_max
PLANNED_RATE = 0.9  # share of a rate limit a planned rotation peaks at


def least_action_frames(translation_m: float, yaw_deg: float, pitch_deg: float, fps: float) -> int:
    """The fewest frames an action of an action program (Reasoning-Structured Videos: each
    action from rest to rest, its frames eased by :func:`trapezoid_s`) needs within the limits:
    a translation at ``PLANNED_ACCEL``, a turn or a look peaking (twice its mean rate) below
    the yaw and gimbal limits."""
    seconds = max(
        min_seconds(translation_m, LIMITS.v_max, PLANNED_ACCEL),
        2.0 * yaw_deg / (PLANNED_RATE * LIMITS.yaw_rate),
        2.0 * pitch_deg / (PLANNED_RATE * LIMITS.camera_pitch_rate_max),
    )
    return 1 + max(1, math.ceil(seconds * fps - 1e-9))


def trapezoid_s(distance: float, v: float, a: float, n: int) -> F64:
    """Fractions of ``distance`` covered at ``n + 1`` evenly spaced instants of a rest-to-rest
    move at most ``v`` fast and ``a`` hard, stretched to its ``n`` steps (more time than the
    move needs only lowers its speed and acceleration)."""
    tau = np.linspace(0.0, 1.0, n + 1)
    if distance <= 0:
        return tau
    total = min_seconds(distance, v, a)
    # the profile of the minimum-time move, played over the longer span: time scales by k,
    # speed by 1/k, acceleration by 1/k²
    t = tau * total
    cruise = min(v, float(np.sqrt(distance * a)))
    ramp = cruise / a
    s = np.where(
        t < ramp,
        0.5 * a * t**2,
        np.where(
            t > total - ramp,
            distance - 0.5 * a * (total - t) ** 2,
            0.5 * a * ramp**2 + cruise * (t - ramp),
        ),
    )
    out: F64 = np.clip(s / distance, 0.0, 1.0)
    return out


def min_seconds(distance: float, v: float, a: float) -> float:
    """The shortest rest-to-rest time over ``distance`` at speed ``v`` and acceleration ``a``."""
    if distance <= 0:
        return 0.0
    if distance >= v * v / a:
        return distance / v + v / a
    return 2.0 * float(np.sqrt(distance / a))
