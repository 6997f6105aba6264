"""Rows of the UltraVR-style family: questions about one survey view with typed GT-CoT steps."""

from __future__ import annotations

from typing import Any, Literal

from skyqa.contracts.base import Contract
from skyqa.contracts.qa import Option, ReasoningStep
from skyqa.contracts.ultra import ViewKind

AnswerFormat = Literal["bbox_coordinates_list", "bbox", "integer", "boolean", "relation", "option_label"]


class UltraStep(ReasoningStep):
    """A GT-CoT step with its answer's type (UltraVR's ``answer_format``): a box list is JSON of
    normalized ``[x1, y1, x2, y2]`` boxes, a box one of them or ``none``."""

    answer_format: AnswerFormat


class UltraRow(Contract):
    """One UltraVR-style question about one survey view."""

    sample_id: str
    scene_id: str
    engine: str
    survey_id: str
    view: ViewKind
    unit: str  # the survey view: rows release one by one, blind-gate folds group by it
    image: str  # relative to the release folder
    width: int
    height: int
    category: Literal["comparison", "logical_verification", "relational_inference"]
    task: str
    task_display_name: str
    question: str
    options: list[Option]
    answer_option_id: str
    answer_label: str
    reasoning_steps: list[UltraStep]
    evidence: dict[str, Any]  # what the answer was derived from (instance ids, counts, regions)
    difficulty: Literal["easy", "medium", "hard"]
    prompt_text: str
    user_prompt: str
    system_prompt: str


class SurveyObjectRow(Contract):
    """One line of ``ultravr_objects.jsonl``: a small object of one survey view, as the family
    reads it (UltraVR's per-object annotation: box, class, colour, orientation, region)."""

    survey_id: str
    view: ViewKind
    image: str
    instance_id: int
    class_name: str
    box_xyxy: list[int]  # pixels
    box_xyxy_norm: list[float]
    pixels: int
    colour: str | None
    orientation: str | None  # horizontal, vertical, diagonal; None: no clear axis
    regions: list[str]  # the quadrant of its box centre; two or four near a split line
    problem: str | None  # why it cannot be counted without doubt; None: it can


class CandidateFunnel(Contract):
    """``ultravr_candidates.json``: candidates planning considered, those it removed as
    ambiguous by reason, and the rows it planned."""

    candidates: int
    removed: dict[str, int]
    rows: int


class SampleStep(Contract):
    step_id: str
    question: str
    ground_truth: Any  # typed by answer_format: a box list, a box or null, an integer, a bool, text
    answer_format: AnswerFormat
    operation: str


class ReasoningSupervision(Contract):
    step_type: Literal["multi_step_qa"]
    steps: list[SampleStep]


class UltraSample(Contract):
    """An entry of ``ultravr_samples.json``, in UltraVR's sample layout."""

    id: str
    image: str
    category: str
    task: str
    question: str
    options: dict[str, str]
    answer: str
    reasoning_supervision: ReasoningSupervision
