"""Assets recorded in the ``render_requests`` sidecar: reference overlays and env observations.

Both are pure functions of the sidecar entry (and the scene), so ``skyqa refresh`` re-creates
them byte for byte.
"""

from __future__ import annotations

import io

from PIL import Image, ImageDraw
from skyqa import media
from skyqa.blob import BlobStore
from skyqa.contracts.qa import EnvRequest, OverlayRequest
from skyqa.sim import CameraSpec, Pose, Simulator

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


def render_env(store: BlobStore, run_root: str, req: EnvRequest, sim: Simulator) -> None:
    """What the renderer does for a still view, for the refresh path that has no bus."""
    frame = sim.render(Pose(*req.pose), CameraSpec(req.width, req.height, req.fov_deg))
    store.put(f"{run_root}/{req.output_image}", media.encode_jpeg(frame.rgb, JPEG_QUALITY), "image/jpeg")
    store.put(
        f"{run_root}/{req.output_segmentation}",
        media.encode_segmentation(frame.semantic, frame.instance),
        "image/png",
    )
