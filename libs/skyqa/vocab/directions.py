"""Label spaces and the geometry behind every image-task answer.

Directions follow UAV-DualCog: a view's *object label* is the landmark facade it shows (the
UAV's position in the landmark frame); the *observer label* mirrors left and right. The
landmark-driven action (env_how) is skyqa's own rule, documented in :func:`env_action`.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from skyqa.contracts.landmarks import RING, RING_OFFSETS
from skyqa.sim import Pose

F64 = NDArray[np.float64]

DISPLAY = {d: "-".join(p.capitalize() for p in d.split("_")) for d in RING}
OBJECT_4 = ["Front", "Back", "Left", "Right"]
OBJECT_8 = [*OBJECT_4, "Front-Left", "Front-Right", "Back-Left", "Back-Right"]
# A camera that shows the landmark rules out every label behind it (and, 8-way, the pure
# sides), so env_where asks only among the labels the image can show: left of, at, or right of
# the forward direction.
ENV_4 = ["Left", "Front", "Right"]
ENV_8 = ["Front-Left", "Front", "Front-Right"]
ACTION_4 = ["Turn left", "Turn right", "Climb", "Descend"]
ACTION_8 = [
    *ACTION_4,
    "Turn left and climb",
    "Turn left and descend",
    "Turn right and climb",
    "Turn right and descend",
]
CARDINAL = {"front", "back", "left", "right"}
# Decision boundaries of the environment answers, and the margin a gold answer must keep from
# each. env_where: the landmark counts as straight ahead under FRONT_DEG of bearing. env_how:
# an axis counts when the landmark is ACTIVE_DEG off centre; 4-way asks for the dominant axis,
# DOMINANCE times the other. A bearing within MARGIN_DEG of an angle boundary, or with a ratio
# within DOMINANCE_MARGIN of the dominance boundary, has no fair answer and is not asked.
FRONT_DEG = 5.0
ACTIVE_DEG = 5.0
DOMINANCE = 1.5
MARGIN_DEG = 2.0
DOMINANCE_MARGIN = 1.3  # the dominant axis must be DOMINANCE * 1.3 times the other


def similarity(a: str, b: str) -> float:
    """difflib's ratio taken both ways: it is not symmetric (its junk heuristic depends on the
    order), and a check that compares the other way round must agree."""
    return max(difflib.SequenceMatcher(None, a, b).ratio(), difflib.SequenceMatcher(None, b, a).ratio())


def object_label(direction: str) -> str:
    return DISPLAY[direction]


def observer_label(direction: str) -> str:
    mirrored = direction.replace("left", "@").replace("right", "left").replace("@", "right")
    return DISPLAY[mirrored]


def label_space(task: str, difficulty: str) -> list[str]:
    """Every label a row of ``task`` at ``difficulty`` can have as its answer."""
    eight = difficulty == "8way"
    return {
        "self_where": OBJECT_8 if eight else OBJECT_4,
        "env_where": ENV_8 if eight else ENV_4,
        "env_how": ACTION_8 if eight else ACTION_4,
    }[task]


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


def box_bearing(box: list[float], hfov_deg: float, width: int, height: int) -> Bearing:
    """Angles of a normalized box's centre off the optical axis (positive: left of / above the
    centre), for a pinhole camera of horizontal field of view ``hfov_deg``."""
    t = math.tan(math.radians(hfov_deg) / 2)
    left = (0.5 - (box[0] + box[2]) / 2) * 2 * t
    up = (0.5 - (box[1] + box[3]) / 2) * 2 * t * height / width
    return Bearing(math.degrees(math.atan(left)), math.degrees(math.atan2(up, math.hypot(1.0, left))), 1.0)


def env_direction(b: Bearing, difficulty: str, margin: float = MARGIN_DEG) -> str | None:
    """Where the landmark is relative to the forward direction; None within the margin."""
    h = b.horizontal_deg
    if b.depth <= 0 or abs(abs(h) - FRONT_DEG) < margin:
        return None
    if abs(h) < FRONT_DEG:
        return "Front"
    side = "Left" if h > 0 else "Right"
    return side if difficulty == "4way" else f"Front-{side}"


def env_action(
    b: Bearing, difficulty: str, margin: float = MARGIN_DEG, dominance_margin: float = DOMINANCE_MARGIN
) -> str | None:
    """The move that brings the landmark to the image centre, or None when within a margin.

    Turn towards its side (yaw) and climb or descend towards it (a landmark below the centre
    comes up when the UAV descends). An axis is active at ACTIVE_DEG or more off centre. 4-way
    asks for the dominant axis, active and DOMINANCE times the other; 8-way names every active
    axis. Angles within MARGIN_DEG of ACTIVE_DEG, and a dominance under DOMINANCE *
    DOMINANCE_MARGIN, make the case ambiguous (``margin=0, dominance_margin=1`` gives the bare
    rule).
    """
    h, v = b.horizontal_deg, b.vertical_deg
    if b.depth <= 0 or any(abs(abs(a) - ACTIVE_DEG) < margin for a in (h, v)):
        return None
    turn = "Turn left" if h > 0 else "Turn right"
    climb = "Climb" if v > 0 else "Descend"
    active_h, active_v = abs(h) >= ACTIVE_DEG, abs(v) >= ACTIVE_DEG
    if difficulty == "4way":
        big, small = max(abs(h), abs(v)), min(abs(h), abs(v))
        if big < ACTIVE_DEG or big < DOMINANCE * dominance_margin * small:
            return None
        return turn if abs(h) > abs(v) else climb
    if active_h and active_v:
        return f"{turn} and {climb.lower()}"
    if active_h:
        return turn
    if active_v:
        return climb
    return None
