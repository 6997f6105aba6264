"""What each UAV of a group perceives of each object, from the renderer's measurements and the
view's recorded degradation: the rules every question type reads.

An object in a view is, in this order of precedence:

- ``out_of_view``: less than half of its box samples project into the image, or it has no
  pixels while nothing hides it;
- ``occluded``: at least ``OCCLUDED`` of its camera-facing samples are hidden behind another
  instance (the one hiding most of them is its occluder);
- ``lost``: the view's masking covers at least half of its box;
- ``small``: fewer pixels than ``SMALL_SHARE`` of the image (at least ``SMALL_MIN_PX``);
- ``degraded``: the view's quality is ``Poor`` or worse from noise, blur, low light or
  compression (its degradation's kind is the cause; a mask elsewhere in the image hides nothing);
- ``clear``: none of these; only then is it usable for detection.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from skyqa.contracts.aircop import GroupObject, GroupTask, ObjectView
from skyqa.contracts.degradation import Degradation
from skyqa.vocab.colours import coarse_colour

State = Literal["out_of_view", "occluded", "lost", "small", "degraded", "clear"]
OCCLUDED = 0.4
SMALL_SHARE = 0.0004
SMALL_MIN_PX = 40
USABLE_QUALITY = 2  # Fair
MIN_IN_FRAME = 0.5
COLOUR_MIN_PX = 30


@dataclass(frozen=True)
class ViewQuality:
    degradation: Degradation
    quality: int
    limited_by: str


@dataclass(frozen=True)
class Seen:
    uav: int  # index into the group's UAVs
    obj: GroupObject
    view: ObjectView
    lost: float  # share of its box the view's masking covers
    state: State

    @property
    def usable(self) -> bool:
        return self.state == "clear"


def lost_share(box: list[float], d: Degradation) -> float:
    if d.kind != "masking" or not any(box):
        return 0.0
    x0, y0, x1, y1 = box
    m0, n0, m1, n1 = d.region
    w, h = max(0.0, min(x1, m1) - max(x0, m0)), max(0.0, min(y1, n1) - max(y0, n0))
    area = (x1 - x0) * (y1 - y0)
    return w * h / area if area > 0 else 0.0


def state_of(view: ObjectView, q: ViewQuality, width: int, height: int) -> tuple[State, float]:
    lost = lost_share(view.bbox_xyxy_norm, q.degradation)
    if view.in_frame < MIN_IN_FRAME or (view.pixels == 0 and view.occluded < OCCLUDED):
        return "out_of_view", lost
    if view.occluded >= OCCLUDED:
        return "occluded", lost
    if lost >= 0.5:
        return "lost", lost
    if view.pixels < max(SMALL_MIN_PX, SMALL_SHARE * width * height):
        return "small", lost
    if q.quality < USABLE_QUALITY and q.degradation.kind != "masking":  # a mask elsewhere hides nothing
        return "degraded", lost
    return "clear", lost


def perceive(task: GroupTask, qualities: list[ViewQuality]) -> list[list[Seen]]:
    """Per UAV, per object (in the task's order)."""
    out = []
    for u, (views, q) in enumerate(zip(task.views, qualities, strict=True)):
        row = []
        for obj, v in zip(task.objects, views, strict=True):
            state, lost = state_of(v, q, task.width, task.height)
            row.append(Seen(u, obj, v, round(lost, 4), state))
        out.append(row)
    return out


def visible(seen: list[Seen]) -> list[Seen]:
    """Objects a viewer can make out: not out of view, not mostly hidden or lost, not a speck."""
    return [s for s in seen if s.state in ("clear", "degraded")]


def colour_name(
    frames: list[NDArray[np.uint8]], masks: list[NDArray[np.uint32]], instance_id: int
) -> str | None:
    """A coarse colour word for the object, read in the view that shows its most sunlit pixels
    (shade scales a colour down; a face in shadow in every view names nothing reliably): the
    greys collapse to white, gray or black by brightness, other colours take the hue family of
    the simulator's palette nearest in chromaticity. None when no view shows enough pixels."""
    best: NDArray[np.float64] | None = None
    for rgb, mask in zip(frames, masks, strict=True):
        px = rgb[mask == instance_id].astype(np.float64) / 255.0
        if len(px) < COLOUR_MIN_PX:
            continue
        lum = px @ np.array([0.299, 0.587, 0.114])
        lit = np.median(px[lum >= np.quantile(lum, 0.75)], axis=0)
        if best is None or lit.max() > best.max():
            best = lit
    return None if best is None else coarse_colour(best)


def unique_names(
    task: GroupTask, frames: list[NDArray[np.uint8]], masks: list[NDArray[np.uint32]]
) -> dict[int, str]:
    """Colour and class for objects whose measured colour the views agree on, kept only when no
    other object of the group has the same name (the words must pick out one object)."""
    named = {}
    for o in task.objects:
        colour = colour_name(frames, masks, o.instance_id)
        if colour:
            named[o.instance_id] = f"{colour} {o.class_name.replace('_', ' ')}"
    counts = Counter(named.values())
    return {i: n for i, n in named.items() if counts[n] == 1}
