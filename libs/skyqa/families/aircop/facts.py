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
- ``clear``: none of these.

One definition of "can be made out" serves every question type (:func:`made_out`):

- an object is *made out* when it is ``clear`` and none of its measures lies within a margin of
  a threshold above (``borderline``): only then is it counted, listed, placed in a quarter,
  matched, or a UAV's view of it a help to others;
- it is certainly *not made out* when it is out of view, occluded, lost or small, away from
  the thresholds: it counts for nothing, and its state is the reason a UAV needs help;
- it is *perhaps* made out when it is ``borderline`` (a person could judge the share hidden,
  lost or in frame, or its size, either way), or ``degraded``: its view is rated Poor or worse,
  so it cannot be relied on (a UAV with that view needs help, and is nobody's helper), yet a
  person looking at the degraded image may still spot it. A question whose answer would change
  if a *perhaps* object were counted (a count, a list, a comparison of views) is not asked; no
  question is asked about a borderline object itself. So a blurred view rated Very poor is
  never the answer "shows the most vehicles" nor counted as showing none: a person counting
  from the blurred image would agree with neither.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from skyqa.contracts.aircop import GroupObject, GroupTask, ObjectView
from skyqa.contracts.degradation import Degradation
from skyqa.sim.classes import BY_ID
from skyqa.vocab.colours import clear_colour

State = Literal["out_of_view", "occluded", "lost", "small", "degraded", "clear"]
OCCLUDED = 0.4
SMALL_SHARE = 0.0004
SMALL_MIN_PX = 40
USABLE_QUALITY = 2  # Fair
MIN_IN_FRAME = 0.5
COLOUR_MIN_PX = 30
# within these margins of a threshold a person could judge the state either way
SHARE_MARGIN = 0.15  # of the occluded, lost and in-frame shares
SIZE_MARGIN = 1.5  # a factor on the small threshold, either way


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
    doubtful: bool = False  # :func:`borderline`: its state is within a margin of a threshold

    @property
    def usable(self) -> bool:
        """Made out for certain (see :func:`made_out`)."""
        return made_out(self) is True


def lost_share(box: list[float], d: Degradation) -> float:
    if d.kind != "masking" or not any(box):
        return 0.0
    x0, y0, x1, y1 = box
    m0, n0, m1, n1 = d.region
    w, h = max(0.0, min(x1, m1) - max(x0, m0)), max(0.0, min(y1, n1) - max(y0, n0))
    area = (x1 - x0) * (y1 - y0)
    return w * h / area if area > 0 else 0.0


def small_px(width: int, height: int) -> float:
    return max(SMALL_MIN_PX, SMALL_SHARE * width * height)


def state_of(view: ObjectView, q: ViewQuality, width: int, height: int) -> tuple[State, float]:
    """The state from the view's measurements, the masked share read off its box."""
    lost = lost_share(view.bbox_xyxy_norm, q.degradation)
    return state_given(view, lost, q, width, height), lost


def state_given(view: ObjectView, lost: float, q: ViewQuality, width: int, height: int) -> State:
    """The state of an object in a view whose masked share is ``lost`` (the QC re-check
    measures it on the mask's pixels)."""
    if view.in_frame < MIN_IN_FRAME or (view.pixels == 0 and view.occluded < OCCLUDED):
        return "out_of_view"
    if view.occluded >= OCCLUDED:
        return "occluded"
    if lost >= 0.5:
        return "lost"
    if view.pixels < small_px(width, height):
        return "small"
    if q.quality < USABLE_QUALITY and q.degradation.kind != "masking":  # a mask elsewhere hides nothing
        return "degraded"
    return "clear"


def borderline(s: Seen, width: int, height: int) -> bool:
    """A measure that decides the object's state lies within a margin of its threshold: a
    person could judge it hidden, lost, out of frame or too small either way. Measures that an
    earlier state already overrides (an object out of view has no size to judge) do not count."""

    def near(v: float, at: float) -> bool:
        return abs(v - at) < SHARE_MARGIN

    v, px = s.view, small_px(width, height)
    if near(v.in_frame, MIN_IN_FRAME):
        return True
    if s.state == "out_of_view":  # in frame without a pixel: hidden by what, or gone where, is unsure
        return v.in_frame >= MIN_IN_FRAME
    if near(v.occluded, OCCLUDED):
        return True
    if s.state == "occluded":
        return False
    if near(s.lost, 0.5):
        return True
    if s.state == "lost":
        return False
    return px / SIZE_MARGIN <= v.pixels < px * SIZE_MARGIN


def made_out(s: Seen) -> bool | None:
    """True: the object can be made out; False: it certainly cannot; None: perhaps (borderline,
    or in a degraded view), so no count, list or comparison may depend on it. An object without
    a pixel in the view is certainly not made out, whatever hides it."""
    if s.view.pixels == 0:
        return False
    if s.doubtful or s.state == "degraded":
        return None
    return s.state == "clear"


def perceive(task: GroupTask, qualities: list[ViewQuality]) -> list[list[Seen]]:
    """Per UAV, per object (in the task's order)."""
    out = []
    for u, (views, q) in enumerate(zip(task.views, qualities, strict=True)):
        row = []
        for obj, v in zip(task.objects, views, strict=True):
            state, lost = state_of(v, q, task.width, task.height)
            seen = Seen(u, obj, v, round(lost, 4), state)
            row.append(replace(seen, doubtful=borderline(seen, task.width, task.height)))
        out.append(row)
    return out


def colour_name(
    frames: list[NDArray[np.uint8]], masks: list[NDArray[np.uint32]], instance_id: int
) -> str | None:
    """A coarse colour word for the object, read in the view that shows its most sunlit pixels
    (shade scales a colour down; a face in shadow in every view names nothing reliably): the
    greys collapse to white, gray or black by brightness, other colours take the hue family of
    the simulator's palette nearest in chromaticity. None when no view shows enough pixels, or
    when the colour lies within the margin of an edge between two words (:func:`.clear_colour`):
    a person might call it either, so it names nothing."""
    best: NDArray[np.float64] | None = None
    for rgb, mask in zip(frames, masks, strict=True):
        px = rgb[mask == instance_id].astype(np.float64) / 255.0
        if len(px) < COLOUR_MIN_PX:
            continue
        lum = px @ np.array([0.299, 0.587, 0.114])
        lit = np.median(px[lum >= np.quantile(lum, 0.75)], axis=0)
        if best is None or lit.max() > best.max():
            best = lit
    return None if best is None else clear_colour(best)


def unique_names(
    task: GroupTask,
    frames: list[NDArray[np.uint8]],
    masks: list[NDArray[np.uint32]],
    classes: list[NDArray[np.uint16]],
) -> dict[int, str]:
    """Colour and class for the group's objects whose name nothing else any view shows carries
    (the words must pick out one object wherever a reader looks): no other object of the group,
    and no instance of the same class outside the area that a view shows in that colour (a
    yellow car at the edge of the picture is a yellow car to a reader)."""
    views = [contents(c, m, np.zeros(m.shape, dtype=np.bool_)) for c, m in zip(classes, masks, strict=True)]
    return group_names(task, shown_names(task, frames, masks, views))


def group_names(task: GroupTask, shown: Sequence[Mapping[int, str]]) -> dict[int, str]:
    """The group's objects named uniquely over all its views (:func:`named_in`)."""
    group = {o.instance_id for o in task.objects}
    return {i: n for i, n in named_in(shown, range(len(shown))).items() if i in group}


def named_in(shown: Sequence[Mapping[int, str]], views: Iterable[int]) -> dict[int, str]:
    """The instances whose name no other instance the given views show carries (``shown``:
    :func:`shown_names`): names that point at one object for a reader of those views."""
    seen: dict[int, str] = {}
    for u in views:
        seen.update(shown[u])
    counts = Counter(seen.values())
    return {i: n for i, n in sorted(seen.items()) if counts[n] == 1}


def shown_names(
    task: GroupTask,
    frames: list[NDArray[np.uint8]],
    masks: list[NDArray[np.uint32]],
    views: Sequence[ViewContents],
) -> list[dict[int, str]]:
    """Per view, the colour and class of every instance it shows with ``COLOUR_MIN_PX`` pixels
    or more (:func:`contents`), the group's objects and any other of a class the vocabulary
    names: what a reader of that view could take a name for. Each instance's colour is read
    once, in its most sunlit view (:func:`colour_name`); a group object's class word is the
    task's."""
    word = {o.instance_id: o.class_name for o in task.objects}
    colours: dict[int, str | None] = {}
    out: list[dict[int, str]] = []
    for view in views:
        here: dict[int, str] = {}
        for i in view.instances:
            cls = word.get(i.instance_id, i.class_name)
            if cls is None or i.pixels < COLOUR_MIN_PX:
                continue
            if i.instance_id not in colours:
                colours[i.instance_id] = colour_name(frames, masks, i.instance_id)
            if (colour := colours[i.instance_id]) is not None:
                here[i.instance_id] = f"{colour} {cls.replace('_', ' ')}"
        out.append(here)
    return out


# ---- the whole view: every instance its segmentation shows, not only the group's area -------
#
# Counting, listing kinds and comparing views ask about what a view shows as a whole (a person
# looking at the image counts every car in it, not the cars near a centre nobody marked). The
# segmentation shows each instance's visible pixels; the renderer measured occlusion and framing
# only for the area's objects, so for the rest they are read off the pixels: an instance with
# far fewer pixels than the others of its class in the view (mostly hidden or cut off), or cut
# by the frame with nothing of its class to compare with, is one a person might or might not
# count.
TRACE_PX = 12  # fewer pixels than this: a speck nobody counts as an object
VISIBLE_SHARE = 0.0001  # of the image: a person makes the object out from this size on
PART = 0.5  # an instance this share of its class's median size in the view: perhaps a part


@dataclass(frozen=True)
class Instance:
    """One instance a view's segmentation shows."""

    instance_id: int
    class_name: str | None  # None: a class the built-in vocabulary does not name
    category: str | None
    pixels: int
    edge: bool  # its pixels touch the image border: perhaps cut off by the frame
    lost: float  # share of its pixels under the view's lost region
    # its pixels' bounds, normalized xyxy; unknown: the whole image (it touches every region)
    box: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)


@dataclass(frozen=True)
class ViewContents:
    """What a view shows as a whole: its instances and each environmental feature's share of
    the scene's pixels a viewer sees (those the view did not lose; the sky is no feature)."""

    instances: tuple[Instance, ...]
    shares: dict[str, float]


# the environmental feature of each category (and the stuff classes): what a view is "mostly"
FEATURE_OF_CATEGORY = {
    "building": "building",
    "vegetation": "vegetation",
    "vehicle": "vehicle",
    "industrial_infrastructure": "industrial",
}
FEATURE_OF_CLASS = {"road": "road", "ground": "ground"}


def feature_of(class_id: int) -> str:
    c = BY_ID.get(class_id)
    if c is None:
        return "other"
    return FEATURE_OF_CLASS.get(c.name) or FEATURE_OF_CATEGORY.get(c.category, "other")


def contents(
    classes: NDArray[np.uint16], instances: NDArray[np.uint32], lost: NDArray[np.bool_]
) -> ViewContents:
    """A view's contents from its segmentation (class and instance maps) and the mask of the
    pixels its degradation lost."""
    flat, cls = instances.ravel(), classes.ravel().astype(np.int64)
    keep = flat > 0
    ids, inverse, counts = np.unique(flat[keep], return_inverse=True, return_counts=True)
    # each instance's class: the class most of its pixels carry (one pass over (instance, class))
    pairs, pair_n = np.unique(inverse.astype(np.int64) * 256 + cls[keep], return_counts=True)
    order = np.lexsort((pair_n, pairs // 256))
    cid_of = np.zeros(len(ids), dtype=np.int64)
    cid_of[pairs[order] // 256] = pairs[order] % 256  # the last (most pixels) per instance wins
    lost_n = np.bincount(inverse, weights=lost.ravel()[keep].astype(np.float64), minlength=len(ids))
    rim = np.concatenate([instances[0], instances[-1], instances[:, 0], instances[:, -1]])
    boxes = _bounds(inverse, len(ids), keep, instances.shape)
    on_edge = set(np.unique(rim[rim > 0]).tolist())
    out = []
    for k, iid in enumerate(ids.tolist()):
        c = BY_ID.get(int(cid_of[k]))
        if c is not None and c.stuff:
            continue
        n = int(counts[k])
        out.append(
            Instance(
                int(iid),
                c.name if c else None,
                c.category if c else None,
                n,
                iid in on_edge,
                round(float(lost_n[k]) / n, 4),
                boxes[k],
            )
        )
    shown = classes[~lost & (classes > 0)]  # class 0 is nothing the scene holds (the sky)
    shares: Counter[str] = Counter()
    if shown.size:
        cids, n_px = np.unique(shown, return_counts=True)
        for cid, n in zip(cids.tolist(), n_px.tolist(), strict=True):
            shares[feature_of(int(cid))] += n / shown.size
    return ViewContents(tuple(out), {k: round(v, 4) for k, v in sorted(shares.items())})


def _bounds(
    inverse: NDArray[np.intp], n: int, keep: NDArray[np.bool_], shape: tuple[int, ...]
) -> list[tuple[float, float, float, float]]:
    """Each instance's pixel bounds (normalized xyxy, the far edge one pixel past its last),
    from the instance index of every kept pixel (``np.unique``'s inverse)."""
    h, w = shape[0], shape[1]
    flat = np.flatnonzero(keep)
    ys, xs = flat // w, flat % w
    x0 = np.full(n, w, dtype=np.int64)
    y0 = np.full(n, h, dtype=np.int64)
    x1 = np.zeros(n, dtype=np.int64)
    y1 = np.zeros(n, dtype=np.int64)
    np.minimum.at(x0, inverse, xs)
    np.minimum.at(y0, inverse, ys)
    np.maximum.at(x1, inverse, xs + 1)
    np.maximum.at(y1, inverse, ys + 1)
    return [
        (round(a / w, 4), round(b / h, 4), round(c / w, 4), round(d / h, 4))
        for a, b, c, d in zip(x0.tolist(), y0.tolist(), x1.tolist(), y1.tolist(), strict=True)
    ]


def visible_px(width: int, height: int) -> float:
    return max(SMALL_MIN_PX, VISIBLE_SHARE * width * height)


def counted(i: Instance, view: ViewContents, q: ViewQuality, width: int, height: int) -> bool | None:
    """Whether a person looking at the view counts the instance: True, False (a speck, or
    lost), or None when a person might or might not (near the size or lost threshold, in a
    view rated Poor or worse, mostly hidden or cut off by the frame as far as its class's other
    instances in the view tell)."""
    px = visible_px(width, height)
    if i.pixels < TRACE_PX:
        return False
    if abs(i.lost - 0.5) < SHARE_MARGIN:
        return None
    if i.lost >= 0.5:
        return False
    if q.quality < USABLE_QUALITY and q.degradation.kind != "masking":
        return None
    if i.pixels < px * SIZE_MARGIN:
        return None
    peers = [
        p.pixels
        for p in view.instances
        if p.class_name == i.class_name and p.instance_id != i.instance_id and not p.edge
    ]
    if not peers:
        return None if i.edge else True
    return None if i.pixels < PART * float(np.median(peers)) else True
