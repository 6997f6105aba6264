"""Label spaces and the geometry behind every image-task answer.

Directions follow UAV-DualCog: a view's *object label* is the landmark facade it shows (the
UAV's position in the landmark frame); the *observer label* mirrors left and right. The
landmark-driven action (env_how) is skyqa's own rule, documented in :func:`env_action`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from skyqa.contracts.landmarks import RING, RING_OFFSETS
from skyqa.sim import Intrinsics, Pose, project

F64 = NDArray[np.float64]

DISPLAY = {d: "-".join(p.capitalize() for p in d.split("_")) for d in RING}
OBJECT_4 = ["Front", "Back", "Left", "Right"]
OBJECT_8 = [*OBJECT_4, "Front-Left", "Front-Right", "Back-Left", "Back-Right"]
ENV_4 = ["Left", "Front", "Right", "Back"]
ENV_8 = ["Front", "Front-Right", "Right", "Back-Right", "Back", "Back-Left", "Left", "Front-Left"]
ACTION_4 = ["Turn left", "Turn right", "Climb", "Descend"]
ACTION_8 = [
    *ACTION_4,
    "Turn left and climb",
    "Turn left and descend",
    "Turn right and climb",
    "Turn right and descend",
]
CARDINAL = {"front", "back", "left", "right"}
# env labels: the landmark counts as straight ahead within this bearing
FRONT_DEG = 5.0
# env_how: an axis counts when the landmark is this far off centre, and is idle below half of it
ACTIVE_DEG = 5.0
DOMINANCE = 1.5


def object_label(direction: str) -> str:
    return DISPLAY[direction]


def observer_label(direction: str) -> str:
    mirrored = direction.replace("left", "@").replace("right", "left").replace("@", "right")
    return DISPLAY[mirrored]


def label_space(difficulty: str) -> list[str]:
    return OBJECT_8 if difficulty == "8way" else OBJECT_4


def ring_index(direction: str) -> int:
    return RING.index(direction)


def geometric_ring_index(view_yaw_deg: float, landmark_yaw_deg: float) -> int:
    """Ring slot of a view from its camera yaw alone (independent of any label)."""
    rel = (view_yaw_deg - landmark_yaw_deg) % 360.0
    best = min(RING, key=lambda d: abs(((rel - RING_OFFSETS[d]) + 180.0) % 360.0 - 180.0))
    return RING.index(best)


def orbit_turn(ref_view_yaw: float, target_view_yaw: float) -> tuple[int, str]:
    """Degrees and direction (seen from above) the UAV orbits from the reference to the target view.

    Orbit views look at the landmark, so the camera's position angle is its yaw + 180 and the
    turn is the yaw change; the shorter way wins, exactly 180 counts as clockwise (UAV-DualCog).
    """
    delta = (target_view_yaw - ref_view_yaw + 180.0) % 360.0 - 180.0
    step = round(delta / 45.0) * 45
    if step in (180, -180):
        return 180, "clockwise"
    return abs(step), "counterclockwise" if step > 0 else "clockwise"


@dataclass(frozen=True)
class Bearing:
    horizontal_deg: float  # positive: the landmark is to the left of the image centre
    vertical_deg: float  # positive: above the image centre
    depth: float


def bearing(center: F64, pose: Pose) -> Bearing:
    """The landmark centre's angles off the optical axis, in the camera frame."""
    local = (np.asarray(center, dtype=np.float64) - pose.position) @ pose.rotation()
    fwd, left, up = (float(v) for v in local)
    return Bearing(
        math.degrees(math.atan2(left, fwd)), math.degrees(math.atan2(up, math.hypot(fwd, left))), fwd
    )


def env_direction(b: Bearing, difficulty: str) -> str | None:
    """Where the landmark is relative to the forward direction; None when too close to a boundary."""
    h = b.horizontal_deg
    if b.depth <= 0:
        return "Back"
    if abs(h) < FRONT_DEG * 0.6:
        return "Front"
    if abs(h) < FRONT_DEG * 1.6:
        return None
    side = "Left" if h > 0 else "Right"
    return side if difficulty == "4way" else f"Front-{side}"


def env_action(b: Bearing, difficulty: str) -> str | None:
    """The move that brings the landmark to the image centre, or None when ambiguous.

    Turn towards its side (yaw) and climb or descend towards it (a landmark below the centre
    comes up when the UAV descends). 4-way asks for the dominant axis, which must be at least
    5 degrees off and 1.5 times the other; 8-way names every axis at least 5 degrees off, and an
    axis between 2.5 and 5 degrees makes the case ambiguous.
    """
    h, v = b.horizontal_deg, b.vertical_deg
    turn = "Turn left" if h > 0 else "Turn right"
    climb = "Climb" if v > 0 else "Descend"
    if difficulty == "4way":
        if max(abs(h), abs(v)) < ACTIVE_DEG:
            return None
        if abs(h) >= DOMINANCE * abs(v):
            return turn
        if abs(v) >= DOMINANCE * abs(h):
            return climb
        return None
    half = ACTIVE_DEG / 2
    if any(half <= abs(a) < ACTIVE_DEG for a in (h, v)):
        return None
    if abs(h) >= ACTIVE_DEG and abs(v) >= ACTIVE_DEG:
        return f"{turn} and {climb.lower()}"
    if abs(h) >= ACTIVE_DEG:
        return turn
    if abs(v) >= ACTIVE_DEG:
        return climb
    return None


def box_corners(lo: F64, hi: F64) -> F64:
    return np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])


def projected_box(lo: F64, hi: F64, pose: Pose, k: Intrinsics) -> tuple[F64, bool]:
    """Pixel box of the 3D box's corners, and whether all of them are in front and in frame."""
    px, d = project(box_corners(lo, hi), pose, k)
    inside = bool(
        np.all(d > 0.1)
        and np.all(px[:, 0] >= 0)
        and np.all(px[:, 0] <= k.width)
        and np.all(px[:, 1] >= 0)
        and np.all(px[:, 1] <= k.height)
    )
    return np.r_[px.min(axis=0), px.max(axis=0)], inside
