"""Ground-truth reasoning steps (UltraVR style) for every image row, derived from geometry.

Operations: GND grounds the landmark (its box), PER perceives a facade or side, QUA
quantifies an angle or a turn, INT integrates two observations, INF infers the answer.
"""

from __future__ import annotations

from skyqa.contracts.qa import ImageRow, ReasoningStep
from skyqa.vocab import directions as L


def _box(row: ImageRow) -> str:
    return "[" + ", ".join(f"{v:.3f}" for v in row.answer_bbox_xyxy_norm) + "]"


def _region(row: ImageRow) -> str:
    """The thirds of the image that hold the centre of the landmark's box."""
    x0, y0, x1, y1 = row.answer_bbox_xyxy_norm
    cols, rows = ("left", "centre", "right"), ("upper", "middle", "lower")
    col, line = cols[min(2, int((x0 + x1) / 2 * 3))], rows[min(2, int((y0 + y1) / 2 * 3))]
    return (
        f"the {line} {col} of the image" if (col, line) != ("centre", "middle") else "the centre of the image"
    )


def steps_for(row: ImageRow) -> list[ReasoningStep]:
    ref = row.reference_object_view
    m = row.metadata
    s = ReasoningStep
    if row.task_type == "self_where":
        return [
            s(question="Which facade of the landmark does image 1 show?", answer=ref, operation="PER"),
            s(question="Where is the landmark in image 2?", answer=_box(row), operation="GND"),
            s(
                question="Which facade of the landmark faces you in image 2?",
                answer=row.answer_label,
                operation="PER",
            ),
            s(
                question="Where are you relative to the landmark, in its own frame?",
                answer=row.answer_label,
                operation="INF",
            ),
        ]
    if row.task_type == "self_what":
        turn = f"{m['turn_degrees']} degrees {m['turn_direction']}"
        # facades in the landmark's own frame, as self_where names them: the paired self_where
        # row's answer is the facade this row's INT step arrives at
        return [
            s(question="Which facade of the landmark does image 1 show?", answer=ref, operation="PER"),
            s(question="How far and which way do you orbit the landmark?", answer=turn, operation="QUA"),
            s(
                question="Which facade of the landmark will face you after the turn?",
                answer=str(m["target_object_view"]),
                operation="INT",
            ),
            s(question="Which candidate shows that side?", answer=row.answer_label, operation="INF"),
            s(question="Where is the landmark in the selected image?", answer=_box(row), operation="GND"),
        ]
    h, v = float(m["horizontal_deg"]), float(m["vertical_deg"])
    side = "left" if h > 0 else "right"
    ground = s(question="Where is the landmark in image 2?", answer=_box(row), operation="GND")
    # a perception step whose answer varies (the landmark of an environment row is always in
    # image 2, so "is it the same landmark?" was "yes" on every row)
    match = s(
        question="Which part of image 2 does the landmark occupy?",
        answer=_region(row),
        operation="PER",
    )
    horizontal = s(
        question="How far is the landmark from your forward direction, horizontally?",
        answer=f"{abs(h):.0f} degrees to the {side}",
        operation="QUA",
    )
    if row.task_type == "env_where":
        return [
            ground,
            match,
            horizontal,
            s(question="Where is the landmark?", answer=row.answer_label, operation="INF"),
        ]
    vertical = s(
        question="How far is the landmark above or below the image centre?",
        answer=f"{abs(v):.0f} degrees {'above' if v > 0 else 'below'}",
        operation="QUA",
    )
    rule = (
        f"turn when the horizontal offset is dominant, climb or descend when the vertical one is "
        f"(axes under {L.ACTIVE_DEG:.0f} degrees count as centred)"
    )
    return [
        ground,
        match,
        horizontal,
        vertical,
        s(question=f"Which move centres the landmark ({rule})?", answer=row.answer_label, operation="INF"),
    ]
