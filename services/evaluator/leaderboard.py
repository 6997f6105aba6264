"""The leaderboard: per-model summaries with confidence intervals, the evidence-access gaps,
CircularEval and the correlation of models' scores across tasks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from skyqa.contracts.qa import IMAGE_TASKS
from skyqa.families import FAMILIES, TaskFamily
from skyqa.families.dualcog_image.evaluation import METRICS as IMAGE_METRICS
from skyqa.families.dualcog_video.evaluation import JOINT_METRICS, VISIBILITY_METRICS
from skyqa.families.headline import primary_metrics

from services.evaluator.conditions import STEP_CONDITIONS
from services.evaluator.metrics import summarize
from services.evaluator.metrics_csv import element_instance_f1
from services.evaluator.paired import paired_comparisons
from services.evaluator.steps import summarize_steps


def _groups(full: list[dict[str, Any]], f: TaskFamily[Any]) -> dict[str, Any]:
    """Each of the family's task groups and all its tasks together, by the metrics they share."""
    out = {}
    for name, tasks in {**f.groups, "all": tuple(f.metrics)}.items():
        shared = [m for m in f.metrics[tasks[0]] if all(m in f.metrics[t] for t in tasks)]
        out[name] = summarize([i for i in full if i["task"] in tasks], tuple(shared))
    return out


ACCESS = ("text_only", "thumbnail", "full", "crop", "full_crop")
# UltraVR's GT-CoT reasoning formats the evaluator runs, by the condition that asks them
PROTOCOLS = {
    "S0 direct": "full",
    "S1 generic CoT": "generic_cot",
    "S2 schema CoT": "schema_cot",
    "S3 few-shot GT-CoT": "fewshot_cot",
    "S4 pred-step": "pred_step",
    "S5 GT-prefix": "gt_prefix",
}
# the protocols that score the reasoning steps, by the condition that asks them
STEP_PROTOCOLS = {name: c for name, c in PROTOCOLS.items() if c in STEP_CONDITIONS}


def _entry(model: str, mine: list[dict[str, Any]], families: Sequence[TaskFamily[Any]]) -> dict[str, Any]:
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
    # every registered family's tasks by the family's own metrics (the sections above keep
    # UAV-DualCog's report layout)
    entry["per_family"] = {
        f.name: {t: summarize([i for i in full if i["task"] == t], m) for t, m in f.metrics.items()}
        for f in families
        if any(i["task"] in f.metrics for i in full)
    }
    entry["per_group"] = {
        f.name: _groups(full, f) for f in families if f.groups and any(i["task"] in f.metrics for i in full)
    }
    access = {
        c: summarize([i for i in mine if i["condition"] == c and i["task"] in IMAGE_TASKS], IMAGE_METRICS)
        for c in ACCESS
        if any(i["condition"] == c for i in mine)
    }
    if len(access) > 1:
        entry["evidence_access"] = access
        # a gap is a difference on the same questions: with a budget each condition is cut at
        # a different row, so the gaps are taken over the rows every condition scored
        image_rows = [i for i in mine if i["condition"] in access and i["task"] in IMAGE_TASKS]
        scored = [{i["sample_id"] for i in image_rows if i["condition"] == c and _scored(i)} for c in access]
        common = set.intersection(*scored)
        entry["access_gaps"] = access_gaps(
            {
                c: summarize(
                    [i for i in image_rows if i["condition"] == c and i["sample_id"] in common],
                    ("option_correct",),
                )
                for c in access
            }
        )
        entry["access_gap_rows"] = len(common)
    circ = [i for i in mine if i["condition"] == "circular"]
    if circ:
        entry["circular"] = circular_summary(circ)
    schema = [i for i in mine if i["condition"] == "schema_cot"]
    if schema:
        entry["process"] = {"final": summarize(schema, IMAGE_METRICS), **summarize_steps(schema)}
    # per-operation step errors and first errors under every step protocol that ran; final
    # accuracy over every family's rows that have steps
    by_protocol = {
        name: {"final": summarize(got, ("option_correct",)), **summarize_steps(got)}
        for name, c in STEP_PROTOCOLS.items()
        if (got := [i for i in mine if i["condition"] == c])
    }
    if set(by_protocol) - {"S2 schema CoT"}:
        entry["step_protocols"] = by_protocol
    protocols = {
        name: summarize(
            [i for i in mine if i["condition"] == c and not i.get("rotation")], ("option_correct",)
        )
        for name, c in PROTOCOLS.items()
        if any(i["condition"] == c for i in mine)
    }
    if len(protocols) > 1:
        entry["protocols"] = protocols
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
    same answer *content* in every rotation) and the chosen-letter histogram (position bias).

    Only complete groups count: a group with a rotation that was never scored (cut by the
    budget, or absent) has no circular verdict, and leaving it in would make vanilla and
    circular accuracy describe different questions. Such groups are reported as
    ``incomplete_groups``; a failed request is scored (wrong), so it does not make a group
    incomplete."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for i in items:
        groups.setdefault(i["base_sample_id"], []).append(i)
    complete = [
        g
        for g in groups.values()
        if all(_scored(i) for i in g) and sorted(int(i["rotation"]) for i in g) == list(range(len(g)))
    ]
    per_group = [
        {
            "landmark_id": g[0]["landmark_id"],
            "vanilla": next(float(i["option_correct"]) for i in g if i["rotation"] == 0),
            "circular": float(all(i["option_correct"] for i in g)),
            "consistent": float(
                len({i.get("pred_label", "") for i in g}) == 1 and bool(g[0].get("pred_label"))
            ),
        }
        for g in complete
    ]
    # over complete groups only: there every label sits under every letter once, so a skewed
    # share is the model's bias and not the order the budget happened to stop in
    letters = Counter(i["pred_option"] for g in complete for i in g if i["parse_kind"] == "choice")
    total = sum(letters.values())
    out = {
        **summarize(per_group, ("vanilla", "circular", "consistent")),
        "groups": len(per_group),
        "incomplete_groups": len(groups) - len(per_group),
        "letter_share": {k: round(v / total, 4) for k, v in sorted(letters.items())} if total else {},
    }
    if len(per_group) < len(groups):
        out["note"] = (
            f"{len(groups) - len(per_group)} of {len(groups)} groups left out: not every "
            "rotation was run (budget)"
        )
    return out


def _scored(item: dict[str, Any]) -> bool:
    return isinstance(item.get("option_correct"), int | float)


def task_correlation(
    items: list[dict[str, Any]], families: Sequence[TaskFamily[Any]] = FAMILIES
) -> dict[str, Any]:
    """Spearman correlation between tasks' primary scores over (model, landmark) units, in the
    full condition; a pair is left out when either side is constant or fewer than 4 units share it.
    ``across_models``: UrbanVideo-Bench's analysis, Pearson between two tasks' mean scores over
    the models (at least 3 scored on both)."""
    # imported here: scipy.stats is about 70 MB resident, and the evaluator waits for releases
    # far longer than it writes reports
    from scipy.stats import pearsonr, spearmanr

    primary = primary_metrics(families)
    units: dict[tuple[str, str], dict[str, list[float]]] = {}
    for i in items:
        metric = primary.get(i["task"])
        if i["condition"] != "full" or metric is None or not isinstance(i.get(metric), int | float):
            continue
        units.setdefault((i["model"], i["landmark_id"]), {}).setdefault(i["task"], []).append(
            float(i[metric])
        )
    tasks = [t for t in primary if any(t in u for u in units.values())]
    models: dict[str, dict[str, list[float]]] = {}
    for (model, _), scores in units.items():
        for task, values in scores.items():
            models.setdefault(model, {}).setdefault(task, []).extend(values)
    return {
        "method": "spearman over (model, landmark) units",
        "units": len(units),
        "matrix": _matrix(tasks, list(units.values()), 4, spearmanr),
        "across_models": {
            "method": "pearson over models' mean scores (UrbanVideo-Bench)",
            "models": len(models),
            "matrix": _matrix(tasks, list(models.values()), 3, pearsonr),
        },
    }


def _matrix(
    tasks: list[str], units: list[dict[str, list[float]]], least: int, corr: Callable[..., Any]
) -> dict[str, dict[str, float | None]]:
    """Task x task correlation of the units' mean scores; None where fewer than ``least`` units
    have both tasks or either side is constant."""
    matrix: dict[str, dict[str, float | None]] = {}
    for a in tasks:
        matrix[a] = {}
        for b in tasks:
            both = [(np.mean(u[a]), np.mean(u[b])) for u in units if a in u and b in u]
            xs, ys = np.array([p[0] for p in both]), np.array([p[1] for p in both])
            if len(both) < least or np.ptp(xs) == 0 or np.ptp(ys) == 0:
                matrix[a][b] = None
                continue
            matrix[a][b] = round(float(corr(xs, ys).statistic), 3)
    return matrix


def leaderboard(
    items: list[dict[str, Any]], families: Sequence[TaskFamily[Any]] = FAMILIES
) -> dict[str, Any]:
    models = sorted({i["model"] for i in items})
    board = [_entry(m, [i for i in items if i["model"] == m], families) for m in models]
    board.sort(key=lambda e: -float(e["image"].get("joint_correct", 0.0)))
    prior = next((e for e in board if e["model"] == "text_prior"), None)
    # a side with no scored image row (cut by the budget) has no accuracy, not an accuracy of 0
    if prior is not None and "option_correct" in prior["image"]:
        base = float(prior["image"]["option_correct"])
        for e in board:
            if "option_correct" in e["image"]:
                e["visual_gap_over_text_prior"] = round(float(e["image"]["option_correct"]) - base, 4)
    return {
        "ranked_by": "image joint accuracy (option and box), full condition",
        "models": board,
        "task_correlation": task_correlation(items, families),
        "paired": paired_comparisons(items),
    }
