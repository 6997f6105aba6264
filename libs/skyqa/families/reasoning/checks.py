"""The QA stage's second look at every trajectory, on a path the validator does not use.

Each step's expected end is recomputed from its recorded start with a rotation matrix (not from
move counts), the steps must chain, a released relation must have no collision and its
identity frames one pose and bit-identical pixels (compared by digest, not by an error sum).
Then the shortcut gate, the world-model analogue of the blind gate: a relation whose anchors a
copy of the first frame already matches tells nothing about a model, a hard one whose anchors a
commuting (symmetric) model reaches is not hard, nor is a hard equivalence pair whose two paths a
commuting model already brings to one state (equal action counts would pass it); all are
dropped with the reason.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping

import numpy as np

from skyqa.contracts.rsv import Execution, StepRecord, TrajectoryRow, Vec5
from skyqa.families.reasoning.validate import decode_rgb

LOCAL = {
    "move_forward": (1.0, 0.0),
    "move_backward": (-1.0, 0.0),
    "move_left": (0.0, 1.0),
    "move_right": (0.0, -1.0),
}
SPIN = {"turn_left": (1, 0), "turn_right": (-1, 0), "look_up": (0, 1), "look_down": (0, -1)}
COPY_FIRST = "a copy of the first frame matches every anchor"
COMMUTING = "a commuting (symmetric) shortcut reaches every anchor"
COMMUTING_PAIR = "a commuting (symmetric) shortcut already puts both paths at one state"


def _rz(yaw_deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    return np.array([[c, -s], [s, c]])


def expected_end(s: StepRecord, step_m: float, yaw_deg: float, pitch_deg: float) -> Vec5:
    x, y, z, yaw, pitch = s.start
    if s.action in LOCAL:
        dx, dy = _rz(yaw) @ (np.array(LOCAL[s.action]) * step_m)
        return (x + float(dx), y + float(dy), z, yaw, pitch)
    dyaw, dpitch = SPIN.get(s.action, (0, 0))
    return (x, y, z, yaw + dyaw * yaw_deg, pitch + dpitch * pitch_deg)


def _apart(a: Vec5, b: Vec5) -> tuple[float, float]:
    yaw = abs((a[3] - b[3] + 180.0) % 360.0 - 180.0)
    return math.dist(a[:3], b[:3]), max(yaw, abs(a[4] - b[4]))


def boundary(record: Execution, frames_per_action: int, frame: int) -> Vec5 | None:
    """The pose of a frame at an action's start or end; None inside an action."""
    k, j = divmod(frame, frames_per_action)
    if k >= len(record.steps):
        return None
    if j == frames_per_action - 1:
        return record.steps[k].actual_end
    return record.steps[k].start if j == 0 else None


def commuting(row: TrajectoryRow, step_m: float, yaw_deg: float, pitch_deg: float, upto: int) -> Vec5:
    """Where a model that lets the actions commute puts the body after ``upto`` of the row's
    actions."""
    return commuting_pose(row.root, row.actions[:upto], step_m, yaw_deg, pitch_deg)


def commuting_pose(root: Vec5, actions: list[str], step_m: float, yaw_deg: float, pitch_deg: float) -> Vec5:
    """Where a model that lets the actions commute puts the body after ``actions``: every move
    along the root's heading, the turns and looks summed."""
    x, y, z, yaw, pitch = root
    turn = look = 0
    for a in actions:
        if a in LOCAL:
            dx, dy = _rz(yaw) @ (np.array(LOCAL[a]) * step_m)
            x, y = x + float(dx), y + float(dy)
        else:
            d = SPIN.get(a, (0, 0))
            turn, look = turn + d[0], look + d[1]
    return (x, y, z, yaw + turn * yaw_deg, pitch + look * pitch_deg)


def check_row(
    row: TrajectoryRow,
    record: Execution | None,
    partner: Execution | None,
    pixels: Mapping[tuple[bool, int], bytes],
    step_m: float,
    yaw_deg: float,
    pitch_deg: float,
) -> str | None:
    """Why the row cannot be released as it is, or None."""
    if record is None:
        return "execution record missing"
    f = row.frames_per_action
    prev: Vec5 | None = None
    for s in record.steps:
        if prev is not None and _apart(prev, s.start) != (0.0, 0.0):
            return f"step {s.step} does not start where step {s.step - 1} ended"
        mine = expected_end(s, step_m, yaw_deg, pitch_deg)
        if max(_apart(mine, s.expected_end)) > 1e-4:
            return f"step {s.step}: the recorded expected end is not the action applied to its start"
        if row.split != "random_walk" and (s.collision or _apart(mine, s.actual_end)[0] > 0.01):
            return f"step {s.step} of a released relation did not end where it should (QC disagreement)"
        prev = s.actual_end
    if row.split == "random_walk":
        if row.built_as != "random_walk" and not row.failure:
            return "a relation routed to random_walk without a reason (QC disagreement)"
        return None
    if row.failure:
        return "a relation that failed validation is in a relation split (QC disagreement)"
    for pair in row.identities:
        other = partner if pair.partner else record
        a = boundary(record, f, pair.first)
        b = boundary(other, f, pair.second) if other is not None else None
        if a is None or b is None:
            return f"identity frames {pair.first}/{pair.second} are not action boundaries of a rendered path"
        if _apart(a, b)[0] > pair.tolerance_m + 0.01 or _apart(a, b)[1] > 1e-6:
            return f"identity frames {pair.first}/{pair.second} are not one state (QC disagreement)"
        pa, pb = pixels.get((False, pair.first)), pixels.get((pair.partner, pair.second))
        if pa is None or pb is None:
            return f"identity frames {pair.first}/{pair.second} are not kept"
        if pair.tolerance_m == 0.0 and _pixel_digest(pa) != _pixel_digest(pb):
            return f"identity frames {pair.first}/{pair.second} are not bit-identical (QC disagreement)"
    root = record.steps[0].start
    anchors = [boundary(record, f, a) for a in row.anchors]
    far = [p for p in anchors if p is not None and _differs(p, root, step_m, yaw_deg)]
    if not far:
        return COPY_FIRST
    if row.difficulty == "hard" and row.trajectory_type == "equivalence":
        # a hard pair is one a commuting model cannot pass: it must put the two ends apart
        if partner is None:
            return "the paired path was not rendered"
        mine = commuting_pose(row.root, [s.action for s in record.steps], step_m, yaw_deg, pitch_deg)
        theirs = commuting_pose(row.root, [s.action for s in partner.steps], step_m, yaw_deg, pitch_deg)
        if not _differs(mine, theirs, step_m, yaw_deg):
            return COMMUTING_PAIR
    if row.difficulty == "hard":
        fooled = True
        for frame, pose in zip(row.anchors, anchors, strict=True):
            if pose is None:
                continue
            guess = commuting(row, step_m, yaw_deg, pitch_deg, frame // f + 1)
            fooled = fooled and not _differs(pose, guess, step_m, yaw_deg)
        if fooled:
            return COMMUTING
    return None


def _differs(a: Vec5, b: Vec5, step_m: float, yaw_deg: float) -> bool:
    dist, angle = _apart(a, b)
    return dist >= step_m / 2 or angle >= yaw_deg / 2


def _pixel_digest(png: bytes) -> str:
    return hashlib.sha256(decode_rgb(png).tobytes()).hexdigest()
