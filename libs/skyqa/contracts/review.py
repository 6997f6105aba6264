"""Stage-2 review: the review state and ``landmarks_review/<scene>.valid_instances.json``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from skyqa.contracts.base import Contract
from skyqa.contracts.landmarks import LandmarkInstance

AnnotationStatus = Literal["unlabeled", "pending_review", "labeled", "failed"]
CONF_THRESHOLD = 0.6


class AutoLabel(Contract):
    ok: bool
    category: str = ""
    subcategory: str = ""
    description: str = ""
    confidence: float = 0.0
    model: str = ""
    reason: str = ""
    views: list[str] = Field(default_factory=list)


class InstanceReview(Contract):
    action: Literal["keep", "drop", ""] = ""
    note: str = ""
    main_view: str = ""
    # view_id -> landmark-centric direction, re-derived from one anchor in ring order
    view_directions: dict[str, str] = Field(default_factory=dict)
    invalid_views: list[str] = Field(default_factory=list)
    class_name: str = ""
    auto_label: AutoLabel | None = None
    landmark_category: str = ""
    landmark_subcategory: str = ""
    landmark_description: str = ""
    landmark_decision: Literal["", "manual", "auto_approved"] = ""
    landmark_note: str = ""
    annotation_status: AnnotationStatus = "unlabeled"


class ReviewState(Contract):
    run_id: str
    scene_id: str
    mode: Literal["auto", "human"]
    source_instances_json: str
    finalized: bool = False
    finalized_at: float = 0.0  # when the finalize that claimed the review began (epoch s)
    log_seq: int = 0
    instances: dict[str, InstanceReview]


def annotation_status(review: InstanceReview) -> AnnotationStatus:
    """UAV-DualCog's rule: manual or final fields win; else the auto label's confidence decides."""
    if review.landmark_decision == "manual" or (
        review.landmark_category
        and review.landmark_description
        and review.landmark_decision != "auto_approved"
    ):
        return "labeled"
    auto = review.auto_label
    if auto is None:
        return "unlabeled"
    if not auto.ok or auto.confidence <= 0.0:
        return "failed"
    if auto.confidence >= CONF_THRESHOLD:
        return "labeled"
    return "pending_review"


class ValidInstance(LandmarkInstance):
    review_action: str
    review_note: str
    main_view: str
    valid_view_ids: list[str]
    auto_label_category: str
    auto_label_subcategory: str
    auto_label_description: str
    auto_label_confidence: float
    auto_label_model: str
    auto_label_views: str
    landmark_category: str
    landmark_subcategory: str
    landmark_description: str
    landmark_decision: str
    landmark_note: str
    annotation_status: str


class ValidSummary(Contract):
    instances_total: int
    valid_instances: int
    dropped_instances: int
    pending_or_failed: int
    default_action: str
    last_trigger: str


class ValidInstancesFile(Contract):
    scene_id: str
    source_instances_json: str
    decision_file: str
    summary: ValidSummary
    valid_instances: list[ValidInstance]
