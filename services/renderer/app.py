"""Renderer service wiring: render jobs -> views in the store -> a done event for the requester."""

from __future__ import annotations

import asyncio

# the renderer loads at start, so a broken install fails start-up instead of the first job
import skyqa.sim.builtin  # noqa: F401
from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.runtime import Service, Settings
from skyqa.sim import SimulatorCache
from skyqa.v1 import render_pb2

from services.renderer.jobs import renderer_for
from services.renderer.worker import render_job

NAME = "renderer"
STAGE = "render"
CONSUMER = topology.ConsumerSpec("renderer", topology.EVENTS_STREAM, topology.RENDER_JOB)
# a mission video holds one delivery for minutes; the bus's keep-alive extends the ack wait
VIDEO_CONSUMER = topology.ConsumerSpec(
    "renderer-video", topology.EVENTS_STREAM, topology.VIDEO_JOB, max_ack_pending=8
)


async def setup(svc: Service) -> None:
    sims = SimulatorCache(svc.settings.scenes_dir, svc.settings.airsim, svc.settings.render_threads)

    async def on_job(job: render_pb2.RenderJob, d: Delivery) -> None:
        sim = await asyncio.to_thread(sims.get, job.backend or "builtin", job.scene_id)
        done = await asyncio.to_thread(render_job, job, sim, svc.store, svc.metrics.frames.labels(NAME).inc)
        await svc.bus.publish(
            topology.render_done_subject(job.requester),
            done,
            msg_id=f"render-done:{job.run_id}:{job.requester}:{job.job_id}",
            run_id=job.run_id,
            trace_id=d.trace_id,
        )

    async def on_video(job: render_pb2.VideoJob, d: Delivery) -> None:
        sim = await asyncio.to_thread(sims.get, job.backend or "builtin", job.scene_id)
        render = renderer_for(job)
        done = await asyncio.to_thread(render, job, sim, svc.store, svc.metrics.frames.labels(NAME).inc)
        await svc.bus.publish(
            topology.video_done_subject(job.requester),
            done,
            msg_id=f"video-done:{job.run_id}:{job.requester}:{job.job_id}",
            run_id=job.run_id,
            trace_id=d.trace_id,
        )

    svc.bus.handle(CONSUMER, render_pb2.RenderJob, on_job, stage=STAGE, concurrency=svc.settings.concurrency)
    svc.bus.handle(
        VIDEO_CONSUMER, render_pb2.VideoJob, on_video, stage=STAGE, concurrency=svc.settings.concurrency
    )


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
