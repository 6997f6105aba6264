"""Compose a mission's steps into one timed trajectory with camera orientation per waypoint.

Timing follows UAV-DualCog: each element gets ``max(24, round(max(0.8 s, length / speed) * 10)
+ 1)`` points at the 10 Hz base rate (so speed sets duration), the path is resampled x4 to
40 Hz and smoothed with a 5-point moving average (endpoints pinned); video frames are every 4th
waypoint (10 FPS). Camera angles are smoothed over 15 waypoints. This is the nominal timing;
:mod:`services.mission_planner.kinematics` retimes it within the kinematic limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from skyqa.vocab.behaviors import Library, StepSpec, Value

from services.mission_planner.shapes import BUILDERS, CONTINUOUS, Context, Shape, Target, polyline

F64 = NDArray[np.float64]
BASE_HZ = 10
SAMPLES_PER_SEGMENT = 4
POSE_HZ = BASE_HZ * SAMPLES_PER_SEGMENT
SMOOTH_WINDOW = 5
FORWARD_WINDOW = 15
VIDEO_FPS = 10


@dataclass
class Element:
    step: StepSpec
    params: dict[str, Value]
    shape: Shape | None = None
    bridged: bool = False
    project_distance_m: float = 0.0


@dataclass
class Segment:
    index: int
    element: str
    camera_mode: str
    params: dict[str, Value]
    effective: dict[str, float]
    start: int  # first waypoint index (40 Hz)
    end: int  # last waypoint index, inclusive
    bridged: bool
    project_distance_m: float


@dataclass
class Trajectory:
    raw: F64  # 10 Hz points before smoothing
    waypoints: F64  # 40 Hz
    segments: list[Segment]
    camera_modes: list[str] = field(default_factory=list)  # per segment

    @property
    def duration_s(self) -> float:
        return (len(self.waypoints) - 1) / POSE_HZ


def start_position(t: Target, phase: float) -> F64:
    """UAV-DualCog's start: 2.8 box diagonals out and 0.8 up; the direction is seeded here."""
    d = float(np.linalg.norm(t.size))
    return t.c + np.array([2.8 * d * math.cos(phase), 2.8 * d * math.sin(phase), 0.8 * d], dtype=np.float64)


def build_shapes(lib: Library, elements: list[Element], t: Target, start: F64) -> None:
    """Fill each element's shape in flight order; an approach ends where the next one starts."""
    cur = start
    bridge_min = max(1.0, 0.12 * float(np.linalg.norm(t.size)))
    for i, el in enumerate(elements):
        name = el.step.element
        if name == "gradual_approach" and i + 1 < len(elements):
            nxt = elements[i + 1]
            nxt.shape = BUILDERS[nxt.step.element](nxt.params, t, Context(current=cur))
            el.shape = BUILDERS[name](el.params, t, Context(current=cur, join=nxt.shape.points[0]))
        elif el.shape is None:
            family = lib.elements[name].family
            inherit = i > 0 and family == "orbit" and elements[i - 1].step.element != "gradual_approach"
            ctx = Context(current=cur, altitude=float(cur[2]) if inherit else None)
            el.shape = BUILDERS[name](el.params, t, ctx)
            jump = float(np.linalg.norm(el.shape.points[0] - cur))
            if i > 0 and name not in CONTINUOUS and jump > bridge_min:
                el.shape.points = np.concatenate([polyline(cur, el.shape.points[0])[:-1], el.shape.points])
                el.bridged, el.project_distance_m = True, jump
        cur = el.shape.points[-1]


def _resample(points: F64, n: int) -> F64:
    """``n`` points at uniform arc length along a polyline."""
    seg = np.linalg.norm(np.diff(points, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    if s[-1] <= 1e-9:
        return np.repeat(points[:1], n, axis=0)
    q = np.linspace(0.0, s[-1], n)
    return np.stack([np.interp(q, s, points[:, k]) for k in range(3)], axis=1)


def path_length(points: F64) -> float:
    return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())


def timed_points(shape: Shape, speed_mps: float) -> F64:
    length = path_length(shape.points)
    n = max(24, round(max(0.8, length / speed_mps) * BASE_HZ) + 1)
    pts = _resample(shape.points, n)
    hold = round(shape.hold_end_s * BASE_HZ)
    return np.concatenate([pts, np.repeat(pts[-1:], hold, axis=0)]) if hold else pts


def moving_average(x: F64, window: int) -> F64:
    """Centred moving average with the ends pinned (shrinking window at the borders)."""
    if len(x) < 3 or window < 2:
        return x.copy()
    half = window // 2
    c = np.concatenate([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
    idx = np.arange(len(x))
    lo = np.maximum(idx - half, 0)
    hi = np.minimum(idx + half + 1, len(x))
    # shrink symmetric so the average stays centred near the ends
    span = np.minimum(idx - lo, hi - 1 - idx)
    lo, hi = idx - span, idx + span + 1
    out: F64 = (c[hi] - c[lo]) / (hi - lo)[:, None]
    return out


def compose(elements: list[Element]) -> Trajectory:
    """Time every element, join them (shared endpoints once), resample to 40 Hz and smooth."""
    raw_parts: list[F64] = []
    bounds: list[tuple[int, int]] = []
    n = 0
    for el in elements:
        assert el.shape is not None
        pts = timed_points(el.shape, float(el.params["speed_mps"]))
        if raw_parts:
            pts = pts[1:]  # starts where the previous element ended
        raw_parts.append(pts)
        bounds.append((n, n + len(pts) - 1))
        n += len(pts)
    raw = np.concatenate(raw_parts)
    t = np.arange(len(raw), dtype=np.float64)
    fine_t = np.arange((len(raw) - 1) * SAMPLES_PER_SEGMENT + 1) / SAMPLES_PER_SEGMENT
    fine = np.stack([np.interp(fine_t, t, raw[:, k]) for k in range(3)], axis=1)
    waypoints = moving_average(fine, SMOOTH_WINDOW)
    segments = []
    for i, (el, (a, b)) in enumerate(zip(elements, bounds, strict=True)):
        assert el.shape is not None
        start = 0 if i == 0 else (a - 1) * SAMPLES_PER_SEGMENT + 1
        end = b * SAMPLES_PER_SEGMENT
        segments.append(
            Segment(
                index=i,
                element=el.step.element,
                camera_mode=el.step.camera_mode,
                params=dict(el.params),
                effective=dict(el.shape.effective),
                start=start,
                end=end,
                bridged=el.bridged,
                project_distance_m=round(el.project_distance_m, 3),
            )
        )
    return Trajectory(raw=raw, waypoints=waypoints, segments=segments)


def camera_angles(traj: Trajectory, t: Target) -> tuple[F64, F64]:
    """Camera yaw (unwrapped) and pitch in degrees per path point: the velocity direction or
    towards the landmark, averaged over ``FORWARD_WINDOW`` points in angle, so a camera-mode
    switch turns the camera over that stretch of path (averaging unit vectors instead would
    flip a 180° switch in one step, where the averaged vector passes near zero)."""
    wp = traj.waypoints
    n = len(wp)
    vel = np.gradient(wp, axis=0) if n > 1 else np.zeros_like(wp)
    track = np.zeros(n, dtype=bool)
    gaze = np.zeros(n)
    for seg in traj.segments:
        track[seg.start : seg.end + 1] = seg.camera_mode == "landmark_track"
        gaze[seg.start : seg.end + 1] = math.radians(float(seg.params.get("gaze_pitch_deg", 0.0)))
    to_target = t.c - wp
    to_target /= np.maximum(np.linalg.norm(to_target, axis=1, keepdims=True), 1e-9)
    to_target[:, 2] += np.sin(gaze) * 0.25
    # look_forward flies the camera along the horizontal velocity; hovering or climbing straight
    # up keeps the last heading the camera had (a tracked landmark's bearing included)
    own = np.where(track[:, None], to_target, vel)
    moving = np.hypot(own[:, 0], own[:, 1]) > 1e-3
    last = np.maximum.accumulate(np.where(moving, np.arange(n), -1))
    start = math.atan2(t.center[1] - wp[0, 1], t.center[0] - wp[0, 0])
    heading = np.where(last >= 0, np.arctan2(own[np.maximum(last, 0), 1], own[np.maximum(last, 0), 0]), start)
    ahead = np.stack([np.cos(gaze) * np.cos(heading), np.cos(gaze) * np.sin(heading), np.sin(gaze)], axis=1)
    out = np.where(track[:, None], to_target, ahead)
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
    yaw, pitch = yaw_pitch(out)
    yaw = np.degrees(np.unwrap(np.radians(yaw)))
    angles = moving_average(np.stack([yaw, pitch], axis=1), FORWARD_WINDOW)
    return angles[:, 0], angles[:, 1]


def yaw_pitch(fwd: F64) -> tuple[F64, F64]:
    """Camera yaw (CCW from east) and pitch (up positive) in degrees; straight down keeps yaw."""
    yaw = np.degrees(np.arctan2(fwd[:, 1], fwd[:, 0]))
    flat = np.hypot(fwd[:, 0], fwd[:, 1]) < 1e-4
    for i in np.flatnonzero(flat):
        yaw[i] = yaw[i - 1] if i > 0 else 0.0
    pitch = np.degrees(np.arcsin(np.clip(fwd[:, 2], -1.0, 1.0)))
    return yaw, pitch


def frame_sources(n_waypoints: int, fps: int = VIDEO_FPS) -> list[int]:
    """Waypoint index of each video frame: every POSE_HZ/fps-th waypoint from the start."""
    stride = POSE_HZ // fps
    return list(range(0, n_waypoints, stride))
