"""Fusion service wiring: capture completed -> fused cloud -> fusion completed."""

from __future__ import annotations

import asyncio

from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.runtime import Service, Settings
from skyqa.runtime.stage import Completion, Stage
from skyqa.v1 import capture_pb2

from services.fusion.fuse import fuse

STAGE = "fusion"
NAME = "fusion"

CONSUMER = topology.ConsumerSpec("fusion", topology.EVENTS_STREAM, topology.CAPTURE_COMPLETED)


async def setup(svc: Service) -> None:
    progress, _ = svc.require()
    stage = Stage(svc, STAGE)

    async def on_capture_completed(done: capture_pb2.CaptureCompleted, d: Delivery) -> None:
        await progress.report(done.run_id, STAGE, 0, 1, message=f"fusing {done.frames} frames")
        result = await asyncio.to_thread(fuse, done, svc.store)
        svc.metrics.points.labels(NAME).inc(result.points)
        message = (
            f"{result.points} points, {result.instance_count} instances, coverage {result.coverage_ratio:.2f}"
        )
        outputs = {
            "cloud_pcd": result.cloud_pcd.key,
            "instances": result.instances.key,
            "meta": result.meta.key,
            "preview_topdown": result.preview_topdown.key,
            "preview_oblique": result.preview_oblique.key,
        }
        completion = Completion(topology.FUSION_COMPLETED, result, 1, 1, message, outputs)
        await stage.announce(done.run_id, d.trace_id, completion)

    svc.bus.handle(CONSUMER, capture_pb2.CaptureCompleted, on_capture_completed, stage=STAGE)


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
