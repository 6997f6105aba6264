"""A run's missions: plan one atomic and one composite mission per reviewed landmark that a
release can include (:mod:`skyqa.families.held`) and the run's navigation missions
(:mod:`services.mission_planner.nav_missions`), bundle each rendered video into its final task,
and index them all.

The i-th reviewed landmark (sorted by id) takes the i-th atomic set and the i-th composite set,
cycling, so every class is used once there are at least 10 landmarks (a held one's sets are not
flown: the others keep the sets and mission ids they would have had without the rule). Planning
state lives in the store (``video_tasks/mission_plan.json``), so replicas and restarts are safe.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from pydantic import Field
from skyqa import keys, scan as scan_rules
from skyqa.blob import BlobStore
from skyqa.contracts import Contract, ValidInstancesFile, dump_json, load_json
from skyqa.contracts.aircop import RejectedGroup
from skyqa.contracts.base import load_jsonl
from skyqa.contracts.fusion import InstanceTable
from skyqa.contracts.missions import (
    ComposedSegments,
    ConstraintReport,
    FrameVisibility,
    MissionIndex,
    MissionIndexRow,
    RejectedMission,
    TaskData,
)
from skyqa.contracts.navigation import RejectedNavigation
from skyqa.contracts.rsv import RejectedTrajectory
from skyqa.contracts.ultra import RejectedSurvey
from skyqa.geometry.pcd import decode_cloud
from skyqa.protojson import to_dict, to_json
from skyqa.sim import Intrinsics
from skyqa.v1 import common_pb2, landmark_pb2, mission_pb2, render_pb2, scan_pb2
from skyqa.vocab.behaviors import SetSpec, load_library

from services.mission_planner import group_missions, nav_missions, surveys, trajectories
from services.mission_planner.camera_plan import CountBalance, draws
from services.mission_planner.config import MissionConfig
from services.mission_planner.describe import describe, mission_id, target_of
from services.mission_planner.final_task import build_final_task, write_final_task
from services.mission_planner.kinematics import beyond_limits, fly
from services.mission_planner.plan_files import spread_order, video_job, write_plan
from services.mission_planner.planner import plan_mission
from services.mission_planner.safety import ObstacleMap

REQUESTER = "mission"  # the renderer answers on ``render.video_done.<requester>``


class MissionPlanFile(Contract):
    run_id: str
    scene_id: str
    profile: str
    missions: list[str]
    rejected: list[RejectedMission]
    navigation: list[str] = Field(default_factory=list)
    rejected_navigation: list[RejectedNavigation] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    rejected_groups: list[RejectedGroup] = Field(default_factory=list)
    trajectories: list[str] = Field(default_factory=list)
    rejected_trajectories: list[RejectedTrajectory] = Field(default_factory=list)
    surveys: list[str] = Field(default_factory=list)
    rejected_surveys: list[RejectedSurvey] = Field(default_factory=list)
    landmarks: int
    held: dict[str, str] = Field(default_factory=dict)  # landmarks given no missions, with the reason
    valid_instances: str
    scan: dict[str, object]

    @property
    def videos(self) -> int:
        """Video jobs the plan sent out: every mission, navigation ones, UAV groups, action
        trajectories and surveys included."""
        return (
            len(self.missions)
            + len(self.navigation)
            + len(self.groups)
            + len(self.trajectories)
            + len(self.surveys)
        )

    @property
    def rejections(self) -> int:
        return (
            len(self.rejected)
            + len(self.rejected_navigation)
            + len(self.rejected_groups)
            + len(self.rejected_trajectories)
            + len(self.rejected_surveys)
        )


def draw_labels(kind: str, spec: SetSpec) -> list[str]:
    """The seed labels of a mission's parameter draws: the kind's own first (the plan a run made
    before it drew more), then one per further draw (:func:`camera_plan.draws`)."""
    return [kind, *(f"{kind}/{j}" for j in range(1, draws(len(spec.steps))))]


def _seed(base: int, instance_id: str, kind: str) -> int:
    return int(hashlib.sha256(f"{base}:{instance_id}:{kind}".encode()).hexdigest()[:8], 16)


def plan_run(
    event: landmark_pb2.LandmarksReviewed, store: BlobStore, archive: bool, scenes_dir: Path | None = None
) -> tuple[MissionPlanFile, list[render_pb2.VideoJob]]:
    """``scenes_dir`` resolves a mesh scene's id, as the renderer's does: action trajectories are
    planned against the geometry the renderer will move their capsule through."""
    run_id, scene_id = event.run_id, event.scene_id
    scan = scan_rules.stored(store, run_id)
    cfg = MissionConfig.for_scan(scan)
    lib = load_library()
    valid = load_json(ValidInstancesFile, store.get(event.valid_instances.key), "valid instances")
    cloud = decode_cloud(store.get(keys.fused_cloud_npy(run_id, scene_id)))
    landmarks = sorted(valid.valid_instances, key=lambda v: v.instance_id)
    # no release can include these: flying their missions would render videos nobody asks about
    # (the families load here, on the first run planned, not when the service starts)
    from skyqa.families import RELEASED
    from skyqa.families.held import held_landmarks

    held = held_landmarks(landmarks, RELEASED)
    safety = lib.safety_distance_m
    keepouts = [
        ObstacleMap.keepout(np.array(v.bbox_3d.min), np.array(v.bbox_3d.max), safety) for v in landmarks
    ]
    xyz = np.column_stack([cloud["x"], cloud["y"], cloud["z"]]).astype(np.float64)
    obstacles = ObstacleMap(xyz, keepouts, safety)
    atomic, composite = lib.set_names("atomic"), lib.set_names("composite")
    jobs: list[tuple[tuple[float, float], render_pb2.VideoJob]] = []
    missions, rejected = [], []
    counts = CountBalance()
    lens = Intrinsics.from_fov(cfg.video_width, cfg.video_height, cfg.video_fov_deg)
    for i, vi in enumerate(landmarks):
        if vi.instance_id in held:
            continue  # the others keep the sets and mission ids they would have without the rule
        t = target_of(vi, safety)
        for kind, sets in (("atomic", atomic), ("composite", composite)):
            traj_id = mission_id(scene_id, vi.instance_id, kind, i)
            set_name = sets[i % len(sets)]
            plans = [
                plan_mission(
                    lib, set_name, t, obstacles, _seed(scan.seed, vi.instance_id, label), cfg.acceptance
                )
                for label in draw_labels(kind, lib.sets[set_name])
            ]
            accepted = [p for p in plans if p.accepted]
            planned = plans[0]
            if accepted:
                n, _ = counts.choose(
                    [p.trajectory for p in accepted], t, vi.instance_id, kind, lens, cfg.video_fps
                )
                planned = accepted[n]
            # the flight as timed within the kinematic limits: what is written, rendered, checked
            flown = fly(planned.trajectory, t)
            clear = obstacles.check(flown.waypoints)
            if planned.accepted and not clear.collision_free:
                # timing smooths the flown path by centimetres: it is checked as flown
                planned.accepted = False
                planned.reason = (
                    f"{clear.violation_count} timed waypoints within {obstacles.safety} m of obstacles"
                )
            composed, report = describe(lib, planned, flown, vi, scene_id, traj_id, kind)
            write_plan(store, run_id, planned, flown, composed, report)
            if not report.accepted:
                rejected.append(
                    RejectedMission(
                        traj_id=traj_id,
                        instance_id=vi.instance_id,
                        set_name=set_name,
                        attempts=planned.attempt + 1,
                        reason=planned.reason or beyond_limits(flown.check),
                    )
                )
                continue
            missions.append(traj_id)
            backend = scan.backend or "builtin"
            job = video_job(run_id, scene_id, backend, composed, flown, t, cfg, archive, REQUESTER)
            # the video's render request, kept so `skyqa refresh --videos` can render it again
            request = to_json(job, indent=1)
            store.put(keys.mission_file(run_id, traj_id, keys.RENDER_REQUEST), request, "application/json")
            jobs.append(((t.center[0], t.center[1]), job))
    navigation, nav_rejected, nav_jobs = nav_missions.plan_all(
        run_id, scene_id, scan.backend or "builtin", landmarks, obstacles, cfg, scan.seed, store
    )
    jobs += [((job.poses[0].x, job.poses[0].y), job) for job in nav_jobs]
    table = load_json(
        InstanceTable, store.get(keys.fusion_outputs(run_id, scene_id)["instances"]), "fused instances"
    )
    groups, groups_rejected, group_jobs = group_missions.plan_all(
        run_id, scene_id, scan.backend or "builtin", table, obstacles, cfg, scan.seed, store
    )
    jobs += [((job.poses[0].x, job.poses[0].y), job) for job in group_jobs]
    planned_trajectories, trajectories_rejected, trajectory_jobs = trajectories.plan_all(
        run_id, scene_id, scan, obstacles, store, scenes_dir
    )
    jobs += [((job.program.root.x, job.program.root.y), job) for job in trajectory_jobs]
    planned_surveys, surveys_rejected, survey_jobs = surveys.plan_all(
        run_id,
        scene_id,
        scan.backend or "builtin",
        table,
        obstacles,
        scan,
        cfg.jpeg_quality,
        store,
        scenes_dir,
    )
    jobs += [((job.poses[0].x, job.poses[0].y), job) for job in survey_jobs]
    plan = MissionPlanFile(
        run_id=run_id,
        scene_id=scene_id,
        profile=scan.profile,
        missions=missions,
        rejected=rejected,
        navigation=navigation,
        rejected_navigation=nav_rejected,
        groups=groups,
        rejected_groups=groups_rejected,
        trajectories=planned_trajectories,
        rejected_trajectories=[
            RejectedTrajectory(traj_id=t, reason=why) for t, why in sorted(trajectories_rejected.items())
        ],
        surveys=planned_surveys,
        rejected_surveys=surveys_rejected,
        landmarks=len(landmarks),
        held=held,
        valid_instances=event.valid_instances.key,
        scan=to_dict(scan),
    )
    store.put(keys.mission_plan(run_id), dump_json(plan), "application/json")
    order = spread_order([c for c, _ in jobs])
    return plan, [jobs[k][1] for k in order]


def bundle_mission(done: render_pb2.VideoDone, store: BlobStore, scan: scan_pb2.ScanRequest) -> None:
    cfg = MissionConfig.for_scan(scan)
    if nav_missions.is_navigation(store, done.run_id, done.job_id):
        nav_missions.bundle(done, store, cfg.video_fov_deg)
        return
    if group_missions.is_group(store, done.run_id, done.job_id):
        group_missions.bundle(done, store)
        return
    if trajectories.is_trajectory(store, done.run_id, done.job_id):
        trajectories.check_rendered(done, store)
        return
    if surveys.is_survey(store, done.run_id, done.job_id):
        surveys.bundle(done, store)
        return
    lib = load_library()
    composed_key = keys.mission_file(done.run_id, done.job_id, keys.COMPOSED_SEGMENTS)
    composed = load_json(ComposedSegments, store.get(composed_key), "composed segments")
    report_key = keys.mission_file(done.run_id, done.job_id, keys.CONSTRAINT_REPORT)
    report = load_json(ConstraintReport, store.get(report_key), "constraint report")
    rows = load_jsonl(FrameVisibility, store.get(done.frame_visibility.key), "frame visibility")
    manifest, index_map, task = build_final_task(lib, composed, report, rows, done, cfg)
    write_final_task(store, done.run_id, done.job_id, manifest, index_map, task)


def write_index(plan: MissionPlanFile, store: BlobStore) -> mission_pb2.MissionsCompleted:
    lib = load_library()
    rows = []
    for traj_id in sorted(plan.missions):
        key = f"{keys.final_task(plan.run_id, traj_id)}/{keys.TASK_DATA}"
        task = load_json(TaskData, store.get(key), "task data")
        composed = task.task_tracks.self_state_awareness
        rows.append(
            MissionIndexRow(
                traj_id=traj_id,
                instance_id=next(iter(task.target_presence_targets)),
                mission_kind=lib.sets[composed.task_subtype].kind,
                set_name=composed.task_subtype,
                task_data=key,
                video=f"{keys.final_task(plan.run_id, traj_id)}/{task.video.path}",
                frame_count=task.video.frame_count,
                duration_sec=task.video.duration_sec,
            )
        )
    index = MissionIndex(
        scene_id=plan.scene_id,
        missions=rows,
        rejected=sorted(plan.rejected, key=lambda r: r.traj_id),
        navigation=[nav_missions.index_row(store, plan.run_id, t) for t in sorted(plan.navigation)],
        rejected_navigation=sorted(plan.rejected_navigation, key=lambda r: r.traj_id),
        groups=[group_missions.index_row(store, plan.run_id, g) for g in sorted(plan.groups)],
        rejected_groups=sorted(plan.rejected_groups, key=lambda r: r.group_id),
        trajectories=[trajectories.index_row(store, plan.run_id, t) for t in sorted(plan.trajectories)],
        rejected_trajectories=plan.rejected_trajectories,
        surveys=[surveys.index_row(plan.run_id, s) for s in sorted(plan.surveys)],
        rejected_surveys=plan.rejected_surveys,
    )
    info = store.put(keys.missions_index(plan.run_id), dump_json(index), "application/json")
    return mission_pb2.MissionsCompleted(
        run_id=plan.run_id,
        scene_id=plan.scene_id,
        index=info.to_ref(),
        missions=len(rows),
        rejected=len(plan.rejected),
        landmarks=plan.landmarks,
        valid_instances=common_pb2.BlobRef(key=plan.valid_instances),
    )
