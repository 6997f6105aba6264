"""How the video rows are asked and scored (UAV-DualCog stage 3).

Behavior recognition: exact option set and set F1, the composite option (composite missions:
the first composite option the reply names must be the gold one), atomic precision and recall
per row, temporal F1@0.5 and mean tIoU over gold intervals (greedy one-to-one matching).
Visibility: count exact / within one / absolute error, segment F1@0.3/0.5, mean best tIoU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from skyqa.answers import Parsed, parse_joint, parse_visibility
from skyqa.contracts.qa import VideoRow
from skyqa.families.base import MediaRef
from skyqa.scoring import match_prf, mean_best_tiou, set_f1
from skyqa.vocab.behaviors import is_composite_label

JOINT = "self_instance_recognition_joint"
VISIBILITY = "env_visibility_reasoning"
JOINT_METRICS = (
    "set_exact",
    "set_exact_strict",
    "composite_correct",
    "element_f1",
    "atomic_precision",
    "atomic_recall",
    "temporal_f1@0.5",
    "temporal_mean_tiou",
)
VISIBILITY_METRICS = (
    "count_exact",
    "count_exact_strict",
    "count_within1",
    "count_abs_error",
    "segment_f1@0.3",
    "segment_f1@0.5",
    "mean_best_tiou",
)


def media(row: VideoRow) -> list[MediaRef]:
    return [
        MediaRef("reference image", row.reference_image_with_bbox),
        MediaRef("video", row.video_path, row.fps),
    ]


def parse(row: VideoRow, text: str) -> Parsed:
    if row.form == JOINT:
        return parse_joint(text, [o.option_id for o in row.choice_options])
    return parse_visibility(text)


def score(row: VideoRow, p: Parsed) -> dict[str, Any]:
    """Failures and unparsed replies score 0, never skipped."""
    ok = p.kind == "choice"
    if row.form == JOINT:
        return _score_joint(row, p if ok else None)
    count = int(row.gold_environment_answer["visible_count"])  # type: ignore[arg-type]
    ivs = _intervals(row)
    pred_ivs = p.count_intervals if ok else []
    out: dict[str, Any] = {
        "count_exact": float(ok and p.count == count),
        "count_exact_strict": float(ok and p.strict and p.count == count),
        "count_within1": float(ok and p.count is not None and abs(p.count - count) <= 1),
        "segment_f1@0.3": round(match_prf(ivs, pred_ivs, 0.3)[2], 4),
        "segment_f1@0.5": round(match_prf(ivs, pred_ivs, 0.5)[2], 4),
        "mean_best_tiou": round(mean_best_tiou(ivs, pred_ivs), 4),
    }
    if ok and p.count is not None:
        out["count_abs_error"] = float(abs(p.count - count))
    return out


def _intervals(row: VideoRow) -> list[list[float]]:
    ivs = row.gold_environment_answer.get("visible_intervals_sec", [])
    return ivs if isinstance(ivs, list) else []


def _score_joint(row: VideoRow, p: Parsed | None) -> dict[str, Any]:
    composite = {o.option_id for o in row.choice_options if is_composite_label(o.label)}
    gold = {a.option_id: a.intervals_sec for a in row.answer_items}
    picked = list(p.options) if p is not None else []
    gold_atomic, pred_atomic = set(gold) - composite, set(picked) - composite
    tp = len(gold_atomic & pred_atomic)
    f1s, tious = [], []
    for oid, ivs in gold.items():
        guess = p.intervals.get(oid, []) if p is not None else []
        f1s.append(match_prf(ivs, guess, 0.5)[2])
        tious.append(mean_best_tiou(ivs, guess))
    out: dict[str, Any] = {
        "set_exact": float(p is not None and set(picked) == set(gold)),
        "set_exact_strict": float(p is not None and p.strict and set(picked) == set(gold)),
        "element_f1": round(set_f1(set(gold), set(picked)), 4),
        "atomic_precision": round(tp / len(pred_atomic), 4) if pred_atomic else 0.0,
        "atomic_recall": round(tp / len(gold_atomic), 4) if gold_atomic else 0.0,
        "temporal_f1@0.5": round(sum(f1s) / len(f1s), 4),
        "temporal_mean_tiou": round(sum(tious) / len(tious), 4),
    }
    if row.mission_kind == "composite":
        first = next((o for o in picked if o in composite), None)
        out["composite_correct"] = float(first is not None and first in gold)
    return out


def guess(row: VideoRow, rng: np.random.Generator) -> dict[str, Any]:
    """A random non-empty option subset over the whole video, or a random count and intervals."""
    if row.form == JOINT:
        opts = [o.option_id for o in row.choice_options]
        k = int(rng.integers(1, len(opts) + 1))
        picked = sorted(opts[i] for i in rng.permutation(len(opts))[:k])
        return {"answers": [{"option_id": o, "intervals_sec": [[0.0, row.duration_sec]]} for o in picked]}
    count = int(rng.integers(0, 4))
    edges = np.sort(rng.uniform(0, row.duration_sec, 2 * count)).round(1).tolist()
    return {
        "visible_count": count,
        "visible_intervals_sec": [edges[i : i + 2] for i in range(0, 2 * count, 2)],
    }


def prior(row: VideoRow, rows: Sequence[VideoRow]) -> dict[str, Any]:
    """From other landmarks' rows of the same form: the median option count (same mission kind)
    over the whole video, or the median visible count over the whole video."""
    others = [r for r in rows if r.landmark_id != row.landmark_id and r.form == row.form]
    if row.form == JOINT:
        same = [r for r in others if r.mission_kind == row.mission_kind]
        k = round(float(np.median([len(r.answer_option_ids) for r in same]))) if same else 1
        picked = sorted(o.option_id for o in row.choice_options)[: max(1, k)]
        return {"answers": [{"option_id": o, "intervals_sec": [[0.0, row.duration_sec]]} for o in picked]}
    counts = [int(r.gold_environment_answer["visible_count"]) for r in others]  # type: ignore[arg-type]
    count = round(float(np.median(counts))) if counts else 1
    return {"visible_count": count, "visible_intervals_sec": [[0.0, row.duration_sec]] if count else []}
