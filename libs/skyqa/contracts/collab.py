"""Rows of the AirCopBench-style collaborative-perception family: one multiple-choice question
about a UAV group's views, shown as one (possibly degraded) image per UAV, labelled "UAV1" ...

``evidence`` is what the answer was derived from (counts, regions, measured quality, causes),
so QC and a reader can re-derive it.
"""

from __future__ import annotations

from typing import Literal, get_args

from skyqa.contracts.base import Contract
from skyqa.contracts.qa import Option

CollabTask = Literal[
    "scene_description",
    "scene_comparison",
    "observing_posture",
    "object_recognition",
    "object_counting",
    "object_grounding",
    "object_matching",
    "quality_assessment",
    "usability_assessment",
    "causal_assessment",
    "when_to_collaborate",
    "what_to_collaborate",
    "who_to_collaborate",
    "why_to_collaborate",
]
COLLAB_TASKS: tuple[CollabTask, ...] = get_args(CollabTask)
CollabGroup = Literal[
    "scene_understanding", "object_understanding", "perception_assessment", "collaborative_decision"
]
COLLAB_GROUPS: dict[str, tuple[CollabTask, ...]] = {
    "scene_understanding": COLLAB_TASKS[0:3],
    "object_understanding": COLLAB_TASKS[3:7],
    "perception_assessment": COLLAB_TASKS[7:10],
    "collaborative_decision": COLLAB_TASKS[10:14],
}
# AirCopBench's own subtask names (its evaluation groups them into categories by exact match)
COLLAB_DISPLAY: dict[str, str] = {
    "scene_description": "Scene Description",
    "scene_comparison": "Scene Comparison",
    "observing_posture": "Observing Posture",
    "object_recognition": "Object Recognition",
    "object_counting": "Object Counting",
    "object_grounding": "Object Grounding",
    "object_matching": "Object Matching",
    "quality_assessment": "Quality Assessment",
    "usability_assessment": "Usability Assessment",
    "causal_assessment": "Causal Assessment",
    "when_to_collaborate": "When to Collaborate",
    "what_to_collaborate": "What to Collaborate",
    "who_to_collaborate": "Who to Collaborate",
    "why_to_collaborate": "Why to Collaborate",
}


def collab_group_of(task: str) -> str:
    return next(g for g, tasks in COLLAB_GROUPS.items() if task in tasks)


class CollabRow(Contract):
    """One multiple-choice question about a UAV group's views (one image per UAV, labelled)."""

    sample_id: str
    scene_id: str
    engine: str
    task: CollabTask
    task_display_name: str
    group: Literal[
        "scene_understanding", "object_understanding", "perception_assessment", "collaborative_decision"
    ]
    group_id: str  # the UAV group (its mission folder)
    uav: str  # the UAV the question is about ("" when about the whole group)
    images: list[str]  # per UAV, relative to the release: the view as shown (degraded or not)
    image_labels: list[str]  # "UAV1", "UAV2", ...
    question: str
    options: list[Option]
    answer_option_id: str
    answer_label: str
    evidence: dict[str, object]  # what the answer was derived from
    difficulty: str  # "easy" (2-3 UAVs) | "medium" (4-5) | "hard" (6+)
    prompt_text: str
    user_prompt: str
    system_prompt: str
