"""Per-answer scores that more than one stage agrees on: box IoU and option-set F1.

The evaluator scores model answers with them, and the qa-generator's blind gate scores the
answers of solvers that never see a pixel; one definition keeps the two comparable.
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
