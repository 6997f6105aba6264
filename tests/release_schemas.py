"""Every JSON file kind a release ships, with the schema it must carry in full.

A file that matches no pattern here fails the test that uses this table: a new file kind is
added with its schema. Fields are checked present, never filled in from defaults, so a writer
that leaves a field out (proto3 drops zero values; pydantic can exclude defaults) is caught.
"""

from __future__ import annotations

import re
import types
from typing import Any, Union, get_args, get_origin

from google.protobuf import json_format
from google.protobuf.message import Message
from pydantic import BaseModel
from skyqa import integrity
from skyqa.contracts.aircop import GroupPlan, GroupTask
from skyqa.contracts.capture import FrameRow, SemanticClassTable
from skyqa.contracts.collab import CollabRow
from skyqa.contracts.fusion import FusionMeta, InstanceTable
from skyqa.contracts.landmarks import InstancesFile, LandmarkInstance
from skyqa.contracts.missions import (
    ComposedSegments,
    ConstraintReport,
    FailedMissions,
    FrameIndexMap,
    FramesManifest,
    FrameVisibility,
    MissionIndex,
    TaskData,
)
from skyqa.contracts.navigation import NavigationPlan, NavigationTask
from skyqa.contracts.qa import ImageRow, QCReport, QCRow, RenderRequests, VideoRow
from skyqa.contracts.review import ReviewState, ValidInstancesFile
from skyqa.contracts.rsv import Execution, TrajectoryPlan, TrajectoryRow
from skyqa.contracts.ultra import SurveyMeasurement, SurveyPlan, SurveyTask
from skyqa.contracts.ultravr import CandidateFunnel, SurveyObjectRow, UltraRow, UltraSample
from skyqa.contracts.urbanvideo import NavRow
from skyqa.protojson import to_dict
from skyqa.v1 import render_pb2, scan_pb2

from services.landmark.plan import LandmarkPlan
from services.mission_planner.missions import MissionPlanFile
from services.qa_generator.pipeline import QAPlan


class LogRow(BaseModel):
    """A review-log row: UAV-DualCog's common keys; each event adds its own."""

    ts: float
    scene_id: str
    event: str


class AirCopQuestion(BaseModel):
    """An entry of AirCopBench's question JSON, as its evaluation reads it."""

    question_id: str
    question_type: str
    question: str
    options: dict[str, str]
    correct_answer: str
    uav_paths: dict[str, str]


class CardStep(BaseModel):
    """A step of a Reasoning-Structured Videos ``_meta.json``, the card's fields."""

    step: int
    action: str
    action_id: int
    start_pos: list[float]
    start_rot: list[float]
    expected_end_pos: list[float]
    actual_end_pos: list[float]
    actual_end_rot: list[float]
    collision: bool
    collision_displacement: float


class CardMeta(BaseModel):
    """A Reasoning-Structured Videos ``_meta.json``: the fields its dataset card names."""

    trajectory_id: int
    data_type: str
    trajectory_type: str
    algebraic_property: str
    paired_trajectory: dict[str, Any]
    has_collision: bool
    collision_count: int
    total_steps: int
    frames_per_step: int
    total_frames: int
    render_config: dict[str, Any]
    root_state: dict[str, list[float]]
    action_sequence: list[str]
    collision_mask: list[int]
    steps: list[CardStep]
    video_encoding: dict[str, Any]


Schema = type[BaseModel] | type[Message] | None  # None: checked by its own tool (croissant.json)

SCHEMAS: list[tuple[str, Schema]] = [
    (r"scan_request\.json", scan_pb2.ScanRequest),
    (r"release\.json", integrity.ReleaseInfo),
    (r"qc_report\.json", QCReport),
    (r"qc_rows\.jsonl", QCRow),
    (r"croissant\.json", None),
    (r"image_qa\.metadata\.jsonl", ImageRow),
    (r"video_qa\.metadata\.jsonl", VideoRow),
    (r"image_tasks/manifests/[^/]+\.image_qa\.jsonl", ImageRow),
    (r"video_tasks/manifests/[^/]+\.video_qa\.jsonl", VideoRow),
    # UAV-DualCog's manifests: their samples are skyqa's rows plus the reference's own fields
    (r"image_tasks/manifests/[^/]+(\.latest_manifest|_qa_manifest_release)\.json", ImageRow),
    (r"video_tasks/datasets/[^/]+(\.latest_manifest|_release)\.json", VideoRow),
    (r"image_tasks/qa_plan\.json", QAPlan),
    (r"image_tasks/render_requests/[^/]+\.json", RenderRequests),
    (r"scene_data/[^/]+/pcd_map/[^/]+\.meta\.json", FusionMeta),
    (r"scene_data/[^/]+/pcd_map/[^/]+\.instances\.json", InstanceTable),
    (r"scene_data/[^/]+/pcd_map/[^/]+\.classes\.json", SemanticClassTable),
    (r"scene_data/[^/]+/pcd_map/([^/]+\.)?frames_manifest\.jsonl", FrameRow),
    (r"scene_data/[^/]+/pcd_map/manifests/manifest_job_\d+\.jsonl", FrameRow),
    (r"scene_data/[^/]+/landmarks_raw/[^/]+\.instances\.json", InstancesFile),
    (r"scene_data/[^/]+/landmarks_raw/parts/plan\.json", LandmarkPlan),
    (r"scene_data/[^/]+/landmarks_raw/parts/[^/]+\.json", LandmarkInstance),
    (r"scene_data/[^/]+/landmarks_review/[^/]+\.valid_instances\.json", ValidInstancesFile),
    (r"scene_data/[^/]+/landmarks_review/[^/]+\.web_review_state\.json", ReviewState),
    (r"scene_data/[^/]+/landmarks_review/[^/]+\.review_log\.jsonl", LogRow),
    (r"scene_data/[^/]+/landmarks_review/log/\d+\.json", LogRow),
    (r"video_tasks/mission_plan\.json", MissionPlanFile),
    (r"video_tasks/missions_index\.json", MissionIndex),
    (r"video_tasks/failed_missions\.json", FailedMissions),
    (r"video_tasks/missions/[^/]+/composed_segments\.json", ComposedSegments),
    (r"video_tasks/missions/[^/]+/constraint_report\.json", ConstraintReport),
    (r"video_tasks/missions/[^/]+/render_request\.json", render_pb2.VideoJob),
    (r"video_tasks/missions/[^/]+/final_task/task_data\.json", TaskData),
    (r"video_tasks/missions/[^/]+/final_task/frames_manifest\.json", FramesManifest),
    (r"video_tasks/missions/[^/]+/final_task/frame_index_map\.json", FrameIndexMap),
    (r"video_tasks/missions/[^/]+/final_task/frame_visibility\.jsonl", FrameVisibility),
    (r"video_tasks/missions/[^/]+/navigation_plan\.json", NavigationPlan),
    (r"video_tasks/missions/[^/]+/final_task/navigation_task\.json", NavigationTask),
    (r"video_tasks/missions/[^/]+/group_plan\.json", GroupPlan),
    (r"video_tasks/missions/[^/]+/final_task/group_task\.json", GroupTask),
    (r"navigation_qa\.metadata\.jsonl", NavRow),
    (r"video_tasks/manifests/[^/]+\.navigation_qa\.jsonl", NavRow),
    (r"collab_qa\.metadata\.jsonl", CollabRow),
    (r"image_tasks/manifests/[^/]+\.collab_qa\.jsonl", CollabRow),
    (r"image_tasks/manifests/[^/]+\.aircop_questions\.json", AirCopQuestion),
    (r"video_tasks/missions/[^/]+/trajectory_plan\.json", TrajectoryPlan),
    (r"video_tasks/missions/[^/]+/final_task/execution\.json", Execution),
    (r"video_tasks/missions/[^/]+/final_task/card_meta\.json", CardMeta),
    (r"reasoning_trajectories\.metadata\.jsonl", TrajectoryRow),
    (r"video_tasks/missions/[^/]+/survey_plan\.json", SurveyPlan),
    (r"video_tasks/missions/[^/]+/final_task/survey\.json", SurveyMeasurement),
    (r"video_tasks/missions/[^/]+/final_task/survey_task\.json", SurveyTask),
    (r"ultravr_qa\.metadata\.jsonl", UltraRow),
    (r"image_tasks/manifests/[^/]+\.ultravr_qa\.jsonl", UltraRow),
    (r"image_tasks/manifests/[^/]+\.ultravr_samples\.json", UltraSample),
    (r"(image_tasks/surveys/objects|image_tasks/manifests/[^/]+\.ultravr_objects)\.jsonl", SurveyObjectRow),
    (
        r"(image_tasks/surveys/candidates|image_tasks/manifests/[^/]+\.ultravr_candidates)\.json",
        CandidateFunnel,
    ),
    (r"reasoning_videos/trajectories\.jsonl", TrajectoryRow),
    (r"reasoning_videos/[a-z_]+/run_[^/]+_meta\.json", CardMeta),
]


def schema_of(rel: str) -> tuple[bool, Schema]:
    for pattern, schema in SCHEMAS:
        if re.fullmatch(pattern, rel):
            return True, schema
    return False, None


def missing(annotation: Any, value: Any, where: str) -> list[str]:
    """Fields of ``annotation`` that ``value`` (parsed JSON) leaves out, recursively."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if not isinstance(value, dict):
            return []
        out = []
        for name, field in annotation.model_fields.items():
            key = field.alias or name
            if key not in value:
                out.append(f"{where}.{key}")
            else:
                out += missing(field.annotation, value[key], f"{where}.{key}")
        return out
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list and isinstance(value, list):
        return [m for i, v in enumerate(value[:20]) for m in missing(args[0], v, f"{where}[{i}]")]
    if origin is dict and isinstance(value, dict):
        return [m for k, v in list(value.items())[:20] for m in missing(args[1], v, f"{where}.{k}")]
    if origin in (Union, types.UnionType):
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        return missing(models[0], value, where) if models and isinstance(value, dict) else []
    return []


def proto_missing(message: type[Message], doc: dict[str, Any]) -> list[str]:
    """Fields the file leaves out: every field of the message, rendered with no default dropped,
    must be in the file as it is."""
    full = to_dict(json_format.ParseDict(doc, message()))
    return _dict_missing(full, doc, "")


def _dict_missing(full: Any, doc: Any, where: str) -> list[str]:
    if isinstance(full, dict) and isinstance(doc, dict):
        return [
            m
            for k, v in full.items()
            for m in ([f"{where}.{k}"] if k not in doc else _dict_missing(v, doc[k], f"{where}.{k}"))
        ]
    if isinstance(full, list) and isinstance(doc, list):
        return [
            m
            for i, (a, b) in enumerate(zip(full, doc, strict=False))
            for m in _dict_missing(a, b, f"{where}[{i}]")
        ]
    return []
