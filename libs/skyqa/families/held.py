"""Reviewed landmarks no release can include, known from the review alone.

A landmark that a family can never plan (too few usable views for UAV-DualCog's image tasks)
never ships. Every stage after the review asks :func:`held_landmarks` and spends nothing on
them: the mission planner flies no missions for them, the QA stage renders no views at the
shipped size and plans no rows. The rule reads only what the review decides (validity, view
directions), never the views' measured boxes, so it gives the same answer before and after the
views are rendered at the shipped size. A description another reviewed landmark shares holds
nothing: the reference box says which one a row asks about, and a row whose media show the
other fails its check (:mod:`skyqa.families.twins`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skyqa.contracts import ValidInstance
from skyqa.families.base import ReleaseFamily


def held_landmarks(
    landmarks: Sequence[ValidInstance], families: Sequence[ReleaseFamily[Any]]
) -> dict[str, str]:
    """Landmark id -> why no release can include it (the first family's reason)."""
    out: dict[str, str] = {}
    for f in families:
        for landmark, why in f.hold(landmarks).items():
            out.setdefault(landmark, why)
    return out
