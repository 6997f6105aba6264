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

TWIN_IN_VIEW = "another reviewed landmark of the same description is in view"
# a twin counts as shown from a share the sighting rule's margin could still call visible:
# where a person might make it out, the question might be about it
MIN_SHARE = vis.MIN_VISIBLE_SHARE / vis.RULE_MARGIN


def description(vi: ValidInstance) -> str:
    """How prompts name the landmark, normalised for comparison."""
    return " ".join((vi.landmark_description or vi.class_name).lower().split())


def rendered_id(vi: ValidInstance) -> int:
    """The instance id the landmark has in rendered segmentation: its main view's, else the
    most common among its views."""
    views = {v.view_id: v for v in vi.rgb_views}
    main = views.get(vi.main_view)
    if main is not None and main.rendered_instance_id:
        return main.rendered_instance_id
    ids = [v.rendered_instance_id for v in vi.rgb_views if v.rendered_instance_id]
    return max(set(ids), key=ids.count) if ids else vi.instance_numeric_id


def twins(landmarks: Iterable[ValidInstance]) -> dict[str, frozenset[int]]:
    """Landmark id -> the rendered instance ids of the other reviewed landmarks of its
    description, for the landmarks that have any."""
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


def shows(instance: NDArray[np.uint32], ids: Collection[int]) -> bool:
    return share(instance, ids) >= MIN_SHARE


def sighted(shares: list[float], fps: float) -> bool:
    """Whether a video shows a twin, from its per-frame pixel shares: a sighting under the
    sighting rule's lenient end (threshold and duration within its margin)."""
    return bool(vis.sightings(shares, fps, MIN_SHARE, vis.MIN_SIGHTING_SEC / vis.RULE_MARGIN))
