"""Hand-built streets for the UAV-group tests: what each UAV sees can be checked by eye."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from skyqa.blob import LocalBlobStore
from skyqa.contracts.aircop import GroupObject, GroupPlan, GroupTask, GroupUav
from skyqa.contracts.fusion import InstanceEntry, InstanceTable
from skyqa.sim import BuiltinSimulator
from skyqa.sim.classes import CLASSES, by_name
from skyqa.sim.mesh import box
from skyqa.sim.scene import Scene, SceneObject

from services.mission_planner import group_missions as G
from services.mission_planner.config import MissionConfig
from services.renderer.video import render_video


def ground(extent: float = 200.0) -> np.ndarray:
    g = np.stack(np.meshgrid(np.arange(-extent, extent + 1, 2.0), np.arange(-extent, extent + 1, 2.0)), -1)
    return np.column_stack([g.reshape(-1, 2), np.zeros(g.size // 2)])


def street(truck: bool = True) -> tuple[BuiltinSimulator, InstanceTable]:
    """A red car at the origin, a tall white truck 8 m west of it (unless ``truck`` is False), a
    blue car 10 m north."""
    grey = (0.5, 0.5, 0.5)
    objects = [
        SceneObject.from_parts(0, by_name("ground"), "gray", 0.0, [box(300, 300, 0.1, (0, 0, -0.1), color=grey)]),
        SceneObject.from_parts(1, by_name("car"), "red", 0.0, [box(4.5, 2.0, 1.5, color=(0.8, 0.1, 0.1))]),
        SceneObject.from_parts(2, by_name("truck"), "white", 0.0, [box(3, 8, 9, (-8, 0, 0), color=(0.9, 0.9, 0.9))]),
        SceneObject.from_parts(3, by_name("car"), "blue", 0.0, [box(4.5, 2.0, 1.5, (0, 10, 0), color=(0.1, 0.2, 0.8))]),
    ]  # fmt: skip
    if not truck:
        objects = [o for o in objects if o.instance_id != 2]
    scene = Scene("street", objects, {c.id: c for c in CLASSES}, (-150.0, 150.0, -150.0, 150.0))
    table = InstanceTable(
        scene_id="street",
        instance_source="ground_truth",
        classes=[],
        instances=[entry(o, yaw=False) for o in scene.things()],
    )
    return BuiltinSimulator(scene), table


def render_group(
    tmp_path: Path, poses: list[list[float]], truck: bool = True
) -> tuple[GroupTask, LocalBlobStore]:
    """The street photographed by one UAV per pose (x, y, z, yaw, pitch, roll), 320x240, bundled
    as the mission planner bundles a group."""
    sim, table = street(truck)
    store = LocalBlobStore(tmp_path)
    uavs = [
        GroupUav(uav=f"UAV{k + 1}", pose=p, distance_m=30.0, altitude_m=p[2]) for k, p in enumerate(poses)
    ]
    objects = [
        GroupObject(
            instance_id=e.instance_id,
            class_name=e.class_name,
            category=e.category,
            center=e.center,
            size=e.size,
            yaw_deg=0.0,
        )
        for e in table.instances
    ]
    plan = GroupPlan(
        scene_id="street", group_id="street_hand_000", center=[0.0, 0.0, 0.0], radius_m=25.0, uavs=uavs,
        objects=objects, width=320, height=240, fov_deg=90.0, seed=0, attempts=len(poses),
    )  # fmt: skip
    store.put(f"runs/r/video_tasks/missions/{plan.group_id}/group_plan.json", plan.model_dump_json().encode())
    job = G.video_job("r", "builtin", plan, MissionConfig(video_width=320, video_height=240))
    return G.bundle(render_video(job, sim, store), store), store


def entry(o: SceneObject, yaw: bool = True) -> InstanceEntry:
    """A scene object as the fused map's instance table would hold it, box and all."""
    return InstanceEntry(
        instance_id=o.instance_id,
        class_id=o.semantic.id,
        class_name=o.semantic.name,
        category=o.semantic.category,
        center=[float(v) for v in o.center],
        aabb_min=[float(v) for v in o.aabb_min],
        aabb_max=[float(v) for v in o.aabb_max],
        size=[float(v) for v in o.size],
        yaw_deg=o.yaw_deg if yaw else 0.0,
        point_count=100,
    )
