"""Mission-planner service: reviewed landmarks -> planned missions -> video jobs -> mission bundles.

Wiring only: the stage's work is in :mod:`services.mission_planner.missions`; fan-in in KV
makes replicas and restarts safe.
"""

from __future__ import annotations

import asyncio

from google.protobuf import json_format
from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.contracts import load_json
from skyqa.runtime import Service, Settings
from skyqa.runtime.stage import Completion, Stage
from skyqa.v1 import landmark_pb2, render_pb2, scan_pb2

from services.mission_planner.missions import (
    REQUESTER,
    MissionPlanFile,
    bundle_mission,
    plan_run,
    write_index,
)

NAME = "mission_planner"
STAGE = "mission"
REVIEWED = topology.ConsumerSpec("mission-planner", topology.EVENTS_STREAM, topology.LANDMARKS_REVIEWED)
VIDEOS = topology.ConsumerSpec(
    "mission-planner-videos", topology.EVENTS_STREAM, topology.video_done_subject(REQUESTER)
)


async def setup(svc: Service) -> None:
    stage = Stage(svc, STAGE)

    async def finish(plan: MissionPlanFile, trace_id: str) -> None:
        event = await asyncio.to_thread(write_index, plan, svc.store)
        total = plan.videos
        message = (
            f"{event.missions} missions, {len(plan.navigation)} navigation missions, "
            f"{len(plan.groups)} UAV groups, {len(plan.trajectories)} action trajectories and "
            f"{len(plan.surveys)} surveys rendered, "
            f"{plan.rejections} rejected, "
            f"for {plan.landmarks} landmarks ({len(plan.held)} held: no release can include them)"
        )
        outputs = {"missions_index": event.index.key}
        completion = Completion(topology.MISSIONS_COMPLETED, event, total, total, message, outputs)
        await stage.announce(plan.run_id, trace_id, completion)

    async def on_reviewed(event: landmark_pb2.LandmarksReviewed, d: Delivery) -> None:
        plan, jobs = await asyncio.to_thread(
            plan_run, event, svc.store, svc.settings.archive_video_frames, svc.settings.scenes_dir
        )
        keyed = [(f"{REQUESTER}:{job.job_id}", job) for job in jobs]
        message = (
            f"{len(plan.missions)} missions, {len(plan.navigation)} navigation missions, "
            f"{len(plan.groups)} UAV groups, {len(plan.trajectories)} action trajectories and "
            f"{len(plan.surveys)} surveys planned, "
            f"{plan.rejections} rejected"
        )
        if not await stage.scatter(event.run_id, topology.VIDEO_JOB, keyed, d.trace_id, message):
            await finish(plan, d.trace_id)

    async def on_video(done: render_pb2.VideoDone, d: Delivery) -> None:
        plan = load_json(
            MissionPlanFile,
            await asyncio.to_thread(svc.store.get, keys.mission_plan(done.run_id)),
            "mission plan",
        )
        scan = json_format.ParseDict(plan.scan, scan_pb2.ScanRequest())
        await asyncio.to_thread(bundle_mission, done, svc.store, scan)
        if await stage.gathered(done.run_id, done.job_id, plan.videos, f"rendered {done.job_id}"):
            await finish(plan, d.trace_id)

    svc.bus.handle(REVIEWED, landmark_pb2.LandmarksReviewed, on_reviewed, stage=STAGE)
    svc.bus.handle(VIDEOS, render_pb2.VideoDone, on_video, stage=STAGE, concurrency=svc.settings.concurrency)


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
