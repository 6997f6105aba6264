"""Labeller service wiring: label requests -> the configured model -> label results."""

from __future__ import annotations

from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.models import open_model
from skyqa.runtime import Service, Settings
from skyqa.v1 import labeller_pb2

from services.labeller.labeller import label_landmark

NAME = "labeller"
STAGE = "label"
CONSUMER = topology.ConsumerSpec("labeller", topology.EVENTS_STREAM, topology.LABEL_REQUESTED)


async def setup(svc: Service) -> None:
    model = open_model(svc.settings.labeller_model)
    attempts = min(5, svc.settings.labeller_model.max_attempts)

    async def on_request(request: labeller_pb2.LabelRequest, d: Delivery) -> None:
        result = await label_landmark(request, model, svc.store, attempts, svc.settings.labeller_class_hint)
        await svc.bus.publish(
            topology.LABEL_DONE,
            result,
            msg_id=f"label-done:{request.run_id}:{request.landmark_id}",
            run_id=request.run_id,
            trace_id=d.trace_id,
        )

    svc.bus.handle(
        CONSUMER,
        labeller_pb2.LabelRequest,
        on_request,
        stage=STAGE,
        concurrency=max(2, svc.settings.concurrency),
    )


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
