"""AirCopBench-style UAV groups: N UAVs photograph one shared area at the same moment.

An area is centred on a cluster of vehicles from the fused instance table (AirCopBench's scenes
are streets and car parks); its objects are every instance whose centre lies within
``AREA_RADIUS_M``. The UAVs stand around it at seeded, varied azimuths, distances and heights,
each camera aimed near the centre with a small seeded offset, so some views are far, some low
and occluded, some leave objects out of frame. A group renders as one video job with one frame
per UAV (the renderer measures every object in every view: pixels, box, in-frame share and what
hides it), and is bundled into ``final_task/group_task.json``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts import dump_json, load_json
from skyqa.contracts.aircop import (
    GroupIndexRow,
    GroupObject,
    GroupPlan,
    GroupTask,
    GroupUav,
    ObjectView,
    RejectedGroup,
)
from skyqa.contracts.base import load_jsonl
from skyqa.contracts.fusion import InstanceEntry, InstanceTable
from skyqa.contracts.missions import FrameVisibility
from skyqa.geometry.boxes import norm_xyxy
from skyqa.protojson import pose_message, to_json
from skyqa.sim.camera import look_at
from skyqa.v1 import render_pb2

from services.mission_planner.config import MissionConfig
from services.mission_planner.safety import ObstacleMap

AREA_RADIUS_M = 25.0
MAX_OBJECTS = 40
MIN_VEHICLES = 2  # an area shows at least this many vehicles
DISTANCE_M = (25.0, 110.0)  # horizontal, UAV to the area's centre
ALTITUDE_M = (15.0, 80.0)  # above the area's ground
AIM_JITTER_DEG = (12.0, 8.0)  # yaw, pitch off the centre
MAX_FOOTPRINT_M = 60.0  # larger instances (long bridges) are scenery, not objects
DRAWS = 30  # pose draws per UAV before the group is rejected


def seed_of(base: int, group_id: str) -> int:
    return int(hashlib.sha256(f"{base}:{group_id}".encode()).hexdigest()[:8], 16)


def group_id_of(scene_id: str, size: int, k: int) -> str:
    return f"{scene_id}_group{size}_{k:03d}"


def _flat(a: list[float], b: list[float]) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


def choose_areas(
    instances: list[InstanceEntry], count: int, rng: np.random.Generator
) -> list[tuple[list[float], list[InstanceEntry]]]:
    """Up to ``count`` areas, densest in vehicles first (seeded ties), 2 radii apart."""
    vehicles = [i for i in instances if i.category == "vehicle"]
    ranked = []
    for v in vehicles:
        near = [w for w in vehicles if _flat(v.center, w.center) <= AREA_RADIUS_M]
        if len(near) >= MIN_VEHICLES:
            centre = [
                float(np.mean([w.center[0] for w in near])),
                float(np.mean([w.center[1] for w in near])),
            ]
            ranked.append((-len(near), float(rng.random()), centre))
    ranked.sort()
    chosen: list[list[float]] = []
    for _, _, centre in ranked:
        if len(chosen) == count:
            break
        if all(_flat(centre, c) >= 2 * AREA_RADIUS_M for c in chosen):
            chosen.append(centre)
    out = []
    for centre in chosen:
        inside = [
            i
            for i in instances
            if _flat(i.center, centre) <= AREA_RADIUS_M and max(i.size[0], i.size[1]) <= MAX_FOOTPRINT_M
        ]
        inside.sort(key=lambda i: (_flat(i.center, centre), i.instance_id))
        out.append((centre, inside[:MAX_OBJECTS]))
    return out


def place_uavs(
    centre: list[float], n: int, obstacles: ObstacleMap, rng: np.random.Generator
) -> tuple[list[GroupUav], int] | None:
    """n poses around ``centre`` (x, y, ground z), an even share of the circle each; None when
    some UAV finds no safe pose in ``DRAWS`` draws."""
    base = float(rng.uniform(0.0, 360.0))
    uavs, draws = [], 0
    for k in range(n):
        for _ in range(DRAWS):
            draws += 1
            az = math.radians(base + 360.0 * k / n + float(rng.uniform(-0.3, 0.3)) * 360.0 / n)
            d, h = float(rng.uniform(*DISTANCE_M)), float(rng.uniform(*ALTITUDE_M))
            eye = np.array([centre[0] + d * math.cos(az), centre[1] + d * math.sin(az), centre[2] + h])
            if obstacles.unsafe(eye[None])[0]:
                continue
            yaw, pitch = look_at(eye, np.array(centre))
            yaw += float(rng.uniform(-AIM_JITTER_DEG[0], AIM_JITTER_DEG[0]))
            pitch = min(-5.0, max(-89.0, pitch + float(rng.uniform(-AIM_JITTER_DEG[1], AIM_JITTER_DEG[1]))))
            pose = [round(float(v), 3) for v in (*eye, (yaw + 180.0) % 360.0 - 180.0, pitch, 0.0)]
            uavs.append(
                GroupUav(uav=f"UAV{k + 1}", pose=pose, distance_m=round(d, 2), altitude_m=round(h, 2))
            )
            break
        else:
            return None
    return uavs, draws


def plan_all(
    run_id: str,
    scene_id: str,
    backend: str,
    table: InstanceTable,
    obstacles: ObstacleMap,
    cfg: MissionConfig,
    seed: int,
    store: BlobStore,
) -> tuple[list[str], list[RejectedGroup], list[render_pb2.VideoJob]]:
    """Plan, write and make video jobs for the run's UAV groups."""
    # sizes in turn (3, 5, 6, 3, 5, 6, ...): when the scene has fewer areas with vehicles than
    # groups asked, every size keeps a share instead of the last sizes getting none
    sizes = [n for _ in range(cfg.groups_per_size) for n in cfg.group_sizes]
    rng = np.random.default_rng(seed_of(seed, scene_id))
    areas = choose_areas(table.instances, len(sizes), rng)
    planned, rejected, jobs = [], [], []
    counters: dict[int, int] = {}
    for k, n in enumerate(sizes):
        group_id = group_id_of(scene_id, n, counters.get(n, 0))
        counters[n] = counters.get(n, 0) + 1
        if k >= len(areas):
            rejected.append(RejectedGroup(group_id=group_id, size=n, reason="no further area with vehicles"))
            continue
        (cx, cy), objects = areas[k]
        centre = [cx, cy, float(obstacles.ground_z(np.array([[cx, cy]]))[0])]
        group_seed = seed_of(seed, group_id)
        placed = place_uavs(centre, n, obstacles, np.random.default_rng(group_seed))
        if placed is None:
            why = f"no safe pose for every UAV in {DRAWS} draws each"
            rejected.append(RejectedGroup(group_id=group_id, size=n, reason=why))
            continue
        uavs, draws = placed
        plan = GroupPlan(
            scene_id=scene_id,
            group_id=group_id,
            center=[round(v, 3) for v in centre],
            radius_m=AREA_RADIUS_M,
            uavs=uavs,
            objects=[
                GroupObject(
                    instance_id=i.instance_id,
                    class_name=i.class_name,
                    category=i.category,
                    center=i.center,
                    size=i.size,
                    yaw_deg=i.yaw_deg,
                )
                for i in objects
            ],
            width=cfg.video_width,
            height=cfg.video_height,
            fov_deg=cfg.video_fov_deg,
            seed=group_seed,
            attempts=draws,
        )
        store.put(keys.mission_file(run_id, group_id, keys.GROUP_PLAN), dump_json(plan), "application/json")
        job = video_job(run_id, backend, plan, cfg)
        store.put(
            keys.mission_file(run_id, group_id, keys.RENDER_REQUEST),
            to_json(job, indent=1),
            "application/json",
        )
        planned.append(group_id)
        jobs.append(job)
    return planned, rejected, jobs


def video_job(run_id: str, backend: str, plan: GroupPlan, cfg: MissionConfig) -> render_pb2.VideoJob:
    """One frame per UAV: the renderer's frames, segmentation and per-object measurements are
    the group's views."""
    job = render_pb2.VideoJob(
        run_id=run_id,
        job_id=plan.group_id,
        scene_id=plan.scene_id,
        backend=backend,
        width=plan.width,
        height=plan.height,
        fov_deg=plan.fov_deg,
        fps=1.0,
        bitrate=cfg.video_bitrate,
        jpeg_quality=cfg.jpeg_quality,
        output_prefix=keys.final_task(run_id, plan.group_id),
        requester="mission",
        correlation=plan.group_id,
    )
    add_stills(job, [u.pose for u in plan.uavs], plan.objects)
    return job


class Measured(Protocol):
    instance_id: int
    center: list[float]
    size: list[float]


def add_stills(job: render_pb2.VideoJob, poses: Sequence[list[float]], objects: Iterable[Measured]) -> None:
    """A job of stills: one frame per pose (x, y, z, yaw, pitch, roll), every object measured."""
    job.poses.extend(pose_message(p) for p in poses)
    for o in objects:
        job.targets.add(
            landmark_id=f"obj_{o.instance_id}", instance_id=o.instance_id, center=o.center, size=o.size
        )


def is_group(store: BlobStore, run_id: str, job_id: str) -> bool:
    return store.exists(keys.mission_file(run_id, job_id, keys.GROUP_PLAN))


def bundle(done: render_pb2.VideoDone, store: BlobStore) -> GroupTask:
    """The plan plus the renderer's measurement of every object in every UAV's view."""
    plan = load_json(
        GroupPlan, store.get(keys.mission_file(done.run_id, done.job_id, keys.GROUP_PLAN)), "group plan"
    )
    rows = load_jsonl(FrameVisibility, store.get(done.frame_visibility.key), "frame visibility")
    if len(rows) != len(plan.uavs):
        raise ValueError(f"{done.job_id}: {len(rows)} measured views for {len(plan.uavs)} UAVs")
    views = []
    for r in rows:
        stats = {s.instance_id: s for s in r.targets}
        per = []
        for o in plan.objects:
            s = stats.get(o.instance_id)
            if s is None:
                raise ValueError(f"{done.job_id}: object {o.instance_id} was not measured in view {r.frame}")
            facing = s.visible_point_count + s.occluded_point_count
            per.append(
                ObjectView(
                    instance_id=o.instance_id,
                    in_frame=round(s.target_inframe_point_count / max(1, s.sample_count), 4),
                    visible_ratio=s.visible_ratio,
                    occluded=round(s.occluded_point_count / facing, 4) if facing else 0.0,
                    occluder_instance_id=s.occluder_instance_id,
                    pixels=s.pixels,
                    bbox_xyxy_norm=norm_xyxy(s.bbox_xyxy, done.width, done.height) if s.pixels else [0.0] * 4,
                )
            )
        views.append(per)
    task = GroupTask(
        **plan.model_dump(),
        images=[keys.video_frame("frames", i) for i in range(len(plan.uavs))],
        segmentation=[keys.video_frame("seg", i) for i in range(len(plan.uavs))],
        views=views,
    )
    store.put(
        f"{keys.final_task(done.run_id, done.job_id)}/{keys.GROUP_TASK}", dump_json(task), "application/json"
    )
    return task


def index_row(store: BlobStore, run_id: str, group_id: str) -> GroupIndexRow:
    key = f"{keys.final_task(run_id, group_id)}/{keys.GROUP_TASK}"
    task = load_json(GroupTask, store.get(key), "group task")
    return GroupIndexRow(group_id=group_id, size=len(task.uavs), task=key)
