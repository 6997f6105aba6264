"""Capture service wiring: scan requests -> capture jobs -> chunks -> capture completed."""

from __future__ import annotations

import asyncio

from google.protobuf import json_format
from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.contracts import FrameRow, SemanticClassRow, SemanticClassTable
from skyqa.contracts.base import dump_json, dump_jsonl, load_jsonl
from skyqa.runtime import Service, Settings
from skyqa.sim import Simulator, SimulatorCache
from skyqa.v1 import capture_pb2, common_pb2, scan_pb2

from services.capture.planner import plan_jobs
from services.capture.worker import capture_job

STAGE = "capture"
NAME = "capture"

PLANNER = topology.ConsumerSpec("capture-planner", topology.EVENTS_STREAM, topology.SCAN_REQUESTED)
WORKER = topology.ConsumerSpec("capture-worker", topology.EVENTS_STREAM, topology.CAPTURE_JOB)


def frames_manifest_key(run_id: str, scene_id: str) -> str:
    return f"{keys.pcd_map(run_id, scene_id)}/frames_manifest.jsonl"


def classes_key(run_id: str, scene_id: str) -> str:
    return f"{keys.pcd_map(run_id, scene_id)}/{scene_id}.classes.json"


def assemble(
    store: BlobStore, run_id: str, scene_id: str, backend: str, sim: Simulator
) -> tuple[common_pb2.BlobRef, list[FrameRow]]:
    """Merge the per-job manifests into ``frames_manifest.jsonl`` ordered by frame index."""
    prefix = f"{keys.pcd_map(run_id, scene_id)}/manifests/"
    rows: list[FrameRow] = []
    for key in store.list(prefix):
        rows += load_jsonl(FrameRow, store.get(key), "job manifest")
    rows.sort(key=lambda r: r.frame_idx)
    body = dump_jsonl(rows)
    info = store.put(frames_manifest_key(run_id, scene_id), body, "application/x-ndjson")
    store.put(
        f"{keys.pcd_map(run_id, scene_id)}/{scene_id}.frames_manifest.jsonl",
        body,
        "application/x-ndjson",
    )
    table = SemanticClassTable(
        scene_id=scene_id,
        backend=backend,
        classes=[
            SemanticClassRow(id=c.id, name=c.name, category=c.category, stuff=c.stuff)
            for c in sorted(sim.classes().values(), key=lambda c: c.id)
        ],
    )
    store.put(classes_key(run_id, scene_id), dump_json(table), "application/json")
    return info.to_ref(), rows


async def setup(svc: Service) -> None:
    progress, fanin = svc.require()
    sims = SimulatorCache(svc.settings.scenes_dir, svc.settings.airsim, svc.settings.render_threads)

    async def on_scan(req: scan_pb2.ScanRequest, d: Delivery) -> None:
        # A scan request opens its run (the gateway opens it earlier), so that a request that
        # fails validation below is reported on its own run; no other failure creates a run.
        if keys.is_valid_id(req.run_id):
            await progress.open(req.run_id, req.scene_id)
        jobs = await asyncio.to_thread(plan_jobs, req, svc.settings.scenes_dir, svc.settings.evaluation)
        full = jobs[0].scan
        frames = sum(len(j.poses) for j in jobs)
        await asyncio.to_thread(
            svc.store.put,
            keys.scan_request(full.run_id),
            json_format.MessageToJson(full, sort_keys=True).encode(),
            "application/json",
        )
        await progress.report(
            full.run_id,
            STAGE,
            0,
            len(jobs),
            message=f"{frames} poses in {len(jobs)} jobs",
            scene_id=full.scene_id,
        )
        for job in jobs:
            await svc.bus.publish(
                topology.CAPTURE_JOB,
                job,
                msg_id=f"capture-job:{full.run_id}:{job.job_index}",
                run_id=full.run_id,
                trace_id=d.trace_id,
            )

    async def on_job(job: capture_pb2.CaptureJob, d: Delivery) -> None:
        req = job.scan
        sim = await asyncio.to_thread(sims.get, req.backend, req.scene_id)
        rows = await asyncio.to_thread(capture_job, job, sim, svc.store, svc.metrics.frames.labels(NAME).inc)
        fan = await fanin.mark_done(f"{job.run_id}.{STAGE}", str(job.job_index), job.job_count)
        await progress.report(
            job.run_id,
            STAGE,
            fan.done,
            fan.total,
            message=f"job {job.job_index}: {len(rows)} frames",
        )
        if fan.complete and not fan.announced:
            ref, frames = await asyncio.to_thread(
                assemble, svc.store, job.run_id, req.scene_id, req.backend, sim
            )
            count = len(frames)
            failed = sum(1 for r in frames if r.point_source != "lidar")
            done = capture_pb2.CaptureCompleted(
                run_id=job.run_id,
                scene_id=req.scene_id,
                scan=req,
                frames_manifest=ref,
                frames=count,
                failed_frames=failed,
            )
            await svc.bus.publish(
                topology.CAPTURE_COMPLETED,
                done,
                msg_id=f"capture-completed:{job.run_id}",
                run_id=job.run_id,
                trace_id=d.trace_id,
            )
            await fanin.mark_announced(f"{job.run_id}.{STAGE}")
            await progress.report(
                job.run_id,
                STAGE,
                fan.total,
                fan.total,
                common_pb2.RUN_STATUS_COMPLETED,
                f"{count} frames captured",
                outputs={"frames_manifest": ref.key},
            )

    svc.bus.handle(PLANNER, scan_pb2.ScanRequest, on_scan, stage=STAGE)
    svc.bus.handle(WORKER, capture_pb2.CaptureJob, on_job, stage=STAGE, concurrency=svc.settings.concurrency)


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
