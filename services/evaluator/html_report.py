"""The evaluation report as one self-contained HTML page: a leaderboard bar chart, the task
correlation heatmap and the tables, drawn as inline SVG (no script, no external asset)."""

from __future__ import annotations

import html
import json
from typing import Any

from skyqa.contracts.qa import IMAGE_TASKS

from services.evaluator.leaderboard import ACCESS, PROTOCOLS


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
            x = x0 + m * bw
            if "option_correct" not in st:
                # nothing scored (not asked, or cut by the budget): a zero bar would read as
                # every answer wrong
                parts.append(
                    f"<text x={x} y={height + 8}>–<title>{html.escape(e['model'])} {task}: "
                    "not scored</title></text>"
                )
                continue
            acc = float(st["option_correct"])
            lo, hi = st.get("option_correct_ci95", [acc, acc])
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


def _group_tables(models: list[dict[str, Any]]) -> str:
    """Per family with task groups: each group's score and 95% interval per model."""
    out = []
    for fam in sorted({f for e in models for f in e.get("per_group", {})}):
        groups = next(e["per_group"][fam] for e in models if fam in e.get("per_group", {}))
        rows = []
        for e in models:
            cells = []
            for g in groups:
                s = e.get("per_group", {}).get(fam, {}).get(g, {})
                metric = next(
                    (k for k in s if k not in ("count", "not_run") and not k.endswith("_ci95")), None
                )
                cells.append(f"{s[metric]} {s[metric + '_ci95']} (n={s['count']})" if metric else "–")
            rows.append([e["model"], *cells])
        out.append(f"<h3>{html.escape(fam)}</h3>" + _table(["model", *groups], rows))
    return "".join(out) or "<p><i>No family with task groups was evaluated.</i></p>"


def _frames(f: dict[str, Any] | None) -> str:
    if f is None:
        return "no video"
    every = f"{f['count']} spread over the video" if f["count"] else f"{f['fps']:g} per second"
    return f"{every}, at most {f['cap']}"


def _media_table(board: dict[str, Any]) -> str:
    """Per model and family, the media policy its requests were made under."""
    if not board.get("media_policy"):
        return "<p><i>No model was evaluated (the baselines are shown no media).</i></p>"
    return _table(
        ["model", "family", "largest image", "video frames", "media bytes per request", "follows"],
        [
            [
                model,
                family,
                f"{p['max_pixels']:,} pixels" if p["max_pixels"] else "as stored",
                _frames(p["frames"]),
                f"{p['max_request_bytes']:,}" if p["max_request_bytes"] else "no limit",
                p["source"],
            ]
            for model, families in board.get("media_policy", {}).items()
            for family, p in families.items()
        ],
    )


def html_page(board: dict[str, Any], title: str) -> bytes:
    """A self-contained report page: bars, tables per protocol, the correlation heat map."""
    models = board["models"]
    corr = board["task_correlation"]
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
        [
            "model",
            "vanilla",
            "circular",
            "circular 95% CI",
            "consistency",
            "letter share",
            "groups",
            "incomplete groups (left out)",
        ],
        [
            [
                e["model"],
                e["circular"].get("vanilla"),
                e["circular"].get("circular"),
                e["circular"].get("circular_ci95"),
                e["circular"].get("consistent"),
                e["circular"]["letter_share"],
                e["circular"]["groups"],
                e["circular"].get("incomplete_groups", 0),
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
    operations = _table(
        [
            "model",
            "protocol",
            "rows",
            "final option acc",
            "step error per operation",
            "error deviation",
            "first error",
        ],
        [
            [
                e["model"],
                name,
                p["items"],
                p["final"].get("option_correct"),
                p["operation_error"],
                p["operation_error_deviation"],
                p["first_error"],
            ]
            for e in models
            for name, p in e.get("step_protocols", {}).items()
        ],
    )
    formats = _table(
        ["model", *PROTOCOLS],
        [
            [e["model"], *(e["protocols"].get(p, {}).get("option_correct") for p in PROTOCOLS)]
            for e in models
            if "protocols" in e
        ],
    )
    paired = _table(
        [
            "model A",
            "model B",
            "rows",
            "acc A",
            "acc B",
            "A − B",
            "95% CI",
            "only A right",
            "only B right",
            "McNemar p",
        ],
        [
            [
                p["a"],
                p["b"],
                p["rows"],
                p["accuracy_a"],
                p["accuracy_b"],
                p["difference"],
                p["difference_ci95"],
                p["only_a_right"],
                p["only_b_right"],
                p["mcnemar_p"],
            ]
            for p in board.get("paired", [])
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
every rotation is right; consistency: the same answer content in every rotation. A group with a rotation
that was not run (budget) is left out and counted as incomplete.</p>{circular}
<h2>Process level (GT reasoning steps, schema_cot)</h2>{process}
<h2>Reasoning formats (UltraVR S0-S5)</h2><p>Option accuracy, every family's rows, when asked
directly (full), with a generic step-by-step instruction (generic_cot), with the ground-truth
step schema (schema_cot, the rows that have steps), after solved examples (fewshot_cot), step by
step on the model's own answers (pred_step) and step by step on ground-truth prefixes
(gt_prefix).</p>{formats}
<h2>Per-operation errors (UltraVR S2-S5)</h2><p>Step error per operation (GND grounding, PER
perception, QUA quantification, INT integration, INF inference), its deviation from the model's
mean step error, and the operation of the first wrong step.</p>{operations}
<h2>Paired comparison</h2><p>Option accuracy of every two models on the rows both were asked (full
condition): the exact McNemar test on the rows only one got right, and a 95% cluster-bootstrap
interval of the difference (resampling release units).</p>{paired}
<h2>Task groups</h2><p>Primary score per group of a family's tasks (and all of them), with 95%
cluster-bootstrap intervals.</p>{_group_tables(models)}
<h2>Media sent</h2><p>What each model was shown, per family: its source benchmark's media policy
clipped by the limits the endpoint states (a larger image is scaled down to its pixel limit).</p>
{_media_table(board)}
<h2>Task correlation</h2><p>{html.escape(corr["method"])},
{corr["units"]} units.</p>{_heatmap_svg(corr)}
<p>{html.escape(corr["across_models"]["method"])}, {corr["across_models"]["models"]} models.</p>
{_heatmap_svg(corr["across_models"])}
<details><summary>leaderboard.json</summary>
<pre>{html.escape(json.dumps(board, indent=1))}</pre></details>""".encode()
