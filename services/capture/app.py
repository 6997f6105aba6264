"""Capture service wiring: scan requests -> capture jobs -> chunks -> capture completed."""

from __future__ import annotations

import asyncio

# the renderer loads at start, so a broken install fails start-up instead of the first job
import skyqa.sim.builtin  # noqa: F401
from skyqa import keys, scan
from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.errors import InvalidScanRequest
from skyqa.runtime import Service, Settings
from skyqa.runtime.stage import Completion, Stage
from skyqa.sim import SimulatorCache
from skyqa.v1 import capture_pb2, scan_pb2

from services.capture.manifest import assemble
from services.capture.planner import plan_jobs
from services.capture.worker import capture_job

STAGE = "capture"
NAME = "capture"

PLANNER = topology.ConsumerSpec("capture-planner", topology.EVENTS_STREAM, topology.SCAN_REQUESTED)
WORKER = topology.ConsumerSpec("capture-worker", topology.EVENTS_STREAM, topology.CAPTURE_JOB)


async def setup(svc: Service) -> None:
    stage = Stage(svc, STAGE)
    progress, _ = svc.require()
    sims = SimulatorCache(svc.settings.scenes_dir, svc.settings.airsim, svc.settings.render_threads)

    async def on_scan(req: scan_pb2.ScanRequest, d: Delivery) -> None:
        # A scan request opens its run (the gateway opens it earlier), so that a request that
        # fails validation below is reported on its own run; no other failure creates a run.
        if keys.is_valid_id(req.run_id):
            await progress.open(req.run_id, req.scene_id)
        full, jobs = await asyncio.to_thread(plan_jobs, req, svc.settings.scenes_dir, svc.settings.evaluation)
        frames = sum(len(j.poses) for j in jobs)
        await asyncio.to_thread(scan.store_once, svc.store, full)
        keyed = [(str(job.job_index), job) for job in jobs]
        message = f"{frames} poses in {len(jobs)} jobs"
        if not await stage.scatter(
            full.run_id, topology.CAPTURE_JOB, keyed, d.trace_id, message, full.scene_id
        ):
            raise InvalidScanRequest(f"the scan of run {full.run_id!r} has no poses")

    async def on_job(job: capture_pb2.CaptureJob, d: Delivery) -> None:
        req = await asyncio.to_thread(scan.stored, svc.store, job.run_id)
        sim = await asyncio.to_thread(sims.get, req.backend, req.scene_id)
        count = svc.metrics.frames.labels(NAME).inc
        rows = await asyncio.to_thread(capture_job, job, req, sim, svc.store, count)
        message = f"job {job.job_index}: {len(rows)} frames"
        if not await stage.gathered(job.run_id, str(job.job_index), job.job_count, message):
            return
        ref, frames = await asyncio.to_thread(assemble, svc.store, job.run_id, req.scene_id, req.backend, sim)
        failed = sum(1 for r in frames if r.point_source != "lidar")
        done = capture_pb2.CaptureCompleted(
            run_id=job.run_id,
            scene_id=req.scene_id,
            frames_manifest=ref,
            frames=len(frames),
            failed_frames=failed,
        )
        message = f"{len(frames)} frames captured"
        outputs = {"frames_manifest": ref.key}
        completion = Completion(
            topology.CAPTURE_COMPLETED, done, job.job_count, job.job_count, message, outputs
        )
        await stage.announce(job.run_id, d.trace_id, completion)

    svc.bus.handle(PLANNER, scan_pb2.ScanRequest, on_scan, stage=STAGE)
    svc.bus.handle(WORKER, capture_pb2.CaptureJob, on_job, stage=STAGE, concurrency=svc.settings.concurrency)


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
