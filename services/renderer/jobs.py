"""Which renderer a video job takes: a survey's ultra-resolution stills, an action program's
executed trajectory, or a mission video along recorded poses; and the file whose presence marks
each kind complete (the renderer reuses a complete job instead of rendering it again)."""

from __future__ import annotations

from collections.abc import Callable

from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.sim import Simulator
from skyqa.v1 import render_pb2

from services.renderer.survey import render_survey
from services.renderer.trajectory import render_trajectory
from services.renderer.video import render_video

Render = Callable[
    [render_pb2.VideoJob, Simulator, BlobStore, Callable[[], None] | None], render_pb2.VideoDone
]


def renderer_for(job: render_pb2.VideoJob) -> Render:
    if job.survey:
        return render_survey
    return render_trajectory if job.HasField("program") else render_video


def completion_marker(job: render_pb2.VideoJob) -> str:
    name = keys.SURVEY if job.survey else keys.EXECUTION if job.HasField("program") else keys.FRAME_VISIBILITY
    return f"{job.output_prefix}/{name}"
