"""Task families: a benchmark family is one folder here and one line in :data:`FAMILIES`.

Each implements :class:`TaskFamily` (what it plans, which renders it asks for, how it checks
its rows against what was rendered, how the blind gate sees them, what it exports); the
qa-generator loops over :data:`FAMILIES` and knows none of them by name.
"""

from __future__ import annotations

from typing import Any

from skyqa.families.base import Checked, Item, PlanInputs, Planned, Rendered, TaskFamily
from skyqa.families.dualcog_image import FAMILY as DUALCOG_IMAGE
from skyqa.families.dualcog_video import FAMILY as DUALCOG_VIDEO

FAMILIES: tuple[TaskFamily[Any], ...] = (
    DUALCOG_IMAGE,
    DUALCOG_VIDEO,
)


def family(name: str) -> TaskFamily[Any]:
    for f in FAMILIES:
        if f.name == name:
            return f
    raise KeyError(f"no task family {name!r}; known: {', '.join(f.name for f in FAMILIES)}")


__all__ = [
    "DUALCOG_IMAGE",
    "DUALCOG_VIDEO",
    "FAMILIES",
    "Checked",
    "Item",
    "PlanInputs",
    "Planned",
    "Rendered",
    "TaskFamily",
    "family",
]
