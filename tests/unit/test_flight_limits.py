"""Every kind of trajectory the planner makes keeps the kinematic limits it states: landmark
missions (every set, over seeds and camera-mode variants), navigation missions and action
programs. The limits follow the behaviour tables, and a camera-mode switch takes at least the
time the gimbal's yaw rate allows."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest
from nav_blocks import world
from partial_models import partial_model
from skyqa.actions import Kinematics, NoConstruction, Root, build
from skyqa.actions.space import ActionSpace
from skyqa.contracts import ValidInstance
from skyqa.contracts.rsv import SPLITS
from skyqa.kinematics import LIMITS, Limits, measure, min_seconds, trapezoid_s
from skyqa.vocab.behaviors import load_library

from services.mission_planner.compose import POSE_HZ, Segment, Trajectory, frame_sources
from services.mission_planner.kinematics import fly, retime
from services.mission_planner.navigation import NavConfig, plan_navigation
from services.mission_planner.planner import Acceptance, plan_mission
from services.mission_planner.safety import ObstacleMap
from services.mission_planner.shapes import Target
from services.mission_planner.trajectories import flight_check

pytestmark = pytest.mark.unit
T = Target((10.0, -5.0, 15.0), (20.0, 12.0, 30.0))


def open_ground() -> ObstacleMap:
    g = np.mgrid[-300:300:4.0, -300:300:4.0].reshape(2, -1).T
    box = ObstacleMap.keepout(np.array([0.0, -11.0, 0.0]), np.array([20.0, 1.0, 30.0]), 2.0)
    return ObstacleMap(np.column_stack([g, np.zeros(len(g))]), [box], 2.0)


def test_the_limits_follow_the_behaviour_tables() -> None:
    lib = load_library()
    fastest = max(float(e.params["speed_mps"].max or 0.0) for e in lib.elements.values())
    slowest = min(float(e.params["speed_mps"].min or 0.0) for e in lib.elements.values())
    # the tables fly 15-25 m/s: v_max is their fastest speed, not UAV-DualCog's stated 8 m/s
    assert LIMITS.v_max == fastest and slowest >= 15.0
    assert LIMITS.a_max == 10.0 and LIMITS.yaw_rate_max == 120.0
    assert LIMITS.camera_yaw_rate_max <= LIMITS.yaw_rate_max and LIMITS.yaw_rate == LIMITS.camera_yaw_rate_max
    nav = NavConfig()
    assert nav.forward_mps <= LIMITS.v_max and nav.vertical_mps <= LIMITS.v_max
    assert nav.yaw_dps <= LIMITS.yaw_rate and nav.camera_dps <= LIMITS.camera_pitch_rate_max
    assert nav.accel_mps2 < LIMITS.a_max


def test_a_rest_to_rest_move_ramps_within_its_speed_and_acceleration() -> None:
    for distance, v, a in ((40.0, 8.0, 9.0), (3.0, 8.0, 9.0), (1.0, 25.0, 9.0)):
        total = min_seconds(distance, v, a)
        n = math.ceil(total * 40)
        s = trapezoid_s(distance, v, a, n) * distance
        assert s[0] == 0.0 and s[-1] == pytest.approx(distance)
        assert np.all(np.diff(s) >= 0)
        assert np.abs(np.diff(s)).max() * 40 <= v + 1e-9
        assert np.abs(np.diff(s, 2)).max() * 40**2 <= a * 1.001
        # symmetric: the move reversed passes the same points
        assert np.allclose(s[::-1], distance - s)


@pytest.mark.parametrize("seed", [1, 2])
def test_every_landmark_mission_flies_within_its_stated_limits(seed: int) -> None:
    """Property over seeds: every set, with its own camera modes and with each mode flipped."""
    lib = load_library()
    obstacles = open_ground()
    for name in lib.sets:
        planned = plan_mission(lib, name, T, obstacles, seed, Acceptance())
        traj = planned.trajectory
        default = [s.camera_mode for s in traj.segments]
        flipped = ["look_forward" if m == "landmark_track" else "landmark_track" for m in default]
        for modes in (default, flipped):
            for s, m in zip(traj.segments, modes, strict=True):
                s.camera_mode = m
            flown = fly(traj, T)
            # measured again here, from what is written and rendered
            got = measure(flown.waypoints, flown.yaw, flown.pitch, POSE_HZ)
            assert got.within_limits and flown.check.within_limits, (name, modes, got)
            assert flown.duration_s >= flown.nominal_s - 1e-9  # only time is added
            assert np.allclose(flown.waypoints[[0, -1]], traj.waypoints[[0, -1]])
            # whole video frames: the last waypoint is the last frame
            assert (len(flown.waypoints) - 1) % 4 == 0
            firsts = [a for a, _ in flown.segments]
            lasts = [b for _, b in flown.segments]
            assert firsts[0] == 0 and lasts[-1] == len(flown.waypoints) - 1
            assert all(b + 1 == a for a, b in itertools.pairwise(firsts)) or all(
                a == b + 1 for b, a in zip(lasts[:-1], firsts[1:], strict=True)
            )
            # the rendered frames are every 4th waypoint: slower sampling of the same flight
            frames = frame_sources(len(flown.waypoints))
            assert measure(flown.waypoints[frames], flown.yaw[frames], flown.pitch[frames], 10).within_limits
            # the time law keeps the path: no flown point strays from the planned one
            assert _distance_to_path(flown.waypoints, traj.waypoints).max() < 0.1


def _distance_to_path(points: np.ndarray, path: np.ndarray) -> np.ndarray:
    a, b = path[:-1], path[1:]
    d = b - a
    out = np.full(len(points), np.inf)
    for i in range(0, len(points), 256):
        p = points[i : i + 256, None, :]
        t = np.clip(np.einsum("pij,ij->pi", p - a, d) / np.maximum(np.einsum("ij,ij->i", d, d), 1e-12), 0, 1)
        near = a + t[..., None] * d
        out[i : i + 256] = np.linalg.norm(p - near, axis=2).min(axis=1)
    return out


def _line_trajectory(modes: tuple[str, str], hold: int = 0) -> Trajectory:
    """Two segments flying east at 20 m/s (nominal), ``hold`` waypoints hovering between them;
    the landmark is far behind the start, so switching to landmark_track turns the camera 180°."""
    n = 200
    x = np.concatenate(
        [np.arange(n) * 0.5, np.full(hold, (n - 1) * 0.5), (n - 1) * 0.5 + np.arange(1, n) * 0.5]
    )
    wp = np.column_stack([200.0 + x, np.zeros_like(x), np.full_like(x, 40.0)])
    half = n - 1 + hold
    segs = [
        Segment(0, "gradual_approach", modes[0], {"gaze_pitch_deg": 0.0}, {}, 0, half, False, 0.0),
        Segment(
            1, "gradual_depart", modes[1], {"gaze_pitch_deg": 0.0}, {}, half + 1, len(wp) - 1, False, 0.0
        ),
    ]
    return Trajectory(raw=wp[::4], waypoints=wp, segments=segs)


@pytest.mark.parametrize("hold", [0, 40])
def test_a_camera_mode_switch_takes_at_least_the_gimbal_yaw_rate_time(hold: int) -> None:
    target = Target((0.0, 0.0, 40.0), (4.0, 4.0, 4.0))  # west of the path: behind the camera
    traj = _line_trajectory(("look_forward", "landmark_track"), hold)
    flown = fly(traj, target)
    assert flown.check.within_limits
    yaw = np.degrees(np.unwrap(np.radians(flown.yaw)))
    turn = abs(yaw[-1] - yaw[0])
    assert turn > 170.0
    moving = np.flatnonzero(np.abs(yaw - yaw[0]) > 0.5)
    done = np.flatnonzero(np.abs(yaw - yaw[-1]) > 0.5)
    seconds = (done[-1] - moving[0]) / POSE_HZ
    assert seconds >= (turn - 1.0) / LIMITS.camera_yaw_rate_max
    # with the behaviours' speeds alone the same switch took a fraction of that
    assert flown.duration_s > flown.nominal_s


def test_a_tighter_limit_only_slows_the_flight() -> None:
    traj = _line_trajectory(("look_forward", "landmark_track"))
    target = Target((0.0, 0.0, 40.0), (4.0, 4.0, 4.0))
    from services.mission_planner.compose import camera_angles

    yaw, pitch = camera_angles(traj, target)
    loose = retime(traj.waypoints, yaw, pitch, 1 / POSE_HZ, POSE_HZ)
    slow = Limits(v_max=5.0, a_max=2.0, camera_yaw_rate_max=30.0)
    tight = retime(traj.waypoints, yaw, pitch, 1 / POSE_HZ, POSE_HZ, slow)
    assert tight.check.within_limits and (tight.check.max_speed_mps or 0.0) <= 5.0
    assert len(tight.positions) > len(loose.positions)
    assert not measure(loose.positions, loose.yaw, loose.pitch, POSE_HZ, slow).within_limits


def test_the_constraint_report_states_the_limits_and_refuses_a_flight_beyond_them() -> None:
    from services.mission_planner.describe import describe
    from services.mission_planner.kinematics import beyond_limits

    lib = load_library()
    vi = partial_model(
        ValidInstance,
        instance_id="lm_1",
        instance_numeric_id=1,
        class_id=1,
        class_name="building",
        bbox_3d=SimpleNamespace(min=[0.0, -11.0, 0.0], max=[20.0, 1.0, 30.0]),
        rgb_views=[],
        main_view="",
        landmark_category="building",
        landmark_subcategory="office",
        landmark_description="grey office tower",
    )
    planned = plan_mission(lib, "square_inspection", T, open_ground(), 4, Acceptance())
    flown = fly(planned.trajectory, T)
    _, report = describe(lib, planned, flown, vi, "s", "m", "composite")
    assert report.limits == {**LIMITS.as_dict(), "safety_distance": lib.safety_distance_m}
    assert report.checks.kinematics.exceeded == [] and report.accepted
    assert report.checks.kinematics.limits == LIMITS.as_dict()
    assert report.summary.duration_sec == pytest.approx(flown.duration_s)
    broken = flown.check.model_copy(update={"within_limits": False, "exceeded": ["a_max"]})
    flown.check = broken
    _, refused = describe(lib, planned, flown, vi, "s", "m", "composite")
    assert not refused.accepted and refused.acceptance["within_kinematic_limits"] == 0.0
    assert "a_max" in beyond_limits(broken)


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_navigation_missions_fly_within_the_limits(seed: int) -> None:
    for hall in (None, 30.0):
        obstacles, marks = world(1.0, hall, span=15.0)
        for part in ("whole", "facade", "rooftop"):
            plan, reason, _ = plan_navigation(
                "blocks", "t", "goal", part, [marks[0]], marks, obstacles, 10.0, seed, NavConfig()
            )
            assert plan is not None, reason
            assert plan.check.kinematics is not None and plan.check.kinematics.within_limits
            assert plan.check.kinematics.limits == LIMITS.as_dict()
            p = np.array([[s.x, s.y, s.z] for s in plan.poses])
            got = measure(p, np.array([s.yaw_deg for s in plan.poses]), np.array([s.camera_pitch_deg for s in plan.poses]), plan.fps)  # fmt: skip
            assert got.within_limits, got
            # translations start and end at rest: no jump from a hover to cruise in one frame
            step = np.linalg.norm(np.diff(p, axis=0), axis=1) * plan.fps
            assert step.max() <= NavConfig().forward_mps + 1e-6
            first = next(s for s in plan.segments if s.action == "fly_forward")
            assert step[first.start_frame] < 0.5 * NavConfig().forward_mps


def test_action_programs_ease_each_step_within_the_limits_and_the_source_timing_is_refused() -> None:
    from skyqa import scan as scan_rules
    from skyqa.v1 import scan_pb2

    req = scan_rules.apply_defaults(scan_pb2.ScanRequest(scene_id="s", profile="release"))
    space, capsule = scan_rules.action_space(req)
    assert space.frames_per_action > ActionSpace().frames_per_action  # 9 frames cannot keep a_max
    kin = Kinematics(space, capsule)
    root = Root(0.0, 0.0, 1.0, 0.0)
    checked = 0
    for split, k in itertools.product(SPLITS, range(4)):
        try:
            built = build(split, kin, np.random.default_rng(100 + k), k)
        except NoConstruction:
            continue
        for seq in (built.actions, built.partner):
            if seq:
                got = flight_check(kin, seq, root, req.reasoning.fps)
                assert got.within_limits and got.limits == LIMITS.as_dict(), (split, got)
                checked += 1
    assert checked >= 8
    source = Kinematics(ActionSpace(), capsule)  # 9 frames per action, 1 m in 0.5 s
    got = flight_check(source, ["move_forward", "move_backward"] * 4, root, req.reasoning.fps)
    assert not got.within_limits and "a_max" in got.exceeded
