"""Navigation missions (UrbanVideo-Bench style): fly to a goal landmark, or along a route of 2-4
landmarks, as discrete labelled actions, each with the reason the planner took it.

A leg turns to face its landmark, tilts the camera towards it, then flies straight at the
current height. When that straight way is unsafe (the fused cloud, a landmark's keep-out box,
the ground) the drone climbs by the least multiple of 2 m that clears it, flies over, and
comes back down if the rest of the way is clear there. It stops ``standoff_m`` outside the
landmark's footprint; the last leg then matches the goal's part (a facade: the box's mid
height; a rooftop: over the roof's centre, camera down) and hovers. Every sample along the
path is checked again at the end; a start that cannot be flown is re-drawn with the next seed.

Moves are timed within the kinematic limits (:data:`skyqa.kinematics.LIMITS`): a translation
starts and ends at rest, speeding up and braking at ``accel_mps2`` (below ``a_max``) to its
cruise speed, so a move's frames ramp instead of jumping from a hover to 8 m/s in one frame;
turns and camera tilts run at their rates, which are within the yaw and gimbal limits. The
frames are measured against the limits, and a flight that breaks one is not planned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from skyqa.contracts.navigation import (
    Action,
    GoalPart,
    NavAlternative,
    NavCheck,
    NavigationPlan,
    NavLandmark,
    NavSegment,
    NavState,
    Reason,
)
from skyqa.kinematics import LIMITS, measure, min_seconds, trapezoid_s

from services.mission_planner.safety import ObstacleMap
from services.mission_planner.shapes import Target

F64 = NDArray[np.float64]
SEED_STRIDE = 1009
MIN_LEG_M = 5.0
TRANSLATIONS = frozenset({"fly_forward", "ascend", "descend"})


@dataclass(frozen=True)
class NavConfig:
    forward_mps: float = 8.0
    vertical_mps: float = 3.0
    yaw_dps: float = 45.0
    camera_dps: float = 30.0
    # speeding up and braking, below a_max: the frames sample the ramp, a margin covers it
    accel_mps2: float = 0.9 * LIMITS.a_max
    hover_s: float = 1.0
    standoff_m: float = 12.0  # kept from a landmark's footprint on arrival
    roof_clearance_m: float = 8.0  # above a rooftop goal
    cruise_m: tuple[float, float] = (14.0, 30.0)  # start height above the ground
    start_distance_m: tuple[float, float] = (45.0, 90.0)  # from the first landmark's centre
    climb_step_m: float = 2.0
    max_climb_m: float = 60.0
    min_turn_deg: float = 4.0
    min_tilt_deg: float = 8.0
    sample_m: float = 1.0
    near_m: float = 80.0  # other landmarks this close to the path are measured too
    max_near: int = 6
    attempts: int = 8

    @property
    def speeds(self) -> dict[str, float]:
        return {
            "forward_mps": self.forward_mps,
            "vertical_mps": self.vertical_mps,
            "yaw_dps": self.yaw_dps,
            "camera_dps": self.camera_dps,
            "accel_mps2": self.accel_mps2,
        }


@dataclass(frozen=True)
class RouteLandmark:
    landmark_id: str
    rendered_instance_id: int
    category: str
    subcategory: str
    description: str
    target: Target


class Unplannable(Exception):
    """This start cannot fly the route (the message says why)."""


@dataclass
class _Move:
    action: Action
    amount: float
    reason: Reason
    leg: int
    toward: str
    start: NavState
    end: NavState
    blocked_by: str = ""


@dataclass
class Flight:
    """The drone's state and the moves so far; every move records the points it passes."""

    state: NavState
    cfg: NavConfig
    moves: list[_Move] = field(default_factory=list)
    samples: list[F64] = field(default_factory=list)
    alternatives: list[NavAlternative] = field(default_factory=list)

    @property
    def pos(self) -> F64:
        return np.array([self.state.x, self.state.y, self.state.z])

    def _add(self, action: Action, amount: float, reason: Reason, leg: int, toward: str, end: NavState,
             points: F64, blocked_by: str = "") -> None:  # fmt: skip
        self.moves.append(_Move(action, round(amount, 3), reason, leg, toward, self.state, end, blocked_by))
        self.samples.append(points)
        self.state = end

    def turn_to(self, yaw_deg: float, reason: Reason, leg: int, toward: str, blocked_by: str = "") -> None:
        delta = (yaw_deg - self.state.yaw_deg + 180.0) % 360.0 - 180.0
        if abs(delta) < self.cfg.min_turn_deg:
            return
        end = self.state.model_copy(update={"yaw_deg": _wrap(self.state.yaw_deg + delta)})
        action: Action = "turn_left" if delta > 0 else "turn_right"
        self._add(action, abs(delta), reason, leg, toward, end, self.pos[None], blocked_by)

    def tilt_to(self, pitch_deg: float, reason: Reason, leg: int, toward: str) -> None:
        delta = pitch_deg - self.state.camera_pitch_deg
        if abs(delta) < self.cfg.min_tilt_deg:
            return
        end = self.state.model_copy(update={"camera_pitch_deg": round(pitch_deg, 3)})
        action: Action = "rotate_camera_up" if delta > 0 else "rotate_camera_down"
        self._add(action, abs(delta), reason, leg, toward, end, self.pos[None])

    def vertical(self, dz: float, reason: Reason, leg: int, toward: str, blocked_by: str = "") -> None:
        if abs(dz) < 1e-6:
            return
        end = self.state.model_copy(update={"z": round(self.state.z + dz, 3)})
        action: Action = "ascend" if dz > 0 else "descend"
        self._add(
            action, abs(dz), reason, leg, toward, end, _column(self.pos, dz, self.cfg.sample_m), blocked_by
        )

    def forward(self, distance: float, reason: Reason, leg: int, toward: str) -> None:
        if distance < 0.5:
            return
        points = _line(self.pos, self.state.yaw_deg, distance, self.cfg.sample_m)
        end = self.state.model_copy(
            update={"x": round(float(points[-1, 0]), 3), "y": round(float(points[-1, 1]), 3)}
        )
        self._add("fly_forward", distance, reason, leg, toward, end, points)

    def hover(self, seconds: float, leg: int, toward: str) -> None:
        self._add("hover", seconds, "arrive", leg, toward, self.state, self.pos[None])

    def seconds(self, move: _Move) -> float:
        """A move's time: translations from rest to rest at the cruise speed and ``accel_mps2``,
        rotations at their rate."""
        c = self.cfg
        rate = {"fly_forward": c.forward_mps, "ascend": c.vertical_mps, "descend": c.vertical_mps,
                "turn_left": c.yaw_dps, "turn_right": c.yaw_dps, "rotate_camera_up": c.camera_dps,
                "rotate_camera_down": c.camera_dps, "hover": 1.0}[move.action]  # fmt: skip
        if move.action in TRANSLATIONS:
            return min_seconds(move.amount, rate, c.accel_mps2)
        return move.amount / rate


def _wrap(deg: float) -> float:
    return round((deg + 180.0) % 360.0 - 180.0, 3)


def _line(p: F64, yaw_deg: float, distance: float, step: float) -> F64:
    d = np.array([math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg)), 0.0])
    n = max(1, math.ceil(distance / step))
    points: F64 = p + np.linspace(0.0, distance, n + 1)[1:, None] * d
    return points


def _column(p: F64, dz: float, step: float) -> F64:
    n = max(1, math.ceil(abs(dz) / step))
    points: F64 = p + np.linspace(0.0, dz, n + 1)[1:, None] * np.array([0.0, 0.0, 1.0])
    return points


def _bearing(frm: F64, to: F64) -> float:
    return math.degrees(math.atan2(to[1] - frm[1], to[0] - frm[0]))


def _look_pitch(frm: F64, to: F64) -> float:
    """Camera pitch that centres ``to``, kept within what a gimbal does (-80..+20 degrees)."""
    flat = max(math.hypot(to[0] - frm[0], to[1] - frm[1]), 1e-6)
    return float(np.clip(math.degrees(math.atan2(to[2] - frm[2], flat)), -80.0, 20.0))


def _blocker(point: F64, landmarks: list[RouteLandmark], safety: float) -> str:
    """The landmark whose (padded) box holds ``point``, else "" (unlabelled structure)."""
    for lm in landmarks:
        half = np.asarray(lm.target.size) / 2 + 2 * safety
        lo, hi = lm.target.c - half, lm.target.c + half
        if np.all(point >= lo) and np.all(point <= hi):
            return lm.landmark_id
    return ""


def fly_leg(
    f: Flight,
    lm: RouteLandmark,
    leg: int,
    obstacles: ObstacleMap,
    every: list[RouteLandmark],
    last: GoalPart | None,
) -> None:
    """Fly from the current state to ``lm``; ``last``: the goal part when it is the final leg."""
    cfg, t, lid = f.cfg, lm.target, lm.landmark_id
    f.turn_to(_bearing(f.pos, t.c), "face_landmark", leg, lid)
    flat = math.hypot(t.center[0] - f.state.x, t.center[1] - f.state.y)
    stop = 0.0 if last == "rooftop" else 0.5 * t.diag_xy + cfg.standoff_m
    if last == "rooftop" and f.state.z < t.top_z + cfg.roof_clearance_m:
        f.vertical(t.top_z + cfg.roof_clearance_m - f.state.z, "match_goal_height", leg, lid)
    travel = flat - stop
    if travel < MIN_LEG_M:  # already there: the leg would be a turn in place, not a flight
        raise Unplannable(f"the flight to {lid} starts within {MIN_LEG_M:g} m of where it ends")
    f.tilt_to(_look_pitch(f.pos, t.c), "look_at_landmark", leg, lid)
    path = _line(f.pos, f.state.yaw_deg, travel, cfg.sample_m) if travel >= 0.5 else np.zeros((0, 3))
    bad = obstacles.unsafe(path) if len(path) else np.zeros(0, dtype=bool)
    sides = _around(f, t, stop, obstacles)
    blocked_by = _blocker(path[int(np.argmax(bad))], every, obstacles.safety) if bad.any() else ""
    over = _over(f, path, bad, travel, obstacles, last == "rooftop") if bad.any() else None
    options: dict[str, float | None] = {"straight": None if bad.any() else travel / cfg.forward_mps}
    if bad.any():
        options["over"] = None if over is None else over[0]
    options |= {f"around_{side}": None if s is None else s[0] for side, s in sides.items()}
    feasible = {k: v for k, v in options.items() if v is not None and k != "straight"}
    chosen = "straight" if not bad.any() else min(feasible, key=lambda k: feasible[k]) if feasible else ""
    for option, seconds in options.items():
        f.alternatives.append(
            NavAlternative(
                leg=leg,
                toward=lid,
                option=option,
                feasible=seconds is not None,
                seconds=None if seconds is None else round(seconds, 3),
                blocked_by=blocked_by if option == "straight" else "",
                chosen=option == chosen,
            )
        )
    if chosen == "straight":
        f.forward(travel, "approach_landmark", leg, lid)
        return _arrive(f, t, lid, leg, obstacles, last)
    if chosen.startswith("around_"):
        side_best = sides[chosen.removeprefix("around_")]
        assert side_best is not None
        _, yaw, out = side_best
        f.turn_to(yaw, "avoid_obstacle", leg, lid, blocked_by)
        f.forward(out, "avoid_obstacle", leg, lid)
        f.turn_to(_bearing(f.pos, t.c), "face_landmark", leg, lid)
        rest = math.hypot(t.center[0] - f.state.x, t.center[1] - f.state.y) - stop
        f.forward(rest, "approach_landmark", leg, lid)
    elif chosen == "over" and over is not None:
        _, climb, past, back_down = over
        f.vertical(climb, "clear_obstacle", leg, lid, blocked_by)
        if back_down:
            f.forward(past, "pass_obstacle", leg, lid)
            f.vertical(-climb, "descend_after_obstacle", leg, lid)
            f.forward(travel - past, "approach_landmark", leg, lid)
        else:
            f.forward(travel, "approach_landmark", leg, lid)
    else:
        raise Unplannable(f"the way to {lid} is blocked, over (up to {cfg.max_climb_m:g} m) and around")
    _arrive(f, t, lid, leg, obstacles, last)


def _arrive(f: Flight, t: Target, lid: str, leg: int, obstacles: ObstacleMap, last: GoalPart | None) -> None:
    """At the final landmark: match the goal's part, look at it, hover."""
    cfg = f.cfg
    if last is None:
        return
    if last == "facade":
        dz = t.center[2] - f.state.z
        if abs(dz) >= 2.0 and not obstacles.unsafe(_column(f.pos, dz, cfg.sample_m)).any():
            f.vertical(dz, "match_goal_height", leg, lid)
    pitch = -80.0 if last == "rooftop" else _look_pitch(f.pos, t.c)
    f.tilt_to(pitch, "look_at_landmark", leg, lid)
    f.hover(cfg.hover_s, leg, lid)


def _over(
    f: Flight, path: F64, bad: NDArray[np.bool_], travel: float, obstacles: ObstacleMap, stay_up: bool
) -> tuple[float, float, float, bool] | None:
    """Flying over: (seconds, the least safe climb in ``climb_step_m`` steps, the distance that
    passes the obstacle, whether to come back down after it), or None above ``max_climb_m``."""
    cfg = f.cfg
    climb = cfg.climb_step_m
    while climb <= cfg.max_climb_m:
        up = np.array([0.0, 0.0, climb])
        if (
            not obstacles.unsafe(path + up).any()
            and not obstacles.unsafe(_column(f.pos, climb, cfg.sample_m)).any()
        ):
            break
        climb += cfg.climb_step_m
    else:
        return None
    final = int(np.flatnonzero(bad)[-1])
    past = min(travel, (final + 1) * cfg.sample_m + 2.0 * obstacles.safety)
    at = max(0, math.ceil(past / cfg.sample_m) - 1)
    rest = path[at:]  # the way on, at the old height
    drop = _column(path[at] + np.array([0.0, 0.0, climb]), -climb, cfg.sample_m)
    back_down = (
        not stay_up
        and travel - past >= 0.5
        and not obstacles.unsafe(rest).any()
        and not obstacles.unsafe(drop).any()
    )
    seconds = climb / cfg.vertical_mps * (2 if back_down else 1) + travel / cfg.forward_mps
    return seconds, climb, past, back_down


def _around(
    f: Flight, t: Target, stop: float, obstacles: ObstacleMap
) -> dict[str, tuple[float, float, float] | None]:
    """Flying around at this height, per side ("left", "right"): (seconds, heading, distance) of
    the quickest side step 20-80 degrees off the straight way from whose end the way to the
    landmark is clear, or None."""
    cfg = f.cfg
    out_by_side: dict[str, tuple[float, float, float] | None] = {}
    for name, side in (("left", 1.0), ("right", -1.0)):
        best: tuple[float, float, float] | None = None
        for off in range(20, 90, 10):
            yaw = _wrap(f.state.yaw_deg + side * off)
            for out in np.arange(10.0, 151.0, 5.0):
                leg1 = _line(f.pos, yaw, float(out), cfg.sample_m)
                if obstacles.unsafe(leg1).any():
                    break  # this heading runs into something
                w = leg1[-1]
                rest = math.hypot(t.center[0] - w[0], t.center[1] - w[1]) - stop
                if rest < 0.5:
                    break
                back = _bearing(w, t.c)
                if obstacles.unsafe(_line(w, back, rest, cfg.sample_m)).any():
                    continue
                turn_back = abs((back - yaw + 180.0) % 360.0 - 180.0)
                seconds = (off + turn_back) / cfg.yaw_dps + (float(out) + rest) / cfg.forward_mps
                if best is None or seconds < best[0]:
                    best = (seconds, yaw, float(out))
                break
        out_by_side[name] = best
    return out_by_side


def timeline(f: Flight, fps: float) -> tuple[list[NavSegment], list[NavState], float]:
    """Segments with their frames, the state at every frame, and the duration (whole frames)."""
    segments: list[NavSegment] = []
    poses: list[NavState] = []
    frame = 0
    for i, m in enumerate(f.moves):
        # whole frames, never fewer than the move needs (a longer move is only gentler)
        n = max(1, math.ceil(f.seconds(m) * fps - 1e-9))
        segments.append(
            NavSegment(
                index=i,
                action=m.action,
                amount=m.amount,
                reason=m.reason,
                leg=m.leg,
                toward=m.toward,
                start_frame=frame,
                end_frame=frame + n - 1,
                start=m.start,
                end=m.end,
                blocked_by=m.blocked_by,
            )
        )
        if m.action in TRANSLATIONS:
            rate = f.cfg.forward_mps if m.action == "fly_forward" else f.cfg.vertical_mps
            share = trapezoid_s(m.amount, rate, f.cfg.accel_mps2, n)
        else:
            share = np.linspace(0.0, 1.0, n + 1)
        poses += [_between(m.start, m.end, float(share[k])) for k in range(n)]
        frame += n
    if segments:
        segments[-1].end_frame = frame  # the end state's frame
        poses.append(f.moves[-1].end)
    return segments, poses, frame / fps


def _between(a: NavState, b: NavState, s: float) -> NavState:
    dyaw = (b.yaw_deg - a.yaw_deg + 180.0) % 360.0 - 180.0
    return NavState(
        x=round(a.x + (b.x - a.x) * s, 4),
        y=round(a.y + (b.y - a.y) * s, 4),
        z=round(a.z + (b.z - a.z) * s, 4),
        yaw_deg=_wrap(a.yaw_deg + dyaw * s),
        camera_pitch_deg=round(a.camera_pitch_deg + (b.camera_pitch_deg - a.camera_pitch_deg) * s, 4),
    )


def start_state(first: Target, obstacles: ObstacleMap, cfg: NavConfig, rng: np.random.Generator) -> NavState:
    phase = float(rng.uniform(0.0, 2.0 * math.pi))
    dist = 0.5 * first.diag_xy + float(rng.uniform(*cfg.start_distance_m))  # from the footprint
    xy = first.c[:2] + dist * np.array([math.cos(phase), math.sin(phase)])
    z = float(obstacles.ground_z(xy[None])[0]) + float(rng.uniform(*cfg.cruise_m))
    yaw = float(rng.uniform(-180.0, 180.0))
    pitch = float(rng.choice([-10.0, -20.0, -30.0]))
    state = NavState(x=round(float(xy[0]), 3), y=round(float(xy[1]), 3), z=round(z, 3), yaw_deg=round(yaw, 3),
                     camera_pitch_deg=pitch)  # fmt: skip
    if obstacles.unsafe(np.array([[state.x, state.y, state.z]])).any():
        raise Unplannable("the drawn start is inside or too close to an obstacle")
    return state


def instruction(kind: str, part: GoalPart, route: list[RouteLandmark], segments: list[NavSegment]) -> str:
    """The goal or route in words, built from the landmarks' reviewed descriptions and, for a
    route, each leg's opening turn (turns under 20 degrees are left out)."""
    if kind == "goal":
        name = route[-1].description
        return {
            "whole": f"Fly to the {name}.",
            "facade": f"Fly to the facade of the {name}.",
            "rooftop": f"Fly to the rooftop of the {name}.",
        }[part]
    steps = []
    for leg, lm in enumerate(route):
        first = next((s for s in segments if s.leg == leg), None)  # the leg's opening turn, if any
        turn = first if first is not None and first.reason == "face_landmark" else None
        verb = "fly forward to" if leg == 0 else "continue to"
        if turn is not None and turn.amount >= 20.0:
            side = "left" if turn.action == "turn_left" else "right"
            steps.append(f"turn {side} and {verb} the {lm.description}")
        else:
            steps.append(f"{verb} the {lm.description}")
    text = ", then ".join(steps) + ", and stop there."
    return text[0].upper() + text[1:]


def plan_navigation(
    scene_id: str,
    traj_id: str,
    kind: str,
    part: GoalPart,
    route: list[RouteLandmark],
    every: list[RouteLandmark],
    obstacles: ObstacleMap,
    fps: float,
    seed: int,
    cfg: NavConfig,
) -> tuple[NavigationPlan | None, str, int]:
    """The first start that flies the route safely: (plan, "", attempt), or (None, why the
    last attempt failed, attempts)."""
    reason = ""
    for k in range(cfg.attempts):
        rng = np.random.default_rng(seed + k * SEED_STRIDE)
        try:
            start = start_state(route[0].target, obstacles, cfg, rng)
            f = Flight(start, cfg)
            for leg, lm in enumerate(route):
                fly_leg(f, lm, leg, obstacles, every, part if leg == len(route) - 1 else None)
        except Unplannable as exc:
            reason = str(exc)
            continue
        points = np.concatenate([np.array([[start.x, start.y, start.z]]), *f.samples])
        check = obstacles.check(points)
        if not check.collision_free:
            reason = f"{check.violation_count} path samples within {obstacles.safety} m of obstacles"
            continue
        segments, poses, duration = timeline(f, fps)
        kin = measure(
            np.array([[s.x, s.y, s.z] for s in poses]),
            np.array([s.yaw_deg for s in poses]),
            np.array([s.camera_pitch_deg for s in poses]),
            fps,
        )
        if not kin.within_limits:
            reason = f"the flight breaks the kinematic limits {', '.join(kin.exceeded)}"
            continue
        plan = NavigationPlan(
            scene_id=scene_id,
            traj_id=traj_id,
            kind="goal" if kind == "goal" else "route",
            goal_part=part,
            instruction=instruction(kind, part, route, segments),
            route=[lm.landmark_id for lm in route],
            landmarks=measured_landmarks(route, every, points, cfg),
            start=start,
            segments=segments,
            fps=fps,
            frame_count=len(poses),
            duration_sec=round(duration, 4),
            speeds=cfg.speeds,
            check=NavCheck(
                collision_free=True,
                min_distance_m=check.min_distance_m,
                samples=len(points),
                kinematics=kin,
            ),
            seed=seed + k * SEED_STRIDE,
            attempt=k,
            poses=poses,
            alternatives=f.alternatives,
        )
        return plan, "", k
    return None, reason, cfg.attempts


def measured_landmarks(
    route: list[RouteLandmark], every: list[RouteLandmark], path: F64, cfg: NavConfig
) -> list[NavLandmark]:
    on = {lm.landmark_id for lm in route}
    near: list[tuple[float, RouteLandmark]] = []
    for lm in every:
        if lm.landmark_id in on:
            continue
        gap = np.maximum(np.abs(path - lm.target.c) - np.asarray(lm.target.size) / 2, 0.0)
        d = float(np.min(np.linalg.norm(gap, axis=1)))
        if d <= cfg.near_m:
            near.append((d, lm))
    chosen = route + [lm for _, lm in sorted(near, key=lambda p: (p[0], p[1].landmark_id))[: cfg.max_near]]
    return [
        NavLandmark(
            landmark_id=lm.landmark_id,
            rendered_instance_id=lm.rendered_instance_id,
            category=lm.category,
            subcategory=lm.subcategory,
            description=lm.description,
            center=[round(v, 4) for v in lm.target.center],
            size=[round(v, 4) for v in lm.target.size],
            on_route=lm.landmark_id in on,
        )
        for lm in chosen
    ]
