"""Reports: item-level JSONL, metric CSVs with UAV-DualCog's columns, leaderboard JSON, HTML page."""

from __future__ import annotations

import csv
import html
import io
import json
from collections import Counter
from typing import Any

from services.evaluator.metrics import summarize
from services.evaluator.scoring import IMAGE_METRICS, JOINT_METRICS, VISIBILITY_METRICS

IMAGE_TASKS = ("self_where", "self_what", "env_where", "env_how")
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
                rows = _rows(items, model=model, task=task, difficulty=diff)
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


def video_csv(items: list[dict[str, Any]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(VIDEO_CSV)
    for model in sorted({i["model"] for i in items}):
        for form in ("self_instance_recognition_joint", "env_visibility_reasoning"):
            for diff in ("ALL", "easy", "medium", "hard"):
                rows = _rows(items, model=model, task=form, difficulty=diff)
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
                    line = [
                        s.get("element_f1"),
                        "",
                        "",
                        "",
                        "",
                        s.get("temporal_f1@0.5"),
                        s.get("temporal_mean_tiou"),
                    ]
                w.writerow([model, "single-landmark", form, diff, len(rows), *line])
    return buf.getvalue().encode()


def leaderboard(items: list[dict[str, Any]]) -> dict[str, Any]:
    board = []
    for model in sorted({i["model"] for i in items}):
        mine = [i for i in items if i["model"] == model]
        image = [i for i in mine if i["task"] in IMAGE_TASKS]
        joint = [i for i in mine if i["task"] == "self_instance_recognition_joint"]
        vis = [i for i in mine if i["task"] == "env_visibility_reasoning"]
        entry: dict[str, Any] = {
            "model": model,
            "items": len(mine),
            "parse": dict(sorted(Counter(i["parse_kind"] for i in mine).items())),
            "parse_stages": dict(sorted(Counter(i["parse_stage"] for i in mine if i["parse_stage"]).items())),
            "image": summarize(image, IMAGE_METRICS),
            "per_task": {
                t: summarize([i for i in image if i["task"] == t], IMAGE_METRICS) for t in IMAGE_TASKS
            },
            "video_behavior": summarize(joint, JOINT_METRICS),
            "video_visibility": summarize(vis, VISIBILITY_METRICS),
        }
        board.append(entry)
    board.sort(key=lambda e: -float(e["image"].get("joint_correct", 0.0)))
    return {"ranked_by": "image joint accuracy (option and box)", "models": board}


def html_page(board: dict[str, Any], title: str) -> bytes:
    """A self-contained page: a bar per model and task (option accuracy) with CI whiskers."""
    bars = []
    for e in board["models"]:
        cells = []
        for task, s in e["per_task"].items():
            acc = float(s.get("option_correct", 0.0))
            lo, hi = s.get("option_correct_ci95", [acc, acc])
            cells.append(
                f"<td><div class=bar style='width:{acc * 200:.0f}px'></div>{acc:.2f} "
                f"<small>[{lo:.2f}, {hi:.2f}]</small><br><small>{html.escape(task)}</small></td>"
            )
        parse = html.escape(json.dumps(e["parse"]))
        bars.append(
            f"<tr><th>{html.escape(e['model'])}</th>{''.join(cells)}<td><small>{parse}</small></td></tr>"
        )
    return f"""<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>
<style>body{{font:14px system-ui;margin:2em}} td{{padding:4px 12px;vertical-align:top}}
.bar{{height:12px;background:#3b6ea5;display:inline-block;margin-right:6px}}</style>
<h1>{html.escape(title)}</h1>
<p>Option accuracy per image task with 95% cluster-bootstrap intervals (by landmark).</p>
<table>{"".join(bars)}</table>
<pre>{html.escape(json.dumps(board, indent=1))}</pre>""".encode()
