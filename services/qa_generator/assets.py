"""Assets recorded in the ``render_requests`` sidecar: reference overlays, env observations,
video clips and degraded views.

Each is a pure function of the sidecar entry (and the scene, or the mission's stored frames),
so ``skyqa refresh`` re-creates them byte for byte (one encoder thread keeps x264 deterministic).
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
from PIL import Image, ImageDraw
from skyqa import keys, media
from skyqa.blob import BlobStore
from skyqa.contracts.qa import ClipRequest, DegradeRequest, EnvRequest, OverlayRequest, ViewRequest
from skyqa.degrade import degraded_jpeg
from skyqa.sim import CameraSpec, Pose, Simulator
from skyqa.video import Mp4Writer, discard

JPEG_QUALITY = 80
RED = (255, 0, 0)


def draw_overlay(store: BlobStore, run_root: str, req: OverlayRequest) -> None:
    img = Image.open(io.BytesIO(store.get(f"{run_root}/{req.source_image}"))).convert("RGB")
    w, h = img.size
    x0, y0, x1, y1 = req.bbox_xyxy_norm
    width = max(2, round(min(w, h) / 160))
    ImageDraw.Draw(img).rectangle([x0 * w, y0 * h, x1 * w - 1, y1 * h - 1], outline=RED, width=width)
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=JPEG_QUALITY)
    store.put(f"{run_root}/{req.output_image}", buf.getvalue(), "image/jpeg")


def degrade_view(store: BlobStore, run_root: str, req: DegradeRequest) -> None:
    data, _ = degraded_jpeg(store.get(f"{run_root}/{req.source_image}"), req.degradation, req.marked)
    store.put(f"{run_root}/{req.output_image}", data, "image/jpeg")


def cut_clips(store: BlobStore, run_root: str, reqs: list[ClipRequest]) -> None:
    """Each request's mission frames 0..``end_frame`` as an MP4 with the mission video's
    settings. The clips of one mission are cut in one pass over its frames: each frame is read
    and decoded once and fed to every clip that still needs it."""
    by_mission: dict[str, list[ClipRequest]] = {}
    for r in reqs:
        by_mission.setdefault(r.frames_prefix, []).append(r)
    for prefix, clips in sorted(by_mission.items()):
        with contextlib.ExitStack() as stack:  # a failure closes and discards every writer
            writers = [stack.enter_context(Mp4Writer(c.width, c.height, c.fps, c.bitrate)) for c in clips]
            for i in range(max(c.end_frame for c in clips) + 1):
                jpeg = store.get(f"{run_root}/{prefix}/{keys.video_frame('frames', i)}")
                rgb = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))
                for c, w in zip(clips, writers, strict=True):
                    if i <= c.end_frame:
                        w.write(rgb)
        try:
            for c, w in zip(clips, writers, strict=True):
                with open(w.path, "rb") as fh:
                    store.put(f"{run_root}/{c.output_video}", fh.read(), "video/mp4")
        finally:
            for w in writers:
                discard(w.path)


def render_view(store: BlobStore, run_root: str, req: ViewRequest, sim: Simulator) -> None:
    """What the renderer does for a landmark view at the shipped size, for the refresh path."""
    frame = sim.render(Pose(*req.pose), CameraSpec(req.width, req.height, req.fov_deg))
    store.put(f"{run_root}/{req.output_image}", media.encode_jpeg(frame.rgb, req.jpeg_quality), "image/jpeg")
    store.put(f"{run_root}/{req.output_depth}", media.encode_depth(frame.depth), "image/png")
    store.put(
        f"{run_root}/{req.output_segmentation}",
        media.encode_segmentation(frame.semantic, frame.instance),
        "image/png",
    )


def render_env(store: BlobStore, run_root: str, req: EnvRequest, sim: Simulator) -> None:
    """What the renderer does for a still view, for the refresh path that has no bus."""
    frame = sim.render(Pose(*req.pose), CameraSpec(req.width, req.height, req.fov_deg))
    store.put(f"{run_root}/{req.output_image}", media.encode_jpeg(frame.rgb, JPEG_QUALITY), "image/jpeg")
    store.put(
        f"{run_root}/{req.output_segmentation}",
        media.encode_segmentation(frame.semantic, frame.instance),
        "image/png",
    )
