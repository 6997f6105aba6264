"""Reports: item-level JSONL, metric CSVs with UAV-DualCog's columns, leaderboard JSON, HTML page."""

from __future__ import annotations

import csv
import html
import io
import json
from collections import Counter
from typing import Any

import numpy as np
from scipy.stats import spearmanr
from skyqa.contracts.qa import IMAGE_TASKS

from services.evaluator.metrics import summarize
from services.evaluator.scoring import IMAGE_METRICS, JOINT_METRICS, VISIBILITY_METRICS
from services.evaluator.steps import summarize_steps

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


PRIMARY = {
    **{t: "option_correct" for t in IMAGE_TASKS},
    "self_instance_recognition_joint": "element_f1",
    "env_visibility_reasoning": "count_exact",
}
ACCESS = ("text_only", "thumbnail", "full", "crop", "full_crop")


def _entry(model: str, mine: list[dict[str, Any]]) -> dict[str, Any]:
    full = [i for i in mine if i["condition"] == "full"]
    image = [i for i in full if i["task"] in IMAGE_TASKS]
    entry: dict[str, Any] = {
        "model": model,
        "items": len(full),
        "parse": dict(sorted(Counter(i["parse_kind"] for i in full).items())),
        "parse_stages": dict(sorted(Counter(i["parse_stage"] for i in full if i["parse_stage"]).items())),
        "image": summarize(image, IMAGE_METRICS),
        "per_task": {t: summarize([i for i in image if i["task"] == t], IMAGE_METRICS) for t in IMAGE_TASKS},
        "per_category": {
            c: summarize([i for i in image if i.get("category") == c], IMAGE_METRICS)
            for c in sorted({str(i.get("category", "")) for i in image})
        },
        "video_behavior": summarize(
            [i for i in full if i["task"] == "self_instance_recognition_joint"], JOINT_METRICS
        ),
        "video_visibility": summarize(
            [i for i in full if i["task"] == "env_visibility_reasoning"], VISIBILITY_METRICS
        ),
    }
    entry["video_behavior"]["element_instance_f1"] = element_instance_f1(entry["video_behavior"])
    access = {
        c: summarize([i for i in mine if i["condition"] == c and i["task"] in IMAGE_TASKS], IMAGE_METRICS)
        for c in ACCESS
        if any(i["condition"] == c for i in mine)
    }
    if len(access) > 1:
        entry["evidence_access"] = access
        entry["access_gaps"] = access_gaps(access)
    circ = [i for i in mine if i["condition"] == "circular"]
    if circ:
        entry["circular"] = circular_summary(circ)
    schema = [i for i in mine if i["condition"] == "schema_cot"]
    if schema:
        entry["process"] = {"final": summarize(schema, IMAGE_METRICS), **summarize_steps(schema)}
    return entry


def access_gaps(access: dict[str, dict[str, Any]]) -> dict[str, float]:
    """UltraVR's diagnostic gaps on image option accuracy: visual (V2 - V0), resolution
    (V2 - V1), access (V3 - V2) and augmentation (V4 - V2)."""
    acc = {c: float(s["option_correct"]) for c, s in access.items() if "option_correct" in s}
    pairs = {
        "visual": ("full", "text_only"),
        "resolution": ("full", "thumbnail"),
        "access": ("crop", "full"),
        "augmentation": ("full_crop", "full"),
    }
    return {k: round(acc[a] - acc[b], 4) for k, (a, b) in pairs.items() if a in acc and b in acc}


def circular_summary(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Vanilla (rotation 0) and circular accuracy (every rotation right), consistency (the
    same answer *content* in every rotation) and the chosen-letter histogram (position bias)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for i in items:
        groups.setdefault(i["base_sample_id"], []).append(i)
    per_group = [
        {
            "landmark_id": g[0]["landmark_id"],
            "vanilla": next(float(i["option_correct"]) for i in g if i["rotation"] == 0),
            "circular": float(all(i["option_correct"] for i in g)),
            "consistent": float(
                len({i.get("pred_label", "") for i in g}) == 1 and bool(g[0].get("pred_label"))
            ),
        }
        for g in groups.values()
    ]
    letters = Counter(i["pred_option"] for i in items if i["parse_kind"] == "choice")
    total = sum(letters.values())
    return {
        **summarize(per_group, ("vanilla", "circular", "consistent")),
        "groups": len(per_group),
        "letter_share": {k: round(v / total, 4) for k, v in sorted(letters.items())} if total else {},
    }


def task_correlation(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Spearman correlation between tasks' primary scores over (model, landmark) units, in the
    full condition; a pair is left out when either side is constant or fewer than 4 units share it."""
    units: dict[tuple[str, str], dict[str, list[float]]] = {}
    for i in items:
        metric = PRIMARY.get(i["task"])
        if i["condition"] != "full" or metric is None or not isinstance(i.get(metric), int | float):
            continue
        units.setdefault((i["model"], i["landmark_id"]), {}).setdefault(i["task"], []).append(
            float(i[metric])
        )
    tasks = [t for t in PRIMARY if any(t in u for u in units.values())]
    matrix: dict[str, dict[str, float | None]] = {}
    for a in tasks:
        matrix[a] = {}
        for b in tasks:
            both = [(np.mean(u[a]), np.mean(u[b])) for u in units.values() if a in u and b in u]
            xs, ys = np.array([p[0] for p in both]), np.array([p[1] for p in both])
            if len(both) < 4 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
                matrix[a][b] = None
                continue
            matrix[a][b] = round(float(spearmanr(xs, ys).statistic), 3)
    return {"method": "spearman over (model, landmark) units", "units": len(units), "matrix": matrix}


def leaderboard(items: list[dict[str, Any]]) -> dict[str, Any]:
    board = [_entry(m, [i for i in items if i["model"] == m]) for m in sorted({i["model"] for i in items})]
    board.sort(key=lambda e: -float(e["image"].get("joint_correct", 0.0)))
    prior = next((e for e in board if e["model"] == "text_prior"), None)
    if prior is not None:
        base = float(prior["image"].get("option_correct", 0.0))
        for e in board:
            e["visual_gap_over_text_prior"] = round(float(e["image"].get("option_correct", 0.0)) - base, 4)
    return {
        "ranked_by": "image joint accuracy (option and box), full condition",
        "models": board,
        "task_correlation": task_correlation(items),
    }


def _bars_svg(board: dict[str, Any]) -> str:
    """Grouped bars: option accuracy per image task and model, with 95% CI whiskers."""
    models = [e["model"] for e in board["models"]]
    colours = ["#3b6ea5", "#d08c2b", "#5a9e5a", "#a44a6b", "#6b5ba4", "#7f7f7f", "#2b9ad0", "#c0b020"]
    bw, gap, height = 14, 30, 180
    width = len(IMAGE_TASKS) * (len(models) * bw + gap) + 60
    parts = [f"<svg width={width} height={height + 70} role=img aria-label='option accuracy per task'>"]
    for y in (0.0, 0.25, 0.5, 0.75, 1.0):
        yy = 10 + height * (1 - y)
        parts.append(
            f"<line x1=40 x2={width} y1={yy} y2={yy} stroke=#ddd /><text x=4 y={yy + 4}>{y:.2f}</text>"
        )
    for t, task in enumerate(IMAGE_TASKS):
        x0 = 45 + t * (len(models) * bw + gap)
        parts.append(f"<text x={x0} y={height + 30}>{html.escape(task)}</text>")
        for m, e in enumerate(board["models"]):
            st = e["per_task"].get(task, {})
            acc = float(st.get("option_correct", 0.0))
            lo, hi = st.get("option_correct_ci95", [acc, acc])
            x = x0 + m * bw
            parts.append(
                f"<rect x={x} y={10 + height * (1 - acc):.1f} width={bw - 2} height={height * acc:.1f} "
                f"fill={colours[m % len(colours)]}><title>{html.escape(e['model'])} {task}: {acc:.3f} "
                f"[{lo:.3f}, {hi:.3f}]</title></rect>"
                f"<line x1={x + bw / 2 - 1} x2={x + bw / 2 - 1} y1={10 + height * (1 - hi):.1f} "
                f"y2={10 + height * (1 - lo):.1f} stroke=#222 />"
            )
    for m, name in enumerate(models):
        parts.append(
            f"<rect x={45 + m * 120} y={height + 45} width=10 height=10 fill={colours[m % len(colours)]} />"
            f"<text x={60 + m * 120} y={height + 55}>{html.escape(name)}</text>"
        )
    return "".join(parts) + "</svg>"


def _heatmap_svg(corr: dict[str, Any]) -> str:
    """Task x task Spearman correlations, blue negative to red positive, blank when undefined."""
    tasks = list(corr["matrix"])
    cell, left, top = 46, 190, 10
    size = left + cell * len(tasks) + 10
    parts = [
        f"<svg width={size} height={top + cell * len(tasks) + 230} role=img aria-label='task correlation'>"
    ]
    for r, a in enumerate(tasks):
        parts.append(f"<text x=4 y={top + r * cell + cell / 2 + 4}>{html.escape(a)}</text>")
        for c, b in enumerate(tasks):
            v = corr["matrix"][a][b]
            if v is None:
                fill, label = "#f4f4f4", "–"
            else:
                k = int(255 * (1 - abs(v)))
                fill = f"rgb(255,{k},{k})" if v >= 0 else f"rgb({k},{k},255)"
                label = f"{v:.2f}"
            x, y = left + c * cell, top + r * cell
            parts.append(
                f"<rect x={x} y={y} width={cell - 2} height={cell - 2} fill='{fill}'>"
                f"<title>{html.escape(a)} vs {html.escape(b)}: {label}</title></rect>"
                f"<text x={x + 8} y={y + cell / 2 + 4}>{label}</text>"
            )
    for c, b in enumerate(tasks):
        tx, ty = left + c * cell + cell / 2, top + cell * len(tasks) + 8
        parts.append(f"<text transform='translate({tx},{ty}) rotate(60)'>{html.escape(b)}</text>")
    return "".join(parts) + "</svg>"


STYLE = (
    "body{font:14px system-ui;margin:2em;max-width:1100px} "
    "td,th{padding:4px 10px;text-align:left;vertical-align:top} "
    "table{border-collapse:collapse;margin-bottom:1.5em} tr:nth-child(even){background:#f6f6f6} "
    "svg text{font:11px system-ui}"
)


def _table(head: list[str], rows: list[list[Any]]) -> str:
    if not rows:
        return "<p><i>Not run: no responder was evaluated under this protocol.</i></p>"
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape('' if v is None else str(v))}</td>" for v in r) + "</tr>"
        for r in rows
    )
    return f"<table><tr>{cells}</tr>{body}</table>"


def html_page(board: dict[str, Any], title: str) -> bytes:
    """A self-contained report page: bars, tables per protocol, the correlation heat map."""
    models = board["models"]
    summary = _table(
        ["model", "option acc", "95% CI", "bbox Acc@0.5", "joint", "gap over text prior", "parse"],
        [
            [
                e["model"],
                e["image"].get("option_correct"),
                e["image"].get("option_correct_ci95"),
                e["image"].get("bbox_acc@50iou"),
                e["image"].get("joint_correct"),
                e.get("visual_gap_over_text_prior"),
                json.dumps(e["parse"]),
            ]
            for e in models
        ],
    )
    access = _table(
        ["model", *ACCESS, "gaps"],
        [
            [
                e["model"],
                *(e["evidence_access"].get(c, {}).get("option_correct") for c in ACCESS),
                e["access_gaps"],
            ]
            for e in models
            if "evidence_access" in e
        ],
    )
    circular = _table(
        ["model", "vanilla", "circular", "circular 95% CI", "consistency", "letter share"],
        [
            [
                e["model"],
                e["circular"].get("vanilla"),
                e["circular"].get("circular"),
                e["circular"].get("circular_ci95"),
                e["circular"].get("consistent"),
                e["circular"]["letter_share"],
            ]
            for e in models
            if "circular" in e
        ],
    )
    process = _table(
        ["model", "final option acc", "operation accuracy", "first error"],
        [
            [
                e["model"],
                e["process"]["final"].get("option_correct"),
                e["process"]["operation_accuracy"],
                e["process"]["first_error"],
            ]
            for e in models
            if "process" in e
        ],
    )
    return f"""<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>
<style>{STYLE}</style>
<h1>{html.escape(title)}</h1>
<h2>Leaderboard (full condition)</h2>{summary}
<h2>Option accuracy per image task</h2>
<p>Bars with 95% cluster-bootstrap intervals (resampling landmarks).</p>
{_bars_svg(board)}
<h2>Visual-evidence access</h2><p>Image option accuracy per condition; gaps: visual = full − text_only,
resolution = full − thumbnail, access = crop − full, augmentation = full_crop − full.</p>{access}
<h2>CircularEval</h2><p>Each MCQ asked once per rotation of its options; circular counts a group only if
every rotation is right; consistency: the same answer content in every rotation.</p>{circular}
<h2>Process level (GT reasoning steps, schema_cot)</h2>{process}
<h2>Task correlation</h2><p>{html.escape(board["task_correlation"]["method"])},
{board["task_correlation"]["units"]} units.</p>{_heatmap_svg(board["task_correlation"])}
<details><summary>leaderboard.json</summary>
<pre>{html.escape(json.dumps(board, indent=1))}</pre></details>""".encode()
