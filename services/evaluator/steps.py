"""Aggregates of the process-level step scores (``skyqa.steps``): operation-wise accuracy, error
deviation and first-error shares."""

from __future__ import annotations

from collections import Counter
from typing import Any

from skyqa.steps import OPERATIONS


def summarize_steps(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Operation-wise accuracy, mean step error deviation per operation, first-error shares."""
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for it in items:
        for op, ok in zip(it.get("step_ops", []), it.get("step_correct", []), strict=True):
            total[op] += 1
            right[op] += ok
    acc = {op: round(right[op] / total[op], 4) for op in OPERATIONS if total[op]}
    errors = {op: 1 - a for op, a in acc.items()}
    mean_err = sum(errors.values()) / len(errors) if errors else 0.0
    firsts = Counter(it["first_error"] for it in items if "first_error" in it)
    n = sum(firsts.values())
    return {
        "items": len(items),
        "operation_accuracy": acc,
        "operation_error": {op: round(1 - a, 4) for op, a in acc.items()},
        "operation_error_deviation": {op: round(e - mean_err, 4) for op, e in errors.items()},
        "first_error": {k: round(v / n, 4) for k, v in sorted(firsts.items())} if n else {},
    }
