import math

import numpy as np
import pytest
from skyqa.geometry import instance_boxes
from skyqa.sim import rotation_matrix

from services.landmark.config import CollectConfig
from services.landmark.orbit import camera_distance, look_at_point, orbit_pose, topdown_pose
from services.landmark.visibility import OBB, occluded_by_neighbours, ray_hits_obb, visible_points

CFG = CollectConfig()


def test_instance_boxes_are_exact() -> None:
    inst = np.zeros((6, 8), np.uint32)
    inst[1:3, 2:5] = 7
    inst[5, 7] = 9
    sem = np.where(inst == 7, 10, np.where(inst == 9, 20, 0)).astype(np.uint16)
    boxes = instance_boxes(inst, sem)
    assert [(b.instance_id, b.class_id, b.pixels, b.xyxy) for b in boxes] == [
        (7, 10, 6, [2, 1, 5, 3]),
        (9, 20, 1, [7, 5, 8, 6]),
    ]
    assert instance_boxes(np.zeros((2, 2), np.uint32), np.zeros((2, 2), np.uint16)) == []


def test_camera_distance_follows_the_uav_dualcog_formula() -> None:
    assert camera_distance(np.array([1.0, 1.0, 1.0]), CFG) == 9.0  # the minimum
    size = np.array([20.0, 10.0, 40.0])
    half = math.radians(36)
    fit = max(
        0.5 * math.hypot(20, 10) / math.tan(half),
        0.5 * 40 / math.tan(half),
        0.5 * float(np.linalg.norm(size)) / math.sin(half),
    )
    assert camera_distance(size, CFG) == pytest.approx(2.5 * fit)


@pytest.mark.parametrize("ring_yaw", [0.0, 45.0, -90.0, 180.0])
def test_orbit_camera_looks_at_the_landmark_from_the_ring_direction(ring_yaw: float) -> None:
    center, lo, size = np.array([10.0, 5.0, 6.0]), np.array([6.0, 1.0, 0.0]), np.array([8.0, 8.0, 12.0])
    pose = orbit_pose(center, lo, size, ring_yaw, 0.0, CFG)
    target = look_at_point(center, lo, size, CFG)
    fwd = rotation_matrix(pose.yaw_deg, pose.pitch_deg, 0)[:, 0]
    to_target = (target - pose.position) / np.linalg.norm(target - pose.position)
    np.testing.assert_allclose(fwd, to_target, atol=1e-9)
    # the camera sits behind the landmark along the ring yaw
    horizontal = pose.position[:2] - center[:2]
    bearing = math.degrees(math.atan2(-horizontal[1], -horizontal[0]))
    assert (bearing - ring_yaw + 180) % 360 - 180 == pytest.approx(0.0, abs=1e-6)


def test_pitch_offset_raises_elevation_at_constant_radius() -> None:
    center, lo, size = np.zeros(3) + [0, 0, 5], np.array([-4.0, -4.0, 0.0]), np.array([8.0, 8.0, 10.0])
    target = look_at_point(center, lo, size, CFG)
    base = orbit_pose(center, lo, size, 30.0, 0.0, CFG)
    raised = orbit_pose(center, lo, size, 30.0, 16.0, CFG)
    assert np.linalg.norm(base.position - target) == pytest.approx(np.linalg.norm(raised.position - target))
    assert raised.pitch_deg == pytest.approx(base.pitch_deg - 16.0)


def test_topdown_pose_looks_straight_down() -> None:
    lo, hi = np.array([-1.0, -1, 0]), np.array([1.0, 1, 4])
    pose = topdown_pose(np.zeros(3), lo, hi, 20.0, CFG)
    assert pose.pitch_deg == -90.0
    assert pose.z == pytest.approx(4 + camera_distance(hi - lo, CFG))
    assert pose.yaw_deg == 20.0  # image up along the landmark's yaw


def test_ray_obb_and_neighbour_occlusion() -> None:
    wall = OBB(np.array([5.0, 0.0, 2.0]), np.array([0.5, 3.0, 2.0]), 0.0)
    assert ray_hits_obb(np.zeros(3) + [0, 0, 2], np.array([1.0, 0, 0]), wall) == pytest.approx(4.5)
    assert ray_hits_obb(np.zeros(3) + [0, 0, 2], np.array([0.0, 1, 0]), wall) is None
    rotated = OBB(np.array([5.0, 0.0, 2.0]), np.array([0.5, 3.0, 2.0]), 90.0)  # now long along x
    assert ray_hits_obb(np.array([0.0, 0, 2]), np.array([1.0, 0, 0]), rotated) == pytest.approx(2.0)
    eye, target = np.array([0.0, 0, 2]), np.array([10.0, 0, 2])
    assert occluded_by_neighbours(eye, target, [wall], 0.8)
    assert not occluded_by_neighbours(eye, np.array([5.2, 0, 2]), [wall], 0.8)  # the target is in the wall


def test_point_visibility_counts_only_unblocked_points() -> None:
    from skyqa.sim import Pose

    target = np.array([[20.0, y, z] for y in np.linspace(-2, 2, 10) for z in np.linspace(-2, 2, 10)])
    blocker = np.array([[10.0, y, z] for y in np.linspace(-3, 0, 40) for z in np.linspace(-3, 3, 60)])
    pose = Pose(0, 0, 0, 0, 0, 0)
    seen_all, ratio_all = visible_points(pose, target, np.zeros((0, 3)), CFG)
    seen, _ = visible_points(pose, target, blocker, CFG)
    assert seen_all == 100 and ratio_all == 1.0
    assert 40 <= seen <= 60  # the half behind the blocker is hidden


def test_a_capped_collection_mixes_categories_and_sizes() -> None:
    from services.landmark.candidates import Candidate, stratified

    def cand(key: str, cls: str, points: int) -> Candidate:
        z = np.zeros(3)
        return Candidate(key, 1, cls, 1, np.zeros((points, 3)), z, z, z, 0.0)

    towers = [cand(f"t{i}", "office_tower", 9000 - i) for i in range(6)]
    cars = [cand(f"c{i}", "car", 300 - 10 * i) for i in range(5)]
    ranked = [*towers, cand("tree", "tree", 200), *cars, cand("odd", "unknown_thing", 50)]
    picked = [c.key for c in stratified(ranked, 6)]
    # one of each category first (an unknown class is its own), the largest ones leading
    assert picked[:4] == ["t0", "tree", "c0", "odd"]
    # then within a category the sizes spread: after the largest car comes the median one
    assert picked[4:] == ["t3", "c2"]
    assert len(stratified(ranked, 100)) == len(ranked)
