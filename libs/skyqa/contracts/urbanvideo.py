"""Rows of the UrbanVideo-Bench-style navigation family: one multiple-choice question about a
navigation mission's video (or the video cut at the moment the question is asked).

``evidence`` is what the answer was derived from (frames, segments, distances, angles), so QC
and a reader can re-derive it; ``clip_end_frame`` is the last frame the row shows.
"""

from __future__ import annotations

from typing import Literal, get_args

from skyqa.contracts.base import Contract
from skyqa.contracts.qa import Option

NavTask = Literal[
    "trajectory_captioning",
    "sequence_recall",
    "object_recall",
    "scene_recall",
    "start_end_position",
    "proximity",
    "duration",
    "landmark_position",
    "goal_detection",
    "cognitive_map",
    "causal",
    "counterfactual",
    "association",
    "progress_evaluation",
    "high_level_planning",
    "action_generation",
]
NAV_TASKS: tuple[NavTask, ...] = get_args(NavTask)
GROUPS: dict[str, tuple[NavTask, ...]] = {
    "recall": NAV_TASKS[0:5],
    "perception": NAV_TASKS[5:10],
    "reasoning": NAV_TASKS[10:13],
    "navigation": NAV_TASKS[13:16],
}
DISPLAY: dict[str, str] = {
    "trajectory_captioning": "Trajectory Captioning",
    "sequence_recall": "Sequence Recall",
    "object_recall": "Object Recall",
    "scene_recall": "Scene Recall",
    "start_end_position": "Start/End Position",
    "proximity": "Proximity",
    "duration": "Duration",
    "landmark_position": "Landmark Position",
    "goal_detection": "Goal Detection",
    "cognitive_map": "Cognitive Map",
    "causal": "Causal",
    "counterfactual": "Counterfactual",
    "association": "Association",
    "progress_evaluation": "Progress Evaluation",
    "high_level_planning": "High-level Planning",
    "action_generation": "Action Generation",
}


def group_of(task: str) -> str:
    return next(g for g, tasks in GROUPS.items() if task in tasks)


class NavRow(Contract):
    sample_id: str
    scene_id: str
    engine: str
    task: NavTask
    task_display_name: str
    group: Literal["recall", "perception", "reasoning", "navigation"]
    mission_id: str
    mission_kind: Literal["goal", "route"]
    instruction: str
    video_path: str  # relative to the release: the whole mission video, or its cut
    fps: float
    clip_end_frame: int  # the last frame shown; the question is asked at its time
    frame_count: int  # of the mission video
    question: str
    options: list[Option]
    answer_option_id: str
    answer_label: str
    evidence: dict[str, str | int | float | bool | list[str] | list[float]]
    difficulty: Literal["easy", "medium", "hard"]
    prompt_text: str
    user_prompt: str
    system_prompt: str
