"""Navigation missions on a hand-checkable block world: flat ground at z=0, a goal box and a
blocking box between the start and the goal (a long hall, cheaper to climb over, or a narrow
pillar, cheaper to fly around). Every number below follows from that geometry."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from skyqa.contracts.navigation import NavState

from services.mission_planner.navigation import (
    Flight,
    NavConfig,
    RouteLandmark,
    fly_leg,
    instruction,
    plan_navigation,
    timeline,
)
from services.mission_planner.safety import ObstacleMap
from services.mission_planner.shapes import Target

pytestmark = pytest.mark.unit
SAFETY = 2.0
CFG = NavConfig()


def box_points(lo: tuple[float, float, float], hi: tuple[float, float, float]) -> np.ndarray:
    axes = [np.arange(a, b + 0.01, 1.0) for a, b in zip(lo, hi, strict=True)]
    g = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    on_face = np.any(np.isclose(g, lo) | np.isclose(g, hi), axis=1)
    return g[on_face]


def landmark(
    lid: str, lo: tuple[float, float, float], hi: tuple[float, float, float], desc: str
) -> RouteLandmark:
    c = tuple((a + b) / 2 for a, b in zip(lo, hi, strict=True))
    s = tuple(b - a for a, b in zip(lo, hi, strict=True))
    return RouteLandmark(lid, int(lid[-1]), "building", "office", desc, Target(c, s, SAFETY))  # type: ignore[arg-type]


def world(blocker_height: float | None, half_width: float = 140.0) -> tuple[ObstacleMap, list[RouteLandmark]]:
    ground = np.stack(np.meshgrid(np.arange(-150.0, 151.0, 2.0), np.arange(-150.0, 151.0, 2.0)), -1)
    parts = [np.column_stack([ground.reshape(-1, 2), np.zeros(ground.size // 2)])]
    goal = landmark("lm_1", (100.0, -10.0, 0.0), (120.0, 10.0, 40.0), "grey office tower")
    marks = [goal]
    if blocker_height is not None:
        hall = landmark(
            "lm_2", (40.0, -half_width, 0.0), (60.0, half_width, blocker_height), "red brick hall"
        )
        marks.append(hall)
    for m in marks:
        lo = tuple(m.target.c - np.asarray(m.target.size) / 2)
        hi = tuple(m.target.c + np.asarray(m.target.size) / 2)
        parts.append(box_points(lo, hi))
    keepouts = [
        ObstacleMap.keepout(
            m.target.c - np.asarray(m.target.size) / 2, m.target.c + np.asarray(m.target.size) / 2, SAFETY
        )
        for m in marks
    ]
    return ObstacleMap(np.concatenate(parts), keepouts, SAFETY), marks


def east_of_origin(z: float = 20.0, yaw: float = 0.0) -> Flight:
    return Flight(NavState(x=0.0, y=0.0, z=z, yaw_deg=yaw, camera_pitch_deg=0.0), CFG)


def actions(f: Flight) -> list[tuple[str, str]]:
    return [(m.action, m.reason) for m in f.moves]


def test_an_open_way_is_flown_straight_and_stops_standoff_outside_the_footprint() -> None:
    obstacles, marks = world(None)
    f = east_of_origin()
    fly_leg(f, marks[0], 0, obstacles, marks, "whole")
    assert [a for a, _ in actions(f)] == ["fly_forward", "hover"]  # facing it already, level camera fine
    flown = f.moves[0].amount
    # centre 110 m east; footprint half diagonal sqrt(10^2 + 10^2), plus the 12 m standoff
    assert flown == pytest.approx(110.0 - (np.hypot(20.0, 20.0) / 2 + 12.0), abs=1e-3)
    assert f.state.z == 20.0


def test_a_blocking_hall_is_climbed_by_the_least_step_then_passed_and_descended() -> None:
    obstacles, marks = world(30.0)
    f = east_of_origin()
    fly_leg(f, marks[0], 0, obstacles, marks, "whole")
    assert actions(f)[:4] == [
        ("ascend", "clear_obstacle"),
        ("fly_forward", "pass_obstacle"),
        ("descend", "descend_after_obstacle"),
        ("fly_forward", "approach_landmark"),
    ]
    climb = f.moves[0]
    # the hall's roof is at 30 m and the safety distance 2 m: from 20 m, the least 2 m step
    # that clears it is 12 m (its keep-out, 0.3 m over the roof, is cleared too)
    assert climb.amount == 12.0 and climb.blocked_by == "lm_2"
    # passed once beyond the hall's far side (60 m) plus its keep-out, safety and a margin
    assert 60.0 < f.moves[1].end.x < 60.0 + 8.0
    assert f.moves[2].amount == 12.0 and f.state.z == 20.0
    chosen = [a.option for a in f.alternatives if a.chosen]
    assert chosen == ["over"] and not next(a for a in f.alternatives if a.option == "straight").feasible


def test_a_narrow_pillar_is_flown_around_and_the_way_resumed() -> None:
    obstacles, marks = world(80.0, half_width=5.0)
    f = east_of_origin()
    fly_leg(f, marks[0], 0, obstacles, marks, "whole")
    assert actions(f)[:4] == [
        ("turn_left", "avoid_obstacle"),  # the first side tried at the same cost
        ("fly_forward", "avoid_obstacle"),
        ("turn_right", "face_landmark"),
        ("fly_forward", "approach_landmark"),
    ]
    assert f.moves[0].blocked_by == "lm_2" and f.moves[0].amount == 20.0  # the smallest offset tried
    # what a counterfactual asks: straight on hits the pillar, over it is beyond the 60 m climb
    judged = {a.option: (a.feasible, a.chosen, a.blocked_by) for a in f.alternatives}
    assert judged == {
        "straight": (False, False, "lm_2"),
        "over": (False, False, ""),
        "around_left": (True, True, ""),
        "around_right": (True, False, ""),
    }
    assert all(m.start.z == 20.0 for m in f.moves)  # never climbs 80 m
    # it ends standoff outside the goal's footprint, on the line from the side step's end
    gap = np.hypot(f.state.x - 110.0, f.state.y) - (np.hypot(20.0, 20.0) / 2 + 12.0)
    assert abs(gap) < 0.01


def test_a_higher_hall_needs_a_higher_climb() -> None:
    low, high = (world(h) for h in (30.0, 44.0))
    f_low, f_high = east_of_origin(), east_of_origin()
    fly_leg(f_low, low[1][0], 0, low[0], low[1], "whole")
    fly_leg(f_high, high[1][0], 0, high[0], high[1], "whole")
    assert f_high.moves[0].amount - f_low.moves[0].amount == 14.0


def test_turns_face_the_landmark_left_or_right() -> None:
    obstacles, marks = world(None)
    f = east_of_origin(yaw=-90.0)  # facing south; the goal lies east: a left turn of 90
    fly_leg(f, marks[0], 0, obstacles, marks, "whole")
    assert (f.moves[0].action, f.moves[0].amount, f.moves[0].reason) == ("turn_left", 90.0, "face_landmark")
    g = east_of_origin(yaw=135.0)  # facing north-west: turn right by 135
    fly_leg(g, marks[0], 0, obstacles, marks, "whole")
    assert (g.moves[0].action, g.moves[0].amount) == ("turn_right", 135.0)


def test_a_rooftop_goal_ends_above_the_roof_centre_looking_down() -> None:
    obstacles, marks = world(None)
    f = east_of_origin()
    fly_leg(f, marks[0], 0, obstacles, marks, "rooftop")
    assert actions(f)[0] == ("ascend", "match_goal_height")
    assert f.state.z == pytest.approx(40.0 + CFG.roof_clearance_m)
    assert (f.state.x, f.state.y) == pytest.approx((110.0, 0.0), abs=0.01)
    assert f.state.camera_pitch_deg == -80.0 and f.moves[-1].action == "hover"


def test_a_facade_goal_descends_to_the_boxes_mid_height() -> None:
    obstacles, marks = world(None)
    f = east_of_origin(z=36.0)
    fly_leg(f, marks[0], 0, obstacles, marks, "facade")
    assert ("descend", "match_goal_height") in actions(f) and f.state.z == 20.0  # mid height of 0..40


def test_the_timeline_tiles_the_frames_and_times_each_move_by_its_speed() -> None:
    obstacles, marks = world(30.0)
    f = east_of_origin(yaw=-90.0)
    fly_leg(f, marks[0], 0, obstacles, marks, "whole")
    segments, poses, duration = timeline(f, 10.0)
    assert segments[0].start_frame == 0 and segments[-1].end_frame == len(poses) - 1
    for a, b in itertools.pairwise(segments):
        assert b.start_frame == a.end_frame + 1
    turn = segments[0]
    assert turn.end_frame - turn.start_frame + 1 == round(90.0 / CFG.yaw_dps * 10)
    assert poses[-1] == f.state and poses[0] == f.moves[0].start
    assert duration == pytest.approx((len(poses) - 1) / 10.0)
    # mid-turn the yaw is between the two headings
    mid = poses[(turn.start_frame + turn.end_frame) // 2]
    assert -90.0 < mid.yaw_deg < 0.0


def test_a_route_instruction_names_each_turn_and_landmark_in_order() -> None:
    obstacles, marks = world(30.0, half_width=15.0)
    hall, tower = marks[1], marks[0]
    f = east_of_origin(yaw=90.0)  # facing north
    fly_leg(f, hall, 0, obstacles, marks, None)
    fly_leg(f, tower, 1, obstacles, marks, "whole")
    segments, _, _ = timeline(f, 10.0)
    text = instruction("route", "whole", [hall, tower], segments)
    assert (
        text
        == "Turn right and fly forward to the red brick hall, then continue to the grey office tower, and stop there."
    )


def test_planned_missions_are_collision_free_and_redrawn_when_a_start_fails() -> None:
    obstacles, marks = world(30.0)
    plan, reason, _ = plan_navigation(
        "blocks", "blocks_nav_goal_000", "goal", "facade", [marks[0]], marks, obstacles, 10.0, 7, CFG
    )
    assert plan is not None, reason
    assert plan.check.collision_free and plan.frame_count == len(plan.poses)
    assert plan.instruction == "Fly to the facade of the grey office tower."
    assert plan.landmarks[0].on_route and plan.route == ["lm_1"]
    assert all(s.reason for s in plan.segments) and plan.segments[-1].action == "hover"
    cramped = NavConfig(cruise_m=(0.5, 1.0))  # every start within the safety distance of the ground
    none, why, attempts = plan_navigation(
        "blocks", "t", "goal", "whole", [marks[0]], marks, obstacles, 10.0, 7, cramped
    )
    assert none is None and attempts == cramped.attempts and why


def test_goals_and_routes_name_only_unambiguous_landmarks_and_fit_the_part() -> None:
    from services.mission_planner.nav_missions import choose

    tall = landmark("lm_1", (0.0, 0.0, 0.0), (20.0, 20.0, 40.0), "grey office tower")
    low = landmark("lm_2", (60.0, 0.0, 0.0), (70.0, 10.0, 3.0), "light gray fountain")
    twin_a = landmark("lm_3", (0.0, 90.0, 0.0), (10.0, 100.0, 8.0), "green tree")
    twin_b = landmark("lm_4", (90.0, 90.0, 0.0), (100.0, 100.0, 8.0), "green tree")
    far = landmark("lm_5", (400.0, 0.0, 0.0), (410.0, 10.0, 20.0), "red water tower")
    chosen = choose([tall, low, twin_a, twin_b, far], 3, 1, np.random.default_rng(3))
    named = {lm.landmark_id for _, _, route in chosen for lm in route}
    assert "lm_3" not in named and "lm_4" not in named  # "green tree" names two landmarks
    goals = [(part, route[0].landmark_id) for kind, part, route in chosen if kind == "goal"]
    assert [p for p, _ in goals] == ["whole", "facade", "rooftop"]
    assert all(lid != "lm_2" for p, lid in goals if p != "whole")  # a 3 m fountain has no rooftop
    for kind, _, route in chosen:
        if kind == "route":
            gaps = [np.linalg.norm(a.target.c[:2] - b.target.c[:2]) for a, b in itertools.pairwise(route)]
            assert len(route) >= 2 and all(20.0 <= g <= 180.0 for g in gaps)
