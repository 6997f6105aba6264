"""The collaboration rows as AirCopBench's question JSON, so scripts written for its release run
on ours: ``{"results": [...]}`` (its evaluation reads ``results``) of objects with
``question_id``, ``question_type``, ``question``, ``options`` (letter -> text),
``correct_answer`` (the letter) and ``uav_paths`` (UAV label -> image path relative to the
release folder).

Ids and types follow the source's generators: ``Sim3_OC_UAV1_1001`` (its simulator set by
group size, the subtask's abbreviation, the UAV asked about, a number) and ``2.2 Object
Counting (UAV1)``; questions about the whole group read ``Sim5_SC_CP_1001`` and ``1.2 Scene
Comparison (5UAV)``. The source gives its three scene-understanding subtasks one abbreviation
(``SC_UN``), whose numbers then collide; here comparison and posture have their own (``SC_CP``,
``SC_OP``). The number is 1001 plus the group's number within its size (the group id's last
digits), so an id does not change when another row of the release is dropped.
"""

from __future__ import annotations

import json
import re

from skyqa.contracts.collab import COLLAB_DISPLAY, COLLAB_GROUPS, CollabRow

ABBREVIATIONS = {
    "scene_description": "SC_UN",
    "scene_comparison": "SC_CP",
    "observing_posture": "SC_OP",
    "object_recognition": "OR",
    "object_counting": "OC",
    "object_grounding": "OG",
    "object_matching": "OM",
    "quality_assessment": "QA",
    "usability_assessment": "UA",
    "causal_assessment": "CA",
    "when_to_collaborate": "when2col",
    "what_to_collaborate": "what2col",
    "who_to_collaborate": "who2col",
    "why_to_collaborate": "why2col",
}
FIRST = 1001  # the source's generators number from here
_NUMBER = re.compile(r"(\d+)$")


def _number(group_id: str) -> int:
    m = _NUMBER.search(group_id)
    if m is None:
        raise ValueError(f"group id {group_id!r} does not end in its number")
    return FIRST + int(m.group(1))


def question_type(r: CollabRow) -> str:
    """The source's "n.m Subtask (UAVk)" (or "(nUAV)" for the whole group)."""
    groups = list(COLLAB_GROUPS)
    major = groups.index(r.group) + 1
    minor = COLLAB_GROUPS[r.group].index(r.task) + 1
    who = r.uav or f"{len(r.image_labels)}UAV"
    return f"{major}.{minor} {COLLAB_DISPLAY[r.task]} ({who})"


def question_id(r: CollabRow) -> str:
    parts = [
        f"Sim{len(r.image_labels)}",
        ABBREVIATIONS[r.task],
        *([r.uav] if r.uav else []),
        str(_number(r.group_id)),
    ]
    return "_".join(parts)


def aircop_questions(rows: list[CollabRow]) -> bytes:
    items = [
        {
            "question_id": question_id(r),
            "question_type": question_type(r),
            "question": r.question,
            "options": {o.option_id: o.label for o in r.options},
            "correct_answer": r.answer_option_id,
            "uav_paths": dict(zip(r.image_labels, r.images, strict=True)),
            "sample_id": r.sample_id,
        }
        for r in rows
    ]
    ids = [item["question_id"] for item in items]
    if len(set(ids)) != len(ids):
        raise ValueError("two collaboration rows would share a question id")
    return (json.dumps({"results": items}, indent=1, ensure_ascii=False) + "\n").encode()
