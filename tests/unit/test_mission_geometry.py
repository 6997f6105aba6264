"""Each behavior's trajectory has the shape its parameters say; timing, joins, repair."""

from __future__ import annotations

import math

import numpy as np
import pytest
from skyqa.vocab.behaviors import Library, load_library

from services.mission_planner import shapes
from services.mission_planner.compose import (
    POSE_HZ,
    Element,
    Trajectory,
    build_shapes,
    camera_angles,
    compose,
    frame_sources,
    path_length,
    yaw_pitch,
)
from services.mission_planner.planner import Acceptance, plan_mission
from services.mission_planner.safety import ObstacleMap, _widen
from services.mission_planner.shapes import Context, Target

T = Target((10.0, -5.0, 15.0), (20.0, 12.0, 30.0))
START = np.array([120.0, -5.0, 60.0])  # east of the target: phase 0


def radii(p: np.ndarray) -> np.ndarray:
    return np.hypot(p[:, 0] - T.center[0], p[:, 1] - T.center[1])


def swept_deg(p: np.ndarray) -> float:
    a = np.unwrap(np.arctan2(p[:, 1] - T.center[1], p[:, 0] - T.center[0]))
    return math.degrees(a[-1] - a[0])


def corners(p: np.ndarray) -> int:
    d = np.diff(p[:, :2], axis=0)
    d = d[np.linalg.norm(d, axis=1) > 1e-9]
    h = np.arctan2(d[:, 1], d[:, 0])
    turn = np.abs(np.angle(np.exp(1j * np.diff(h))))
    return int((turn > math.radians(20)).sum())


def test_circular_orbit_keeps_radius_altitude_and_sweeps_the_arc_in_its_direction() -> None:
    p: dict[str, float | str] = {"extension_m": 12, "arc_deg": 270, "direction": "cw", "altitude_offset_m": 8}
    pts = shapes.circular(p, T, Context(current=START)).points
    assert np.allclose(radii(pts), T.anchor_m + 12, atol=1e-6)
    assert np.allclose(pts[:, 2], T.base_z + 8)
    assert swept_deg(pts) == pytest.approx(-270, abs=0.5)
    ccw = shapes.circular({**p, "direction": "ccw"}, T, Context(current=START)).points
    assert swept_deg(ccw) == pytest.approx(270, abs=0.5)
    # starts at the phase of the current position
    assert math.atan2(pts[0, 1] - T.center[1], pts[0, 0] - T.center[0]) == pytest.approx(0.0, abs=1e-6)


def test_spiral_widens_and_rises_over_its_arc() -> None:
    p: dict[str, float | str] = {
        "start_extension_m": 6,
        "end_extension_m": 30,
        "arc_deg": 540,
        "rise_m": 24,
        "direction": "ccw",
    }
    pts = shapes.spiral(p, T, Context(current=START)).points
    r = radii(pts)
    assert r[0] == pytest.approx(T.anchor_m + 6) and r[-1] == pytest.approx(T.anchor_m + 30)
    assert np.all(np.diff(r) >= -1e-9) and np.all(np.diff(pts[:, 2]) >= -1e-9)
    assert pts[-1, 2] - pts[0, 2] == pytest.approx(24)
    assert swept_deg(pts) == pytest.approx(540, abs=0.5)


@pytest.mark.parametrize(("builder", "n", "edges"), [("square", 4, 4), ("square", 4, 6), ("triangle", 3, 5)])
def test_polygon_orbits_walk_edge_count_edges_of_the_right_side(builder: str, n: int, edges: int) -> None:
    p = {
        "extension_m": 10,
        "edge_count": edges,
        "direction": "cw",
        "altitude_offset_m": 4,
        "rotation_deg": 30,
    }
    shape = getattr(shapes, builder)(p, T, Context(current=START))
    pts = shape.points
    side = T.diag_xy + 20
    assert shape.effective["effective_side_m"] == pytest.approx(side)
    assert corners(pts) == edges - 1
    assert path_length(pts) == pytest.approx(edges * side, rel=1e-6)
    radius = side / (2 * math.sin(math.pi / n))
    assert radii(pts).max() == pytest.approx(radius, rel=1e-6)
    assert radii(pts).min() == pytest.approx(radius * math.cos(math.pi / n), rel=1e-3)


def test_figure_eight_crosses_over_the_landmark_once_per_cycle_and_spans_its_radius() -> None:
    p = {"extension_m": 10, "cycles": 2, "altitude_offset_m": 20}
    pts = shapes.figure8(p, T, Context(current=START)).points
    r = T.anchor_m + 10
    assert radii(pts).max() == pytest.approx(r, rel=1e-3)
    assert (radii(pts) < 0.5).sum() >= 2 * 2  # passes the centre twice per cycle
    assert np.allclose(pts[0], pts[-1], atol=1e-6)


def test_sky_rise_flies_over_then_climbs_vertically_and_hovers() -> None:
    p = {"rise_m": 40, "top_extension_m": 2, "hover_sec": 3}
    shape = shapes.sky_rise(p, T, Context(current=START))
    pts = shape.points
    top = pts[-1]
    assert top[:2] == pytest.approx(T.center[:2])
    climb = pts[np.hypot(pts[:, 0] - T.center[0], pts[:, 1] - T.center[1]) < 1e-6]
    assert climb[:, 2].max() - climb[:, 2].min() > 30
    assert top[2] == pytest.approx(T.base_z + 0.1 * T.size[2] + 40)
    assert shape.hold_end_s == 3


def test_surface_mapping_flies_lane_count_lanes_over_the_extended_box() -> None:
    p = {"extension_x_m": 6, "extension_y_m": 4, "lane_count": 5, "altitude_offset_m": 18}
    pts = shapes.surface(p, T, Context(current=START)).points
    w, h = T.size[0] + 12, T.size[1] + 8
    assert np.ptp(pts[:, 0]) == pytest.approx(w) and np.ptp(pts[:, 1]) == pytest.approx(h)
    lanes = np.unique(np.round(pts[:, 1], 6))
    on_lane = [y for y in lanes if (np.abs(pts[:, 1] - y) < 1e-6).sum() > 10]
    assert len(on_lane) == 5
    assert np.allclose(pts[:, 2], T.base_z + 18)


def test_approach_and_depart_travel_their_distance_with_descent_and_rise() -> None:
    a = shapes.approach(
        {"travel_distance_m": 60, "descent_m": 15, "yaw_offset_deg": 20}, T, Context(current=START)
    )
    s, e = a.points[0], a.points[-1]
    assert np.hypot(*(s[:2] - e[:2])) == pytest.approx(60) and s[2] - e[2] == pytest.approx(15)
    d = shapes.depart({"travel_distance_m": 40, "rise_m": 10, "yaw_offset_deg": 0}, T, Context(current=START))
    assert np.hypot(*(d.points[-1, :2] - START[:2])) == pytest.approx(40)
    assert d.points[-1, 2] - START[2] == pytest.approx(10)
    # straight outward: the distance from the landmark grows all the way
    assert np.all(np.diff(radii(d.points)) > 0)


def test_comet_loops_behind_the_landmark_and_returns_to_its_entry() -> None:
    p: dict[str, float | str] = {
        "extension_m": 10,
        "semi_major_m": 60,
        "eccentricity": 0.5,
        "arc_deg": 180,
        "direction": "cw",
    }
    shape = shapes.comet(p, T, Context(current=START))
    pts = shape.points
    entry = T.anchor_m + 10
    assert radii(pts[:1])[0] == pytest.approx(entry)
    behind = pts[:, 0] - T.center[0]  # the entry is east, so behind is west
    assert behind.min() == pytest.approx(entry - 2 * shape.effective["effective_semi_major_m"], abs=0.3)
    assert np.allclose(pts[0], pts[-1], atol=1e-6)


def composed(set_name: str, seed: int = 3) -> tuple[Library, list[Element], Trajectory]:
    lib = load_library()
    rng = np.random.default_rng(seed)
    els = [Element(s, lib.sample_step(s, rng)) for s in lib.sets[set_name].steps]
    build_shapes(lib, els, T, START)
    return lib, els, compose(els)


def test_speed_sets_duration_and_segments_tile_the_waypoints() -> None:
    _lib, els, traj = composed("circular_inspection")
    for el, seg in zip(els, traj.segments, strict=True):
        assert el.shape is not None
        length = path_length(el.shape.points)
        n_base = max(24, round(max(0.8, length / float(el.params["speed_mps"])) * 10) + 1)
        # n_base points at 10 Hz span n_base - 1 intervals of 4 waypoints at 40 Hz
        assert (seg.end - seg.start + (0 if seg.index == 0 else 1)) / 4 == n_base - 1
    starts = [s.start for s in traj.segments]
    ends = [s.end for s in traj.segments]
    assert starts[0] == 0 and ends[-1] == len(traj.waypoints) - 1
    assert all(b == a + 1 for a, b in zip(ends[:-1], starts[1:], strict=True))
    frames = frame_sources(len(traj.waypoints))
    assert len(frames) == len(traj.raw) == round(traj.duration_s * 10) + 1
    # no jumps: consecutive waypoints are at most max speed / 40 Hz apart
    step = np.linalg.norm(np.diff(traj.waypoints, axis=0), axis=1)
    assert step.max() <= 25.0 / POSE_HZ * 1.5


def test_landmark_track_camera_looks_at_the_landmark() -> None:
    _lib, _els, traj = composed("atomic_circular_orbit")
    yaw, pitch = (np.radians(a) for a in camera_angles(traj, T))
    fwd = np.stack([np.cos(pitch) * np.cos(yaw), np.cos(pitch) * np.sin(yaw), np.sin(pitch)], axis=1)
    to_target = T.c - traj.waypoints
    to_target /= np.linalg.norm(to_target, axis=1, keepdims=True)
    cos = np.einsum("ij,ij->i", fwd, to_target)
    assert np.median(cos) > 0.97
    yaw_deg, pitch_deg = yaw_pitch(fwd)
    assert np.all(np.isfinite(yaw_deg)) and np.all(pitch_deg < 0)


def wall_cloud() -> tuple[np.ndarray, ObstacleMap]:
    g = np.mgrid[-200:200:2.0, -200:200:2.0].reshape(2, -1).T
    ground = np.column_stack([g, np.zeros(len(g))])
    s = np.mgrid[-60:60:0.5, 0:40:0.5].reshape(2, -1).T
    wall = np.column_stack([np.full(len(s), 60.0), s[:, 0], s[:, 1]])  # a 40 m wall at x=60
    cloud = np.concatenate([ground, wall])
    box = ObstacleMap.keepout(np.array([0.0, -11.0, 0.0]), np.array([20.0, 1.0, 30.0]), 2.0)
    return cloud, ObstacleMap(cloud, [box], 2.0)


def test_repair_lifts_a_path_through_a_wall_to_the_safety_distance_smoothly() -> None:
    cloud, obstacles = wall_cloud()
    line = shapes.polyline(np.array([20.0, 30.0, 20.0]), np.array([100.0, 30.0, 20.0]))
    assert not obstacles.check(line).collision_free
    fixed, stats = obstacles.repair(line)
    assert obstacles.check(fixed).collision_free
    d = np.min(np.linalg.norm(fixed[:, None, :] - cloud[None, ::7, :], axis=2), axis=1)
    assert d.min() >= 2.0 - 0.35  # brute force on a subsample of the cloud
    assert 20 < stats.max_lift_m <= 24 and 0 < stats.lifted_fraction < 1
    assert np.abs(np.diff(fixed[:, 2])).max() < 2.0  # the lift is ramped, not a step


def test_widened_lift_is_never_below_what_each_point_needs() -> None:
    need = np.zeros(200)
    need[50], need[51:60] = 8.0, 4.0
    out = _widen(need, 41)
    assert np.all(out >= need) and out[0] == 0.0


def test_planner_accepts_only_collision_free_missions() -> None:
    _, obstacles = wall_cloud()
    lib = load_library()
    accepted = 0
    for name in lib.sets:
        planned = plan_mission(lib, name, T, obstacles, 11, Acceptance())
        if planned.accepted:
            accepted += 1
            assert obstacles.check(planned.trajectory.waypoints).collision_free, name
    assert accepted >= 12


def test_planner_retries_then_records_why_it_rejected() -> None:
    _, obstacles = wall_cloud()
    lib = load_library()
    never = Acceptance(attempts=3, max_lift_m=-1.0)
    planned = plan_mission(lib, "atomic_circular_orbit", T, obstacles, 5, never)
    assert not planned.accepted and planned.attempt == 2 and "repair lifted" in planned.reason
    assert planned.seed == 5 + 2 * 1009
    # a volume of obstacles no lift can clear
    g = np.mgrid[-60:61:2.0, -60:61:2.0, 0:71:2.0].reshape(3, -1).T
    solid = ObstacleMap(g, [], 2.0)
    small = Target((0.0, 0.0, 2.0), (4.0, 4.0, 4.0))
    stuck = plan_mission(lib, "atomic_circular_orbit", small, solid, 5, Acceptance(attempts=2))
    assert not stuck.accepted and "still within" in stuck.reason


def test_camera_plan_spreads_the_visible_count_of_one_mission_kind() -> None:
    from skyqa.sim import Intrinsics

    from services.mission_planner.camera_plan import CountBalance, estimated_count, variants

    assert variants(("landmark_track",)) == [("landmark_track",), ("look_forward",)]
    assert variants(("look_forward", "landmark_track"))[0] == ("look_forward", "landmark_track")
    six = variants(("landmark_track",) * 6)  # too many steps for every combination
    assert (
        six[0] == ("landmark_track",) * 6 and len(six) == len(set(six)) == 1 + 6 + 1
    )  # own, one switch each, all look ahead

    _, obstacles = wall_cloud()
    lib = load_library()
    k = Intrinsics.from_fov(160, 120, 90.0)
    orbit = plan_mission(lib, "atomic_circular_orbit", T, obstacles, 11, Acceptance())
    assert orbit.accepted
    # tracking keeps the landmark in view the whole orbit: one interval
    assert estimated_count(orbit.trajectory, T, k, 10) == 1
    # an orbit can only track (one sighting) or look ahead (the landmark never in view): a
    # mission that never shows its landmark has nothing to ask, so tracking it is
    balance = CountBalance()
    for seed in (11, 12, 13, 14):
        planned = plan_mission(lib, "atomic_circular_orbit", T, obstacles, seed, Acceptance())
        assert balance.choose([planned.trajectory], T, f"lm{seed}", "atomic", k, 10) == (0, 1)
    balance, chosen = CountBalance(), []
    for seed in (11, 12, 13, 14):
        planned = plan_mission(lib, "square_inspection", T, obstacles, seed, Acceptance())
        chosen.append(balance.choose([planned.trajectory], T, f"lm{seed}", "composite", k, 10)[1])
        modes = {s.camera_mode for s in planned.trajectory.segments}
        # what was chosen is what the trajectory now carries
        assert estimated_count(planned.trajectory, T, k, 10) == chosen[-1] and modes
    # never a count of zero; the counts the run has not used yet come first
    assert 0 not in chosen and len(set(chosen)) >= 2, chosen
    # one landmark's missions of different kinds take different counts: a landmark seen from
    # everywhere must not always count high
    same = CountBalance()
    first = plan_mission(lib, "square_inspection", T, obstacles, 13, Acceptance())
    second = plan_mission(lib, "square_inspection", T, obstacles, 14, Acceptance())
    _, a = same.choose([first.trajectory], T, "lm", "atomic", k, 10)
    _, b = same.choose([second.trajectory], T, "lm", "composite", k, 10)
    assert a != b and 0 not in (a, b), (a, b)


def test_a_one_step_mission_draws_its_parameters_again_to_vary_its_count() -> None:
    """An atomic mission has two camera variants (tracking: one sighting; looking ahead: often
    none): with its parameters drawn once, 20 of 23 atomic missions of a 40-landmark build
    showed their landmark once and the count balance kept no video row. Drawn again, a comet's
    arc or a polygon orbit's edges make a look-ahead camera pass the landmark more often, and
    the kind takes the count the other kind shows more of."""
    from skyqa.sim import Intrinsics

    from services.mission_planner.camera_plan import CANDIDATES, CountBalance, draws, estimated_count

    assert draws(1) == CANDIDATES // 2 and draws(4) == 1  # a composite's 16 variants suffice
    _, obstacles = wall_cloud()
    lib = load_library()
    k = Intrinsics.from_fov(160, 120, 90.0)

    def comets(first: int) -> list[Trajectory]:
        plans = [
            plan_mission(lib, "atomic_comet", T, obstacles, s, Acceptance()) for s in range(first, first + 8)
        ]
        return [p.trajectory for p in plans if p.accepted]

    balance, counts = CountBalance(), []
    for n in range(4):
        plans = comets(11 + 8 * n)
        i, count = balance.choose(plans, T, f"lm{n}", "atomic", k, 10)
        assert estimated_count(plans[i], T, k, 10) == count  # the chosen plan carries its modes
        counts.append(count)
    assert counts[0] == 1 and len(set(counts)) >= 2 and 0 not in counts, counts
    # the atomic kind showed these counts: a composite mission takes one of them, not its set's
    # own modes' count (7), which no atomic mission shows
    square = plan_mission(lib, "square_inspection", T, obstacles, 11, Acceptance())
    assert estimated_count(square.trajectory, T, k, 10) == 7
    _, count = balance.choose([square.trajectory], T, "lm9", "composite", k, 10)
    assert count in set(counts), (count, counts)


def test_the_kinematic_check_measures_what_the_report_states() -> None:
    from skyqa.kinematics import LIMITS, measure

    hz = 40.0
    t = np.arange(81) / hz
    # 6 m/s along x, then braking at 12 m/s² for the last second; the camera swings 90° in one step
    x = np.where(t <= 1.0, 6.0 * t, 6.0 + 6.0 * (t - 1.0) - 6.0 * (t - 1.0) ** 2)
    path = np.column_stack([x, np.zeros_like(x), np.full_like(x, 30.0)])
    yaw = np.where(t < 1.5, 0.0, 90.0)
    pitch = np.where(t < 0.5, 0.0, -30.0)
    got = measure(path, yaw, pitch, hz)
    assert got.checked
    assert got.max_speed_mps == pytest.approx(6.0, abs=0.2)
    assert got.max_accel_mps2 == pytest.approx(12.0, abs=0.5)
    assert got.max_yaw_rate_dps == pytest.approx(90.0 * hz)
    assert got.max_camera_pitch_rate_dps == pytest.approx(30.0 * hz)
    assert got.exceeded == ["a_max", "yaw_rate_max", "camera_yaw_rate_max", "camera_pitch_rate_max"]
    assert not got.within_limits
    # yaw wraps: 179° to -179° is a 2° turn (80 °/s), and cruising at 6 m/s keeps every limit
    calm = measure(path[:20], np.array([179.0, -179.0] * 10), np.zeros(20), hz)
    assert calm.max_yaw_rate_dps == pytest.approx(2.0 * hz)
    assert calm.exceeded == [] and calm.within_limits
    # a limit is a limit: just above it breaks it
    fast = np.column_stack([np.arange(10) * (LIMITS.v_max * 1.01 / hz), np.zeros(10), np.zeros(10)])
    assert measure(fast, np.zeros(10), np.zeros(10), hz).exceeded == ["v_max"]
