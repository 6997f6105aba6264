"""Fusion service wiring: capture completed -> fused cloud -> fusion completed."""

from __future__ import annotations

import asyncio

from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.runtime import Service, Settings
from skyqa.v1 import capture_pb2, common_pb2

from services.fusion.fuse import fuse

STAGE = "fusion"
NAME = "fusion"

CONSUMER = topology.ConsumerSpec("fusion", topology.EVENTS_STREAM, topology.CAPTURE_COMPLETED)


async def setup(svc: Service) -> None:
    progress, _ = svc.require()

    async def on_capture_completed(done: capture_pb2.CaptureCompleted, d: Delivery) -> None:
        await progress.report(done.run_id, STAGE, 0, 1, message=f"fusing {done.frames} frames")
        result = await asyncio.to_thread(fuse, done, svc.store)
        svc.metrics.points.labels(NAME).inc(result.points)
        await svc.bus.publish(
            topology.FUSION_COMPLETED,
            result,
            msg_id=f"fusion-completed:{done.run_id}",
            run_id=done.run_id,
            trace_id=d.trace_id,
        )
        await progress.report(
            done.run_id,
            STAGE,
            1,
            1,
            common_pb2.RUN_STATUS_COMPLETED,
            f"{result.points} points, {result.instance_count} instances, "
            f"coverage {result.coverage_ratio:.2f}",
            outputs={
                "cloud_pcd": result.cloud_pcd.key,
                "instances": result.instances.key,
                "meta": result.meta.key,
                "preview_topdown": result.preview_topdown.key,
                "preview_oblique": result.preview_oblique.key,
            },
        )

    svc.bus.handle(CONSUMER, capture_pb2.CaptureCompleted, on_capture_completed, stage=STAGE)


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
