"""Score one reply against one manifest row; the item record keeps the parse provenance."""

from __future__ import annotations

from typing import Any

from skyqa.scoring import iou, set_f1
from skyqa.vocab.behaviors import is_composite_label

from services.evaluator import metrics as M
from services.evaluator.parsing import Parsed, parse_choice, parse_joint, parse_visibility
from services.evaluator.steps import score_steps


def parse_for(row: dict[str, Any], text: str) -> Parsed:
    if "label_options" in row:
        opts = row["label_options"]
        return parse_choice(text, [o["option_id"] for o in opts], [o["label"] for o in opts])
    if row["form"] == "self_instance_recognition_joint":
        return parse_joint(text, [o["option_id"] for o in row["choice_options"]])
    return parse_visibility(text)


def score(row: dict[str, Any], p: Parsed, steps: bool = False) -> dict[str, Any]:
    """Metric values of one item; failures and unparsed replies score 0, never skipped.

    With ``steps`` the row's reasoning steps are scored too (protocol ``schema_cot``).
    """
    ok = p.kind == "choice"
    if "label_options" in row:
        correct = ok and p.option == row["answer_option_id"]
        box_iou = iou(p.bbox, row["answer_bbox_xyxy_norm"]) if ok else 0.0
        out: dict[str, Any] = {
            "option_correct": float(correct),
            "option_correct_strict": float(correct and p.strict),
            "bbox_iou": round(box_iou, 4),
            "bbox_acc@50iou": float(box_iou >= 0.5),
            "bbox_acc@75iou": float(box_iou >= 0.75),
            "joint_correct": float(correct and box_iou >= 0.5),
        }
        if steps:
            out.update(score_steps(row["reasoning_steps"], p.steps if ok else None))
        return out
    if row["form"] == "self_instance_recognition_joint":
        return _score_joint(row, p if ok else None)
    gold_answer = row["gold_environment_answer"]
    count, ivs = int(gold_answer["visible_count"]), gold_answer["visible_intervals_sec"]
    pred_ivs = p.count_intervals if ok else []
    out = {
        "count_exact": float(ok and p.count == count),
        "count_exact_strict": float(ok and p.strict and p.count == count),
        "count_within1": float(ok and p.count is not None and abs(p.count - count) <= 1),
        "segment_f1@0.3": round(M.match_prf(ivs, pred_ivs, 0.3)[2], 4),
        "segment_f1@0.5": round(M.match_prf(ivs, pred_ivs, 0.5)[2], 4),
        "mean_best_tiou": round(M.mean_best_tiou(ivs, pred_ivs), 4),
    }
    if ok and p.count is not None:
        out["count_abs_error"] = float(abs(p.count - count))
    return out


def _score_joint(row: dict[str, Any], p: Parsed | None) -> dict[str, Any]:
    """UAV-DualCog's two levels of the joint row: the composite option (composite missions:
    the first composite option the reply names must be the gold one) and the atomic options
    (set precision / recall per row), plus temporal F1@0.5 and mean tIoU over gold intervals."""
    composite = {o["option_id"] for o in row["choice_options"] if is_composite_label(o["label"])}
    gold = {a["option_id"]: a["intervals_sec"] for a in row["answer_items"]}
    picked = list(p.options) if p is not None else []
    gold_atomic, pred_atomic = set(gold) - composite, set(picked) - composite
    tp = len(gold_atomic & pred_atomic)
    f1s, tious = [], []
    for oid, ivs in gold.items():
        guess = p.intervals.get(oid, []) if p is not None else []
        f1s.append(M.match_prf(ivs, guess, 0.5)[2])
        tious.append(M.mean_best_tiou(ivs, guess))
    out: dict[str, Any] = {
        "set_exact": float(p is not None and set(picked) == set(gold)),
        "set_exact_strict": float(p is not None and p.strict and set(picked) == set(gold)),
        "element_f1": round(set_f1(set(gold), set(picked)), 4),
        "atomic_precision": round(tp / len(pred_atomic), 4) if pred_atomic else 0.0,
        "atomic_recall": round(tp / len(gold_atomic), 4) if gold_atomic else 0.0,
        "temporal_f1@0.5": round(sum(f1s) / len(f1s), 4),
        "temporal_mean_tiou": round(sum(tious) / len(tious), 4),
    }
    if row.get("mission_kind") == "composite":
        first = next((o for o in picked if o in composite), None)
        out["composite_correct"] = float(first is not None and first in gold)
    return out


IMAGE_METRICS = (
    "option_correct",
    "option_correct_strict",
    "bbox_acc@50iou",
    "bbox_acc@75iou",
    "bbox_iou",
    "joint_correct",
)
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
