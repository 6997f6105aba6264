"""Metric CSVs with UAV-DualCog's columns: Stage 4 image metrics and Stage 3 video metrics by
difficulty, so its own result tables read skyqa's numbers."""

from __future__ import annotations

import csv
import io
from typing import Any

from skyqa.contracts.qa import IMAGE_TASKS
from skyqa.families.dualcog_image.evaluation import METRICS as IMAGE_METRICS
from skyqa.families.dualcog_video.evaluation import JOINT_METRICS, VISIBILITY_METRICS

from services.evaluator.metrics import summarize

IMAGE_CSV = [
    "model",
    "view_definition",
    "task_type",
    "difficulty",
    "count",
    "option_accuracy",
    "bbox_acc@50iou",
    "bbox_mean_iou",
]
VIDEO_CSV = [
    "model",
    "mode",
    "form",
    "difficulty",
    "count",
    "main_metric",
    "count_within1_acc",
    "segment_f1@0.5",
    "mean_best_tIoU",
    "bbox_acc@50iou",
    "self_temporal_loc_f1@0.5",
    "self_temporal_loc_mean_tIoU",
]


def _rows(items: list[dict[str, Any]], **match: str) -> list[dict[str, Any]]:
    return [i for i in items if all(match[k] in ("ALL", i.get(k)) for k in match)]


def image_csv(items: list[dict[str, Any]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(IMAGE_CSV)
    for model in sorted({i["model"] for i in items}):
        for task in IMAGE_TASKS:
            view = "Self-Aware" if task.startswith("self") else "Environment-Aware"
            for diff in ("ALL", "4way", "8way"):
                rows = _rows(items, model=model, task=task, difficulty=diff, condition="full")
                if not rows:
                    continue
                s = summarize(rows, IMAGE_METRICS)
                w.writerow(
                    [
                        model,
                        view,
                        task,
                        diff,
                        len(rows),
                        s.get("option_correct"),
                        s.get("bbox_acc@50iou"),
                        s.get("bbox_iou"),
                    ]
                )
    return buf.getvalue().encode()


def element_instance_f1(summary: dict[str, Any]) -> float | None:
    """UAV-DualCog's atomic-level main metric: F1 of the row-averaged precision and recall."""
    p, r = summary.get("atomic_precision"), summary.get("atomic_recall")
    if not isinstance(p, float) or not isinstance(r, float):
        return None
    return round(2 * p * r / (p + r), 4) if p + r else 0.0


def video_csv(items: list[dict[str, Any]]) -> bytes:
    """One row per model x form x difficulty; the joint task is split into its composite and
    atomic levels as UAV-DualCog does (composite rows only carry a composite level)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(VIDEO_CSV)
    forms = (
        "self_composite_instance_recognition",
        "self_atomic_instance_recognition",
        "env_visibility_reasoning",
    )
    for model in sorted({i["model"] for i in items}):
        for form in forms:
            task = "env_visibility_reasoning" if form.startswith("env") else "self_instance_recognition_joint"
            for diff in ("ALL", "easy", "medium", "hard"):
                rows = _rows(items, model=model, task=task, difficulty=diff, condition="full")
                if form == "self_composite_instance_recognition":
                    rows = [i for i in rows if "composite_correct" in i]
                if not rows:
                    continue
                if form == "env_visibility_reasoning":
                    s = summarize(rows, VISIBILITY_METRICS)
                    line = [
                        s.get("count_exact"),
                        s.get("count_within1"),
                        s.get("segment_f1@0.5"),
                        s.get("mean_best_tiou"),
                        "",
                        "",
                        "",
                    ]
                else:
                    s = summarize(rows, JOINT_METRICS)
                    main = s.get("composite_correct") if "composite" in form else element_instance_f1(s)
                    line = [main, "", "", "", "", s.get("temporal_f1@0.5"), s.get("temporal_mean_tiou")]
                w.writerow([model, "single-landmark", form, diff, len(rows), *line])
    return buf.getvalue().encode()
