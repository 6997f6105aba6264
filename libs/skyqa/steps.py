"""Process-level scoring of the ground-truth reasoning steps (UltraVR GT-CoT, protocol S2).

A step answer is matched by the kind its gold value has, read from the gold text itself:

- a box ``[x1, y1, x2, y2]``: the predicted box (a list or the same text form) with IoU >= 0.5;
- a box list ``[[x1, y1, x2, y2], ...]`` (``[]`` when there is none): as many predicted boxes,
  matched one to one (greedily, best IoU first) each with IoU >= 0.5;
- an angle ``"<n> degrees <direction>"`` (``to the left``, ``below``, ``clockwise``...): same
  direction word and within ``ANGLE_TOLERANCE`` degrees; two angles both under the tolerance
  match whatever their direction (a landmark 1 degree left is as centred as 1 degree right);
- ``yes``/``no`` answers: the first word;
- anything else (facades, actions, "Image 3"): equal after lower-casing and dropping punctuation.

Per operation (GND, PER, QUA, INT, INF) the accuracy is the share of correct steps with that
label; the first error is the operation of the first wrong step, or ``none``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from skyqa.contracts.qa import ReasoningStep
from skyqa.scoring import iou

ANGLE_TOLERANCE = 10.0
OPERATIONS = ("GND", "PER", "QUA", "INT", "INF")
_NUM = r"(-?\d+(?:\.\d+)?)"
_BOX = re.compile(r"^\s*\[\s*" + r"\s*,\s*".join([_NUM] * 4) + r"\s*\]\s*$")
_ANGLE = re.compile(_NUM + r"\s*(?:degrees?|deg|°)\s*(?:to the\s+)?([a-z-]+)?", re.I)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]+", " ", text.lower()).split())


def _as_box(value: Any) -> list[float] | None:
    if isinstance(value, list | tuple) and len(value) == 4:
        try:
            return [float(v) for v in value]
        except (TypeError, ValueError):
            return None
    if isinstance(value, str) and (m := _BOX.match(value)):
        return [float(v) for v in m.groups()]
    return None


def _as_boxes(value: Any) -> list[list[float]] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    if not isinstance(value, list):
        return None
    boxes = [_as_box(v) for v in value]
    return None if any(b is None for b in boxes) else [b for b in boxes if b is not None]


def boxes_match(gold: list[list[float]], pred: list[list[float]]) -> bool:
    """As many boxes, matched one to one, best IoU first, each pair with IoU >= 0.5."""
    if len(gold) != len(pred):
        return False
    pairs = sorted(((iou(g, p), i, j) for i, g in enumerate(gold) for j, p in enumerate(pred)), reverse=True)
    used_g: set[int] = set()
    used_p: set[int] = set()
    for score, i, j in pairs:
        if score >= 0.5 and i not in used_g and j not in used_p:
            used_g.add(i)
            used_p.add(j)
    return len(used_g) == len(gold)


def step_correct(gold: str, pred: Any) -> bool:
    """``pred`` as the reply's JSON gave it: a JSON true/false reads as yes/no, null as none."""
    if isinstance(pred, bool):
        pred = "yes" if pred else "no"
    if pred is None:
        return _norm(gold) == "none"
    if (gold_box := _as_box(gold)) is not None:
        return iou(gold_box, _as_box(pred)) >= 0.5
    if gold.lstrip().startswith("[") and (gold_boxes := _as_boxes(gold)) is not None:
        pred_boxes = _as_boxes(pred)
        return pred_boxes is not None and boxes_match(gold_boxes, pred_boxes)
    text = pred if isinstance(pred, str) else str(pred)
    if (g := _ANGLE.search(gold)) is not None:
        p = _ANGLE.search(text)
        if p is None:
            return False
        g_deg, p_deg = abs(float(g.group(1))), abs(float(p.group(1)))
        if g_deg < ANGLE_TOLERANCE and p_deg < ANGLE_TOLERANCE:
            return True
        same_way = (g.group(2) or "").lower() == (p.group(2) or "").lower()
        return same_way and abs(g_deg - p_deg) <= ANGLE_TOLERANCE
    gold_n, pred_n = _norm(gold), _norm(text)
    if gold_n.split()[:1] in (["yes"], ["no"]):
        return pred_n.split()[:1] == gold_n.split()[:1]
    return gold_n == pred_n


def score_steps(gold_steps: Sequence[ReasoningStep], pred_steps: list[Any] | None) -> dict[str, Any]:
    """Item-level values: per-step correctness with its operation, step accuracy, first error."""
    preds = list(pred_steps or [])
    marks = [int(i < len(preds) and step_correct(s.answer, preds[i])) for i, s in enumerate(gold_steps)]
    ops: list[str] = [s.operation for s in gold_steps]
    first = next((op for op, ok in zip(ops, marks, strict=True) if not ok), "none")
    return {
        "step_ops": ops,
        "step_correct": marks,
        "step_accuracy": round(sum(marks) / len(marks), 4) if marks else 0.0,
        "steps_answered": float(pred_steps is not None),
        "first_error": first,
    }
