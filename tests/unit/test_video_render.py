"""Mission video rendering: frame outputs are written by a sink thread, in order, and its errors
reach the caller."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from skyqa import keys, media
from skyqa.blob import BlobInfo, LocalBlobStore
from skyqa.sim import BuiltinSimulator, CameraSpec, Pose, load_scene, look_at
from skyqa.sim.classes import CLASSES, by_name
from skyqa.sim.mesh import box
from skyqa.sim.scene import Scene, SceneObject
from skyqa.v1 import common_pb2, render_pb2
from skyqa.video import probe

from services.renderer.video import render_video


@pytest.fixture(scope="module")
def town() -> BuiltinSimulator:
    return BuiltinSimulator(load_scene("tiny_town"))


def _job(frames: int = 6) -> render_pb2.VideoJob:
    job = render_pb2.VideoJob(
        run_id="r",
        job_id="orbit",
        scene_id="tiny_town",
        width=96,
        height=72,
        fov_deg=90.0,
        fps=10.0,
        bitrate=1_000_000,
        jpeg_quality=90,
        output_prefix="runs/r/video",
        requester="test",
    )
    for a in np.linspace(0.0, np.pi, frames):
        eye = np.array([40 * np.cos(a), 40 * np.sin(a), 25.0])
        yaw, pitch = look_at(eye, np.zeros(3))
        job.poses.append(common_pb2.Pose(x=eye[0], y=eye[1], z=eye[2], yaw_deg=yaw, pitch_deg=pitch))
    return job


def test_frames_are_stored_in_order_and_match_a_fresh_render(town: BuiltinSimulator, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    job = _job()
    done = render_video(job, town, store)
    rows = [
        json.loads(line) for line in store.get(f"{job.output_prefix}/{keys.FRAME_VISIBILITY}").splitlines()
    ]
    assert [r["frame"] for r in rows] == list(range(len(job.poses)))
    (tmp_path / "v.mp4").write_bytes(store.get(f"{job.output_prefix}/{keys.VIDEO}"))
    assert probe(str(tmp_path / "v.mp4")).frames == len(job.poses) == done.frame_count
    # the sink wrote each frame's labels from that frame, not a neighbour's
    for i in (0, len(job.poses) - 1):
        p = job.poses[i]
        frame = town.render(Pose(p.x, p.y, p.z, p.yaw_deg, p.pitch_deg), CameraSpec(96, 72, 90.0))
        semantic, instance = media.decode_segmentation(
            store.get(f"{job.output_prefix}/seg/frame_{i:06d}.png")
        )
        assert np.array_equal(semantic, frame.semantic) and np.array_equal(instance, frame.instance)


class _FailingStore(LocalBlobStore):
    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> BlobInfo:
        if key.endswith("seg/frame_000002.png"):
            raise OSError("disk full")
        return super().put(key, data, content_type)


def test_an_error_while_storing_a_frame_fails_the_video_and_marks_nothing_done(
    town: BuiltinSimulator, tmp_path: Path
) -> None:
    store = _FailingStore(tmp_path)
    job = _job()
    with pytest.raises(OSError, match="disk full"):
        render_video(job, town, store)
    assert store.head(f"{job.output_prefix}/{keys.VIDEO}") is None
    assert store.head(f"{job.output_prefix}/{keys.FRAME_VISIBILITY}") is None
    assert store.head(f"{job.output_prefix}/seg/frame_000001.png") is not None  # earlier frames kept


def _street(truck: bool) -> BuiltinSimulator:
    """Ground, a car at the origin and (optionally) a tall truck between it and the camera."""
    grey = (0.5, 0.5, 0.5)
    objects = [
        SceneObject.from_parts(
            0, by_name("ground"), "gray", 0.0, [box(200, 200, 0.1, (0, 0, -0.1), color=grey)]
        ),
        SceneObject.from_parts(1, by_name("car"), "red", 0.0, [box(4.5, 2.0, 1.5, color=(0.8, 0.1, 0.1))]),
    ]
    if truck:
        objects.append(
            SceneObject.from_parts(
                2, by_name("truck"), "white", 0.0, [box(3, 8, 6, (-8, 0, 0), color=(0.9, 0.9, 0.9))]
            )
        )
    return BuiltinSimulator(
        Scene("street", objects, {c.id: c for c in CLASSES}, (-100.0, 100.0, -100.0, 100.0))
    )


@pytest.mark.parametrize("truck", [False, True])
def test_a_target_hidden_behind_another_object_is_measured_occluded_by_it(
    truck: bool, tmp_path: Path
) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    job = _job(1)
    job.poses[0].CopyFrom(common_pb2.Pose(x=-30.0, y=0.0, z=4.0, yaw_deg=0.0, pitch_deg=-5.0))
    job.targets.add(landmark_id="car", instance_id=1, center=[0.0, 0.0, 0.75], size=[4.5, 2.0, 1.5])
    render_video(job, _street(truck), store)
    row = json.loads(store.get(f"{job.output_prefix}/{keys.FRAME_VISIBILITY}").splitlines()[0])
    stat = row["targets"][0]
    assert stat["target_inframe_point_count"] > 0
    if truck:  # the truck stands in the line of sight: most of the car's facing side is behind it
        assert (
            stat["occluder_instance_id"] == 2 and stat["occluded_point_count"] > stat["visible_point_count"]
        )
    else:  # nothing in the way: the hidden samples are the car's own far side
        assert stat["occluder_instance_id"] == 0 and stat["occluded_point_count"] == 0 and stat["pixels"] > 0
