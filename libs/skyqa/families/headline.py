"""The score each task is reported and correlated by: UAV-DualCog's choices, else the family's
first metric. One table, so the evaluator's report and the workbench's tables agree."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skyqa.contracts.qa import IMAGE_TASKS
from skyqa.families.base import ReleaseFamily

PRIMARY: dict[str, str] = {
    **{t: "option_correct" for t in IMAGE_TASKS},
    "self_instance_recognition_joint": "element_f1",
    "env_visibility_reasoning": "count_exact",
}


def primary_metrics(families: Sequence[ReleaseFamily[Any]]) -> dict[str, str]:
    out = dict(PRIMARY)
    for f in families:
        for task, metrics in f.metrics.items():
            out.setdefault(task, metrics[0])
    return out
