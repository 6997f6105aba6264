"""Render one job of still views: JPEG, segmentation, depth, per-instance pixel statistics.

The segmentation PNG is always written, because the statistics come from it; a view whose
files all exist is not rendered again (its statistics are recomputed from the stored PNG).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from skyqa import keys, media
from skyqa.blob import BlobInfo, BlobStore
from skyqa.errors import InvalidInput
from skyqa.geometry import instance_boxes
from skyqa.sim import CameraSpec, Pose, Simulator
from skyqa.v1 import render_pb2

CONTENT_TYPES = {"rgb": "image/jpeg", "segmentation": "image/png", "depth": "image/png"}
MAX_VIEWS = 64
MAX_PIXELS = 4096 * 3072


def validate_job(job: render_pb2.RenderJob) -> None:
    keys.validate_id(job.run_id, "run id")
    keys.validate_id(job.requester, "requester")
    keys.validate_key(job.output_prefix)
    if not job.views or len(job.views) > MAX_VIEWS:
        raise InvalidInput(f"a render job needs 1..{MAX_VIEWS} views, got {len(job.views)}")
    if not (16 <= job.width <= 4096 and 16 <= job.height <= 3072 and job.width * job.height <= MAX_PIXELS):
        raise InvalidInput(f"render size must be within 16x16..4096x3072, got {job.width}x{job.height}")
    if not 10.0 <= job.fov_deg <= 170.0:
        raise InvalidInput(f"render fov must be 10..170 degrees, got {job.fov_deg}")
    if not 1 <= job.jpeg_quality <= 100:
        raise InvalidInput(f"jpeg quality must be 1..100, got {job.jpeg_quality}")
    unknown = set(job.modalities) - set(keys.STILL_FILES)
    if unknown:
        raise InvalidInput(f"unknown modalities {sorted(unknown)}; use {sorted(keys.STILL_FILES)}")
    ids = [v.view_id for v in job.views]
    if len(set(ids)) != len(ids):
        raise InvalidInput("view ids in a render job must be unique")
    for view_id in ids:
        keys.validate_id(view_id, "view id")
    for v in job.views:
        p = v.pose
        if not np.all(np.isfinite([p.x, p.y, p.z, p.yaw_deg, p.pitch_deg, p.roll_deg])):
            raise InvalidInput(f"view {v.view_id} has a non-finite pose")


def render_job(
    job: render_pb2.RenderJob, sim: Simulator, store: BlobStore, on_frame: Callable[[], None] | None = None
) -> render_pb2.RenderDone:
    validate_job(job)
    camera = CameraSpec(job.width, job.height, job.fov_deg)
    wanted = {"segmentation", *job.modalities}
    done = render_pb2.RenderDone(
        run_id=job.run_id,
        job_id=job.job_id,
        requester=job.requester,
        scene_id=job.scene_id,
        correlation=job.correlation,
        width=job.width,
        height=job.height,
    )
    for view in job.views:
        out = {m: keys.still_view(job.output_prefix, view.view_id, m) for m in wanted}
        infos: dict[str, BlobInfo | None] = {m: store.head(k) for m, k in out.items()}
        stored = media.decode_segmentation(store.get(out["segmentation"])) if all(infos.values()) else None
        # the view's files at another size are an earlier job's (a landmark view checked at a
        # working size, now rendered at the size it ships): this job renders its own
        if stored is not None and stored[1].shape == (job.height, job.width):
            semantic, instance = stored
        else:
            p = view.pose
            frame = sim.render(Pose(p.x, p.y, p.z, p.yaw_deg, p.pitch_deg, p.roll_deg), camera)
            semantic, instance = frame.semantic, frame.instance
            for m in sorted(wanted - {"segmentation"}):
                data = (
                    media.encode_jpeg(frame.rgb, job.jpeg_quality)
                    if m == "rgb"
                    else media.encode_depth(frame.depth)
                )
                infos[m] = store.put(out[m], data, CONTENT_TYPES[m])
            # written last: its presence marks the view complete
            infos["segmentation"] = store.put(
                out["segmentation"], media.encode_segmentation(semantic, instance), "image/png"
            )
            if on_frame is not None:
                on_frame()
        result = done.views.add(view_id=view.view_id)
        for m, info in infos.items():
            if info is not None:
                getattr(result, m).CopyFrom(info.to_ref())
        for box in instance_boxes(instance, semantic):
            result.instances.add(
                instance_id=box.instance_id,
                class_id=box.class_id,
                pixels=box.pixels,
                x0=box.x0,
                y0=box.y0,
                x1=box.x1,
                y1=box.y1,
            )
    return done
