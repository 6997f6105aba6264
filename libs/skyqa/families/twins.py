"""Reviewed landmarks whose description also fits another one, and whether an image shows one.

UAV-DualCog points at its landmark with a box drawn on a reference image and names it by its
reviewed description. Two reviewed landmarks of one description (the same fountain in two
plazas of a procedural city) are told apart by that box and the scene around it, as long as
the other one stays out of the image or video the question is about: a person shown both could
answer about either. So a row whose target media show a twin fails, and a landmark whose twins
never appear in its media is asked about like any other. Objects the review did not keep are
not compared: only reviewed landmarks have descriptions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable

import numpy as np
from numpy.typing import NDArray

from skyqa.contracts import ValidInstance
from skyqa.geometry import visibility as vis
from skyqa.reviewed import description, rendered_id

TWIN_IN_VIEW = "another reviewed landmark of the same description is in view"
# a twin counts as shown from a share the sighting rule's margin could still call visible:
# where a person might make it out, the question might be about it
MIN_SHARE = vis.MIN_VISIBLE_SHARE / vis.RULE_MARGIN


def twins(landmarks: Iterable[ValidInstance]) -> dict[str, frozenset[int]]:
    """Landmark id -> the rendered instance ids of the other reviewed landmarks of its
    description, for the landmarks that have any. One object reviewed under two ids is its own
    twin (its id is in the set): it is in every image of itself, so both ids' rows fail."""
    by_description: dict[str, list[ValidInstance]] = defaultdict(list)
    for vi in landmarks:
        by_description[description(vi)].append(vi)
    return {
        vi.instance_id: frozenset(rendered_id(o) for o in group if o is not vi)
        for group in by_description.values()
        if len(group) > 1
        for vi in group
    }


def share(instance: NDArray[np.uint32], ids: Collection[int]) -> float:
    """The share of the image's pixels that belong to any of ``ids``."""
    return float(np.isin(instance, np.fromiter(ids, np.int64)).mean()) if ids else 0.0


def shows(instance: NDArray[np.uint32], ids: Collection[int], own: int) -> bool:
    """Whether an image shows a twin (``ids``) of the landmark ``own``: from ``MIN_SHARE``, or
    as large as the landmark itself (both small, the one asked about no easier to make out)."""
    twin = share(instance, ids)
    return twin >= MIN_SHARE or (twin > 0 and twin >= share(instance, (own,)))


def sighted(landmark: list[float], twin: list[float], fps: float) -> bool:
    """Whether a video shows a twin, from per-frame pixel shares: a sighting under the sighting
    rule's lenient end (threshold and duration within its margin), or the twin as large as the
    landmark in a frame that shows the landmark."""
    lenient = vis.sightings(twin, fps, MIN_SHARE, vis.MIN_SIGHTING_SEC / vis.RULE_MARGIN)
    return bool(lenient) or any(
        t > 0 and t >= s >= vis.MIN_VISIBLE_SHARE for s, t in zip(landmark, twin, strict=False)
    )
