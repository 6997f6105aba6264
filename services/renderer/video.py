"""Render one mission video: frames along the trajectory, per-frame target visibility, H.264 MP4.

A frame shows the landmark when its instance pixels cover ``skyqa.geometry.visibility``'s
share of the frame; UAV-DualCog's face-grid statistics are measured alongside for its readers,
with the frame's own depth buffer as the occluder (UAV-DualCog uses the Stage-1 cloud, which
misses thin occluders). The box is measured on the instance mask. A mission whose MP4 and
``frame_visibility.jsonl`` exist is complete and is not rendered again.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from PIL import Image
from skyqa import keys, media
from skyqa.blob import BlobStore
from skyqa.contracts.missions import FrameVisibility, TargetFrameStat
from skyqa.errors import InvalidInput
from skyqa.geometry.visibility import (
    DEPTH_MARGIN_M,
    box_surface_grid,
    frame_visible,
)
from skyqa.sim import CameraSpec, Frame, Intrinsics, Pose, Simulator, project
from skyqa.v1 import render_pb2
from skyqa.video import Mp4Writer, discard

MAX_FRAMES = 6000  # 10 minutes at 10 FPS
MIN_COMPLETE_BYTES = 1024


def validate_video_job(job: render_pb2.VideoJob) -> None:
    keys.validate_id(job.run_id, "run id")
    keys.validate_id(job.requester, "requester")
    keys.validate_id(job.job_id, "mission id")
    keys.validate_key(job.output_prefix)
    if not job.HasField("program") and not 1 <= len(job.poses) <= MAX_FRAMES:
        raise InvalidInput(f"a video job needs 1..{MAX_FRAMES} poses, got {len(job.poses)}")
    if not (16 <= job.width <= 4096 and 16 <= job.height <= 3072) or job.width % 2 or job.height % 2:
        raise InvalidInput(
            f"video size must be even and within 16x16..4096x3072, got {job.width}x{job.height}"
        )
    if job.archive_width or job.archive_height:
        if not (job.width <= job.archive_width <= 4096 and job.height <= job.archive_height <= 3072):
            raise InvalidInput("archive size must be at least the video size and at most 4096x3072")
        if abs(job.archive_width / job.archive_height - job.width / job.height) > 0.01:
            raise InvalidInput("archive frames must have the video's aspect ratio")
    if not 1.0 <= job.fps <= 60.0:
        raise InvalidInput(f"fps must be 1..60, got {job.fps}")
    if not 10.0 <= job.fov_deg <= 170.0:
        raise InvalidInput(f"video fov must be 10..170 degrees, got {job.fov_deg}")
    if not 100_000 <= job.bitrate <= 100_000_000:
        raise InvalidInput(f"bitrate must be 100 kb/s..100 Mb/s, got {job.bitrate}")
    validate_geometry(job)


def validate_geometry(job: render_pb2.VideoJob) -> None:
    """Its JPEG quality, and every target's box and every pose finite."""
    if not 1 <= job.jpeg_quality <= 100:
        raise InvalidInput(f"jpeg quality must be 1..100, got {job.jpeg_quality}")
    for t in job.targets:
        if len(t.center) != 3 or len(t.size) != 3 or not np.all(np.isfinite([*t.center, *t.size])):
            raise InvalidInput(f"target {t.landmark_id} needs a finite 3D centre and size")
    for i, p in enumerate(job.poses):
        if not np.all(np.isfinite([p.x, p.y, p.z, p.yaw_deg, p.pitch_deg, p.roll_deg])):
            raise InvalidInput(f"pose {i} is not finite")


def measure(
    grid: NDArray[np.float64],
    instance_id: int,
    pose: Pose,
    k: Intrinsics,
    depth: NDArray[np.float32],
    instance: NDArray[np.uint32],
) -> TargetFrameStat:
    px, d = project(grid, pose, k)
    inframe = (d > 0.05) & (px[:, 0] >= 0) & (px[:, 0] < k.width) & (px[:, 1] >= 0) & (px[:, 1] < k.height)
    cols, rows = px[inframe, 0].astype(int), px[inframe, 1].astype(int)
    seen = d[inframe] <= depth[rows, cols] + DEPTH_MARGIN_M
    count = int(seen.sum())
    # a hidden sample whose pixel shows the target itself is on its far side; one that shows
    # something else is occluded by that (the most frequent such id names the occluder)
    shown = instance[rows[~seen], cols[~seen]]
    others = shown[shown != instance_id]
    occluder = int(np.bincount(others).argmax()) if len(others) else 0
    ratio = count / len(grid)
    mask = instance == instance_id
    pixels = int(mask.sum())
    box = [0, 0, 0, 0]
    if pixels:
        ys, xs = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
        box = [int(xs[0]), int(ys[0]), int(xs[-1]) + 1, int(ys[-1]) + 1]
    return TargetFrameStat(
        instance_id=instance_id,
        is_visible=frame_visible(pixels, k.width, k.height),
        visible_ratio=round(ratio, 4),
        visible_point_count=count,
        target_inframe_point_count=int(inframe.sum()),
        occluded_point_count=len(others),
        occluder_instance_id=occluder,
        sample_count=len(grid),
        pixels=pixels,
        bbox_xyxy=box,
    )


G = TypeVar("G", bound=np.generic)


def _nearest(img: NDArray[G], width: int, height: int) -> NDArray[G]:
    rows = ((np.arange(height) + 0.5) * img.shape[0] / height).astype(int)
    cols = ((np.arange(width) + 0.5) * img.shape[1] / width).astype(int)
    picked: NDArray[G] = img[rows][:, cols]
    return picked


class FrameSink:
    """Runs each frame's encoding and storing on one thread, in frame order, while the next
    frame renders. The encoders (x264, OpenCV) release the GIL for their whole call, so they
    use the core the single-threaded parts of rendering leave free (Open3D's cast holds the
    GIL, so nothing overlaps the cast's own Python call). At most one frame waits, so memory
    stays at two frames; the first error is raised in the caller."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="frame-sink")
        self._pending: Future[bytes] | None = None
        self.results: list[bytes] = []

    def submit(self, fn: Callable[..., bytes], *args: Any) -> None:
        self._drain()
        self._pending = self._pool.submit(fn, *args)

    def _drain(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.results.append(pending.result())

    def __enter__(self) -> FrameSink:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        try:
            if exc_type is None:
                self._drain()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)


def done_event(job: render_pb2.VideoJob, frames: int) -> render_pb2.VideoDone:
    return render_pb2.VideoDone(
        run_id=job.run_id,
        job_id=job.job_id,
        requester=job.requester,
        correlation=job.correlation,
        scene_id=job.scene_id,
        frame_count=frames,
        width=job.width,
        height=job.height,
        fps=job.fps,
        archive_width=job.archive_width,
        archive_height=job.archive_height,
    )


def reuse(done: render_pb2.VideoDone, store: BlobStore, video_key: str, field: str, marker_key: str) -> bool:
    """Whether the job's MP4 and its marker file (written last, ``field`` of the done event) are
    both stored: the job is complete and ``done`` now says so."""
    video, marker = store.head(video_key), store.head(marker_key)
    if not (video and marker and video.size >= MIN_COMPLETE_BYTES):
        return False
    done.video.CopyFrom(video.to_ref())
    getattr(done, field).CopyFrom(marker.to_ref())
    done.reused = True
    return True


def encoded(writer: Mp4Writer) -> bytes:
    """The closed writer's MP4, its temporary file removed."""
    try:
        with open(writer.path, "rb") as fh:
            return fh.read()
    finally:
        discard(writer.path)


def render_video(
    job: render_pb2.VideoJob, sim: Simulator, store: BlobStore, on_frame: Callable[[], None] | None = None
) -> render_pb2.VideoDone:
    validate_video_job(job)
    video_key = f"{job.output_prefix}/{keys.VIDEO}"
    vis_key = f"{job.output_prefix}/{keys.FRAME_VISIBILITY}"
    done = done_event(job, len(job.poses))
    if reuse(done, store, video_key, "frame_visibility", vis_key):
        return done
    archive = bool(job.archive_width)
    cam_w, cam_h = (job.archive_width, job.archive_height) if archive else (job.width, job.height)
    camera = CameraSpec(cam_w, cam_h, job.fov_deg)
    k = Intrinsics.from_fov(job.width, job.height, job.fov_deg)
    grids = [(t.instance_id, box_surface_grid(np.array(t.center), np.array(t.size))) for t in job.targets]
    with Mp4Writer(job.width, job.height, job.fps, int(job.bitrate)) as writer, FrameSink() as sink:

        def emit(i: int, pose: Pose, frame: Frame) -> bytes:
            """Everything after the ray cast, for one frame, in frame order."""
            rgb, depth, instance, semantic = frame.rgb, frame.depth, frame.instance, frame.semantic
            if archive:
                store.put(
                    f"{job.output_prefix}/{keys.video_frame('archive', i)}",
                    media.encode_jpeg(rgb, job.jpeg_quality),
                    "image/jpeg",
                )
                rgb = np.asarray(Image.fromarray(rgb).resize((job.width, job.height), Image.Resampling.BOX))
                depth = _nearest(depth, job.width, job.height)
                instance = _nearest(instance, job.width, job.height)
                semantic = _nearest(semantic, job.width, job.height)
            writer.write(rgb)
            store.put(
                f"{job.output_prefix}/{keys.video_frame('frames', i)}",
                media.encode_jpeg(rgb, job.jpeg_quality),
                "image/jpeg",
            )
            store.put(
                f"{job.output_prefix}/{keys.video_frame('seg', i)}",
                media.encode_segmentation(semantic, instance),
                "image/png",
            )
            stats = [measure(g, iid, pose, k, depth, instance) for iid, g in grids]
            if on_frame is not None:
                on_frame()
            return (
                FrameVisibility(frame=i, time_sec=round(i / job.fps, 4), targets=stats)
                .model_dump_json()
                .encode()
            )

        for i, p in enumerate(job.poses):
            pose = Pose(p.x, p.y, p.z, p.yaw_deg, p.pitch_deg, p.roll_deg)
            sink.submit(emit, i, pose, sim.render(pose, camera))
    rows = sink.results
    done.video.CopyFrom(store.put(video_key, encoded(writer), "video/mp4").to_ref())
    # written last: its presence (with the MP4) marks the mission rendered
    done.frame_visibility.CopyFrom(
        store.put(vis_key, b"\n".join(rows) + b"\n", "application/x-ndjson").to_ref()
    )
    return done
