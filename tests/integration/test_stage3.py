"""Stage 3 against a real nats-server and S3 server: missions, videos, bundles, visibility."""

from __future__ import annotations

import asyncio
import io
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from conftest import Probe, small_scan
from skyqa import keys, media
from skyqa.blob import S3BlobStore
from skyqa.bus import Bus, topology
from skyqa.contracts import ValidInstancesFile, load_json
from skyqa.contracts.missions import (
    ComposedSegments,
    ConstraintReport,
    FrameIndexMap,
    FramesManifest,
    MissionIndex,
    TaskData,
)
from skyqa.runtime import Service, Settings
from skyqa.v1 import common_pb2, mission_pb2
from skyqa.video import probe

from services.capture import app as capture_app
from services.embedded import publish_scan, wait_for_run
from services.fusion import app as fusion_app
from services.labeller import app as labeller_app
from services.landmark import app as landmark_app
from services.mission_planner import app as mission_app
from services.renderer import app as renderer_app

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
async def pipeline(settings: Settings, s3_store: S3BlobStore) -> AsyncIterator[list[Service]]:
    factories = [capture_app, fusion_app, renderer_app, renderer_app, landmark_app, labeller_app, mission_app]
    services = [f.create(settings, s3_store) for f in factories]
    for svc in services:
        await svc.start(http=False)
    yield services
    for svc in services:
        await svc.stop()


@pytest.fixture
async def run(
    pipeline: list[Service], settings: Settings, s3_store: S3BlobStore, unique: str
) -> dict[str, str]:
    req = small_scan(f"m-{unique}")
    await publish_scan(settings.bus.nats_url, req)
    state = await wait_for_run(settings.bus.nats_url, req.run_id, "mission", 600)
    assert state.status == "completed", state.errors
    return {"run_id": req.run_id, **state.outputs}


def seg_visible(png: bytes, instance_id: int, min_pixels: int) -> bool:
    _, instance = media.decode_segmentation(png)
    return int((instance == instance_id).sum()) >= min_pixels


async def test_every_landmark_gets_two_rendered_missions_with_tiled_supervision(
    run: dict[str, str], s3_store: S3BlobStore, tmp_path: Path, bus: Bus
) -> None:
    index = load_json(MissionIndex, s3_store.get(run["missions_index"]))
    valid = load_json(ValidInstancesFile, s3_store.get(run["valid_instances"]))
    assert len(valid.valid_instances) >= 2
    per_landmark: dict[str, set[str]] = {}
    for row in [*index.missions, *index.rejected]:
        kind = "atomic" if "_atomic_" in row.traj_id else "composite"
        per_landmark.setdefault(row.instance_id, set()).add(kind)
    assert per_landmark == {v.instance_id: {"atomic", "composite"} for v in valid.valid_instances}
    assert len(index.missions) >= len(valid.valid_instances)
    cloud = np.load(io.BytesIO(s3_store.get(keys.fused_cloud_npy(run["run_id"], index.scene_id))))
    xyz = np.column_stack([cloud["x"], cloud["y"], cloud["z"]]).astype(np.float64)
    agreements = []
    for row in index.missions:
        root = keys.mission_root(run["run_id"], row.traj_id)
        task = load_json(TaskData, s3_store.get(row.task_data))
        composed = load_json(ComposedSegments, s3_store.get(f"{root}/composed_segments.json"))
        report = load_json(ConstraintReport, s3_store.get(f"{root}/constraint_report.json"))
        manifest = load_json(FramesManifest, s3_store.get(f"{root}/final_task/frames_manifest.json"))
        fmap = load_json(FrameIndexMap, s3_store.get(f"{root}/final_task/frame_index_map.json"))
        assert report.accepted and report.checks.collision.collision_free

        # ffprobe-level facts of the MP4; frame count matches the mission's duration
        path = tmp_path / f"{row.traj_id}.mp4"
        path.write_bytes(s3_store.get(row.video))
        info = probe(str(path))
        assert (info.codec, info.pix_fmt, info.fps, info.width, info.height) == (
            "h264",
            "yuv420p",
            10.0,
            160,
            120,
        )
        n = task.video.frame_count
        assert info.frames == n == manifest.frame_count == len(manifest.frames) == len(fmap.frames)
        assert n == round(composed.summary.duration_sec * 10) + 1
        assert [f.source_idx for f in fmap.frames] == list(range(0, composed.summary.waypoints, 4))

        # no accepted waypoint within the safety distance of the fused cloud (independent check)
        wp = np.load(io.BytesIO(s3_store.get(f"{root}/waypoints.npy"))).astype(np.float64)
        for chunk in np.array_split(wp, max(1, len(wp) // 200)):
            d = np.sqrt(((chunk[:, None, :] - xyz[None, ::3, :]) ** 2).sum(axis=2)).min(axis=1)
            assert d.min() >= 2.0 - 0.2, row.traj_id  # float32 storage and the 1-in-3 subsample

        # behavior intervals tile the video: no gap, no overlap, in event order
        track = task.task_tracks.self_state_awareness
        spans = sorted(
            (i.start_frame, i.end_frame) for b in track.behavior_intervals_sec for i in b.intervals_frame
        )
        assert spans[0][0] == 0 and spans[-1][1] == n - 1
        assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(spans))
        secs = sorted((i.start_sec, i.end_sec) for b in track.behavior_intervals_sec for i in b.intervals_sec)
        assert secs[0][0] == 0.0 and secs[-1][1] == pytest.approx(task.video.duration_sec)
        assert all(b[0] == pytest.approx(a[1]) for a, b in itertools.pairwise(secs))
        assert [r.event_id for r in track.frame_behavior_labels] == sorted(
            r.event_id for r in track.frame_behavior_labels
        )
        assert len(track.frame_behavior_labels) == n

        # visibility intervals agree with an independent recomputation from the segmentation frames
        env = task.task_tracks.environmental_awareness
        flags = np.zeros(n, dtype=bool)
        for iv in env.intervals_frame:
            flags[iv.start_frame : iv.end_frame + 1] = True
        assert env.visible_count == len(env.intervals_frame) and env.visible_frame_count == flags.sum()
        seg = np.array(
            [
                seg_visible(
                    s3_store.get(f"{root}/final_task/seg/frame_{i:06d}.png"),
                    composed.rendered_instance_id,
                    12,
                )
                for i in range(n)
            ]
        )
        agreements.append(float((seg == flags).mean()))
        for box in task.target_presence.bboxes:
            x0, y0, x1, y1 = box.bbox_xyxy_norm
            assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1
            assert flags[box.frame]
    assert min(agreements) >= 0.8 and float(np.mean(agreements)) >= 0.9, agreements

    # a finished mission is skipped: the same job again reuses the stored video
    probe_bus = Probe(bus)
    dones = await probe_bus.collect(topology.video_done_subject("mission"), mission_pb2.VideoDone)
    first = index.missions[0]
    root = keys.mission_root(run["run_id"], first.traj_id)
    job = mission_pb2.VideoJob(
        run_id=run["run_id"],
        job_id=first.traj_id,
        scene_id=index.scene_id,
        width=160,
        height=120,
        fov_deg=90,
        fps=10,
        bitrate=2_000_000,
        jpeg_quality=85,
        output_prefix=f"{root}/final_task",
        requester="mission",
        correlation=first.traj_id,
    )
    job.poses.append(common_pb2.Pose(x=0, y=0, z=50))
    await bus.publish(topology.VIDEO_JOB, job, msg_id=f"again-{first.traj_id}", run_id=run["run_id"])
    done = await Probe.first(dones, lambda d: d.job_id == first.traj_id)
    assert done.reused


async def test_bad_video_job_is_rejected_with_an_error_event(
    pipeline: list[Service], bus: Bus, unique: str
) -> None:
    probe_bus = Probe(bus)
    errors = await probe_bus.collect(topology.error_subject("render"), common_pb2.ErrorEvent)
    job = mission_pb2.VideoJob(
        run_id=f"bad-{unique}",
        job_id="m1",
        scene_id="tiny_town",
        width=161,
        height=120,
        fov_deg=90,
        fps=10,
        bitrate=2_000_000,
        jpeg_quality=85,
        output_prefix=f"runs/bad-{unique}/video_tasks/missions/m1/final_task",
        requester="mission",
    )
    job.poses.append(common_pb2.Pose(x=0, y=0, z=50))
    await bus.publish(topology.VIDEO_JOB, job, msg_id=f"bad-{unique}", run_id=f"bad-{unique}")
    err = await Probe.first(errors, lambda e: e.run_id == f"bad-{unique}")
    assert "even" in err.message
    await asyncio.sleep(0)
