"""Review rules: auto-review, direction anchors, view validity, labels, and valid_instances.json.

Pure functions over :class:`ReviewState`; persistence lives in ``book.py``.
"""

from __future__ import annotations

import math

from skyqa import keys
from skyqa.contracts import (
    AutoLabel,
    InstanceReview,
    InstancesFile,
    LandmarkInstance,
    ReviewState,
    ValidInstance,
    ValidInstancesFile,
    annotation_status,
)
from skyqa.contracts.landmarks import CARDINALS, RING
from skyqa.contracts.review import ValidSummary
from skyqa.errors import InvalidInput
from skyqa.labels import (
    MAX_DESCRIPTION_CHARS,
    MAX_NOTE_CHARS,
    MAX_REASON_CHARS,
    MAX_SUBCATEGORY_CHARS,
    MODEL_NAME_CHARS,
    REASON_EXTRA,
    is_model_name,
    plain_prose,
    prose_problem,
    validate,
)
from skyqa.sim.classes import CATEGORIES
from skyqa.v1 import labeller_pb2

MIN_VALID_VIEWS = 4


class ReviewError(InvalidInput):
    reason = "invalid_review_action"


class AlreadyFinalized(ReviewError):
    """Another call finalized this review first; it published the one ``LandmarksReviewed``."""

    reason = "review_already_finalized"


def _valid_orbit(inst: LandmarkInstance, review: InstanceReview) -> list[str]:
    return [
        v.view_id
        for v in inst.rgb_views
        if v.mode == "orbit" and v.is_valid and v.view_id not in review.invalid_views
    ]


def initial_state(run_id: str, doc: InstancesFile, instances_key: str, mode: str) -> ReviewState:
    """Auto mode keeps every collected landmark and picks the first valid cardinal view as main."""
    reviews = {}
    for inst in doc.instances:
        review = InstanceReview(
            class_name=inst.class_name,
            view_directions={v.view_id: v.view_direction for v in inst.rgb_views},
            invalid_views=[v.view_id for v in inst.rgb_views if not v.is_valid],
        )
        if mode == "auto":
            valid = _valid_orbit(inst, review)
            by_dir = {review.view_directions[v]: v for v in valid}
            review.main_view = next((by_dir[d] for d in CARDINALS if d in by_dir), valid[0] if valid else "")
            review.action = "keep" if len(valid) >= MIN_VALID_VIEWS and review.main_view else "drop"
        reviews[inst.instance_id] = review
    return ReviewState(
        run_id=run_id,
        scene_id=doc.scene_id,
        mode="auto" if mode == "auto" else "human",
        source_instances_json=instances_key,
        instances=reviews,
    )


def find(doc: InstancesFile, instance_id: str) -> LandmarkInstance:
    for inst in doc.instances:
        if inst.instance_id == instance_id:
            return inst
    raise ReviewError(f"no landmark {instance_id!r} in this run")


def _plain(text: str, what: str, limit: int) -> str:
    """``text`` stripped, or ReviewError: reviewer prose is released or shown beside what is,
    so it is held to the plain-text rule (``skyqa.labels``) instead of escaped by every reader."""
    text = text.strip()
    if problem := prose_problem(text, what, limit):
        raise ReviewError(problem)
    return text


def decide(state: ReviewState, doc: InstancesFile, instance_id: str, action: str, note: str = "") -> None:
    review = state.instances[find(doc, instance_id).instance_id]
    if action not in ("keep", "drop"):
        raise ReviewError(f"action must be keep or drop, got {action!r}")
    note = _plain(note, "note", MAX_NOTE_CHARS)
    if action == "keep":
        inst = find(doc, instance_id)
        if not review.main_view or review.main_view in review.invalid_views:
            raise ReviewError("keep_requires_main_view: pick a valid main view first")
        if len(_valid_orbit(inst, review)) < MIN_VALID_VIEWS:
            raise ReviewError(f"keep needs at least {MIN_VALID_VIEWS} valid orbit views")
    review.action = action  # type: ignore[assignment]
    review.note = note


def set_direction(
    state: ReviewState, doc: InstancesFile, instance_id: str, view_id: str, direction: str, main: bool
) -> None:
    """Anchor one view to a direction; the other orbit views follow in ring order by yaw."""
    inst = find(doc, instance_id)
    review = state.instances[instance_id]
    if direction not in RING:
        raise ReviewError(f"direction must be one of {', '.join(RING)}")
    anchor = next((v for v in inst.rgb_views if v.view_id == view_id), None)
    if anchor is None or anchor.mode != "orbit":
        raise ReviewError(f"{view_id!r} is not an orbit view of {instance_id}")
    base = RING.index(direction)
    for v in inst.rgb_views:
        if v.mode != "orbit":
            continue
        delta = (v.yaw_deg - anchor.yaw_deg + 180.0) % 360.0 - 180.0
        review.view_directions[v.view_id] = RING[(base + round(-delta / 45.0)) % 8]
    if main:
        if view_id in review.invalid_views:
            raise ReviewError("an invalid view cannot be the main view")
        review.main_view = view_id


def set_view_validity(
    state: ReviewState, doc: InstancesFile, instance_id: str, view_id: str, valid: bool
) -> None:
    inst = find(doc, instance_id)
    if view_id not in {v.view_id for v in inst.rgb_views}:
        raise ReviewError(f"{view_id!r} is not a view of {instance_id}")
    review = state.instances[instance_id]
    if valid:
        review.invalid_views = [v for v in review.invalid_views if v != view_id]
    elif view_id not in review.invalid_views:
        review.invalid_views = sorted([*review.invalid_views, view_id])
        if review.main_view == view_id:
            review.main_view = ""


def set_class_name(state: ReviewState, doc: InstancesFile, instance_id: str, class_name: str) -> list[str]:
    """Sync the class-name hint to every landmark of the same class id (as UAV-DualCog does).

    The hint is plain text: 1..64 characters of letters, digits (any script) and `` _-./()``
    after stripping. It is copied into valid_instances.json, mission task data and label
    prompts, so markup, quotes and control characters are refused here rather than escaped
    by every reader.
    """
    name = class_name.strip()
    if not 1 <= len(name) <= 64:
        raise ReviewError("class name must be 1..64 characters after stripping")
    bad = sorted({c for c in name if not (c.isalnum() or c in " _-./()")})
    if bad:
        raise ReviewError(
            f"class name may hold only letters, digits, spaces and _-./(), not {''.join(bad)!r}"
        )
    class_id = find(doc, instance_id).class_id
    synced = [i.instance_id for i in doc.instances if i.class_id == class_id]
    for iid in synced:
        state.instances[iid].class_name = name
    return synced


def update_labels(
    state: ReviewState,
    doc: InstancesFile,
    instance_id: str,
    category: str,
    subcategory: str,
    description: str,
    note: str = "",
) -> None:
    # refused, not cleaned as a model's label is: the reviewer is there to fix the text
    subcategory = _plain(subcategory, "subcategory", MAX_SUBCATEGORY_CHARS)
    description = _plain(description, "description", MAX_DESCRIPTION_CHARS)
    note = _plain(note, "note", MAX_NOTE_CHARS)
    label, problem = validate(
        {"category": category, "subcategory": subcategory, "description": description, "confidence": 1.0}
    )
    if label is None:
        raise ReviewError(problem)
    review = state.instances[find(doc, instance_id).instance_id]
    review.landmark_category, review.landmark_subcategory = label.category, label.subcategory
    review.landmark_description, review.landmark_decision, review.landmark_note = (
        label.description,
        "manual",
        note,
    )
    review.annotation_status = annotation_status(review)


def label_problem(result: labeller_pb2.LabelResult) -> str:
    """Why a labeller's ok result is not a label this review may store ("" when it is): every
    field of it is untrusted, and the category, subcategory and description flow into released
    manifests and prompts, the model and reason sit beside them in the review."""
    if result.category not in CATEGORIES:
        return f"category is not one of the {len(CATEGORIES)} categories ({', '.join(CATEGORIES)})"
    if not (math.isfinite(result.confidence) and 0.0 <= result.confidence <= 1.0):
        return "confidence must be a number from 0 to 1"
    if result.model and not is_model_name(result.model):
        return f"model is not a model name (letters, digits and . _ : / @ + -, at most {MODEL_NAME_CHARS})"
    return (
        prose_problem(result.subcategory, "subcategory", MAX_SUBCATEGORY_CHARS)
        or prose_problem(result.description, "description", MAX_DESCRIPTION_CHARS)
        or prose_problem(result.reason, "reason", MAX_REASON_CHARS, REASON_EXTRA)
    )


def apply_label(state: ReviewState, result: labeller_pb2.LabelResult) -> InstanceReview:
    review = state.instances[result.landmark_id]
    refused = result.ok and label_problem(result)
    if refused or not result.ok:
        # the labeller removes markup from a model's text; a result that still has some, or
        # names no known category, comes from an older or broken labeller and is a failed
        # label, never released text. A failed label keeps only its (cleaned) model and reason.
        reason = f"label refused: {refused}" if refused else result.reason
        result = labeller_pb2.LabelResult(
            landmark_id=result.landmark_id,
            ok=False,
            model=result.model if is_model_name(result.model) else "",
            reason=plain_prose(reason, REASON_EXTRA)[:MAX_REASON_CHARS],
            views_used=result.views_used,
        )
    review.auto_label = AutoLabel(
        ok=result.ok,
        category=result.category,
        subcategory=result.subcategory,
        description=result.description,
        confidence=result.confidence,
        model=result.model,
        reason=result.reason,
        views=[v for v in result.views_used if keys.is_valid_id(v)],
    )
    if review.landmark_decision != "manual":
        status = annotation_status(review)
        if status == "labeled":
            review.landmark_category, review.landmark_subcategory = result.category, result.subcategory
            review.landmark_description, review.landmark_decision = result.description, "auto_approved"
        else:
            review.landmark_category = review.landmark_subcategory = review.landmark_description = ""
            review.landmark_decision = ""
    review.annotation_status = annotation_status(review)
    return review


def label_request(state: ReviewState, doc: InstancesFile, instance_id: str) -> labeller_pb2.LabelRequest:
    inst = find(doc, instance_id)
    review = state.instances[instance_id]
    req = labeller_pb2.LabelRequest(
        run_id=state.run_id,
        scene_id=state.scene_id,
        landmark_id=instance_id,
        class_hint=review.class_name,
        size_m=inst.bbox_3d.extent or inst.bbox_3d.size,
    )
    for v in inst.rgb_views:
        if v.mode == "orbit" and v.is_valid and v.view_id not in review.invalid_views:
            req.views.add(
                view_id=v.view_id,
                image_key=keys.stored(state.run_id, v.path),
                direction=review.view_directions.get(v.view_id, v.view_direction),
                bbox_xyxy=v.bbox_2d_xyxy,
                is_main=v.view_id == review.main_view,
            )
    return req


def valid_instances(
    state: ReviewState, doc: InstancesFile, decision_file: str, trigger: str
) -> ValidInstancesFile:
    """Only landmarks that are kept AND labelled; reviewer-invalid views are marked invalid."""
    out = []
    for inst in doc.instances:
        review = state.instances[inst.instance_id]
        if review.action != "keep" or review.annotation_status != "labeled":
            continue
        views = []
        for v in inst.rgb_views:
            v2 = v.model_copy(deep=True)
            v2.view_direction = review.view_directions.get(v.view_id, v.view_direction)
            v2.label = v2.view_direction if v.mode == "orbit" else v.label
            if v.view_id in review.invalid_views:
                v2.is_valid, v2.invalid_reason = False, v2.invalid_reason or "reviewer_marked_invalid"
            v2.is_query_view = v.view_id == review.main_view
            views.append(v2)
        auto = review.auto_label or AutoLabel(ok=False)
        base = inst.model_dump(exclude={"rgb_views", "class_name"})
        out.append(
            ValidInstance(
                **base,
                class_name=review.class_name,
                rgb_views=views,
                review_action=review.action,
                review_note=review.note,
                main_view=review.main_view,
                valid_view_ids=[v.view_id for v in views if v.is_valid],
                auto_label_category=auto.category,
                auto_label_subcategory=auto.subcategory,
                auto_label_description=auto.description,
                auto_label_confidence=auto.confidence,
                auto_label_model=auto.model,
                auto_label_views=",".join(auto.views),
                landmark_category=review.landmark_category,
                landmark_subcategory=review.landmark_subcategory,
                landmark_description=review.landmark_description,
                landmark_decision=review.landmark_decision,
                landmark_note=review.landmark_note,
                annotation_status=review.annotation_status,
            )
        )
    kept = sum(1 for r in state.instances.values() if r.action == "keep")
    return ValidInstancesFile(
        scene_id=state.scene_id,
        source_instances_json=keys.release_path(state.source_instances_json),
        decision_file=keys.release_path(decision_file),
        summary=ValidSummary(
            instances_total=len(doc.instances),
            valid_instances=len(out),
            dropped_instances=sum(1 for r in state.instances.values() if r.action == "drop"),
            pending_or_failed=kept - len(out),
            default_action="keep" if state.mode == "auto" else "",
            last_trigger=trigger,
        ),
        valid_instances=out,
    )
