"""Camera modes and parameter draws per mission, chosen so the landmark's visible count varies
across a run.

A library set fixes each step's camera mode. With landmark_track on every atomic set, the
landmark is in view exactly once per atomic mission, and the visibility-count question answers
itself from the mission kind (the blind gate measured a count prior of 0.83 against 0.33).
The planner therefore weighs the set's own modes against variants with steps switched between
landmark_track and look_forward, and a one-step (atomic) mission, which has two such variants
only, against further draws of its parameters too (UAV-DualCog's generator also picks
parameters for "balanced visibility"). It estimates each candidate's visible count with the
renderer's sighting rule (``skyqa.geometry.visibility``), taking the share of the frame inside
the hull of the projected box as the landmark's pixel share, without occlusion (which needs a
render). Candidates that show the landmark at least once come first (a mission whose video
never shows it has nothing to ask), then those whose estimated count is robust (a count that
changes within the rule's margin is dropped by QC), then the count the run has used least for
that landmark (a landmark seen from everywhere would otherwise always count high, and its
description would predict the count), then the count the other mission kind shows most beyond
this one (the QA stage keeps a count only as often as every kind shows it), then the count used
least for the kind, the first draw and the set's own modes winning ties. The rendered count,
with occlusion, stays the answer; this only spreads it, and what still clusters is evened out
by the QA stage (``count_surplus``). In a 40-landmark build that planned with the set's own
parameters only, 20 of 23 atomic missions showed their landmark once and no video row shipped.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.spatial import ConvexHull, QhullError
from skyqa.geometry import visibility as vis
from skyqa.sim import Intrinsics, Pose, project

from services.mission_planner.compose import Trajectory, frame_sources
from services.mission_planner.kinematics import fly
from services.mission_planner.shapes import Target

MODES = ("landmark_track", "look_forward")
MAX_VARIANTS = 32
# (parameter draw, camera variant) pairs weighed per mission: a one-step mission has two camera
# variants, so it draws its parameters several times (a polygon orbit's edge count, a comet's
# arc, a figure eight's cycles change how often a look-ahead camera passes the landmark)
CANDIDATES = 16
GRID = 5  # samples per face edge, edges included


def variants(default: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The set's modes first, then every combination (few steps) or single switches."""
    if len(default) <= 5:
        combos = list(itertools.product(MODES, repeat=len(default)))
    else:
        flip = {MODES[0]: MODES[1], MODES[1]: MODES[0]}
        combos = [default[:i] + (flip[m],) + default[i + 1 :] for i, m in enumerate(default)]
        combos += [(m,) * len(default) for m in MODES]
    out = [default] + [c for c in combos if c != default]
    return list(dict.fromkeys(out))[:MAX_VARIANTS]


def face_grid(t: Target) -> NDArray[np.float64]:
    c, s = t.c, np.asarray(t.size, dtype=np.float64) / 2
    u = np.linspace(-1.0, 1.0, GRID)
    a, b = (x.ravel() for x in np.meshgrid(u, u))
    faces = []
    for axis in range(3):
        others = [k for k in range(3) if k != axis]
        for sign in (-1.0, 1.0):
            f = np.zeros((len(a), 3))
            f[:, axis] = sign
            f[:, others[0]], f[:, others[1]] = a, b
            faces.append(f)
    out: NDArray[np.float64] = c + np.concatenate(faces) * s
    return out


def draws(steps: int) -> int:
    """How many parameter draws a mission of ``steps`` steps is planned with."""
    return max(1, CANDIDATES // len(variants(("landmark_track",) * steps)))


def estimated_shares(traj: Trajectory, t: Target, k: Intrinsics, fps: int) -> list[float]:
    """Per video frame of the flight as timed within the kinematic limits, the share of the
    frame inside the hull of the projected box."""
    flown = fly(traj, t)
    grid = face_grid(t)
    shares = []
    for i in frame_sources(len(flown.waypoints), fps):
        x, y, z = (float(v) for v in flown.waypoints[i])
        pose = Pose(x, y, z, float(flown.yaw[i]), float(flown.pitch[i]), 0.0)
        px, d = project(grid, pose, k)
        front = px[d > 0.05]
        inside = (front[:, 0] >= 0) & (front[:, 0] < k.width) & (front[:, 1] >= 0) & (front[:, 1] < k.height)
        share = 0.0
        if inside.any():
            # clamping to the frame keeps the hull inside it; exact clipping is not worth it here
            clamped = np.clip(front, 0, [k.width, k.height])
            try:
                share = float(ConvexHull(clamped).volume) / (k.width * k.height)
            except QhullError:  # the box seen edge-on: no area
                share = 0.0
        shares.append(share)
    return shares


def estimated_count(traj: Trajectory, t: Target, k: Intrinsics, fps: int) -> int:
    """How many sightings of the landmark the video will have, by frustum alone."""
    return len(vis.sightings(estimated_shares(traj, t, k, fps), fps))


class CountBalance:
    """Estimated visible counts per landmark and per mission kind over the missions planned so far."""

    def __init__(self) -> None:
        self._by_landmark: Counter[tuple[str, int]] = Counter()
        self._by_kind: Counter[tuple[str, int]] = Counter()
        self._kinds: set[str] = set()

    def choose(
        self, plans: Sequence[Trajectory], t: Target, landmark: str, kind: str, k: Intrinsics, fps: int
    ) -> tuple[int, int]:
        """Of a mission's plans (its parameter draws, the first preferred on ties), the one the
        run needs, with its camera modes set to the variant it needs: its index and estimated
        count."""
        scored = []
        for n, traj in enumerate(plans):
            default = tuple(s.camera_mode for s in traj.segments)
            for order, modes in enumerate(variants(default)):
                self._apply(traj, modes)
                shares = estimated_shares(traj, t, k, fps)
                count = len(vis.sightings(shares, fps))
                # a variant that never shows the landmark is a failed mission (its rows would ask
                # about a landmark the video does not show): the last resort
                scored.append(
                    (
                        count == 0,
                        not vis.count_is_robust(shares, fps),
                        self._by_landmark[(landmark, count)],
                        -self._deficit(kind, count),
                        self._by_kind[(kind, count)],
                        n,
                        order,
                        count,
                        modes,
                    )
                )
            self._apply(traj, default)
        *_, n, _, count, modes = min(scored)
        self._apply(plans[n], modes)
        self._by_landmark[(landmark, count)] += 1
        self._by_kind[(kind, count)] += 1
        self._kinds.add(kind)
        return n, count

    def _deficit(self, kind: str, count: int) -> int:
        """How many more missions of another kind than of ``kind`` show ``count``: a count keeps
        rows only as often as every kind shows it (``count_surplus``), so a kind catches up. A
        count no other kind shows is a surplus from its first mission on."""
        others = [self._by_kind[(o, count)] for o in self._kinds - {kind}]
        mine = self._by_kind[(kind, count)]
        if not others:
            return 0
        return max(others) - mine if max(others) else -mine - 1

    @staticmethod
    def _apply(traj: Trajectory, modes: tuple[str, ...]) -> None:
        for seg, mode in zip(traj.segments, modes, strict=True):
            seg.camera_mode = mode
