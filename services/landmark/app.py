"""Landmark service wiring: fusion completed -> plan -> render jobs -> checked views -> instances.json.

The stage's work is in :mod:`services.landmark.collection`; the review (auto-labelling or the
review web) in :mod:`services.landmark.review_app`.
"""

from __future__ import annotations

import asyncio

from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.runtime import Service, Settings
from skyqa.runtime.stage import Completion, Stage
from skyqa.v1 import fusion_pb2, landmark_pb2, render_pb2

from services.landmark.collection import REQUESTER, RunData, assemble, check_views, make_plan, render_job
from services.landmark.plan import LandmarkPlan
from services.landmark.review_app import setup_review
from services.landmark.web import mount_review_web

NAME = "landmark"
STAGE = "landmark"
FUSED = topology.ConsumerSpec("landmark-collect", topology.EVENTS_STREAM, topology.FUSION_COMPLETED)
RENDERED = topology.ConsumerSpec(
    "landmark-rendered", topology.EVENTS_STREAM, topology.render_done_subject(REQUESTER)
)


async def setup(svc: Service) -> None:
    stage = Stage(svc, STAGE)
    runs = RunData(svc.store)

    async def finish(plan: LandmarkPlan, trace_id: str) -> None:
        info, kept = await asyncio.to_thread(assemble, plan, svc.store)
        event = landmark_pb2.LandmarksCollected(
            run_id=plan.run_id,
            scene_id=plan.scene_id,
            instances=info.to_ref(),
            candidates=plan.candidate_pairs,
            kept=kept,
        )
        total = len(plan.candidates)
        message = f"{kept} landmarks kept of {plan.candidate_pairs} candidates"
        outputs = {"landmarks_raw": info.key}
        completion = Completion(topology.LANDMARKS_COLLECTED, event, total, total, message, outputs)
        await stage.announce(plan.run_id, trace_id, completion)

    async def on_fused(done: fusion_pb2.FusionCompleted, d: Delivery) -> None:
        plan = await asyncio.to_thread(make_plan, done, svc.store)
        jobs = [(f"{REQUESTER}:{cand.key}", render_job(plan, cand)) for cand in plan.candidates]
        message = f"rendering views of {len(jobs)} candidates"
        if not await stage.scatter(done.run_id, topology.RENDER_JOB, jobs, d.trace_id, message):
            await finish(plan, d.trace_id)

    async def on_rendered(done: render_pb2.RenderDone, d: Delivery) -> None:
        plan, cloud = await asyncio.to_thread(runs.get, done.run_id, done.scene_id)
        await asyncio.to_thread(check_views, plan, done, cloud, svc.store)
        total = len(plan.candidates)
        if await stage.gathered(done.run_id, done.correlation, total, f"checked {done.correlation}"):
            await finish(plan, d.trace_id)

    mount_review_web(svc, await setup_review(svc))
    svc.bus.handle(FUSED, fusion_pb2.FusionCompleted, on_fused, stage=STAGE)
    svc.bus.handle(
        RENDERED, render_pb2.RenderDone, on_rendered, stage=STAGE, concurrency=svc.settings.concurrency
    )


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
