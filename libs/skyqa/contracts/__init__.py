"""Pydantic models of every handoff file and of the run state, validated where written and read."""

from skyqa.contracts.base import Contract, dump_json, load_json
from skyqa.contracts.capture import FrameRow, PoseENU, SemanticClassRow, SemanticClassTable
from skyqa.contracts.fusion import ClassEntry, FusionMeta, InstanceEntry, InstanceTable
from skyqa.contracts.landmarks import (
    RING,
    Bbox3D,
    CameraPose,
    CollectSummary,
    InstancesFile,
    LandmarkInstance,
    RgbView,
)
from skyqa.contracts.review import (
    AutoLabel,
    InstanceReview,
    ReviewState,
    ValidInstance,
    ValidInstancesFile,
    annotation_status,
)
from skyqa.contracts.runs import RunState, StageState

__all__ = [
    "RING",
    "AutoLabel",
    "Bbox3D",
    "CameraPose",
    "ClassEntry",
    "CollectSummary",
    "Contract",
    "FrameRow",
    "FusionMeta",
    "InstanceEntry",
    "InstanceReview",
    "InstanceTable",
    "InstancesFile",
    "LandmarkInstance",
    "PoseENU",
    "ReviewState",
    "RgbView",
    "RunState",
    "SemanticClassRow",
    "SemanticClassTable",
    "StageState",
    "ValidInstance",
    "ValidInstancesFile",
    "annotation_status",
    "dump_json",
    "load_json",
]
