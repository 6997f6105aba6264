"""Stage 2 collection on real servers: renderer replicas + landmark service, checked against ground truth."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable

import numpy as np
import pytest
from PIL import Image
from skyqa import keys
from skyqa.blob import S3BlobStore
from skyqa.bus import topology
from skyqa.contracts import InstancesFile, ValidInstancesFile, load_json
from skyqa.models import HeuristicLabeller, openai_app
from skyqa.runtime import Service
from skyqa.servers import ServedApp
from skyqa.settings import ModelEndpoint, Settings
from skyqa.sim import CameraSpec, Pose, load_scene, project
from skyqa.v1 import common_pb2, render_pb2
from stage_helpers import Probe, small_scan

from services.capture import app as capture_app
from services.embedded import publish_scan, wait_for_run
from services.fusion import app as fusion_app
from services.labeller import app as labeller_app
from services.landmark import app as landmark_app
from services.renderer import app as renderer_app


@pytest.fixture
async def pipeline(settings: Settings, s3_store: S3BlobStore) -> AsyncIterator[list[Service]]:
    # the labeller talks to a real OpenAI-compatible HTTP server serving the heuristic model
    served = ServedApp(openai_app(HeuristicLabeller())).__enter__()
    settings.labeller_model = ModelEndpoint(kind="openai", url=served.url + "/v1", model="heuristic-labeller")
    services = [
        labeller_app.create(settings, s3_store),
        capture_app.create(settings, s3_store),
        fusion_app.create(settings, s3_store),
        renderer_app.create(settings, s3_store),
        renderer_app.create(settings, s3_store),
        landmark_app.create(settings, s3_store),
    ]
    for svc in services:
        await svc.start(http=False)
    yield services
    for svc in services:
        await svc.stop()
    served.__exit__()


def gt_box(vertices: np.ndarray, pose: Pose, cam: CameraSpec) -> np.ndarray:
    px, depth = project(vertices, pose, cam.intrinsics)
    assert np.all(depth > 0)
    lo = np.clip(px.min(axis=0), 0, [cam.width, cam.height])
    hi = np.clip(px.max(axis=0), 0, [cam.width, cam.height])
    box: np.ndarray = np.r_[lo, hi]
    return box


def iou(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.clip(np.minimum(a[2:], b[2:]) - np.maximum(a[:2], b[:2]), 0, None).prod()
    area: Callable[[np.ndarray], float] = lambda r: float(np.prod(r[2:] - r[:2]))  # noqa: E731
    return float(inter / (area(a) + area(b) - inter))


async def test_kept_landmarks_have_four_valid_views_with_true_boxes(
    pipeline: list[Service], settings: Settings, s3_store: S3BlobStore, unique: str
) -> None:
    req = small_scan(f"lm-{unique}")
    req.landmark_count = 50  # every candidate; this pipeline has no mission stage
    await publish_scan(settings.bus.nats_url, req)
    state = await wait_for_run(settings.bus.nats_url, req.run_id, "review", 300)
    assert state.stages["review"].status == "completed", state.errors
    doc = load_json(InstancesFile, s3_store.get(state.outputs["landmarks_raw"]))
    assert doc.summary.instances == len(doc.instances) >= 5
    truth = {o.instance_id: o for o in load_scene("tiny_town").things()}
    ious = []
    for lm in doc.instances:
        obj = truth[lm.instance_numeric_id]
        assert lm.class_name == obj.semantic.name
        orbit_valid = [v for v in lm.rgb_views if v.mode == "orbit" and v.is_valid]
        assert len(orbit_valid) >= 4
        assert [v.view_direction for v in lm.rgb_views][-1] == "topdown"
        for v in lm.rgb_views:
            if not v.is_valid:
                continue
            # fused ids are the simulator's here, so the depth-checked vote must find the object
            assert v.rendered_instance_id == obj.instance_id
            w, h = v.bbox_2d_image_size
            cam = CameraSpec(w, h, 72.0)
            c = v.camera
            expected = gt_box(obj.vertices, Pose(c.x, c.y, c.z, c.yaw_deg, c.pitch_deg, c.roll_deg), cam)
            box = np.array(v.bbox_2d_xyxy, dtype=float)
            # the visible part lies inside the projected object, and mostly fills it
            assert np.all(box[:2] >= expected[:2] - 1.0) and np.all(box[2:] <= expected[2:] + 1.0), (
                lm.instance_id,
                v.view_id,
            )
            ious.append(iou(box, expected))
            img = Image.open(io.BytesIO(s3_store.get(keys.stored(req.run_id, v.path))))
            assert img.format == "JPEG" and img.size == (w, h)
    assert np.median(ious) > 0.8

    # labels round-trip into valid_instances.json: kept AND labelled only. The labeller sees no
    # class hint, so it is sure of some landmarks only (from the measured size); the others wait
    # for a person, and every one it approved has the true category
    valid = load_json(ValidInstancesFile, s3_store.get(state.outputs["valid_instances"]))
    assert valid.summary.valid_instances == len(valid.valid_instances) >= len(doc.instances) // 3
    for vi in valid.valid_instances:
        assert vi.review_action == "keep" and vi.annotation_status == "labeled"
        assert vi.auto_label_model == "heuristic-labeller"
        assert vi.landmark_category == truth[vi.instance_numeric_id].semantic.category
        assert len(vi.landmark_description.split()) <= 20
        assert vi.main_view in vi.valid_view_ids and len(vi.valid_view_ids) >= 5


async def test_render_job_with_bad_input_is_rejected(
    pipeline: list[Service], probe: Probe, unique: str
) -> None:
    errors = await probe.collect(topology.error_subject("render"), common_pb2.ErrorEvent)
    run_id = f"rj-{unique}"
    job = render_pb2.RenderJob(
        run_id=run_id, job_id="j", scene_id="tiny_town", width=64, height=48, fov_deg=60, jpeg_quality=80,
        output_prefix="../../etc", requester="probe",
    )  # fmt: skip
    job.views.add(view_id="v0", pose=common_pb2.Pose(z=30, pitch_deg=-90))
    await probe.bus.publish(topology.RENDER_JOB, job, msg_id=f"rj:{unique}", run_id=run_id)
    event = await Probe.first(errors, lambda e: e.run_id == run_id)
    assert event.reason == "invalid_key"
