"""Video QA: 2 rows per mission (4 per landmark).

Flight Behavior Recognition and Temporal Localization lists the mission's behaviors (the
composite label for composite missions plus every atomic behavior, each with its intervals)
among distractors, up to 8 options; distractors come from the other missions of the run and
from the behavior library and are never more than 0.85 similar (difflib) to any option already
listed. Landmark Visibility Counting and Interval Reasoning asks for the count and intervals.
"""

from __future__ import annotations

import numpy as np

from skyqa.contracts.missions import ComposedSegments, SelfTrack, TaskData
from skyqa.contracts.qa import AnswerItem, Option, VideoRow
from skyqa.errors import InvalidInput
from skyqa.families.structure import MAX_SIMILARITY
from skyqa.vocab import directions as L, prompts
from skyqa.vocab.behaviors import Library, composite_label, element_label

LETTERS = "ABCDEFGH"
MAX_OPTIONS = 8


def distractor_pool(lib: Library, rng: np.random.Generator) -> list[str]:
    """Library behaviors with sampled parameters, both camera modes, in a seeded order."""
    out = []
    for name in lib.set_names("atomic"):
        step = lib.sets[name].steps[0]
        for mode in ("look_forward", "landmark_track"):
            out.append(element_label(step.element, mode, lib.sample_step(step, rng)))
    for name in lib.set_names("composite"):
        out.append(composite_label(lib, name))
    return [out[i] for i in rng.permutation(len(out))]


def joint_row(
    lib: Library,
    composed: ComposedSegments,
    task: TaskData,
    others: list[str],
    common: dict[str, object],
    rng: np.random.Generator,
) -> VideoRow:
    track = task.task_tracks.self_state_awareness
    intervals: dict[str, list[list[float]]] = {}
    for seg, iv in zip(composed.segments, _intervals_by_event(track), strict=True):
        label = element_label(seg.element_class, seg.mode_key, seg.params)
        intervals.setdefault(label, []).extend(iv)
    gold: list[tuple[str, list[list[float]]]] = []
    if composed.mission_kind == "composite":
        gold.append((composite_label(lib, composed.task_subtype), [[0.0, task.video.duration_sec]]))
    gold += list(intervals.items())
    labels = [g[0] for g in gold]
    for cand in [*others, *distractor_pool(lib, rng)]:
        if len(labels) >= MAX_OPTIONS:
            break
        if all(L.similarity(cand, x) <= MAX_SIMILARITY for x in labels):
            labels.append(cand)
    order = rng.permutation(len(labels))
    options = [Option(option_id=LETTERS[i], label=labels[j]) for i, j in enumerate(order)]
    by_label = {o.label: o.option_id for o in options}
    items = sorted(
        (AnswerItem(option_id=by_label[lab], label=lab, intervals_sec=ivs) for lab, ivs in gold),
        key=lambda a: a.option_id,
    )
    desc = str(common["landmark_description"])
    text = prompts.JOINT_USER.format(
        desc=desc,
        options=prompts.options_text([(o.option_id, o.label) for o in options]),
    )
    return VideoRow.model_validate(
        {
            **common,
            "sample_id": f"{composed.scene_id}_{composed.traj_id}_self_instance_recognition_joint",
            "form": "self_instance_recognition_joint",
            "task_group": "self-state",
            "task_name": "self_instance_recognition_joint",
            "task_display_name": prompts.DISPLAY["self_instance_recognition_joint"],
            "response_kind": "choice_with_optional_intervals",
            "difficulty_score": track.task_difficulty_score,
            "difficulty_band": track.task_difficulty,
            "choice_options": options,
            "multi_select": True,
            "answer_option_ids": [i.option_id for i in items],
            "answer_items": items,
            "behavior_intervals_sec": [
                {
                    "event_id": b.event_id,
                    "event_label": b.event_label,
                    "start_sec": b.start_sec,
                    "end_sec": b.end_sec,
                }
                for b in track.behavior_intervals_sec
            ],
            "prompt_text": text,
            "user_prompt": text,
            "system_prompt": prompts.JOINT_SYSTEM,
        }
    )


def _intervals_by_event(track: SelfTrack) -> list[list[list[float]]]:
    return [[[i.start_sec, i.end_sec] for i in b.intervals_sec] for b in track.behavior_intervals_sec]


def visibility_row(composed: ComposedSegments, task: TaskData, common: dict[str, object]) -> VideoRow:
    env = task.task_tracks.environmental_awareness
    if env.visible_count < 1:
        # the mission failed: its landmark is not asked about (``family.failed_missions``)
        raise InvalidInput(f"mission {composed.traj_id} never shows its landmark: no visibility row")
    desc = str(common["landmark_description"])
    text = prompts.VISIBILITY_USER.format(desc=desc)
    return VideoRow.model_validate(
        {
            **common,
            "sample_id": f"{composed.scene_id}_{composed.traj_id}_env_visibility_reasoning",
            "form": "env_visibility_reasoning",
            "task_group": "environmental",
            "task_name": "env_visibility_reasoning",
            "task_display_name": prompts.DISPLAY["env_visibility_reasoning"],
            "response_kind": "count_and_intervals",
            "difficulty_score": env.difficulty_score,
            "difficulty_band": env.difficulty_band,
            "gold_environment_answer": {
                "visible_count": env.visible_count,
                "visible_intervals_sec": [[i.start_sec, i.end_sec] for i in env.intervals_sec],
            },
            "prompt_text": text,
            "user_prompt": text,
            "system_prompt": prompts.VISIBILITY_SYSTEM,
        }
    )
