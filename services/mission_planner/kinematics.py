"""The kinematic check of a planned mission against the limits its constraint report states.

UAV-DualCog states ``v_max`` 8 m/s, ``a_max`` 10 m/s² and a yaw rate of 120 °/s in every
constraint report and, by default, never checks them. Here the flown path is measured at the pose
rate and compared: a report that states a limit says whether the mission keeps it. The planner
does not enforce them (it times a mission by its behaviors, not by a flight model), so the
report is the place a user learns how far a mission is from a real multirotor's envelope.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from skyqa.contracts.missions import KinematicsCheck

LIMITS = {"v_max": 8.0, "a_max": 10.0, "yaw_rate_max": 120.0}


def check(waypoints: NDArray[np.float64], yaw_deg: NDArray[np.float64], hz: float) -> KinematicsCheck:
    """Peak speed (m/s), acceleration (m/s², from the second difference of positions) and camera
    yaw rate (°/s, wrapped) of a path sampled at ``hz``."""
    dt = 1.0 / hz
    step = np.diff(waypoints, axis=0)
    speed = float(np.linalg.norm(step, axis=1).max() / dt) if len(step) else 0.0
    accel = float(np.linalg.norm(np.diff(step, axis=0), axis=1).max() / dt**2) if len(step) > 1 else 0.0
    turn = (np.diff(yaw_deg) + 180.0) % 360.0 - 180.0
    yaw_rate = float(np.abs(turn).max() / dt) if len(turn) else 0.0
    measured = {"v_max": speed, "a_max": accel, "yaw_rate_max": yaw_rate}
    exceeded = [name for name, limit in LIMITS.items() if measured[name] > limit]
    return KinematicsCheck(
        checked=True,
        max_speed_mps=round(speed, 3),
        max_accel_mps2=round(accel, 3),
        max_yaw_rate_dps=round(yaw_rate, 3),
        within_limits=not exceeded,
        exceeded=exceeded,
    )
