"""Subjects, streams and consumers: the one place that names them.

Events live in ``SKYQA_EVENTS`` (limits retention, so several roles can read the same
subject); progress, errors and dead letters have streams of their own so their retention can
differ. Every service declares the whole topology at start-up; declarations are idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import Message

from skyqa.keys import validate_id
from skyqa.v1 import (
    capture_pb2,
    common_pb2,
    eval_pb2,
    fusion_pb2,
    labeller_pb2,
    landmark_pb2,
    mission_pb2,
    qa_pb2,
    render_pb2,
    scan_pb2,
)

EVENT_DOMAINS = (
    "scan",
    "capture",
    "fusion",
    "landmark",
    "label",
    "mission",
    "render",
    "qa",
    "eval",
)

SCAN_REQUESTED = "skyqa.v1.scan.requested"
CAPTURE_JOB = "skyqa.v1.capture.job"
CAPTURE_COMPLETED = "skyqa.v1.capture.completed"
FUSION_COMPLETED = "skyqa.v1.fusion.completed"
RENDER_JOB = "skyqa.v1.render.job"
VIDEO_JOB = "skyqa.v1.render.video"
LANDMARKS_COLLECTED = "skyqa.v1.landmark.collected"
LANDMARKS_REVIEWED = "skyqa.v1.landmark.reviewed"
LABEL_REQUESTED = "skyqa.v1.label.requested"
LABEL_DONE = "skyqa.v1.label.done"
MISSIONS_COMPLETED = "skyqa.v1.mission.completed"
QA_COMPLETED = "skyqa.v1.qa.completed"
EVAL_REQUESTED = "skyqa.v1.eval.requested"

DAY = 24 * 3600.0

# The one message type each subject carries. The bus refuses to publish another type on a bound
# subject and to register a handler that would decode another, so a producer and its consumers
# cannot drift apart silently (a wrong type decodes as garbage more often than it fails).
MESSAGE_TYPES: dict[str, type[Message]] = {
    SCAN_REQUESTED: scan_pb2.ScanRequest,
    CAPTURE_JOB: capture_pb2.CaptureJob,
    CAPTURE_COMPLETED: capture_pb2.CaptureCompleted,
    FUSION_COMPLETED: fusion_pb2.FusionCompleted,
    RENDER_JOB: render_pb2.RenderJob,
    VIDEO_JOB: render_pb2.VideoJob,
    LANDMARKS_COLLECTED: landmark_pb2.LandmarksCollected,
    LANDMARKS_REVIEWED: landmark_pb2.LandmarksReviewed,
    LABEL_REQUESTED: labeller_pb2.LabelRequest,
    LABEL_DONE: labeller_pb2.LabelResult,
    MISSIONS_COMPLETED: mission_pb2.MissionsCompleted,
    QA_COMPLETED: qa_pb2.QACompleted,
    EVAL_REQUESTED: eval_pb2.EvaluationRequest,
}
# subjects with a per-requester, per-run or per-stage last token
_MESSAGE_TYPE_PREFIXES: dict[str, type[Message]] = {
    "skyqa.v1.render.done.": render_pb2.RenderDone,
    "skyqa.v1.render.video_done.": render_pb2.VideoDone,
    "skyqa.v1.progress.": common_pb2.Progress,
    "skyqa.v1.error.": common_pb2.ErrorEvent,
}


def message_type(subject: str) -> type[Message] | None:
    """The type bound to ``subject``, or None for a subject outside the topology."""
    if subject in MESSAGE_TYPES:
        return MESSAGE_TYPES[subject]
    return next((t for p, t in _MESSAGE_TYPE_PREFIXES.items() if subject.startswith(p)), None)


def check_message_type(subject: str, found: type[Message]) -> None:
    bound = message_type(subject)
    if bound is not None and found is not bound:
        raise TypeError(f"{subject} carries {bound.DESCRIPTOR.full_name}, not {found.DESCRIPTOR.full_name}")


def render_done_subject(requester: str) -> str:
    return f"skyqa.v1.render.done.{validate_id(requester, 'requester')}"


def video_done_subject(requester: str) -> str:
    return f"skyqa.v1.render.video_done.{validate_id(requester, 'requester')}"


def progress_subject(run_id: str) -> str:
    return f"skyqa.v1.progress.{validate_id(run_id, 'run id')}"


def error_subject(stage: str) -> str:
    return f"skyqa.v1.error.{validate_id(stage, 'stage')}"


def dlq_subject(subject: str) -> str:
    return f"skyqa.v1.dlq.{subject}"


@dataclass(frozen=True)
class StreamSpec:
    name: str
    subjects: tuple[str, ...]
    max_age_s: float = 7 * DAY
    duplicate_window_s: float = 600.0
    max_msgs_per_subject: int = -1


@dataclass(frozen=True)
class ConsumerSpec:
    """A durable pull consumer; every replica of a role binds the same durable.

    ``ack_wait_s`` and ``max_deliver`` left as ``None`` take the bus settings, so one
    deployment setting tunes every consumer.
    """

    durable: str
    stream: str
    filter_subject: str
    ack_wait_s: float | None = None
    max_deliver: int | None = None
    max_ack_pending: int = 64


EVENTS_STREAM = "SKYQA_EVENTS"
PROGRESS_STREAM = "SKYQA_PROGRESS"
ERRORS_STREAM = "SKYQA_ERRORS"
DLQ_STREAM = "SKYQA_DLQ"


def streams(duplicate_window_s: float = 600.0) -> list[StreamSpec]:
    return [
        StreamSpec(
            EVENTS_STREAM,
            tuple(f"skyqa.v1.{d}.>" for d in EVENT_DOMAINS),
            duplicate_window_s=duplicate_window_s,
        ),
        StreamSpec(
            PROGRESS_STREAM,
            ("skyqa.v1.progress.>",),
            max_age_s=2 * DAY,
            duplicate_window_s=duplicate_window_s,
            max_msgs_per_subject=100_000,
        ),
        StreamSpec(ERRORS_STREAM, ("skyqa.v1.error.>",), max_age_s=30 * DAY),
        StreamSpec(DLQ_STREAM, ("skyqa.v1.dlq.>",), max_age_s=30 * DAY),
    ]


RUNS_BUCKET = "skyqa-runs"
FANIN_BUCKET = "skyqa-fanin"
REVIEW_BUCKET = "skyqa-review"
