"""Valid manifest rows for tests: every contract field set to something plausible, then the
fields a test is about."""

from __future__ import annotations

from typing import Any

from partial_models import partial_model
from skyqa import integrity
from skyqa.contracts.qa import ImageRow, VideoRow

LABELS = ("Front", "Left", "Right", "Back")


def image_row(**fields: Any) -> ImageRow:
    """An env_where row whose gold is "Right" (option C), unless ``fields`` say otherwise."""
    options = [{"option_id": x, "label": lab} for x, lab in zip("ABCD", LABELS, strict=True)]
    prompt = "Where is the landmark?\nOptions:\n" + "\n".join(
        f"{o['option_id']}. {o['label']}" for o in options
    )
    base: dict[str, Any] = {
        "sample_id": "s1",
        "scene_id": "tiny_town",
        "engine": "builtin",
        "landmark_id": "lm",
        "landmark_category": "building",
        "landmark_description": "the red house",
        "task_group": "environment-aware",
        "view_definition": "Environment-Aware",
        "task_type": "env_where",
        "task_display_name": "Self-Relative Position Reasoning",
        "difficulty": "4way",
        "reference_image": "ref.jpg",
        "reference_image_with_bbox": "ref.jpg",
        "reference_bbox_xyxy_norm": [0.4, 0.3, 0.6, 0.7],
        "reference_object_view": "Front",
        "target_image": "env.jpg",
        "images": ["ref.jpg", "env.jpg"],
        "label_options": options,
        "answer_option_id": "C",
        "answer_label": "Right",
        "answer_bbox_xyxy_norm": [0.7, 0.3, 0.9, 0.7],
        "metadata": {"env_request_id": "env0"},
        "reasoning_steps": [{"question": "Where is it?", "answer": "Right", "operation": "INF"}],
        "prompt_text": "Where is the landmark?",
        "user_prompt": prompt,
        "system_prompt": "[TASK] t\n[OUTPUT] one JSON",
    }
    return ImageRow.model_validate(base | fields)


def video_row(**fields: Any) -> VideoRow:
    """A visibility row (count 1 over [0, 2] s of a 10 s video), unless ``fields`` say otherwise."""
    base: dict[str, Any] = {
        "sample_id": "v1",
        "scene_id": "tiny_town",
        "engine": "builtin",
        "form": "env_visibility_reasoning",
        "task_group": "environmental",
        "task_name": "env_visibility_reasoning",
        "task_display_name": "Landmark Visibility Counting and Interval Reasoning",
        "response_kind": "count_and_intervals",
        "mission_id": "m1",
        "mission_kind": "atomic",
        "set_id": "orbit",
        "set_name": "orbit",
        "landmark_id": "lm",
        "landmark_category": "building",
        "landmark_description": "the red house",
        "reference_image_with_bbox": "ref.jpg",
        "reference_bbox_xyxy_norm": [0.4, 0.3, 0.6, 0.7],
        "video_path": "m1.mp4",
        "fps": 10.0,
        "frame_count": 100,
        "duration_sec": 10.0,
        "video_width": 160,
        "video_height": 120,
        "difficulty_score": 0.5,
        "difficulty_band": "medium",
        "gold_environment_answer": {"visible_count": 1, "visible_intervals_sec": [[0.0, 2.0]]},
        "prompt_text": "How many times is the landmark visible?",
        "user_prompt": "How many times is the landmark visible?",
        "system_prompt": "[TASK] t\n[OUTPUT] one JSON",
    }
    return VideoRow.model_validate(base | fields)


def count_row(shares: list[float], count: int, intervals: list[list[float]]) -> VideoRow:
    """A visibility row of mission "m" (10 fps, one frame per share) with only the fields its
    QC reads, and the given gold count and intervals."""
    return partial_model(
        VideoRow,
        sample_id="m_env",
        form="env_visibility_reasoning",
        mission_id="m",
        video_path="m.mp4",
        prompt_text="How many times does this landmark appear?",
        fps=10.0,
        frame_count=len(shares),
        duration_sec=len(shares) / 10,
        gold_environment_answer={"visible_count": count, "visible_intervals_sec": intervals},
    )


def plan_fields(rows: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A QA plan as stored, with nothing planned (``rows`` absent when None: an older plan)."""
    base: dict[str, Any] = {
        "run_id": "r",
        "scene_id": "s",
        "engine": "builtin",
        "landmarks": ["lm"],
        "skipped": {},
        "requests": {
            "scene_id": "s",
            "run_id": "r",
            "backend": "builtin",
            "env_requests": [],
            "overlays": [],
        },
        "missions": {},
        "candidates": 1,
        "collected": 1,
        "valid_instances": "runs/r/valid.json",
        "scan": {},
    }
    if rows is not None:
        base["rows"] = rows
    return base | fields


def release_info(run_id: str = "r1", scene_id: str = "s", **fields: Any) -> integrity.ReleaseInfo:
    """A release's info with nothing recorded but what a test names."""
    base: dict[str, Any] = {
        "skyqa_version": "0",
        "git_commit": "unknown",
        "run_id": run_id,
        "scene_id": scene_id,
        "seed": 0,
        "config_hash": "h",
        "settings": {},
        "scan_request": {},
        "counts": {},
        "family_rows": {},
        "manifests": {},
    }
    return integrity.ReleaseInfo(**{**base, **fields})
