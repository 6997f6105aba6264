"""AirCopBench-style UAV groups: areas chosen where vehicles cluster, UAVs spread around them on
safe poses, and every object measured in every view by the renderer (in frame, pixels, box,
what hides it), on hand-built streets whose answers can be checked by eye."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from group_scenes import ground, render_group, street
from skyqa.blob import LocalBlobStore
from skyqa.contracts.fusion import InstanceEntry
from skyqa.sim.classes import by_name

from services.mission_planner import group_missions as G
from services.mission_planner.config import MissionConfig
from services.mission_planner.safety import ObstacleMap
from services.renderer.video import render_video

pytestmark = pytest.mark.unit


def entry(iid: int, cls: str, x: float, y: float, size: tuple[float, float, float]) -> InstanceEntry:
    c = by_name(cls)
    lo = [x - size[0] / 2, y - size[1] / 2, 0.0]
    hi = [x + size[0] / 2, y + size[1] / 2, size[2]]
    return InstanceEntry(
        instance_id=iid, class_id=c.id, class_name=c.name, category=c.category,
        center=[x, y, size[2] / 2], aabb_min=lo, aabb_max=hi, size=list(size), yaw_deg=0.0, point_count=100,
    )  # fmt: skip


def test_areas_are_where_vehicles_cluster_densest_first_and_apart() -> None:
    car = (4.5, 2.0, 1.5)
    instances = [
        entry(1, "car", 0, 0, car), entry(2, "car", 6, 0, car), entry(3, "car", 0, 8, car),
        entry(4, "tree", 10, 10, (4, 4, 8)),
        entry(5, "bridge", 5, 5, (120, 10, 8)),  # scenery, not an object
        entry(6, "car", 100, 0, car), entry(7, "bus", 110, 0, (12, 3, 3.5)),
        entry(8, "car", 300, 0, car),  # alone: no area
    ]  # fmt: skip
    areas = G.choose_areas(instances, 5, np.random.default_rng(0))
    assert len(areas) == 2
    (c1, objects1), (c2, objects2) = areas
    assert math.hypot(*c1) < 10 and {o.instance_id for o in objects1} == {1, 2, 3, 4}
    assert abs(c2[0] - 105) < 1 and {o.instance_id for o in objects2} == {6, 7}
    # objects nearest the centre first
    assert [o.instance_id for o in objects1][-1] == 4


@pytest.mark.parametrize("n", [3, 5, 6])
def test_uavs_spread_around_the_area_on_safe_poses_aimed_near_its_centre(n: int) -> None:
    # a tall block stands where the first UAVs would like to be
    keep = ObstacleMap.keepout(np.array([30.0, -60.0, 0.0]), np.array([120.0, 60.0, 100.0]), 2.0)
    obstacles = ObstacleMap(ground(), [keep], 2.0)
    placed = G.place_uavs([0.0, 0.0, 0.0], n, obstacles, np.random.default_rng(n))
    assert placed is not None
    uavs, draws = placed
    assert [u.uav for u in uavs] == [f"UAV{k + 1}" for k in range(n)] and draws >= n
    azimuths = []
    for u in uavs:
        x, y, z, yaw, pitch, _ = u.pose
        assert not obstacles.unsafe(np.array([[x, y, z]]))[0]
        assert G.DISTANCE_M[0] <= math.hypot(x, y) <= G.DISTANCE_M[1]
        assert G.ALTITUDE_M[0] <= z <= G.ALTITUDE_M[1]
        to_centre = math.degrees(math.atan2(-y, -x))
        assert abs((yaw - to_centre + 180) % 360 - 180) <= G.AIM_JITTER_DEG[0] + 1e-6
        assert pitch < 0
        azimuths.append(math.degrees(math.atan2(y, x)) % 360)
    # an even share of the circle each: neighbours at least 40 % of a share apart
    ring = sorted(azimuths)
    gaps = [(b - a) % 360 for a, b in zip(ring, ring[1:] + ring[:1], strict=True)]
    assert min(gaps) >= 0.4 * 360 / n - 1e-6


def test_a_group_is_rendered_and_every_object_measured_in_every_view(tmp_path: Path) -> None:
    sim, table = street()
    store = LocalBlobStore(tmp_path)
    obstacles = ObstacleMap(ground(150.0), [], 2.0)
    cfg = MissionConfig(video_width=160, video_height=120, group_sizes=(3,), groups_per_size=1)
    planned, rejected, jobs = G.plan_all("r", "street", "builtin", table, obstacles, cfg, 7, store)
    assert planned == ["street_group3_000"] and not rejected
    task = G.bundle(render_video(jobs[0], sim, store), store)
    assert len(task.views) == 3 and all(len(v) == len(task.objects) == 3 for v in task.views)
    assert task.images[1] == "frames/frame_000001.jpg" and store.exists(
        f"{jobs[0].output_prefix}/{task.images[1]}"
    )
    for view in task.views:
        for o in view:
            assert 0.0 <= o.in_frame <= 1.0 and 0.0 <= o.occluded <= 1.0
            assert (o.pixels > 0) == any(o.bbox_xyxy_norm)
    # every object is seen by at least one UAV of the group
    assert all(any(v[k].pixels > 0 for v in task.views) for k in range(3))


def test_a_car_behind_the_truck_is_occluded_for_the_uav_behind_the_truck_only(tmp_path: Path) -> None:
    """The rule AirCopBench's 'who to collaborate' rests on: UAV1 looks over the truck at the
    car, UAV2 sees it from the east with nothing in between."""
    poses = [[-30.0, 0.0, 6.0, 0.0, -10.0, 0.0], [30.0, 0.0, 6.0, 180.0, -10.0, 0.0]]
    task, _ = render_group(tmp_path, poses)
    car1, car2 = task.views[0][0], task.views[1][0]
    assert car1.occluder_instance_id == 2 and car1.occluded > 0.5
    assert car2.occluder_instance_id == 0 and car2.occluded == 0.0 and car2.pixels > car1.pixels


def test_sizes_take_turns_when_the_scene_has_fewer_areas_than_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two areas for four groups of sizes 3 and 5: one group of each size, not two of size 3."""
    _, table = street()
    obstacles = ObstacleMap(ground(150.0), [], 2.0)
    one = G.choose_areas(table.instances, 1, np.random.default_rng(0))
    monkeypatch.setattr(G, "choose_areas", lambda instances, count, rng: (one * 2)[:count])
    cfg = MissionConfig(video_width=160, video_height=120, group_sizes=(3, 5), groups_per_size=2)
    planned, rejected, _ = G.plan_all(
        "r", "street", "builtin", table, obstacles, cfg, 7, LocalBlobStore(tmp_path)
    )
    assert planned == ["street_group3_000", "street_group5_000"]
    assert [r.group_id for r in rejected] == ["street_group3_001", "street_group5_001"]
