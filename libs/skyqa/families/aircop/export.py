"""The collaboration rows as AirCopBench's question JSON, so scripts written for its release run
on ours: ``{"results": [...]}`` (its evaluation reads ``results``) of objects with
``question_id``, ``question_type`` (its subtask names, e.g. "When to Collaborate"),
``question``, ``options`` (letter -> text), ``correct_answer`` (the letter) and ``uav_paths``
(UAV label -> image path relative to the release folder)."""

from __future__ import annotations

import json

from skyqa.contracts.collab import CollabRow


def aircop_questions(rows: list[CollabRow]) -> bytes:
    items = [
        {
            "question_id": r.sample_id,
            "question_type": r.task_display_name,
            "question": r.question,
            "options": {o.option_id: o.label for o in r.options},
            "correct_answer": r.answer_option_id,
            "uav_paths": dict(zip(r.image_labels, r.images, strict=True)),
        }
        for r in rows
    ]
    return (json.dumps({"results": items}, indent=1, ensure_ascii=False) + "\n").encode()
