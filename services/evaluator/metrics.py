"""Aggregates of per-item scores with cluster-bootstrap confidence intervals. (The per-item
scores live in ``skyqa.scoring``, shared with the blind gate, and each task family scores its
rows with them.)

Image (UAV-DualCog stage 4): option accuracy, bbox Acc@0.5 and mean IoU (a missing or invalid
box scores IoU 0), and joint accuracy (option right *and* IoU >= 0.5). Video (stage 3): exact
option-set accuracy and set F1 for behavior recognition, temporal F1@0.5 and mean tIoU from
greedy one-to-one matching; count exact / within-1 / MAE, segment F1@0.3/0.5 and mean best
tIoU for visibility. Unparsed and failed requests stay in every denominator.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bootstrap_ci(
    values: Sequence[float], clusters: Sequence[str], b: int = 2000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float]:
    """Percentile CI of the mean, resampling whole clusters (landmarks), with a fixed seed."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return float("nan"), float("nan")
    keys = sorted(set(clusters))
    index = {k: i for i, k in enumerate(keys)}
    cid = np.array([index[c] for c in clusters])
    sums = np.bincount(cid, weights=v, minlength=len(keys))
    counts = np.bincount(cid, minlength=len(keys)).astype(np.float64)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(keys), size=(b, len(keys)))
    means = sums[draws].sum(axis=1) / np.maximum(counts[draws].sum(axis=1), 1.0)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return round(float(lo), 4), round(float(hi), 4)


def summarize(
    rows: list[dict[str, float | str]], metrics: Sequence[str], cluster: str = "landmark_id"
) -> dict[str, object]:
    """Mean and cluster-bootstrap CI of each metric over rows that have it.

    A row the budget cut (``not_run``) has no scores: it is not a wrong answer, so it is left
    out of the means, but counted in ``count`` and, when there are any, in ``not_run``, so a
    truncated summary says what it does not cover."""
    out: dict[str, object] = {"count": len(rows)}
    if skipped := sum(1 for r in rows if r.get("parse_kind") == "not_run"):
        out["not_run"] = skipped
    for m in metrics:
        have = [r for r in rows if isinstance(r.get(m), int | float)]
        if not have:
            continue
        vals = [float(r[m]) for r in have]
        out[m] = round(float(np.mean(vals)), 4)
        out[f"{m}_ci95"] = list(bootstrap_ci(vals, [str(r[cluster]) for r in have]))
    return out
