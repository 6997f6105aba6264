"""The renderer's still jobs: a view whose files exist is reused only at the job's own size."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image
from skyqa.blob import LocalBlobStore
from skyqa.sim import BuiltinSimulator, load_scene
from skyqa.v1 import common_pb2, render_pb2

from services.renderer.worker import render_job


def test_a_job_at_a_new_size_renders_over_the_files_of_an_earlier_size(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    sim = BuiltinSimulator(load_scene("tiny_town"))
    job = render_pb2.RenderJob(
        run_id="r", job_id="j", scene_id="tiny_town", backend="builtin", width=64, height=48,
        fov_deg=72.0, jpeg_quality=80, modalities=["rgb", "segmentation", "depth"],
        output_prefix="runs/r/views", requester="t", correlation="c",
    )  # fmt: skip
    job.views.add(view_id="v0", pose=common_pb2.Pose(x=-30, y=-40, z=30, yaw_deg=40, pitch_deg=-30))
    rendered: list[int] = []
    render_job(job, sim, store, lambda: rendered.append(1))
    job.width, job.height = 128, 96  # a landmark view checked small, now shipped
    big = render_job(job, sim, store, lambda: rendered.append(1))
    assert rendered == [1, 1]
    for name in ("rgb.jpg", "seg.png", "depth.png"):
        assert Image.open(io.BytesIO(store.get(f"runs/r/views/v0.{name}"))).size == (128, 96), name
    again = render_job(job, sim, store, lambda: rendered.append(1))  # its own size: reused
    assert rendered == [1, 1] and list(again.views[0].instances) == list(big.views[0].instances)
