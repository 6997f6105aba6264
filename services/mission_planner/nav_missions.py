"""A run's navigation missions: which goals and routes to fly, their files and video jobs, and the
final ``navigation_task.json`` once the renderer has measured every landmark in every frame.

Goals cycle through the parts (the whole landmark, its facade, its rooftop; the last two only
for landmarks at least ``PART_MIN_HEIGHT_M`` tall); a route starts at a landmark and adds the
nearest unused one 20-180 m away, up to 2-4 landmarks. Instructions name a landmark by the
first clause of its reviewed description ("teal office tower, about 94 m tall, ..." is "teal
office tower"), and only landmarks whose name no other landmark shares are used, so a goal in
words is one landmark. Choices and starts are seeded from the scan's seed and the mission id.
"""

from __future__ import annotations

import hashlib

import numpy as np
from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts import ValidInstance, dump_json, load_json
from skyqa.contracts.base import load_jsonl
from skyqa.contracts.missions import FrameVisibility, NavigationIndexRow
from skyqa.contracts.navigation import (
    GoalPart,
    NavFrame,
    NavigationPlan,
    NavigationTask,
    NavVideo,
    RejectedNavigation,
)
from skyqa.geometry.boxes import norm_xyxy
from skyqa.protojson import to_json
from skyqa.reviewed import rendered_id
from skyqa.v1 import common_pb2, render_pb2

from services.mission_planner.config import MissionConfig
from services.mission_planner.describe import target_of
from services.mission_planner.navigation import NavConfig, RouteLandmark, plan_navigation
from services.mission_planner.safety import ObstacleMap

PARTS: tuple[GoalPart, ...] = ("whole", "facade", "rooftop")
ROUTE_GAP_M = (20.0, 180.0)
PART_MIN_HEIGHT_M = 12.0  # a facade or rooftop goal needs a landmark at least this tall


def short_name(vi: ValidInstance) -> str:
    text = (vi.landmark_description or vi.class_name).strip()
    return text.split(",")[0].strip() or text


def route_landmark(vi: ValidInstance, safety_m: float) -> RouteLandmark:
    return RouteLandmark(
        landmark_id=vi.instance_id,
        rendered_instance_id=rendered_id(vi),
        category=vi.landmark_category or vi.class_name,
        subcategory=vi.landmark_subcategory,
        description=short_name(vi),
        target=target_of(vi, safety_m),
    )


def nameable(every: list[RouteLandmark]) -> list[RouteLandmark]:
    """Landmarks an instruction can name: no other landmark has the same description."""
    counts: dict[str, int] = {}
    for lm in every:
        counts[lm.description] = counts.get(lm.description, 0) + 1
    return [lm for lm in every if counts[lm.description] == 1]


def choose(
    every: list[RouteLandmark], goals: int, routes: int, rng: np.random.Generator
) -> list[tuple[str, GoalPart, list[RouteLandmark]]]:
    """(kind, goal part, landmarks in flight order) of each mission to plan."""
    pool = nameable(every)
    out: list[tuple[str, GoalPart, list[RouteLandmark]]] = []
    if not pool:
        return out
    order = [pool[i] for i in rng.permutation(len(pool))]
    used: list[RouteLandmark] = []
    for i in range(goals):
        part = PARTS[i % len(PARTS)]
        fresh = [lm for lm in order if lm not in used] or order
        if part == "whole":  # leave the tall ones to the facade and rooftop goals
            fits = sorted(fresh, key=lambda lm: lm.target.size[2] >= PART_MIN_HEIGHT_M)
        else:  # another part of a landmark already used is another goal
            tall = [lm for lm in order if lm.target.size[2] >= PART_MIN_HEIGHT_M]
            fits = [lm for lm in tall if lm not in used] or tall
        goal = (fits or fresh)[0]
        used.append(goal)
        out.append(("goal", part if fits else "whole", [goal]))
    for i in range(routes):
        route = [order[(goals + i) % len(order)]]
        want = 2 + i % 3
        while len(route) < want:
            here = route[-1].target.c[:2]
            options = [
                (float(np.linalg.norm(lm.target.c[:2] - here)), lm.landmark_id, lm)
                for lm in pool
                if lm not in route
                and ROUTE_GAP_M[0] <= np.linalg.norm(lm.target.c[:2] - here) <= ROUTE_GAP_M[1]
            ]
            if not options:
                break
            route.append(min(options)[2])
        if len(route) >= 2:
            out.append(("route", "whole", route))
    return out


def seed_of(base: int, traj_id: str) -> int:
    return int(hashlib.sha256(f"{base}:{traj_id}:navigation".encode()).hexdigest()[:8], 16)


def traj_id_of(scene_id: str, kind: str, i: int) -> str:
    return f"{scene_id}_nav_{kind}_{i:03d}"


def plan_all(
    run_id: str,
    scene_id: str,
    backend: str,
    landmarks: list[ValidInstance],
    obstacles: ObstacleMap,
    cfg: MissionConfig,
    seed: int,
    store: BlobStore,
) -> tuple[list[str], list[RejectedNavigation], list[render_pb2.VideoJob]]:
    """Plan, write and make video jobs for the run's navigation missions."""
    every = [route_landmark(vi, obstacles.safety) for vi in landmarks]
    rng = np.random.default_rng(seed_of(seed, scene_id))
    planned, rejected, jobs = [], [], []
    counters = {"goal": 0, "route": 0}
    for kind, part, route in choose(every, cfg.navigation_goals, cfg.navigation_routes, rng):
        traj_id = traj_id_of(scene_id, kind, counters[kind])
        counters[kind] += 1
        fps, mission_seed = float(cfg.video_fps), seed_of(seed, traj_id)
        plan, why, attempts = plan_navigation(
            scene_id, traj_id, kind, part, route, every, obstacles, fps, mission_seed, NavConfig()
        )
        if plan is None:
            rejected.append(
                RejectedNavigation(
                    traj_id=traj_id,
                    kind=kind,
                    route=[lm.landmark_id for lm in route],
                    attempts=attempts,
                    reason=why,
                )
            )
            continue
        write_plan(store, run_id, plan)
        job = video_job(run_id, backend, plan, cfg)
        store.put(
            keys.mission_file(run_id, traj_id, keys.RENDER_REQUEST),
            to_json(job, indent=1),
            "application/json",
        )
        planned.append(traj_id)
        jobs.append(job)
    return planned, rejected, jobs


def write_plan(store: BlobStore, run_id: str, plan: NavigationPlan) -> None:
    """The plan and, as every mission has, ``poses.csv`` (camera yaw and pitch per frame)."""
    store.put(
        keys.mission_file(run_id, plan.traj_id, keys.NAVIGATION_PLAN), dump_json(plan), "application/json"
    )
    lines = ["frame,t,x,y,z,yaw,pitch,roll"]
    for i, s in enumerate(plan.poses):
        at = f"{i},{i / plan.fps:.4f},{s.x:.4f},{s.y:.4f},{s.z:.4f}"
        lines.append(f"{at},{s.yaw_deg:.4f},{s.camera_pitch_deg:.4f},0.0000")
    store.put(
        keys.mission_file(run_id, plan.traj_id, keys.POSES), ("\n".join(lines) + "\n").encode(), "text/csv"
    )


def video_job(run_id: str, backend: str, plan: NavigationPlan, cfg: MissionConfig) -> render_pb2.VideoJob:
    job = render_pb2.VideoJob(
        run_id=run_id,
        job_id=plan.traj_id,
        scene_id=plan.scene_id,
        backend=backend,
        width=cfg.video_width,
        height=cfg.video_height,
        fov_deg=cfg.video_fov_deg,
        fps=plan.fps,
        bitrate=cfg.video_bitrate,
        jpeg_quality=cfg.jpeg_quality,
        output_prefix=keys.final_task(run_id, plan.traj_id),
        requester="mission",
        correlation=plan.traj_id,
    )
    for s in plan.poses:
        job.poses.append(
            common_pb2.Pose(x=s.x, y=s.y, z=s.z, yaw_deg=s.yaw_deg, pitch_deg=s.camera_pitch_deg)
        )
    for lm in plan.landmarks:
        job.targets.add(
            landmark_id=lm.landmark_id, instance_id=lm.rendered_instance_id, center=lm.center, size=lm.size
        )
    return job


def index_row(store: BlobStore, run_id: str, traj_id: str) -> NavigationIndexRow:
    key = f"{keys.final_task(run_id, traj_id)}/{keys.NAVIGATION_TASK}"
    task = load_json(NavigationTask, store.get(key), "navigation task")
    return NavigationIndexRow(
        traj_id=traj_id,
        kind=task.kind,
        goal_part=task.goal_part,
        route=task.route,
        task=key,
        video=f"{keys.final_task(run_id, traj_id)}/{task.video.path}",
        frame_count=task.video.frame_count,
        duration_sec=task.duration_sec,
    )


def is_navigation(store: BlobStore, run_id: str, traj_id: str) -> bool:
    return store.exists(keys.mission_file(run_id, traj_id, keys.NAVIGATION_PLAN))


def bundle(done: render_pb2.VideoDone, store: BlobStore, fov_deg: float) -> NavigationTask:
    """The plan plus the renderer's per-frame measurement of each landmark."""
    plan = load_json(
        NavigationPlan,
        store.get(keys.mission_file(done.run_id, done.job_id, keys.NAVIGATION_PLAN)),
        "navigation plan",
    )
    rows = load_jsonl(FrameVisibility, store.get(done.frame_visibility.key), "frame visibility")
    if len(rows) != plan.frame_count:
        raise ValueError(f"{done.job_id}: {len(rows)} measured frames for {plan.frame_count} planned")
    w, h = done.width, done.height
    visibility: dict[str, list[NavFrame]] = {}
    for lm in plan.landmarks:
        frames = []
        for r in rows:
            stat = next((s for s in r.targets if s.instance_id == lm.rendered_instance_id), None)
            if stat is None or not stat.pixels:
                frames.append(
                    NavFrame(
                        frame=r.frame, visible=False, visible_ratio=0.0, pixels=0, bbox_xyxy_norm=[0.0] * 4
                    )
                )
                continue
            frames.append(
                NavFrame(
                    frame=r.frame,
                    visible=stat.is_visible,
                    visible_ratio=stat.visible_ratio,
                    pixels=stat.pixels,
                    bbox_xyxy_norm=norm_xyxy(stat.bbox_xyxy, w, h),
                )
            )
        visibility[lm.landmark_id] = frames
    video = NavVideo(
        path=keys.VIDEO, fps=done.fps, frame_count=done.frame_count, width=w, height=h, fov_deg=fov_deg
    )
    task = NavigationTask(**plan.model_dump(), video=video, visibility=visibility)
    store.put(
        f"{keys.final_task(done.run_id, done.job_id)}/{keys.NAVIGATION_TASK}",
        dump_json(task),
        "application/json",
    )
    return task
