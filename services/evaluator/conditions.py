"""Evaluation conditions: which rows a responder is asked, and what it sees of each.

Visual-evidence access (UltraVR V0-V4), same prompt and options, only the pixels change:

- ``text_only`` (V0): no image at all; measures language-prior leakage and option bias.
- ``thumbnail`` (V1): every image downsampled to at most 160x120 before upload.
- ``full`` (V2): every image at the runner's default upload size (at most 640x480); the
  standard condition every leaderboard number refers to unless it names another.
- ``crop`` (V3): the four quadrants of every image at their original resolution, without the
  whole image. Quadrants, not answer-localising crops, so the crop never gives the box away.
  Image rows only: a video has no single image to cut.
- ``full_crop`` (V4): the full images followed by their quadrants. Image rows only.

Protocols that change the rows rather than the pixels:

- ``circular`` (MMBench CircularEval): each image MCQ is asked once per rotation of its
  option labels over the letters; the group counts only if every rotation is right.
- ``schema_cot`` (UltraVR S2): the full-image prompt plus the row's ground-truth reasoning step
  questions; the reply carries one answer per step, scored by ``steps.step_correct``.
"""

from __future__ import annotations

import copy
from typing import Any

from skyqa import scan
from skyqa.vocab.prompts import options_text

Condition = scan.EvalCondition
CONDITIONS = scan.EVAL_CONDITIONS

# what each condition uploads of every image: the whole image at one of two sizes, its quadrants
MEDIA: dict[str, tuple[str, ...]] = {
    "full": ("full",),
    "text_only": (),
    "thumbnail": ("thumbnail",),
    "crop": ("quadrants",),
    "full_crop": ("full", "quadrants"),
    "circular": ("full",),
    "schema_cot": ("full",),
}
IMAGE_ONLY = {"crop", "full_crop", "circular", "schema_cot"}

STEP_SCHEMA = (
    "[OUTPUT] Return exactly one JSON object and nothing else (no markdown). Answer every step in "
    'order as a string in "steps", then the question. Use only a listed option_id. The bounding box '
    "is normalized [x1, y1, x2, y2] in [0, 1] on the image named in the question. Schema: "
    '{"steps": ["...", "..."], "answer_option_id": "A", "bbox_xyxy_norm": [0.1, 0.2, 0.3, 0.4]}'
)


def is_image_row(row: dict[str, Any]) -> bool:
    return "label_options" in row


def rows_for(condition: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if condition == "circular":
        return [r for row in rows if is_image_row(row) for r in rotations(row)]
    if condition == "schema_cot":
        return [with_step_schema(row) for row in rows if is_image_row(row) and row.get("reasoning_steps")]
    if condition in IMAGE_ONLY:
        return [row for row in rows if is_image_row(row)]
    return rows


def rotations(row: dict[str, Any]) -> list[dict[str, Any]]:
    """n copies of an n-option row; copy k gives letter i the label of option (i + k) mod n.

    Images stay where they are ("Image 3" is the same picture in every copy); only which letter
    names which answer moves, so a model that tracks content answers every copy the same way.
    """
    opts = row["label_options"]
    labels = [o["label"] for o in opts]
    head = row["user_prompt"].rsplit("\nOptions:\n", 1)[0]
    out = []
    for k in range(len(opts)):
        moved = [
            {"option_id": o["option_id"], "label": labels[(i + k) % len(labels)]} for i, o in enumerate(opts)
        ]
        new = copy.deepcopy(row)
        new["label_options"] = moved
        new["answer_option_id"] = next(o["option_id"] for o in moved if o["label"] == row["answer_label"])
        new["user_prompt"] = (
            f"{head}\nOptions:\n{options_text([(o['option_id'], o['label']) for o in moved])}"
        )
        new["base_sample_id"] = row["sample_id"]
        new["rotation"] = k
        new["sample_id"] = f"{row['sample_id']}#rot{k}"
        out.append(new)
    return out


def with_step_schema(row: dict[str, Any]) -> dict[str, Any]:
    steps = row["reasoning_steps"]
    listing = "\n".join(f"{i}. {s['question']}" for i, s in enumerate(steps, start=1))
    new = copy.deepcopy(row)
    new["user_prompt"] = f"{row['user_prompt']}\n\nBefore answering, answer these steps in order:\n{listing}"
    new["system_prompt"] = row["system_prompt"].split("[OUTPUT]", 1)[0] + STEP_SCHEMA
    new["base_sample_id"] = row["sample_id"]
    return new
