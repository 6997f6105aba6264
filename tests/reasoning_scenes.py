"""A hand-built square for the action-trajectory tests: open ground with one wall and a few
coloured blocks to look at, so every frame is distinct and a walk into the wall is blocked."""

from __future__ import annotations

import numpy as np
from skyqa import keys
from skyqa.actions import ActionSpace, Capsule, Kinematics, Root, build
from skyqa.blob import BlobStore
from skyqa.contracts import dump_json
from skyqa.contracts.rsv import TrajectoryPlan
from skyqa.sim import BuiltinSimulator
from skyqa.sim.classes import CLASSES, by_name
from skyqa.sim.mesh import box
from skyqa.sim.scene import Scene, SceneObject
from skyqa.v1 import render_pb2

from services.mission_planner.trajectories import Video, plans_for, video_job
from services.renderer.trajectory import render_trajectory

SCENE = "square"
RUN = "rsv-run"
SPACE = ActionSpace()
CAPSULE = Capsule()
KIN = Kinematics(SPACE, CAPSULE)
STREET_Z = CAPSULE.half_height_m + 0.05
WALL_X = 6.0


def square() -> BuiltinSimulator:
    grey = (0.5, 0.5, 0.5)
    objects = [
        SceneObject.from_parts(0, by_name("ground"), "gray", 0.0, [box(200, 200, 0.1, (0, 0, -0.1), color=grey)]),
        SceneObject.from_parts(1, by_name("office_tower"), "white", 0.0, [box(1.0, 40, 8, (WALL_X + 0.5, 0, 0), color=(0.9, 0.9, 0.85))]),
        SceneObject.from_parts(2, by_name("car"), "red", 0.0, [box(2, 2, 2, (0, 12, 0), color=(0.8, 0.1, 0.1))]),
        SceneObject.from_parts(3, by_name("car"), "blue", 0.0, [box(2, 2, 3, (-12, -3, 0), color=(0.1, 0.2, 0.8))]),
        SceneObject.from_parts(4, by_name("shipping_container"), "green", 0.0, [box(3, 2, 2, (0, -14, 0), color=(0.1, 0.7, 0.2))]),
    ]  # fmt: skip
    return BuiltinSimulator(Scene(SCENE, objects, {c.id: c for c in CLASSES}, (-100.0, 100.0, -100.0, 100.0)))


def plan_of(
    split: str,
    number: int,
    seed: int,
    root: Root,
    actions: list[str] | None = None,
    index: int = 0,
    size: tuple[int, int] = (96, 64),
) -> list[TrajectoryPlan]:
    """The plans (two for an equivalence pair) of ``split``, as the mission planner makes them."""
    built = build(split, KIN, np.random.default_rng(seed), index)
    if actions:
        built.actions = actions
    video = Video(size[0], size[1], 79.0, 16.0, 28)
    return plans_for(built, split, f"{SCENE}_rsv_{split}_{number:03d}", number, seed, root, KIN, video)


def render(sim: BuiltinSimulator, store: BlobStore, plan: TrajectoryPlan) -> render_pb2.VideoDone:
    store.put(keys.mission_file(RUN, plan.traj_id, keys.TRAJECTORY_PLAN), dump_json(plan), "application/json")
    return render_trajectory(video_job(RUN, SCENE, "builtin", plan), sim, store)
