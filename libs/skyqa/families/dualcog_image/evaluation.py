"""How the image rows are asked and scored (UAV-DualCog stage 4): one option and a box; option
accuracy, box Acc@0.5/0.75 and mean IoU (a missing box scores IoU 0), joint accuracy (option
right and IoU >= 0.5); CircularEval rotations and the ground-truth reasoning-step protocol."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from skyqa.answers import Parsed, parse_choice
from skyqa.contracts.qa import ImageRow, Option
from skyqa.errors import InvalidInput
from skyqa.families.base import MediaRef
from skyqa.scoring import iou
from skyqa.steps import score_steps
from skyqa.vocab.prompts import options_text

METRICS = (
    "option_correct",
    "option_correct_strict",
    "bbox_acc@50iou",
    "bbox_acc@75iou",
    "bbox_iou",
    "joint_correct",
)
STEP_SCHEMA = (
    "[OUTPUT] Return exactly one JSON object and nothing else (no markdown). Answer every step in "
    'order as a string in "steps", then the question. Use only a listed option_id. The bounding box '
    "is normalized [x1, y1, x2, y2] in [0, 1] on the image named in the question. Schema: "
    '{"steps": ["...", "..."], "answer_option_id": "A", "bbox_xyxy_norm": [0.1, 0.2, 0.3, 0.4]}'
)


def media(row: ImageRow) -> list[MediaRef]:
    return [MediaRef(f"Image {i}", p) for i, p in enumerate(row.images, 1)]


def parse(row: ImageRow, text: str) -> Parsed:
    return parse_choice(text, [o.option_id for o in row.label_options], [o.label for o in row.label_options])


def score(row: ImageRow, p: Parsed, steps: bool) -> dict[str, Any]:
    """Failures and unparsed replies score 0, never skipped."""
    ok = p.kind == "choice"
    correct = ok and p.option == row.answer_option_id
    box_iou = iou(p.bbox, row.answer_bbox_xyxy_norm) if ok else 0.0
    out: dict[str, Any] = {
        "option_correct": float(correct),
        "option_correct_strict": float(correct and p.strict),
        "bbox_iou": round(box_iou, 4),
        "bbox_acc@50iou": float(box_iou >= 0.5),
        "bbox_acc@75iou": float(box_iou >= 0.75),
        "joint_correct": float(correct and box_iou >= 0.5),
    }
    if steps:
        out.update(score_steps(row.reasoning_steps, p.steps if ok else None))
    return out


def rotations(row: ImageRow) -> list[ImageRow]:
    """n copies of an n-option row; copy k gives letter i the label of option (i + k) mod n.

    Images stay where they are ("Image 3" is the same picture in every copy); only which letter
    names which answer moves, so a model that tracks content answers every copy the same way.
    """
    labels = [o.label for o in row.label_options]
    if row.answer_label not in labels:
        raise InvalidInput(f"image row {row.sample_id!r}: its answer label is not one of its options")
    head = row.user_prompt.rsplit("\nOptions:\n", 1)[0]
    out = []
    for k in range(len(labels)):
        moved = [
            Option(option_id=o.option_id, label=labels[(i + k) % len(labels)])
            for i, o in enumerate(row.label_options)
        ]
        update = {
            "label_options": moved,
            "answer_option_id": next(o.option_id for o in moved if o.label == row.answer_label),
            "user_prompt": f"{head}\nOptions:\n{options_text([(o.option_id, o.label) for o in moved])}",
            "sample_id": f"{row.sample_id}#rot{k}",
        }
        out.append(row.model_copy(deep=True, update=update))
    return out


def with_steps(row: ImageRow) -> ImageRow | None:
    if not row.reasoning_steps:
        return None
    listing = "\n".join(f"{i}. {s.question}" for i, s in enumerate(row.reasoning_steps, start=1))
    return row.model_copy(
        deep=True,
        update={
            "user_prompt": f"{row.user_prompt}\n\nBefore answering, answer these steps in order:\n{listing}",
            "system_prompt": row.system_prompt.split("[OUTPUT]", 1)[0] + STEP_SCHEMA,
        },
    )


def guess(row: ImageRow, rng: np.random.Generator) -> dict[str, Any]:
    """A uniform option and a random box."""
    opts = [o.option_id for o in row.label_options]
    x0, y0 = rng.uniform(0, 0.8, 2)
    w, h = rng.uniform(0.05, 0.4, 2)
    box = [
        round(float(x0), 3),
        round(float(y0), 3),
        round(float(min(1, x0 + w)), 3),
        round(float(min(1, y0 + h)), 3),
    ]
    return {"answer_option_id": opts[int(rng.integers(len(opts)))], "bbox_xyxy_norm": box}


def prior(row: ImageRow, rows: Sequence[ImageRow]) -> dict[str, Any]:
    """The most frequent gold label of the same task and difficulty among other landmarks' rows,
    and their mean box."""
    others = [
        r
        for r in rows
        if r.landmark_id != row.landmark_id and (r.task_type, r.difficulty) == (row.task_type, row.difficulty)
    ]
    freq = Counter(r.answer_label for r in others)
    ranked = sorted(row.label_options, key=lambda o: (-freq.get(o.label, 0), o.option_id))
    boxes = (
        np.array([r.answer_bbox_xyxy_norm for r in others]) if others else np.array([[0.3, 0.3, 0.7, 0.7]])
    )
    return {
        "answer_option_id": ranked[0].option_id,
        "bbox_xyxy_norm": [round(float(v), 3) for v in boxes.mean(axis=0)],
    }
