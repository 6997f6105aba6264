"""Mission-planner service: reviewed landmarks -> planned missions -> video jobs -> mission bundles.

Each valid landmark (sorted by id) gets one atomic and one composite mission; the i-th landmark
takes the i-th atomic set and the i-th composite set, cycling, so every class is used once there
are at least 10 landmarks. Planning state lives in the store (``video_tasks/mission_plan.json``)
and fan-in in KV, so replicas and restarts are safe.
"""

from __future__ import annotations

import asyncio
import hashlib
import io

import numpy as np
from google.protobuf import json_format
from skyqa import keys, scan as scan_rules
from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.contracts import Contract, ValidInstancesFile, dump_json, load_json
from skyqa.contracts.base import load_jsonl
from skyqa.contracts.missions import (
    ComposedSegments,
    ConstraintReport,
    FrameVisibility,
    MissionIndex,
    MissionIndexRow,
    RejectedMission,
    TaskData,
)
from skyqa.runtime import Service, Settings
from skyqa.sim import Intrinsics
from skyqa.v1 import common_pb2, fusion_pb2, mission_pb2, scan_pb2

from services.mission_planner.bundle import (
    build_final_task,
    describe,
    mission_id,
    spread_order,
    target_of,
    video_job,
    write_final_task,
    write_plan,
)
from services.mission_planner.camera_plan import CountBalance
from services.mission_planner.config import MissionConfig
from services.mission_planner.library import load_library
from services.mission_planner.planner import plan_mission
from services.mission_planner.safety import ObstacleMap

NAME = "mission_planner"
STAGE = "mission"
REQUESTER = "mission"
RENDER_REQUEST = "render_request.json"
REVIEWED = topology.ConsumerSpec("mission-planner", topology.EVENTS_STREAM, topology.LANDMARKS_REVIEWED)
VIDEOS = topology.ConsumerSpec(
    "mission-planner-videos", topology.EVENTS_STREAM, topology.video_done_subject(REQUESTER)
)


class MissionPlanFile(Contract):
    run_id: str
    scene_id: str
    profile: str
    missions: list[str]
    rejected: list[RejectedMission]
    landmarks: int
    valid_instances: str
    scan: dict[str, object]


def plan_key(run_id: str) -> str:
    return f"{keys.video_tasks(run_id)}/mission_plan.json"


def index_key(run_id: str) -> str:
    return f"{keys.video_tasks(run_id)}/missions_index.json"


def _seed(base: int, instance_id: str, kind: str) -> int:
    return int(hashlib.sha256(f"{base}:{instance_id}:{kind}".encode()).hexdigest()[:8], 16)


def plan_run(
    event: fusion_pb2.LandmarksReviewed, store: BlobStore, archive: bool
) -> tuple[MissionPlanFile, list[mission_pb2.VideoJob]]:
    run_id, scene_id = event.run_id, event.scene_id
    scan = scan_rules.carried(event.scan, run_id, "LandmarksReviewed")
    cfg = MissionConfig.for_scan(scan)
    lib = load_library()
    valid = load_json(ValidInstancesFile, store.get(event.valid_instances.key), "valid instances")
    cloud = np.load(io.BytesIO(store.get(keys.fused_cloud_npy(run_id, scene_id))), allow_pickle=False)
    landmarks = sorted(valid.valid_instances, key=lambda v: v.instance_id)
    safety = lib.safety_distance_m
    keepouts = [
        ObstacleMap.keepout(np.array(v.bbox_3d.min), np.array(v.bbox_3d.max), safety) for v in landmarks
    ]
    xyz = np.column_stack([cloud["x"], cloud["y"], cloud["z"]]).astype(np.float64)
    obstacles = ObstacleMap(xyz, keepouts, safety)
    atomic, composite = lib.set_names("atomic"), lib.set_names("composite")
    jobs: list[tuple[tuple[float, float], mission_pb2.VideoJob]] = []
    missions, rejected = [], []
    counts = CountBalance()
    lens = Intrinsics.from_fov(cfg.video_width, cfg.video_height, cfg.video_fov_deg)
    for i, vi in enumerate(landmarks):
        t = target_of(vi, safety)
        for kind, sets in (("atomic", atomic), ("composite", composite)):
            traj_id = mission_id(scene_id, vi.instance_id, kind, i)
            set_name = sets[i % len(sets)]
            planned = plan_mission(
                lib, set_name, t, obstacles, _seed(scan.seed, vi.instance_id, kind), cfg.acceptance
            )
            if planned.accepted:
                counts.choose(planned.trajectory, t, vi.instance_id, kind, lens, cfg.video_fps)
            composed, report = describe(lib, planned, vi, scene_id, traj_id, kind)
            fwd = write_plan(store, run_id, planned, composed, report, t)
            if not planned.accepted:
                rejected.append(
                    RejectedMission(
                        traj_id=traj_id,
                        instance_id=vi.instance_id,
                        set_name=set_name,
                        attempts=planned.attempt + 1,
                        reason=planned.reason,
                    )
                )
                continue
            missions.append(traj_id)
            backend = scan.backend or "builtin"
            wp = planned.trajectory.waypoints
            job = video_job(run_id, scene_id, backend, composed, wp, fwd, t, cfg, archive, REQUESTER)
            # the video's render request, kept so `skyqa refresh --videos` can render it again
            request = json_format.MessageToJson(job, sort_keys=True, indent=1).encode()
            store.put(f"{keys.mission_root(run_id, traj_id)}/{RENDER_REQUEST}", request, "application/json")
            jobs.append(((t.center[0], t.center[1]), job))
    plan = MissionPlanFile(
        run_id=run_id,
        scene_id=scene_id,
        profile=scan.profile,
        missions=missions,
        rejected=rejected,
        landmarks=len(landmarks),
        valid_instances=event.valid_instances.key,
        scan=json_format.MessageToDict(scan),
    )
    store.put(plan_key(run_id), dump_json(plan), "application/json")
    order = spread_order([c for c, _ in jobs])
    return plan, [jobs[k][1] for k in order]


def bundle_mission(done: mission_pb2.VideoDone, store: BlobStore, scan: scan_pb2.ScanRequest) -> None:
    lib = load_library()
    root = keys.mission_root(done.run_id, done.job_id)
    composed = load_json(ComposedSegments, store.get(f"{root}/composed_segments.json"), "composed segments")
    report = load_json(ConstraintReport, store.get(f"{root}/constraint_report.json"), "constraint report")
    rows = load_jsonl(FrameVisibility, store.get(done.frame_visibility.key), "frame visibility")
    cfg = MissionConfig.for_scan(scan)
    manifest, index_map, task = build_final_task(lib, composed, report, rows, done, cfg)
    write_final_task(store, done.run_id, done.job_id, manifest, index_map, task)


def write_index(plan: MissionPlanFile, store: BlobStore) -> mission_pb2.MissionsCompleted:
    rows = []
    for traj_id in sorted(plan.missions):
        key = f"{keys.mission_root(plan.run_id, traj_id)}/final_task/task_data.json"
        task = load_json(TaskData, store.get(key), "task data")
        composed = task.task_tracks.self_state_awareness
        rows.append(
            MissionIndexRow(
                traj_id=traj_id,
                instance_id=next(iter(task.target_presence_targets)),
                mission_kind="atomic" if "_atomic_" in traj_id else "composite",
                set_name=composed.task_subtype,
                task_data=key,
                video=f"{keys.mission_root(plan.run_id, traj_id)}/final_task/{task.video.path}",
                frame_count=task.video.frame_count,
                duration_sec=task.video.duration_sec,
            )
        )
    index = MissionIndex(
        scene_id=plan.scene_id, missions=rows, rejected=sorted(plan.rejected, key=lambda r: r.traj_id)
    )
    info = store.put(index_key(plan.run_id), dump_json(index), "application/json")
    return mission_pb2.MissionsCompleted(
        run_id=plan.run_id,
        scene_id=plan.scene_id,
        index=info.to_ref(),
        missions=len(rows),
        rejected=len(plan.rejected),
        landmarks=plan.landmarks,
        valid_instances=common_pb2.BlobRef(key=plan.valid_instances),
        scan=json_format.ParseDict(plan.scan, scan_pb2.ScanRequest()),
    )


async def setup(svc: Service) -> None:
    progress, fanin = svc.require()

    async def finish(plan: MissionPlanFile, trace_id: str) -> None:
        event = await asyncio.to_thread(write_index, plan, svc.store)
        await svc.bus.publish(
            topology.MISSIONS_COMPLETED,
            event,
            msg_id=f"missions-completed:{plan.run_id}",
            run_id=plan.run_id,
            trace_id=trace_id,
        )
        await fanin.mark_announced(f"{plan.run_id}.{STAGE}")
        total = len(plan.missions)
        await progress.report(
            plan.run_id,
            STAGE,
            total,
            total,
            common_pb2.RUN_STATUS_COMPLETED,
            f"{event.missions} missions rendered, {event.rejected} rejected, for {plan.landmarks} landmarks",
            outputs={"missions_index": event.index.key},
        )

    async def on_reviewed(event: fusion_pb2.LandmarksReviewed, d: Delivery) -> None:
        plan, jobs = await asyncio.to_thread(plan_run, event, svc.store, svc.settings.archive_video_frames)
        total = len(plan.missions)
        await progress.report(
            event.run_id, STAGE, 0, total, message=f"{total} missions planned, {len(plan.rejected)} rejected"
        )
        keyed = [(f"{REQUESTER}:{job.job_id}", job) for job in jobs]
        if not await svc.fan_out(event.run_id, STAGE, topology.VIDEO_JOB, keyed, d.trace_id):
            await finish(plan, d.trace_id)

    async def on_video(done: mission_pb2.VideoDone, d: Delivery) -> None:
        plan = load_json(
            MissionPlanFile, await asyncio.to_thread(svc.store.get, plan_key(done.run_id)), "mission plan"
        )
        scan = json_format.ParseDict(plan.scan, scan_pb2.ScanRequest())
        await asyncio.to_thread(bundle_mission, done, svc.store, scan)
        fan = await fanin.mark_done(f"{done.run_id}.{STAGE}", done.job_id, len(plan.missions))
        await progress.report(done.run_id, STAGE, fan.done, fan.total, message=f"rendered {done.job_id}")
        if fan.complete and not fan.announced:
            await finish(plan, d.trace_id)

    svc.bus.handle(REVIEWED, fusion_pb2.LandmarksReviewed, on_reviewed, stage=STAGE)
    svc.bus.handle(VIDEOS, mission_pb2.VideoDone, on_video, stage=STAGE, concurrency=svc.settings.concurrency)


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
