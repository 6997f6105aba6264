"""Stage 1 end to end on real servers: scan request -> capture -> fusion, against ground truth."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
from skyqa import keys, scan
from skyqa.blob import BlobStore, S3BlobStore, sha256_hex
from skyqa.bus import Bus, topology
from skyqa.contracts import FrameRow, InstanceTable, load_json
from skyqa.geometry import read_pcd
from skyqa.runtime import Service
from skyqa.servers import NatsServer, SeaweedS3
from skyqa.settings import Settings
from skyqa.sim import load_scene
from skyqa.v1 import common_pb2, scan_pb2
from stage_helpers import Probe, small_scan

from services.capture import app as capture_app
from services.embedded import publish_scan, read_run, wait_for_run
from services.fusion import app as fusion_app


@pytest.fixture
async def stage1(settings: Settings, s3_store: S3BlobStore) -> AsyncIterator[list[Service]]:
    # two capture replicas share the scan's jobs through one durable consumer
    services = [
        capture_app.create(settings, s3_store),
        capture_app.create(settings, s3_store),
        fusion_app.create(settings, s3_store),
    ]
    for svc in services:
        await svc.start(http=True)
    yield services
    for svc in services:
        await svc.stop()


async def test_scan_fuses_the_ground_truth_instances(
    stage1: list[Service], settings: Settings, s3_store: S3BlobStore, unique: str
) -> None:
    req = small_scan(f"gt-{unique}")
    await publish_scan(settings.bus.nats_url, req)
    state = await wait_for_run(settings.bus.nats_url, req.run_id, "fusion", 240)
    assert state.stages["fusion"].status == "completed", state.errors
    assert state.stages["capture"].done == state.stages["capture"].total == 9  # 25 poses / 3 per job
    per_replica = [svc.metrics.frames.labels("capture")._value.get() for svc in stage1[:2]]
    assert sum(per_replica) == 25, per_replica
    assert min(per_replica) > 0, per_replica

    table = load_json(InstanceTable, s3_store.get(state.outputs["instances"]))
    assert table.instance_source == "sensor"
    found = {i.instance_id: i for i in table.instances}
    truth = load_scene("tiny_town").things()
    big = [
        o
        for o in truth
        if max(o.size[:2]) >= 4.0 and o.size[2] >= 3.0 and abs(o.center[0]) < 50 and abs(o.center[1]) < 50
    ]
    assert len(big) >= 10
    for obj in big:
        got = found.get(obj.instance_id)
        assert got is not None, f"{obj.semantic.name} {obj.instance_id} at {obj.center} not fused"
        assert got.class_name == obj.semantic.name
        tol = max(1.5, 0.3 * float(max(obj.size[:2])))
        assert np.linalg.norm(np.array(got.center[:2]) - obj.center[:2]) < tol
        # observed points lie inside the object's true box
        assert np.all(np.array(got.aabb_min) >= obj.aabb_min - 0.3)
        assert np.all(np.array(got.aabb_max) <= obj.aabb_max + 0.3)

    cloud = read_pcd(s3_store.get(state.outputs["cloud_pcd"]))
    assert set(cloud.dtype.names or ()) >= {"x", "y", "z", "class_id", "instance_id"}
    assert len(cloud) == json.loads(s3_store.get(state.outputs["meta"]))["dedup_points"]
    rows = [load_json(FrameRow, line) for line in s3_store.get(state.outputs["frames_manifest"]).splitlines()]
    assert [r.frame_idx for r in rows] == list(range(25))
    assert s3_store.get(state.outputs["preview_topdown"]).startswith(b"\x89PNG")


async def test_health_ready_and_metrics(stage1: list[Service]) -> None:
    async with httpx.AsyncClient() as client:
        for svc in stage1:
            base = f"http://127.0.0.1:{svc.port}"
            assert (await client.get(f"{base}/healthz")).status_code == 200
            ready = await client.get(f"{base}/readyz")
            assert ready.status_code == 200
            assert ready.json()["checks"]["bus"] is True
            metrics = (await client.get(f"{base}/metrics")).text
            assert "skyqa_handler_duration_seconds" in metrics
            assert "skyqa_messages_handled_total" in metrics


def x_bounds(xmin: float, xmax: float) -> Callable[[scan_pb2.ScanRequest], None]:
    def mutate(r: scan_pb2.ScanRequest) -> None:
        r.bound.xmin, r.bound.xmax = xmin, xmax

    return mutate


@pytest.mark.parametrize(
    ("mutate", "reason", "fragment"),
    [
        (lambda r: setattr(r, "scene_id", "atlantis"), "unknown_scene", "unknown scene"),
        (x_bounds(90.0, -90.0), "invalid_scan_request", "MapBound"),
        (lambda r: setattr(r.fusion, "voxel_size_m", -1.0), "invalid_scan_request", "voxel"),
        (lambda r: setattr(r, "spacing_x_m", -10.0), "invalid_scan_request", "spacing"),
        (lambda r: setattr(r.camera, "jpeg_quality", 500), "invalid_scan_request", "jpeg"),
        (x_bounds(5000.0, 5100.0), "invalid_scan_request", "overlap"),
        (None, "invalid_input", "not a valid skyqa.v1.ScanRequest"),
    ],
)
async def test_malformed_scan_requests_get_error_events_and_store_nothing(
    stage1: list[Service],
    settings: Settings,
    s3_store: S3BlobStore,
    unique: str,
    probe: Probe,
    mutate: Callable[[scan_pb2.ScanRequest], None] | None,
    reason: str,
    fragment: str,
) -> None:
    errors = await probe.collect(topology.error_subject("capture"), common_pb2.ErrorEvent)
    before = s3_store.list("")
    run_id = f"bad-{unique}"
    if mutate is None:
        await probe.bus.js.publish(
            topology.SCAN_REQUESTED, b"\x0a\xffgarbage", headers={"Skyqa-Run-Id": run_id}
        )
    else:
        req = small_scan(run_id)
        mutate(req)
        await probe.bus.publish(topology.SCAN_REQUESTED, req, msg_id=f"scan:{run_id}", run_id=run_id)
    if mutate is None:
        # the header's run id is a claim: the failure is reported on no run, and none is made
        event = await Probe.first(errors, lambda e: e.payload_sha256 == sha256_hex(b"\x0a\xffgarbage"))
        assert event.reason == reason and fragment in event.message and event.run_id == ""
        await asyncio.sleep(0.5)
        assert await read_run(settings.bus.nats_url, run_id) is None
    else:
        event = await Probe.first(errors, lambda e: e.run_id == run_id)
        assert event.reason == reason and fragment in event.message
        state = await wait_for_run(settings.bus.nats_url, run_id, "fusion", 10)
        assert state.status == "failed"
        assert fragment in state.errors[0]
    assert s3_store.list("") == before


def _serve_capture(nats: NatsServer, s3: SeaweedS3, bucket: str, tmp: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SKYQA_BUS__NATS_URL": nats.url,
        "SKYQA_BUS__ACK_WAIT_S": "2",
        "SKYQA_BUS__RETRY_BASE_S": "0.2",
        "SKYQA_BUS__FETCH_TIMEOUT_S": "0.5",
        "SKYQA_STORE__BACKEND": "s3",
        "SKYQA_STORE__S3_ENDPOINT": s3.endpoint,
        "SKYQA_STORE__S3_ACCESS_KEY": s3.access_key,
        "SKYQA_STORE__S3_SECRET_KEY": s3.secret_key,
        "SKYQA_STORE__S3_BUCKET": bucket,
        "SKYQA_HTTP__PORT": "0",
    }
    log = open(tmp / "capture.log", "ab")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", "serve", "capture"], env=env, stdout=log, stderr=log
    )


async def test_killed_capture_worker_job_completes_once(
    nats_server: NatsServer,
    s3_server: SeaweedS3,
    settings: Settings,
    s3_store: S3BlobStore,
    unique: str,
    tmp_path: Path,
) -> None:
    """SIGKILL the capture process mid-job: a new replica finishes the run, no chunk is duplicated."""
    fusion = fusion_app.create(settings, s3_store)
    await fusion.start(http=False)
    req = small_scan(f"kill-{unique}")
    req.poses_per_job = 25  # one job, so the kill lands inside it
    req.camera.width, req.camera.height = 640, 480
    worker = _serve_capture(nats_server, s3_server, s3_store.bucket, tmp_path)
    try:
        await publish_scan(settings.bus.nats_url, req)
        prefix = f"runs/{req.run_id}/scene_data/tiny_town/pcd_map/raw/builtin/"
        deadline = time.monotonic() + 120
        while len([k for k in s3_store.list(prefix) if k.endswith(".lidarseg.npy")]) < 3:
            assert time.monotonic() < deadline, "capture never started"
            await asyncio.sleep(0.1)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        partial = len([k for k in s3_store.list(prefix) if k.endswith(".lidarseg.npy")])
        assert 3 <= partial < 25
        worker = _serve_capture(nats_server, s3_server, s3_store.bucket, tmp_path)
        state = await wait_for_run(settings.bus.nats_url, req.run_id, "fusion", 240)
        assert state.stages["fusion"].status == "completed", state.errors
        chunks = s3_store.list(prefix)
        assert len(chunks) == 25 * 4
        assert len(set(chunks)) == len(chunks)
        rows = [
            load_json(FrameRow, line) for line in s3_store.get(state.outputs["frames_manifest"]).splitlines()
        ]
        assert sorted(r.frame_idx for r in rows) == list(range(25))
        # completion was announced exactly once
        bus = Bus(settings.bus, "probe")
        await bus.connect()
        info = await bus.js.stream_info(topology.EVENTS_STREAM, subjects_filter=topology.CAPTURE_COMPLETED)
        published = await _count_for_run(bus, topology.CAPTURE_COMPLETED, req.run_id)
        await bus.stop()
        assert info.state.messages >= 1
        assert published == 1
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        await fusion.stop()


async def _count_for_run(bus: Bus, subject: str, run_id: str) -> int:
    sub = await bus.js.subscribe(subject, ordered_consumer=True, deliver_policy=None)
    count = 0
    try:
        while True:
            msg = await sub.next_msg(timeout=1.0)
            count += (msg.headers or {}).get("Skyqa-Run-Id") == run_id
    except Exception:
        pass
    finally:
        await sub.unsubscribe()
    return count


_ = (functools, BlobStore)


async def test_a_second_request_under_a_running_run_id_is_refused_and_the_run_goes_on(
    stage1: list[Service], settings: Settings, s3_store: S3BlobStore, unique: str, probe: Probe
) -> None:
    # every stage reads the run's settings from the stored request while the run goes on: a
    # request with other settings under the same id must neither replace them nor fail the run
    errors = await probe.collect(topology.error_subject("capture"), common_pb2.ErrorEvent)
    run_id = f"twice-{unique}"
    first = small_scan(run_id)
    await probe.bus.publish(topology.SCAN_REQUESTED, first, msg_id=f"scan:{run_id}", run_id=run_id)
    for _ in range(500):  # accepted (its request stored), while its capture jobs still run
        if s3_store.exists(keys.scan_request(run_id)):
            break
        await asyncio.sleep(0.01)
    other = small_scan(run_id)
    other.seed = first.seed + 1
    await probe.bus.publish(topology.SCAN_REQUESTED, other, msg_id=f"scan2:{run_id}", run_id=run_id)
    event = await Probe.first(errors, lambda e: e.run_id == run_id)
    assert event.reason == "run_conflict" and "already exists with other settings" in event.message
    assert scan.stored(s3_store, run_id).seed == first.seed
    state = await wait_for_run(settings.bus.nats_url, run_id, "fusion", 120)
    assert state.status != "failed", state.errors
