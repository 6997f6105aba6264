"""Plan one mission: sample a set, search obstacle-aware parameters, compose, repair, accept.

Acceptance (UAV-DualCog ``task_pipeline``): the repaired path is collision free, its largest
lift is at most ``max_lift_m`` and at most ``max_lift_fraction`` of its waypoints were lifted.
A rejected attempt is re-sampled with ``seed + k*1009``, up to ``attempts`` times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product

import numpy as np
from skyqa.contracts.missions import ObstacleAdaptation
from skyqa.vocab.behaviors import Library, Value

from services.mission_planner.compose import Element, Trajectory, build_shapes, compose, start_position
from services.mission_planner.safety import CheckResult, ObstacleMap, RepairResult
from services.mission_planner.shapes import Target

SEARCH_FAMILIES = frozenset({"orbit", "transition", "survey"})
EXTENSION_DELTAS = (0.0, 2.0, -2.0, 4.0, -4.0, 6.0, -6.0, 8.0, -8.0)
SURFACE_DELTAS = (0.0, 2.0, -2.0, 4.0, -4.0)
ALTITUDE_DELTAS = (0.0, 2.0, -2.0, 4.0, -4.0, 6.0, -6.0, 8.0, -8.0)
SEED_STRIDE = 1009


@dataclass(frozen=True)
class Acceptance:
    attempts: int = 8
    max_lift_m: float = 50.0
    max_lift_fraction: float = 0.5


@dataclass
class Planned:
    set_name: str
    seed: int
    attempt: int
    elements: list[Element]
    adaptations: list[ObstacleAdaptation | None]
    trajectory: Trajectory
    repair: RepairResult
    segment_lifts: list[RepairResult]
    check: CheckResult
    accepted: bool
    reason: str = ""
    raw_before_repair: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))


def _adjusted(params: dict[str, Value], de: float, da: float) -> dict[str, Value]:
    out = dict(params)
    for name, value in params.items():
        if name.startswith(("extension", "start_extension", "end_extension")):
            out[name] = max(0.0, float(value) + de)
        elif name == "altitude_offset_m":
            out[name] = float(value) + da
    return out


def _search(
    lib: Library, elements: list[Element], i: int, t: Target, start: np.ndarray, obstacles: ObstacleMap
) -> ObstacleAdaptation:
    """Pick the collision-free (extension, altitude) change with the least cost for element i."""
    el = elements[i]
    base = dict(el.params)
    ext = SURFACE_DELTAS if el.step.element == "surface_mapping" else EXTENSION_DELTAS
    alt = ALTITUDE_DELTAS if "altitude_offset_m" in base else (0.0,)
    candidates = sorted(product(ext, alt), key=lambda c: (abs(c[0]) + abs(c[1]), -c[0], -c[1]))
    best: tuple[tuple[int, float], ObstacleAdaptation, dict[str, Value]] | None = None
    for n, (de, da) in enumerate(candidates, start=1):
        trial = [Element(e.step, dict(e.params)) for e in elements[: i + 1]]
        trial[i].params = _adjusted(base, de, da)
        build_shapes(lib, trial, t, start)
        shape = trial[i].shape
        assert shape is not None
        res = obstacles.check(shape.points, keep=0)
        adapt = ObstacleAdaptation(
            checked=True,
            applied=(de, da) != (0.0, 0.0),
            collision_free=res.collision_free,
            min_distance=res.min_distance_m,
            violation_count=res.violation_count,
            candidate_count=n,
            cost=abs(de) + abs(da),
            extension_delta_m=de,
            altitude_delta_m=da,
        )
        if res.collision_free:
            el.params = trial[i].params
            return adapt
        score = (res.violation_count, -res.min_distance_m)
        if best is None or score < best[0]:
            best = (score, adapt, trial[i].params)
    assert best is not None
    el.params = best[2]
    best[1].candidate_count = len(candidates)
    return best[1]


def attempt_once(
    lib: Library,
    set_name: str,
    t: Target,
    obstacles: ObstacleMap,
    seed: int,
    accept: Acceptance,
    attempt: int,
) -> Planned:
    rng = np.random.default_rng(seed)
    start = start_position(t, float(rng.uniform(0.0, 2.0 * math.pi)))
    elements = [Element(step, lib.sample_step(step, rng)) for step in lib.sets[set_name].steps]
    adaptations: list[ObstacleAdaptation | None] = []
    for i, el in enumerate(elements):
        if lib.elements[el.step.element].family in SEARCH_FAMILIES:
            adaptations.append(_search(lib, elements, i, t, start, obstacles))
        else:
            adaptations.append(None)
    for el in elements:
        el.shape = None
    build_shapes(lib, elements, t, start)
    traj = compose(elements)
    before = traj.waypoints
    traj.waypoints, repair = obstacles.repair(before)
    lifted = np.abs(traj.waypoints[:, 2] - before[:, 2]) > 1e-6
    seg_lifts = []
    for s in traj.segments:
        d = traj.waypoints[s.start : s.end + 1, 2] - before[s.start : s.end + 1, 2]
        m = lifted[s.start : s.end + 1]
        seg_lifts.append(RepairResult(int(m.sum()), round(float(m.mean()), 4), round(float(d.max()), 3)))
    check = obstacles.check(traj.waypoints)
    reason = ""
    if not check.collision_free:
        reason = (
            f"{check.violation_count} waypoints still within {obstacles.safety} m of obstacles after repair"
        )
    elif repair.max_lift_m > accept.max_lift_m:
        reason = f"repair lifted {repair.max_lift_m} m (limit {accept.max_lift_m} m)"
    elif repair.lifted_fraction > accept.max_lift_fraction:
        reason = (
            f"repair lifted {repair.lifted_fraction:.0%} of waypoints (limit {accept.max_lift_fraction:.0%})"
        )
    return Planned(
        set_name=set_name,
        seed=seed,
        attempt=attempt,
        elements=elements,
        adaptations=adaptations,
        trajectory=traj,
        repair=repair,
        segment_lifts=seg_lifts,
        check=check,
        accepted=not reason,
        reason=reason,
        raw_before_repair=before,
    )


def plan_mission(
    lib: Library, set_name: str, t: Target, obstacles: ObstacleMap, seed: int, accept: Acceptance
) -> Planned:
    """The first accepted attempt, else the last attempt with its rejection reason."""
    planned: Planned | None = None
    for k in range(accept.attempts):
        planned = attempt_once(lib, set_name, t, obstacles, seed + k * SEED_STRIDE, accept, k)
        if planned.accepted:
            return planned
    assert planned is not None
    return planned


def self_difficulty(duration_s: float, landmarks: int, elements: int, revisits: int = 0) -> tuple[float, str]:
    """UAV-DualCog's self-state difficulty score and band (easy < 0.40 <= medium < 0.70 <= hard)."""
    score = (
        0.30 * min(duration_s / 80.0, 1.0)
        + 0.25 * min(landmarks / 5.0, 1.0)
        + 0.30 * min(elements / 8.0, 1.0)
        + 0.10 * min((elements - 1) / 7.0, 1.0)
        + 0.05 * min(revisits / 3.0, 1.0)
    )
    band = "easy" if score < 0.40 else "medium" if score < 0.70 else "hard"
    return round(score, 4), band
