"""The workbench's evaluation explorer: the leaderboard with its intervals, tables per task and
condition, every scored reply with its raw text and parse provenance, two models side by side
on the same rows, and confusion matrices per task, read from ``eval/leaderboard.json`` and
``eval/items.jsonl``. Each reply's headline score is its task's first metric, as its family
reports it."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from skyqa import keys
from skyqa.errors import BlobNotFound, InvalidInput

from services.gateway.rows import MAX_PAGE, NotFound, family_named, json_doc, ledger, scene_of
from services.gateway.stored import ParsedCache

SHOWN = (
    "sample_id", "base_sample_id", "model", "condition", "task", "difficulty", "rotation", "status",
    "parse_kind", "parse_stage", "pred_option", "pred_label", "pred_count", "pred_bbox", "raw_text",
    "latency_ms",
)  # fmt: skip


@dataclass(frozen=True)
class Items:
    rows: list[dict[str, Any]]
    skipped: int  # lines that are not a scored reply


def parse_items(data: bytes) -> Items:
    rows, skipped = [], 0
    for line in data.splitlines():
        try:
            r = json.loads(line) if line.strip() else None
        except (ValueError, RecursionError):
            r = None
        if isinstance(r, dict) and all(
            isinstance(r.get(k), str) for k in ("model", "condition", "sample_id", "task")
        ):
            rows.append(r)
        elif line.strip():
            skipped += 1
    return Items(rows, skipped)


def _items(cache: ParsedCache, run_id: str) -> Items:
    try:
        items: Items = cache.get(
            keys.eval_outputs(run_id, scene_of(cache, run_id))["eval_items"], parse_items
        )
    except BlobNotFound:
        raise NotFound(f"run {run_id!r} has not been evaluated yet") from None
    return items


def _main_metrics(cache: ParsedCache, run_id: str) -> dict[str, str]:
    """Task -> its headline metric, as the evaluator's report has it."""
    from skyqa.families.headline import primary_metrics

    names = sorted({r.family for r in ledger(cache, run_id).rows})
    return primary_metrics([family_named(n) for n in names])


def _score(row: dict[str, Any], metric: str | None) -> float | None:
    value = row.get(metric) if metric else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        score = float(value)
    except OverflowError:  # an integer too large for a float: not a score
        return None
    return score if math.isfinite(score) else None


def interval(values: list[float]) -> list[float]:
    """95 %: Wilson's for 0/1 scores, the normal approximation otherwise."""
    n = len(values)
    if n == 0:
        return [0.0, 0.0]
    mean = sum(values) / n
    if all(v in (0.0, 1.0) for v in values):
        z = 1.96
        centre = (mean + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(mean * (1 - mean) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return [round(mean - 1.96 * sd / math.sqrt(n), 4), round(mean + 1.96 * sd / math.sqrt(n), 4)]


def summary(cache: ParsedCache, run_id: str) -> dict[str, Any]:
    """The leaderboard as the evaluator wrote it, plus the headline score per model, condition
    and task computed from the scored replies (``n`` rows, each scored once; 95 % intervals)."""
    try:
        board = cache.get(keys.eval_outputs(run_id, scene_of(cache, run_id))["leaderboard"], json_doc)
    except BlobNotFound:
        raise NotFound(f"run {run_id!r} has not been evaluated yet") from None
    if not isinstance(board, dict) or not isinstance(board.get("models"), list):
        raise InvalidInput("eval/leaderboard.json is not a leaderboard (no models list)")
    items = _items(cache, run_id)
    main = _main_metrics(cache, run_id)
    # the replies to one row's copies (CircularEval's rotations) score the row once: right only
    # if every copy is (a single reply is its own row)
    per_row: dict[tuple[str, str, str, str], float] = {}
    for r in items.rows:
        s = _score(r, main.get(r["task"]))
        if s is not None:
            key = (r["model"], r["condition"], r["task"], str(r.get("base_sample_id") or r["sample_id"]))
            per_row[key] = min(s, per_row.get(key, s))
    cells: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for (m, c, t, _), s in per_row.items():
        cells[(m, c, t)].append(s)
    table = [
        {"model": m, "condition": c, "task": t, "metric": main[t], "n": len(v)}
        | {"score": round(sum(v) / len(v), 4), "ci95": interval(v)}
        for (m, c, t), v in sorted(cells.items())
    ]
    return {
        "leaderboard": board,
        "conditions": sorted({r["condition"] for r in items.rows}),
        "models": sorted({r["model"] for r in items.rows}),
        "tasks": sorted({r["task"] for r in items.rows}),
        "by_condition": table,
        "skipped_lines": items.skipped,
    }


def _shown(r: dict[str, Any], metric: str | None) -> dict[str, Any]:
    out = {k: r.get(k) for k in SHOWN}
    out["metric"] = metric
    out["score"] = _score(r, metric)
    out["metrics"] = {
        k: v
        for k, v in r.items()
        if k not in SHOWN and isinstance(v, int | float) and not isinstance(v, bool)
    }
    return out


def replies(
    cache: ParsedCache, run_id: str, filters: dict[str, str], outcome: str, offset: int, limit: int
) -> dict[str, Any]:
    """One page of scored replies matching ``filters`` (model, condition, task, sample) and
    ``outcome`` ("right": headline score 1, "wrong": below 1, "" any)."""
    main = _main_metrics(cache, run_id)
    wanted = {k: v for k, v in filters.items() if v and k != "sample"}
    needle = filters.get("sample", "").strip()
    hits = []
    for r in _items(cache, run_id).rows:
        if any(r.get(k) != v for k, v in wanted.items()) or (needle and needle not in r["sample_id"]):
            continue
        s = _score(r, main.get(r["task"]))
        if (outcome == "right" and s != 1.0) or (outcome == "wrong" and (s is None or s >= 1.0)):
            continue
        hits.append(r)
    page = hits[offset : offset + min(limit, MAX_PAGE)]
    return {"total": len(hits), "offset": offset, "rows": [_shown(r, main.get(r["task"])) for r in page]}


def compare(
    cache: ParsedCache,
    run_id: str,
    a: str,
    b: str,
    condition: str,
    only_disagree: bool,
    offset: int,
    limit: int,
) -> dict[str, Any]:
    """Two models on the rows both answered in one condition: how often each is right where
    the other is not, and the rows side by side."""
    if a == b:
        raise InvalidInput("pick two different models to compare")
    main = _main_metrics(cache, run_id)
    of: dict[str, dict[str, dict[str, Any]]] = {a: {}, b: {}}
    for r in _items(cache, run_id).rows:
        if r["model"] in of and r["condition"] == condition:
            of[r["model"]][r["sample_id"]] = r
    shared = [s for s in of[a] if s in of[b]]
    if not shared:
        raise NotFound(f"models {a!r} and {b!r} share no rows in condition {condition!r}")
    tally: Counter[str] = Counter()
    pairs = []
    for s in shared:
        ra, rb = of[a][s], of[b][s]
        metric = main.get(ra["task"])
        sa, sb = _score(ra, metric), _score(rb, metric)
        right_a, right_b = sa == 1.0, sb == 1.0
        tally[
            {(True, True): "both", (True, False): "only_a", (False, True): "only_b"}.get(
                (right_a, right_b), "neither"
            )
        ] += 1
        if only_disagree and sa == sb:
            continue
        pairs.append({"sample_id": s, "task": ra["task"], "a": _shown(ra, metric), "b": _shown(rb, metric)})
    return {
        "a": a,
        "b": b,
        "condition": condition,
        "rows": len(shared),
        "tally": {k: tally.get(k, 0) for k in ("both", "only_a", "only_b", "neither")},
        "total": len(pairs),
        "offset": offset,
        "pairs": pairs[offset : offset + min(limit, MAX_PAGE)],
    }


def confusion(cache: ParsedCache, run_id: str, model: str, task: str, condition: str) -> dict[str, Any]:
    """Gold answer against predicted answer over one model's replies to one task: option
    labels for single-answer rows, values for counts; a reply that did not parse is "(none)"."""
    index = ledger(cache, run_id)
    labels: list[str] = []
    cells: Counter[tuple[str, str]] = Counter()
    kind = ""
    for r in _items(cache, run_id).rows:
        if r["model"] != model or r["task"] != task or r["condition"] != condition:
            continue
        entry = index.by_id.get(str(r.get("base_sample_id") or r["sample_id"]))
        if entry is None or entry.kind not in ("choice", "count"):
            continue
        kind = entry.kind
        if entry.kind == "choice":
            names = dict((oid, label) for oid, label in entry.options)
            gold = names.get(entry.gold[0], entry.gold[0]) if entry.gold else "(none)"
            labels += [label for _, label in entry.options]
            pred = (
                r.get("pred_label")
                if isinstance(r.get("pred_label"), str) and r.get("pred_label")
                else "(none)"
            )
        else:
            gold = entry.gold[0] if entry.gold else "(none)"
            pred = str(r["pred_count"]) if isinstance(r.get("pred_count"), int) else "(none)"
            labels += [gold]
        cells[(gold, str(pred))] += 1
    if not cells:
        raise NotFound(
            f"no single-answer or count replies of {model!r} to {task!r} in condition {condition!r}"
        )
    axis = list(dict.fromkeys(sorted(set(labels) | {g for g, _ in cells}, key=_natural)))
    predicted = list(dict.fromkeys(axis + sorted({p for _, p in cells} - set(axis), key=_natural)))
    return {
        "model": model,
        "task": task,
        "condition": condition,
        "kind": kind,
        "gold": axis,
        "predicted": predicted,
        "counts": [[cells.get((g, p), 0) for p in predicted] for g in axis],
    }


def _natural(label: str) -> tuple[int, float, str]:
    try:
        return (0, float(label), label)
    except ValueError:
        return (1 if label != "(none)" else 2, 0.0, label)
