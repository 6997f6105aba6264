"""Reviewed landmarks no release can include, known from the review alone.

A landmark is released only with its whole share of rows from every family of its unit kind, so
one that a family can never plan, or whose description also fits another reviewed landmark (a
question naming it would not say which one it asks about), never ships. Every stage after the
review asks :func:`held_landmarks` and spends nothing on them: the mission planner flies no
missions for them, the QA stage renders no views at the shipped size and plans no rows. The rule
reads only what the review decides (descriptions, validity, view directions), never the views'
measured boxes, so it gives the same answer before and after the views are rendered at the
shipped size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from skyqa.contracts import ValidInstance
from skyqa.families.base import ReleaseFamily


def description(vi: ValidInstance) -> str:
    """How prompts name the landmark, normalised for comparison."""
    return " ".join((vi.landmark_description or vi.class_name).lower().split())


def held_landmarks(
    landmarks: Sequence[ValidInstance], families: Sequence[ReleaseFamily[Any]]
) -> dict[str, str]:
    """Landmark id -> why no release can include it (a shared description first, then the first
    family's reason)."""
    shared = Counter(description(vi) for vi in landmarks)
    out = {
        vi.instance_id: f"description shared with {shared[d] - 1} other landmark(s): '{d}'"
        for vi in landmarks
        if shared[d := description(vi)] > 1
    }
    for f in families:
        for landmark, why in f.hold(landmarks).items():
            out.setdefault(landmark, why)
    return out
