"""The labeller service against real model servers: gRPC, OpenAI-compatible HTTP, and a broken model."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import numpy as np
import pytest
from fastapi import FastAPI
from skyqa import media
from skyqa.blob import S3BlobStore
from skyqa.bus import topology
from skyqa.geometry import instance_boxes, oriented_extent
from skyqa.models import HeuristicLabeller, openai_app, serve_grpc
from skyqa.servers import ServedApp
from skyqa.settings import ModelEndpoint, Settings
from skyqa.sim import BuiltinSimulator, CameraSpec, Pose, load_scene, look_at
from skyqa.v1 import labeller_pb2
from stage_helpers import Probe

from services.labeller import app as labeller_app


@pytest.fixture
def tank_request(s3_store: S3BlobStore, unique: str) -> labeller_pb2.LabelRequest:
    """Four real rendered views of a storage tank, stored like the landmark service stores them."""
    sim = BuiltinSimulator(load_scene("tiny_town"))
    tank = next(o for o in sim.scene.things() if o.semantic.name == "storage_tank")
    # the class hint is sent but, by default, not shown to the model: the size must do
    req = labeller_pb2.LabelRequest(
        run_id=f"lab-{unique}",
        scene_id="tiny_town",
        landmark_id="11_1",
        class_hint="a_bus_hint_the_model_never_sees",
        size_m=oriented_extent(tank.vertices, 0.0),
    )
    for i, (direction, yaw) in enumerate([("front", 0.0), ("right", -90.0), ("back", 180.0), ("left", 90.0)]):
        a = np.radians(yaw)
        eye = tank.center + np.array([-np.cos(a) * 35, -np.sin(a) * 35, 20.0])
        x, y, z = eye
        frame = sim.render(Pose(x, y, z, *look_at(eye, tank.center)), CameraSpec(320, 240, 72.0))
        box = next(
            b for b in instance_boxes(frame.instance, frame.semantic) if b.instance_id == tank.instance_id
        )
        key = f"runs/{req.run_id}/views/{i}.jpg"
        s3_store.put(key, media.encode_jpeg(frame.rgb, 90), "image/jpeg")
        req.views.add(view_id=f"v{i}", image_key=key, direction=direction, bbox_xyxy=box.xyxy, is_main=i == 0)
    return req


async def label_via_service(
    settings: Settings, store: S3BlobStore, probe: Probe, request: labeller_pb2.LabelRequest
) -> tuple[labeller_pb2.LabelResult, float]:
    svc = labeller_app.create(settings, store)
    await svc.start(http=False)
    results = await probe.collect(topology.LABEL_DONE, labeller_pb2.LabelResult)
    started = time.monotonic()
    try:
        await probe.bus.publish(
            topology.LABEL_REQUESTED, request, msg_id=f"lr:{request.run_id}", run_id=request.run_id
        )
        result = await Probe.first(results, lambda r: r.run_id == request.run_id, timeout=60)
    finally:
        await svc.stop()
    return result, time.monotonic() - started


async def test_labeller_through_grpc_model_server(
    settings: Settings, s3_store: S3BlobStore, probe: Probe, tank_request: labeller_pb2.LabelRequest
) -> None:
    server, port = await serve_grpc(HeuristicLabeller())
    settings.labeller_model = ModelEndpoint(kind="grpc", url=f"127.0.0.1:{port}")
    try:
        result, _ = await label_via_service(settings, s3_store, probe, tank_request)
    finally:
        await server.stop(None)
    assert result.ok, result.reason
    assert result.category == "industrial_infrastructure" and result.subcategory == "storage tank"
    assert result.model == "heuristic-labeller" and result.attempts == 1
    assert list(result.views_used) == ["front", "back", "left", "right"]  # main first, then cardinals
    assert "16 m tall" in result.description
    # the white tank's walls, lit at most at the sun's angle to a wall, are also sunlit light
    # gray: the labeller names white or, unsure, no colour; never another one
    assert result.description.partition("storage tank")[0].strip() in ("white", "")


async def test_the_class_hint_reaches_the_model_only_when_configured(
    settings: Settings, s3_store: S3BlobStore, probe: Probe, tank_request: labeller_pb2.LabelRequest
) -> None:
    server, port = await serve_grpc(HeuristicLabeller())
    settings.labeller_model = ModelEndpoint(kind="grpc", url=f"127.0.0.1:{port}")
    settings.labeller_class_hint = True
    try:
        result, _ = await label_via_service(settings, s3_store, probe, tank_request)
    finally:
        await server.stop(None)
    # the heuristic takes a hint over the size: the planted "bus" hint now decides
    assert result.ok and result.category == "vehicle", result


@pytest.fixture
def http_model() -> Iterator[str]:
    with ServedApp(openai_app(HeuristicLabeller())) as served:
        yield served.url + "/v1"


async def test_labeller_through_openai_compatible_server(
    settings: Settings,
    s3_store: S3BlobStore,
    probe: Probe,
    tank_request: labeller_pb2.LabelRequest,
    http_model: str,
) -> None:
    settings.labeller_model = ModelEndpoint(kind="openai", url=http_model, model="heuristic-labeller")
    result, _ = await label_via_service(settings, s3_store, probe, tank_request)
    assert result.ok and result.category == "industrial_infrastructure"
    assert len(result.description.split()) <= 20


async def test_unparseable_model_output_fails_with_a_reason_after_bounded_attempts(
    settings: Settings, s3_store: S3BlobStore, probe: Probe, tank_request: labeller_pb2.LabelRequest
) -> None:
    app = FastAPI()
    calls: list[dict[str, object]] = []

    @app.post("/v1/chat/completions")
    async def chat(body: dict[str, object]) -> dict[str, object]:
        calls.append(body)
        return {
            "choices": [{"message": {"content": "I think it is a big round thing."}, "finish_reason": "stop"}]
        }

    with ServedApp(app) as served:
        settings.labeller_model = ModelEndpoint(
            kind="openai", url=served.url + "/v1", model="broken", max_attempts=3
        )
        result, elapsed = await label_via_service(settings, s3_store, probe, tank_request)
    assert not result.ok and result.attempts == 3
    assert "no JSON object" in result.reason
    assert len(calls) == 3 and elapsed < 30
    # retries ask again at temperature 0 and say what was wrong
    assert calls[0]["temperature"] == 0.2 and calls[1]["temperature"] == 0.0
    assert "previous answer was empty or invalid" in json.dumps(calls[1]["messages"])
