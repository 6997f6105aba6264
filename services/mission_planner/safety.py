"""Collision checks and vertical-lift repair against the fused cloud and landmark keep-out boxes.

A waypoint violates the constraints when it is closer than the safety distance to a point of
the Stage-1 cloud, inside a keep-out box (every valid landmark's box inflated by 0.25*safety in
XY and 0.15*safety in Z, as UAV-DualCog does), or below the local ground + safety (the lowest
cloud point per 4 m cell; outside the scan, the scene's ground level). Repair raises waypoints in
2 m steps up to 24 m; the lift profile is widened and averaged so the path stays smooth and is
never lower than what each waypoint needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy.spatial import cKDTree

F64 = NDArray[np.float64]
MAX_POINTS = 220_000
GROUND_CELL_M = 4.0
LIFT_STEP_M = 2.0
MAX_LIFT_M = 24.0
LIFT_SMOOTH = 41  # waypoints at 40 Hz, about one second


@dataclass
class Violation:
    index: int
    kind: str  # "cloud", "keepout" or "ground"
    distance_m: float


@dataclass
class CheckResult:
    collision_free: bool
    min_distance_m: float
    violations: list[Violation] = field(default_factory=list)
    violation_count: int = 0


@dataclass
class RepairResult:
    lifted_points: int
    lifted_fraction: float
    max_lift_m: float


class ObstacleMap:
    def __init__(self, cloud_xyz: F64, keepouts: list[tuple[F64, F64]], safety_m: float) -> None:
        pts = np.asarray(cloud_xyz, dtype=np.float64)
        if len(pts) > MAX_POINTS:
            pts = pts[:: int(np.ceil(len(pts) / MAX_POINTS))]
        if len(pts) == 0:
            raise ValueError("the obstacle cloud is empty")
        self.safety = safety_m
        self.tree = cKDTree(pts)
        self.lo = np.array([k[0] for k in keepouts]).reshape(-1, 3)
        self.hi = np.array([k[1] for k in keepouts]).reshape(-1, 3)
        self.ground_default = float(np.percentile(pts[:, 2], 1.0))
        cells = np.floor(pts[:, :2] / GROUND_CELL_M).astype(np.int64)
        order = np.lexsort((pts[:, 2], cells[:, 1], cells[:, 0]))
        c = cells[order]
        first = np.ones(len(c), dtype=bool)
        first[1:] = np.any(c[1:] != c[:-1], axis=1)
        self.ground = {
            (int(a), int(b)): float(z) for (a, b), z in zip(c[first], pts[order][first, 2], strict=True)
        }

    @staticmethod
    def keepout(lo: F64, hi: F64, safety_m: float) -> tuple[F64, F64]:
        pad = np.array([0.25, 0.25, 0.15]) * safety_m
        return np.asarray(lo, dtype=np.float64) - pad, np.asarray(hi, dtype=np.float64) + pad

    def ground_z(self, xy: F64) -> F64:
        cells = np.floor(xy / GROUND_CELL_M).astype(np.int64)
        return np.array([self.ground.get((int(a), int(b)), self.ground_default) for a, b in cells])

    def _state(self, points: F64) -> tuple[F64, NDArray[np.bool_], F64]:
        dist, _ = self.tree.query(points, k=1, distance_upper_bound=self.safety * 8)
        dist = np.minimum(dist, self.safety * 8)
        if len(self.lo):
            inside = np.any(
                np.all((points[:, None, :] >= self.lo[None]) & (points[:, None, :] <= self.hi[None]), axis=2),
                axis=1,
            )
        else:
            inside = np.zeros(len(points), dtype=bool)
        above = points[:, 2] - self.ground_z(points[:, :2])
        return dist, inside, above

    def unsafe(self, points: F64) -> NDArray[np.bool_]:
        dist, inside, above = self._state(points)
        bad: NDArray[np.bool_] = (dist < self.safety) | inside | (above < self.safety)
        return bad

    def check(self, points: F64, keep: int = 20) -> CheckResult:
        dist, inside, above = self._state(points)
        kinds = [("cloud", dist < self.safety), ("keepout", inside), ("ground", above < self.safety)]
        violations: list[Violation] = []
        count = 0
        for kind, mask in kinds:
            idx = np.flatnonzero(mask)
            count += len(idx)
            violations += [Violation(int(i), kind, round(float(dist[i]), 3)) for i in idx[:keep]]
        violations.sort(key=lambda v: v.index)
        return CheckResult(
            collision_free=count == 0,
            min_distance_m=round(float(dist.min()), 3),
            violations=violations[:keep],
            violation_count=count,
        )

    def repair(self, points: F64) -> tuple[F64, RepairResult]:
        """Lift unsafe waypoints (2 m steps, at most 24 m); returns the new path and stats."""
        need = np.zeros(len(points))
        todo = self.unsafe(points)
        lift = 0.0
        while todo.any() and lift < MAX_LIFT_M:
            lift += LIFT_STEP_M
            idx = np.flatnonzero(todo)
            raised = points[idx] + np.array([0.0, 0.0, lift])
            ok = ~self.unsafe(raised)
            need[idx[ok]] = lift
            todo[idx[ok]] = False
        need[todo] = MAX_LIFT_M  # unrepairable: lifted to the cap, the final check rejects it
        smooth = _widen(need, LIFT_SMOOTH)
        out = points.copy()
        out[:, 2] += smooth
        lifted = smooth > 1e-6
        return out, RepairResult(
            lifted_points=int(lifted.sum()),
            lifted_fraction=round(float(lifted.mean()) if len(points) else 0.0, 4),
            max_lift_m=round(float(smooth.max()) if len(points) else 0.0, 3),
        )


def _widen(need: F64, window: int) -> F64:
    """Max-filter then box-average with the same window: continuous and >= ``need`` everywhere."""
    if not need.any():
        return need
    half = window // 2
    padded = np.pad(need, half, mode="edge")
    dilated = np.lib.stride_tricks.sliding_window_view(padded, window).max(axis=1)
    padded = np.pad(dilated, half, mode="edge")
    c = np.concatenate([[0.0], np.cumsum(padded)])
    averaged: F64 = (c[window:] - c[:-window]) / window
    return np.maximum(averaged, need)
