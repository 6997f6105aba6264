"""The two-layer validator: Layer 1 on poses (every step's actual end within 1 cm of its
expected end, no collision, and every identity's two frames within its tolerance plus 1 cm),
Layer 2 on pixels (the mean squared error between an identity's two lossless frames; zero for an
exact identity, since the renderer is deterministic)."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from skyqa.actions.space import ActionSpace
from skyqa.contracts.rsv import Execution, IdentityPair, StepRecord, Vec5

POSE_TOLERANCE_M = 0.01
ANGLE_TOLERANCE_DEG = 1e-6


def frame_body(steps: list[StepRecord], space: ActionSpace, frame: int) -> Vec5:
    """The body pose of ``frame``: each action's frames run from its start to its actual end,
    eased from rest to rest as the renderer moves it (:meth:`ActionSpace.step_shares`)."""
    frames_per_action = space.frames_per_action
    k, j = divmod(frame, frames_per_action)
    s = steps[k]
    if j == frames_per_action - 1:
        return s.actual_end
    if j == 0:
        return s.start
    t = space.step_shares()[j]
    a, b = np.array(s.start), np.array(s.actual_end)
    turn = (b[3] - a[3] + 180.0) % 360.0 - 180.0
    out = a + t * (b - a)
    out[3] = a[3] + t * turn
    return (float(out[0]), float(out[1]), float(out[2]), float(out[3]), float(out[4]))


def pose_gap(a: Vec5, b: Vec5) -> tuple[float, float]:
    """Position distance (m) and largest angle difference (degrees) of two body poses."""
    dist = math.dist(a[:3], b[:3])
    yaw = abs((a[3] - b[3] + 180.0) % 360.0 - 180.0)
    return dist, max(yaw, abs(a[4] - b[4]))


@dataclass
class Layers:
    collisions: int
    pose_error_max_m: float
    identity_error_max_m: float
    pixel_mse: list[float]
    failure: str  # "" when both layers pass


def decode_rgb(data: bytes) -> NDArray[np.uint8]:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def mse(a: NDArray[np.uint8], b: NDArray[np.uint8]) -> float:
    if a.shape != b.shape:
        return math.inf
    return float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))


def validate(
    record: Execution,
    partner: Execution | None,
    identities: list[IdentityPair],
    space: ActionSpace,
    frames: dict[tuple[bool, int], bytes],
) -> Layers:
    """Both layers; ``frames`` holds the kept PNGs by (partner's, frame)."""
    problems: list[str] = []
    if not record.root_clear:
        problems.append("the capsule overlaps the scene at the root")
    collisions = sum(record.collisions)
    if collisions:
        first = next(s for s in record.steps if s.collision)
        problems.append(f"{collisions} blocked step(s), the first at step {first.step} ({first.action})")
    worst = 0.0
    for s in record.steps:
        dist, angle = pose_gap(s.actual_end, s.expected_end)
        worst = max(worst, dist)
        if dist > POSE_TOLERANCE_M or angle > ANGLE_TOLERANCE_DEG:
            problems.append(
                f"step {s.step} ends {dist * 100:.1f} cm / {angle:.3g} deg from its expected pose"
            )
            break
    ident = 0.0
    pixels: list[float] = []
    for pair in identities:
        other = partner if pair.partner else record
        if other is None:
            problems.append("the paired trajectory was not rendered")
            break
        a = frame_body(record.steps, space, pair.first)
        b = frame_body(other.steps, space, pair.second)
        dist, angle = pose_gap(a, b)
        ident = max(ident, dist)
        if dist > pair.tolerance_m + POSE_TOLERANCE_M or angle > ANGLE_TOLERANCE_DEG:
            problems.append(
                f"frames {pair.first} and {pair.second} are {dist * 100:.1f} cm apart, not one state"
            )
        fa, fb = frames.get((False, pair.first)), frames.get((pair.partner, pair.second))
        if fa is None or fb is None:
            problems.append(f"a lossless frame of identity {pair.first}/{pair.second} is missing")
            continue
        err = mse(decode_rgb(fa), decode_rgb(fb))
        pixels.append(round(err, 6))
        if pair.tolerance_m == 0.0 and err != 0.0:
            problems.append(f"frames {pair.first} and {pair.second} differ by pixel MSE {err:.4g}")
    return Layers(collisions, round(worst, 6), round(ident, 6), pixels, "; ".join(problems))
