"""The QA stage's reading of stored segmentation frames (UAV-DualCog's visibility rows check
every frame of every mission): the previous code, Pillow decoding one frame after another,
against ``skyqa.families.frames.per_frame`` (OpenCV, several frames at a time), on the same
1440x1080 frames in the same run."""

from __future__ import annotations

import io
import tempfile
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image
from skyqa import media
from skyqa.blob import LocalBlobStore
from skyqa.families.frames import READERS, per_frame
from skyqa.sim import BuiltinSimulator, CameraSpec, Pose


def _previous_decode(data: bytes) -> NDArray[np.uint32]:
    """The instance map as ``media.decode_segmentation`` read it before OpenCV."""
    img = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    return (img[:, :, 1].astype(np.uint32) | (img[:, :, 2].astype(np.uint32) << 8)).astype(np.uint32)


def segmentation_reads(sim: BuiltinSimulator, frames: int = 48) -> dict[str, Any]:
    camera = CameraSpec(1440, 1080, 90.0)
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalBlobStore(tmp)
        keys, ids = [], []
        for i in range(frames):
            f = sim.render(Pose(-60.0 + 2.5 * i, -50.0, 40.0, 60.0 + i, -30.0), camera)
            keys.append(f"seg/frame_{i:06d}.png")
            store.put(keys[-1], media.encode_segmentation(f.semantic, f.instance), "image/png")
            ids.append(int(np.bincount(f.instance.ravel()).argmax()))
        target = max(set(ids), key=ids.count)  # an instance most frames show

        def share(instance: NDArray[np.uint32]) -> float:
            return float((instance == target).mean())

        t = time.perf_counter()
        before = [share(_previous_decode(store.get(k))) for k in keys]
        previous_s = time.perf_counter() - t
        t = time.perf_counter()
        now = per_frame(store, keys, share)
        current_s = time.perf_counter() - t
    assert now == before, "the two readers disagree"
    return {
        "frames": frames,
        "size": "1440x1080",
        "readers": READERS,
        "previous_frames_per_s": frames / previous_s,
        "frames_per_s": frames / current_s,
        "speedup": previous_s / current_s,
    }


if __name__ == "__main__":
    from skyqa.sim import load_scene

    print(segmentation_reads(BuiltinSimulator(load_scene("tiny_town"))))
