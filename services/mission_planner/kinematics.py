"""Time a landmark mission's path so that its flight keeps the kinematic limits
(:data:`skyqa.kinematics.LIMITS`), and check the flight it gives.

The composed trajectory fixes where the drone flies and where its camera looks at every path
point, sampled at 40 Hz at the behaviours' speeds (UAV-DualCog's timing). That timing alone
flew corners and camera-mode switches in one pose step (17-64 m/s peaks, 180° camera turns in
25 ms). Here the path keeps its geometry and gets a time law:

- each step between path points takes at least its nominal time (no faster than the behaviour's
  speed), at least its length over ``v_max``, and at least its camera yaw and pitch change over
  their rates, so a camera-mode switch (spread over ``compose.FORWARD_WINDOW`` path points in
  angle) is flown slowly enough for the gimbal, or in a hover where the path stands still;
- the speed at a point is at most ``sqrt(a / curvature)`` (the turn's acceleration), and
  between points it changes at most as a constant acceleration allows (a forward and a backward
  pass), so the drone brakes before a corner or a hover and speeds up after it;
- the time law (constant acceleration between path points) is sampled at 40 Hz, the flight
  stretched to a whole video frame (every 4th sample), and the positions averaged over
  ``TIME_WINDOW`` samples, which spreads what is left of a corner's turn over a few samples
  without raising any peak.

The result is measured at the pose rate; a margin below the limits covers the sampling, and a
flight that still breaks a limit is timed again with a wider margin, then refused
(``within_limits`` false; the mission planner does not fly it). Only time is added: flights are
longer where they turn, brake or switch the camera.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from skyqa.contracts.kinematics import KinematicsCheck
from skyqa.kinematics import LIMITS, Limits, measure, wrapped

from services.mission_planner.compose import (
    POSE_HZ,
    VIDEO_FPS,
    Trajectory,
    camera_angles,
    moving_average,
)
from services.mission_planner.shapes import Target

F64 = NDArray[np.float64]
MARGINS = (0.9, 0.75, 0.6)  # shares of each limit the time law plans with, tried in turn
TIME_WINDOW = 9  # samples (0.225 s at 40 Hz) the flown positions are averaged over
STORED_DECIMALS = 4  # of poses.csv


def beyond_limits(check: KinematicsCheck) -> str:
    """Why a flight is refused: the limits its timed flight still breaks."""
    return f"the timed flight breaks the kinematic limits {', '.join(check.exceeded)}"


@dataclass
class Timed:
    positions: F64  # at ``hz``
    yaw: F64  # degrees, wrapped
    pitch: F64
    node_times: F64  # when the flight passes each path point (s)
    check: KinematicsCheck


@dataclass
class Flown:
    """A mission as flown: 40 Hz waypoints, camera yaw and pitch, and each segment's waypoints."""

    waypoints: F64
    yaw: F64
    pitch: F64
    segments: list[tuple[int, int]]  # first and last waypoint (inclusive) of each segment
    check: KinematicsCheck
    nominal_s: float  # the duration the behaviours' speeds alone gave

    @property
    def duration_s(self) -> float:
        return (len(self.waypoints) - 1) / POSE_HZ

    def forwards(self) -> F64:
        """Unit camera forward per waypoint."""
        y, p = np.radians(self.yaw), np.radians(self.pitch)
        out: F64 = np.stack([np.cos(p) * np.cos(y), np.cos(p) * np.sin(y), np.sin(p)], axis=1)
        return out


def fly(traj: Trajectory, t: Target, limits: Limits = LIMITS) -> Flown:
    """The trajectory (its geometry and camera modes) timed within ``limits``."""
    yaw, pitch = camera_angles(traj, t)
    # whole video frames: the last waypoint is a frame, and duration * fps + 1 frames
    stride = POSE_HZ // VIDEO_FPS
    timed = retime(traj.waypoints, yaw, pitch, 1.0 / POSE_HZ, POSE_HZ, limits, stride)
    ends = np.rint(timed.node_times[[s.end for s in traj.segments]] * POSE_HZ).astype(int)
    segments, start = [], 0
    for end in ends:
        end = max(int(end), start)  # a segment keeps at least one waypoint
        segments.append((start, end))
        start = end + 1
    last = len(timed.positions) - 1
    segments[-1] = (segments[-1][0], last)
    return Flown(timed.positions, timed.yaw, timed.pitch, segments, timed.check, traj.duration_s)


def retime(
    points: F64,
    yaw_deg: F64,
    pitch_deg: F64,
    nominal_dt: float,
    hz: float,
    limits: Limits = LIMITS,
    multiple: int = 1,
) -> Timed:
    """Positions and camera angles at ``hz`` along ``points`` (each reached at its angles), no
    faster than ``nominal_dt`` per step and within ``limits``, in a multiple of ``multiple``
    steps; see the module text."""
    p = np.asarray(points, dtype=np.float64)
    if len(p) < 2:
        raise ValueError("a flight needs at least two path points")
    yaw = np.asarray(yaw_deg, dtype=np.float64)
    yaw = yaw[0] + np.concatenate([[0.0], np.cumsum(wrapped(yaw))])  # unwrapped
    pitch = np.asarray(pitch_deg, dtype=np.float64)
    timed: Timed | None = None
    for margin in MARGINS:
        timed = _sampled(p, yaw, pitch, nominal_dt, hz, limits, margin, multiple)
        if timed.check.within_limits:
            return timed
    assert timed is not None
    return timed


def _speeds(
    p: F64, yaw: F64, pitch: F64, nominal_dt: float, limits: Limits, margin: float
) -> tuple[F64, F64, F64]:
    """Each path point's speed, each step's length and its least time."""
    d = np.diff(p, axis=0)
    ds = np.linalg.norm(d, axis=1)
    least = np.maximum.reduce(
        [
            np.full(len(ds), nominal_dt),
            ds / (margin * limits.v_max),
            np.abs(np.diff(yaw)) / (margin * limits.yaw_rate),
            np.abs(np.diff(pitch)) / (margin * limits.camera_pitch_rate_max),
        ]
    )
    step_cap = ds / least
    cap = np.full(len(p), np.inf)
    cap[:-1] = np.minimum(cap[:-1], step_cap)
    cap[1:] = np.minimum(cap[1:], step_cap)
    # half the acceleration along the path, half across it: their norm stays within a_max
    a = margin * limits.a_max / math.sqrt(2.0)
    moving = ds > 1e-9
    u = np.where(moving[:, None], d / np.maximum(ds, 1e-12)[:, None], 0.0)
    cos = np.clip(np.einsum("ij,ij->i", u[:-1], u[1:]), -1.0, 1.0)
    bend = np.where(moving[:-1] & moving[1:], np.arccos(cos), 0.0)
    curvature = bend / np.maximum(0.5 * (ds[:-1] + ds[1:]), 1e-12)
    turn_cap = np.sqrt(a / np.maximum(curvature, 1e-12))
    # the body's heading turns with the path too: its rate is speed times curvature
    heading_cap = math.radians(margin * limits.yaw_rate_max) / np.maximum(curvature, 1e-12)
    cap[1:-1] = np.minimum(cap[1:-1], np.minimum(turn_cap, heading_cap))
    v = cap.tolist()
    lengths = ds.tolist()
    for i in range(len(lengths)):  # speeding up at most at ``a``
        v[i + 1] = min(v[i + 1], math.sqrt(v[i] * v[i] + 2.0 * a * lengths[i]))
    for i in range(len(lengths) - 1, -1, -1):  # braking at most at ``a``
        v[i] = min(v[i], math.sqrt(v[i + 1] * v[i + 1] + 2.0 * a * lengths[i]))
    return np.asarray(v), ds, least


def _sampled(
    p: F64, yaw: F64, pitch: F64, nominal_dt: float, hz: float, limits: Limits, margin: float, multiple: int
) -> Timed:
    v, ds, least = _speeds(p, yaw, pitch, nominal_dt, limits, margin)
    a = margin * limits.a_max / math.sqrt(2.0)
    vsum = v[:-1] + v[1:]
    dt = np.where(vsum > 1e-12, 2.0 * ds / np.maximum(vsum, 1e-12), 2.0 * np.sqrt(ds / a))
    dt = np.maximum(dt, least)
    times = np.concatenate([[0.0], np.cumsum(dt)])
    # a whole number of samples: the flight is stretched (never sped up) to the next one
    n = max(1, math.ceil(times[-1] * hz / multiple - 1e-9)) * multiple
    k = n / (hz * times[-1])
    times, dt, v = times * k, dt * k, v / k
    acc = np.where(dt > 0, (v[1:] - v[:-1]) / np.maximum(dt, 1e-12), 0.0)
    tau = np.arange(n + 1) / hz
    i = np.clip(np.searchsorted(times, tau, side="right") - 1, 0, len(dt) - 1)
    delta = tau - times[i]
    along = np.clip(v[i] * delta + 0.5 * acc[i] * delta**2, 0.0, ds[i])
    frac = np.where(ds[i] > 1e-12, along / np.maximum(ds[i], 1e-12), 0.0)
    pos = p[i] + frac[:, None] * (p[i + 1] - p[i])
    share = np.clip(delta / np.maximum(dt[i], 1e-12), 0.0, 1.0)
    y = yaw[i] + share * (yaw[i + 1] - yaw[i])
    pt = pitch[i] + share * (pitch[i + 1] - pitch[i])
    pos[-1], y[-1], pt[-1] = p[-1], yaw[-1], pitch[-1]
    # measured as ``poses.csv`` stores it (4 decimals): rounding must not tip a peak over
    pos = np.round(moving_average(pos, TIME_WINDOW), STORED_DECIMALS)
    y = np.round((y + 180.0) % 360.0 - 180.0, STORED_DECIMALS)
    pt = np.round(pt, STORED_DECIMALS)
    return Timed(pos, y, pt, times, measure(pos, y, pt, hz, limits))
