"""The image rows as VLMEvalKit's native MCQ TSV.

VLMEvalKit's custom-MCQ path reads ``index, image, question, A, B, ..., answer`` and a
``category`` column; ``image`` is a base64 image, or a list of them (written as a JSON list,
which its ``toliststr`` reads) for multi-image rows. It builds its own prompt ("Question: ...
Options: ... Please select the correct answer"), so ``question`` is the question alone, without
skyqa's JSON answer instruction, and a reply is a letter. The bounding box is not asked there.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable

from skyqa.contracts.qa import ImageRow
from skyqa.vocab.prompts import image_question


def vlmevalkit_tsv(rows: list[ImageRow], image_b64: Callable[[str], str]) -> bytes:
    """One line per image MCQ; ``image_b64`` returns a release file as base64."""
    letters = sorted({o.option_id for r in rows for o in r.label_options})
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t", lineterminator="\n")
    w.writerow(["index", "image", "question", *letters, "answer", "category", "l2-category", "sample_id"])
    for i, r in enumerate(rows):
        opts = {o.option_id: o.label for o in r.label_options}
        images = [image_b64(p) for p in r.images]
        question = image_question(
            r.task_type, r.reference_object_view, r.landmark_description, r.behavior_instance
        )
        w.writerow(
            [
                i,
                images[0] if len(images) == 1 else json.dumps(images),
                question,
                # an option a row does not have stays empty, which VLMEvalKit reads as absent
                *(opts.get(x, "") for x in letters),
                r.answer_option_id,
                r.task_type,
                r.difficulty,
                r.sample_id,
            ]
        )
    return buf.getvalue().encode()


def dualcog_manifest(rows: list[ImageRow]) -> bytes:
    """The rows as UAV-DualCog's Stage 4 manifest (a JSON object with ``samples``), which its
    loaders and metric code read: every skyqa field plus ``reference_view`` (the reference's
    label in the task's frame), ``answer_option_ids`` and, for ``self_what``, ``multi_select``."""
    scene_id = rows[0].scene_id if rows else ""
    samples = []
    for r in rows:
        s = r.model_dump(mode="json")
        s["reference_view"] = r.metadata.get("reference_label", r.reference_object_view)
        s["answer_option_ids"] = [r.answer_option_id]
        if r.task_type == "self_what":
            s["multi_select"] = False
        s["skyqa_conventions"] = CONVENTIONS[r.task_type]
        samples.append(s)
    doc = {
        "generation_id": f"{scene_id}_qa_manifest_{len(rows)}samples_release",
        "scene_id": scene_id,
        "engine": rows[0].engine if rows else "",
        "sample_count": len(rows),
        "reference_main_only": False,
        "difficulties": sorted({r.difficulty for r in rows}),
        "view_definitions": sorted({r.view_definition for r in rows}),
        "task_types": sorted({r.task_type for r in rows}),
        "selected_landmark_categories": sorted({r.landmark_category for r in rows}),
        "samples": samples,
    }
    return (json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode()


# where a row deliberately differs from what UAV-DualCog's generator would have written
_REFERENCE = "the reference view is any valid view, not always the main one (metadata.reference_is_main_view)"
CONVENTIONS = {
    "self_where": _REFERENCE,
    "self_what": _REFERENCE,
    "env_where": "the observation is rendered for this row alone (UAV-DualCog shares one with env_how); "
    "labels are only those a forward camera that shows the landmark allows",
    "env_how": "the gold is the move that brings the landmark to the image centre (turn and climb or "
    "descend), not env_where's label repeated; the observation is this row's own",
}
