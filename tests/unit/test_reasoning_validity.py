"""Action trajectories survive rendering (issue 42): on the builtin backend, roots and whole paths
are planned against the geometry the renderer moves the capsule through, with the renderer's own
test, not only against the fused map, which has holes.

The map here is what a nadir LiDAR would fuse of tiny_town without its cars, lamps, vehicles,
shelter and billboards: no walls, no small objects. The old planner placed roots and paths in
those holes (scan seed 1: an equivalence pair whose halves the renderer blocked; seed 4: a root
inside an object); the renderer then routed them to ``random_walk/``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import open3d as o3d
import pytest
from google.protobuf import json_format
from numpy.typing import NDArray
from skyqa import keys, scan as scan_rules
from skyqa.actions import Kinematics, Root, execute
from skyqa.actions.roots import grid_roots
from skyqa.blob import LocalBlobStore
from skyqa.contracts.missions import MissionIndex
from skyqa.contracts.rsv import TrajectoryPlan
from skyqa.families.base import PlanInputs, Rendered
from skyqa.families.reasoning.family import FAMILY
from skyqa.sim import BuiltinSimulator, Scene, load_scene
from skyqa.v1 import render_pb2, scan_pb2

from services.mission_planner.safety import ObstacleMap
from services.mission_planner.trajectories import (
    MAP_MARGIN_M,
    CloudClearance,
    Geometry,
    index_row,
    plan_all,
    plan_trajectories,
    scene_geometry,
)
from services.renderer.trajectory import render_trajectory

SCENE = "tiny_town"
RUN = "rsv-validity"
UNSEEN = ("car", "street_lamp", "bus", "truck", "bus_shelter", "billboard")  # the map's holes


def nadir_cloud(scene: Scene, skip: tuple[str, ...], step_m: float = 0.5) -> NDArray[np.float64]:
    """The first surface below a grid of points high above the scene, objects of ``skip``
    left out: roofs and ground, no walls, holes where the small objects stand."""
    rc = o3d.t.geometry.RaycastingScene()
    for obj in scene.objects:
        if obj.semantic.name not in skip:
            rc.add_triangles(
                o3d.core.Tensor(obj.vertices.astype(np.float32)),
                o3d.core.Tensor(obj.triangles.astype(np.uint32)),
            )
    x0, x1, y0, y1 = scene.extent
    gx, gy = np.meshgrid(np.arange(x0, x1, step_m), np.arange(y0, y1, step_m))
    top = 500.0
    rays = np.zeros((gx.size, 6), dtype=np.float32)
    rays[:, 0], rays[:, 1], rays[:, 2], rays[:, 5] = gx.ravel(), gy.ravel(), top, -1.0
    t = rc.cast_rays(o3d.core.Tensor(rays))["t_hit"].numpy()
    hit = np.isfinite(t)
    return np.column_stack([rays[hit, 0], rays[hit, 1], top - t[hit]]).astype(np.float64)


@pytest.fixture(scope="module")
def sim() -> BuiltinSimulator:
    return BuiltinSimulator(load_scene(SCENE), shadows=False)


@pytest.fixture(scope="module")
def holey_map(sim: BuiltinSimulator) -> ObstacleMap:
    return ObstacleMap(nadir_cloud(sim.scene, UNSEEN), [], 1.0)


def scan_of(seed: int) -> scan_pb2.ScanRequest:
    scan = scan_rules.default_request(SCENE)
    scan.seed = seed
    scan.reasoning.per_split, scan.reasoning.random_walks = 2, 0
    scan.reasoning.width, scan.reasoning.height = 32, 24  # validation is exact at any size
    return scan


def planned(store: LocalBlobStore, seed: int, holey_map: ObstacleMap) -> list[TrajectoryPlan]:
    ids, rejected, _ = plan_all(RUN, SCENE, scan_of(seed), holey_map, store)
    assert not rejected
    return [TrajectoryPlan.model_validate_json(store.get(index_row(store, RUN, t).plan)) for t in ids]


def test_a_root_the_map_calls_free_but_the_scene_blocks_is_not_planned(
    sim: BuiltinSimulator, holey_map: ObstacleMap, tmp_path: Path
) -> None:
    seed = 4  # the map alone put a root inside an object here
    scan = scan_of(seed)
    kin = Kinematics(*scan_rules.action_space(scan))
    lo, hi = holey_map.tree.mins, holey_map.tree.maxes
    extent = (lo[0], hi[0], lo[1], hi[1])

    def cells(roots: list[Root]) -> set[tuple[float, float]]:
        return {(r.x, r.y) for r in roots}

    on_map = cells(
        grid_roots(kin, CloudClearance(holey_map), extent, holey_map.ground_z, margin_m=MAP_MARGIN_M)
    )
    in_scene = cells(grid_roots(kin, sim, extent, holey_map.ground_z))
    trap = on_map - in_scene
    assert len(trap) >= 10  # cells the map calls free where the capsule overlaps a car, a lamp or a wall
    plans = planned(LocalBlobStore(tmp_path), seed, holey_map)
    assert len(plans) == 16  # two of each split, an equivalence split two pairs
    for plan in plans:
        root = Root(*plan.root)
        assert (root.x, root.y) in in_scene and (root.x, root.y) not in trap
        # the renderer's own execution: the root clear and no step blocked
        ran = execute(kin, plan.actions, root, sim)
        assert ran.root_clear and not any(s.collision for s in ran.steps), plan.traj_id


def test_equivalence_halves_pass_the_renderers_validation(
    sim: BuiltinSimulator, holey_map: ObstacleMap, tmp_path: Path
) -> None:
    store = LocalBlobStore(tmp_path)
    plans = [p for p in planned(store, 1, holey_map) if p.split == "equivalence_easy"]
    assert [p.role for p in plans] == ["path_A", "path_B"] * 2
    assert {p.construction for p in plans} == {"commutative_shuffle", "l_shape_zigzag"}
    for plan in plans:  # the jobs the planner wrote, rendered as the renderer renders them
        request = store.get(keys.mission_file(RUN, plan.traj_id, keys.RENDER_REQUEST))
        render_trajectory(json_format.Parse(request, render_pb2.VideoJob()), sim, store)
    index = MissionIndex(
        scene_id=SCENE,
        missions=[],
        rejected=[],
        trajectories=[index_row(store, RUN, p.traj_id) for p in plans],
    )
    inputs = PlanInputs(
        run_id=RUN,
        scene_id=SCENE,
        engine="builtin",
        seed=1,
        scan=scan_of(1),
        store=store,
        landmarks=[],
        excluded={},
        missions=index,
    )
    rows = FAMILY.plan(inputs).rows
    assert len(rows) == 4
    for row in rows:
        # Layer 1 and Layer 2: no collision, the meeting frames one pose and the same pixels
        assert (row.split, row.failure, row.collisions) == ("equivalence_easy", "", 0), row.failure
        assert row.identity_error_max_m == 0.0 and row.pixel_mse == [0.0]
    assert FAMILY.check(rows, Rendered(store, RUN, {}, {}, {})).failed == {}


def test_the_airsim_backend_keeps_planning_on_the_map(holey_map: ObstacleMap, tmp_path: Path) -> None:
    """AirSim moves no capsule (the renderer refuses action programs there) and its geometry is
    not readable: its trajectories are placed on the fused map with a margin, as before."""
    assert scene_geometry("airsim", SCENE, None) is None
    scan = scan_of(4)
    scan.backend = "airsim"
    ids, _, jobs = plan_all(RUN, SCENE, scan, holey_map, LocalBlobStore(tmp_path))
    on_map = Geometry(CloudClearance(holey_map), exact=False, where="on the fused map")
    plans, _ = plan_trajectories(SCENE, scan, holey_map, on_map)
    assert ids == [p.traj_id for p in plans] and {j.backend for j in jobs} == {"airsim"}
    assert [(j.program.root.x, j.program.root.y) for j in jobs] == [p.root[:2] for p in plans]
