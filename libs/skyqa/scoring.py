"""Per-answer scores that more than one stage agrees on: box IoU, option-set F1 and interval
matching (temporal IoU, greedy one-to-one F1, mean best tIoU).

The evaluator scores model answers with them, and the qa-generator's blind gate scores the
answers of solvers that never see a pixel; one definition keeps the two comparable.
Standard library only, on purpose: ``skyqa export lmms-eval`` ships this file verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence, Set

Box = Sequence[float]


def iou(a: Box | None, b: Box | None) -> float:
    """IoU of two ``[x0, y0, x1, y1]`` boxes; 0 when either is missing or the union is empty."""
    if a is None or b is None:
        return 0.0
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


def set_f1(gold: Set[str], pred: Set[str]) -> float:
    """F1 of a predicted option set against the gold one; 1 when both are empty."""
    if not gold and not pred:
        return 1.0
    tp = len(gold & pred)
    if not tp:
        return 0.0
    p, r = tp / len(pred), tp / len(gold)
    return 2 * p * r / (p + r)


Interval = Sequence[float]


def tiou(a: Interval, b: Interval) -> float:
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return float(inter / union) if union > 0 else 0.0


def match_prf(
    gold: Sequence[Interval], pred: Sequence[Interval], threshold: float
) -> tuple[float, float, float]:
    """Greedy one-to-one matching: each gold takes its best unused prediction; TP needs tIoU >= t."""
    if not gold and not pred:
        return 1.0, 1.0, 1.0
    used: set[int] = set()
    tp = 0
    for g in gold:
        best, best_j = 0.0, -1
        for j, p in enumerate(pred):
            if j not in used and (v := tiou(g, p)) > best:
                best, best_j = v, j
        if best_j >= 0 and best >= threshold:
            used.add(best_j)
            tp += 1
    precision = tp / len(pred) if pred else 0.0
    recall = tp / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def mean_best_tiou(gold: Sequence[Interval], pred: Sequence[Interval]) -> float:
    if not gold:
        return 1.0 if not pred else 0.0
    best = [max((tiou(g, p) for p in pred), default=0.0) for g in gold]
    return sum(best) / len(best)
