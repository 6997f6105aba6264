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

from services.mission_planner.library import Library
from services.qa_generator import labels as L, prompts

LETTERS = "ABCDEFGH"
MAX_OPTIONS = 8
MAX_SIMILARITY = 0.85
CAMERA = {
    "look_forward": "with the camera looking ahead along the path",
    "landmark_track": "with the camera locked on the landmark",
}


def _turn(p: dict[str, float | str]) -> str:
    return "clockwise" if p.get("direction") == "cw" else "counterclockwise"


def element_label(element: str, camera_mode: str, p: dict[str, float | str]) -> str:
    """A short sentence for one behavior with its parameters; kept short so that two behaviors
    of one mission (the same orbit with another camera mode) stay below 0.85 similarity."""

    def n(name: str) -> int:
        return round(float(p[name]))

    text = {
        "gradual_approach": lambda: f"approach, descending {n('descent_m')} m",
        "gradual_depart": lambda: f"depart, rising {n('rise_m')} m",
        "circular_orbit": lambda: f"circle {_turn(p)} {n('arc_deg')}°",
        "spiral_orbit": lambda: f"spiral out {_turn(p)} {n('arc_deg')}°, rising {n('rise_m')} m",
        "square_orbit": lambda: f"square orbit {_turn(p)}, {n('edge_count')} sides",
        "triangular_orbit": lambda: f"triangle orbit {_turn(p)}, {n('edge_count')} sides",
        "figure8_orbit": lambda: f"figure-eight over the landmark, {n('cycles')} loop(s)",
        "sky_rise": lambda: f"fly over, then climb {n('rise_m')} m vertically",
        "comet": lambda: "comet loop behind the landmark and back",
        "surface_mapping": lambda: f"lawnmower survey from above, {n('lane_count')} lanes",
    }[element]()
    return f"{text} {CAMERA[camera_mode]}"


def composite_label(lib: Library, set_name: str) -> str:
    """The set's name only, the same form as composite distractors: a gold label that listed its
    steps named the gold atomic options too (a blind "most specific" pick reached set-F1 0.52
    against 0.35 by chance)."""
    return f"a {lib.set_display(set_name).lower()} mission"


def is_composite_label(label: str) -> bool:
    """Composite options, gold or distractor, are named "a <set> mission[: <steps>]"."""
    return label.startswith("a ") and (label.endswith(" mission") or " mission: " in label)


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
