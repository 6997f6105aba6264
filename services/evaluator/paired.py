"""Paired comparison of two models on the same rows (UltraVR reports model differences with a
paired test): on the rows both were asked in the full condition, the exact McNemar test on the
discordant pairs (one right, the other wrong) and a cluster-bootstrap interval of the accuracy
difference, resampling release units (landmarks, missions, groups), since rows of one unit are
not independent.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from services.evaluator.metrics import bootstrap_ci

METRIC = "option_correct"


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs."""
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest  # loaded when a report compares models

    return float(binomtest(min(b, c), b + c, 0.5).pvalue)


def paired_comparisons(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pair of models on their common base rows of the full condition."""
    by_model: dict[str, dict[str, dict[str, Any]]] = {}
    for it in items:
        if (
            it.get("condition") == "full"
            and not it.get("rotation")
            and isinstance(it.get(METRIC), int | float)
            and "sample_id" in it
        ):
            by_model.setdefault(it["model"], {})[it["sample_id"]] = it
    out = []
    for a, b in combinations(sorted(by_model), 2):
        common = sorted(set(by_model[a]) & set(by_model[b]))
        if not common:
            continue
        xa = [float(by_model[a][s][METRIC]) for s in common]
        xb = [float(by_model[b][s][METRIC]) for s in common]
        only_a = sum(1 for u, v in zip(xa, xb, strict=True) if u and not v)
        only_b = sum(1 for u, v in zip(xa, xb, strict=True) if v and not u)
        diff = [u - v for u, v in zip(xa, xb, strict=True)]
        units = [str(by_model[a][s].get("landmark_id", s)) for s in common]
        out.append(
            {
                "a": a,
                "b": b,
                "rows": len(common),
                "accuracy_a": round(sum(xa) / len(xa), 4),
                "accuracy_b": round(sum(xb) / len(xb), 4),
                "difference": round(sum(diff) / len(diff), 4),
                "difference_ci95": list(bootstrap_ci(diff, units)),
                "only_a_right": only_a,
                "only_b_right": only_b,
                "mcnemar_p": round(mcnemar_exact(only_a, only_b), 6),
            }
        )
    return out
