"""The 14 AirCopBench question types over one UAV group, each answered by a rule on what the
renderer measured and what the view's recorded degradation did (:mod:`.facts`).

A builder yields candidate questions: the gold, the key its label class is balanced by, and how
to draw its options. The family picks one candidate per group and type and draws its options
so that the option set says nothing about which member is the gold (:mod:`..options`). Every
row has the source's four options A-D; a candidate that cannot offer four is not asked:

- counts: a window of four consecutive values from 1 up with the gold at a uniformly drawn rank;
- UAVs: drawn from the group's UAVs (the asking one excepted), whichever is the gold; a group
  with too few UAVs is not asked (AirCopBench pads with "None" and "a ground-based sensor");
- sides (grounding, matching): all four, every time;
- features, quality levels, states and causes (:data:`SPACES`): drawn from the labels that are
  golds of this type elsewhere in the release (:data:`RELEASED`), the same pool for every row;
- objects to share: drawn from the other objects of the gold's category that need not be sent.

What a view shows is asked about as a whole (counts, kinds, the view with most vehicles, the
dominant feature): every instance its segmentation shows, never only the objects near a
centre the model is not shown (:func:`.facts.counted`). Objects are named by colour and class
where the name picks out one object in every view (:func:`.facts.unique_names`).

Option texts of one type share one form ("it is ..., so no" for every usability option, "on
its left" / "above it" for every side), and no question repeats an option's words. A drawn set
whose form still singles an option out (``options.singled_out``), or that holds two options more
alike than ``MAX_SIMILARITY``, is not asked, whichever of its members the gold is.

A question is only asked where its answer holds with a margin a person can see from the
images: counts two apart, heights and distances 25 % apart (:func:`beyond_margin`), pixels 50 %
apart, one side of a box twice the other offset and the boxes apart, and nothing it depends on
perhaps made out (:func:`.facts.made_out`, :func:`.facts.counted`). There is no "about equal" or
"none of them" option: where the two leading candidates are too close to tell, nothing is asked,
so a tied candidate is never a wrong option.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import SupportsFloat

import numpy as np

from skyqa.contracts.aircop import GroupTask
from skyqa.contracts.collab import CollabTask
from skyqa.degrade import LEVELS
from skyqa.families import options as O
from skyqa.families.aircop.facts import (
    TRACE_PX,
    USABLE_QUALITY,
    Instance,
    Seen,
    ViewContents,
    ViewQuality,
    counted,
    made_out,
    visible_px,
)

Evidence = dict[str, str | int | float | bool | list[str] | list[int] | list[float]]
# gold first; None: not asked with this draw. The second argument is the release's pool of
# keys for the types in RELEASED (the golds of the type elsewhere), empty for the others.
Draw = Callable[[np.random.Generator, Sequence[str]], list[str] | None]
RATIO = 1.25  # heights and distances: the leader this far beyond the next
PX_RATIO = 1.5  # an object's pixels in the helper's view this many times any other's
COUNT_MARGIN = 2  # the view with the most vehicles shows this many more than any other
MAX_OPTIONS = 4

# every option text of a type in one form: the object as "it", the verdict last
USABLE = {
    "clear": "it is clearly visible, so yes",
    "occluded": "it is mostly hidden, so no",
    "small": "it is too small to see well, so no",
    "out_of_view": "it is outside the frame, so no",
    "lost": "it lies in a lost part of the view, so no",
    "degraded": "it is too degraded to rely on, so no",
}
WHEN = {
    "clear": "it is clearly visible, so no",
    "occluded": "it is mostly hidden, so yes",
    "small": "it is too small to see well, so yes",
    "out_of_view": "it is outside the frame, so yes",
    "lost": "it lies in a lost part of the view, so yes",
    "degraded": "it is too degraded to rely on, so yes",
}
# a state's cause, or for a degraded view its degradation's kind; no two start alike
CAUSE = {
    "clear": "nothing: it is clearly visible",
    "occluded": "another object hiding it",
    "small": "its small size in the view",
    "out_of_view": "lying outside the frame",
    "lost": "a lost part of the view",
    "noise": "sensor noise over the view",
    "blur": "blur over the whole view",
    "low_light": "low light over the view",
    "compression": "compression artefacts",
}
WHY = {
    "occluded": "because another object hides it",
    "small": "because it is too small to make out",
    "out_of_view": "because it lies outside the frame",
    "lost": "because part of the view is lost",
    "degraded": "because the view is too degraded",
}
# the types whose options are drawn from the golds of the type elsewhere in the release, and
# each one's label space (its keys, in the order a pool too small is topped up from)
SPACES: dict[str, tuple[str, ...]] = {
    "scene_description": ("road", "building", "vegetation", "ground", "vehicle", "industrial"),
    "quality_assessment": LEVELS,
    "usability_assessment": tuple(USABLE),
    "causal_assessment": tuple(CAUSE),
    "when_to_collaborate": tuple(WHEN),
    "why_to_collaborate": tuple(WHY),
}
RELEASED = frozenset(SPACES)


@dataclass(frozen=True)
class Question:
    task: CollabTask
    uav: str
    question: str
    gold: str
    key: str  # the gold's label class: balanced across groups; the release pool's member
    draw: Draw
    evidence: Evidence = field(default_factory=dict)


class Group:
    """A group's task with the lookups every question needs."""

    def __init__(
        self,
        task: GroupTask,
        seen: list[list[Seen]],
        qualities: list[ViewQuality],
        names: dict[int, str],
        views: list[ViewContents],
    ) -> None:
        if not len(seen) == len(qualities) == len(views) == len(task.uavs):
            raise ValueError("a group needs the objects, quality and contents of every UAV's view")
        self.task = task
        self.seen = seen
        self.views = views  # per UAV, everything its segmentation shows
        self.q = qualities
        self.names = names  # instance id -> "red car", for objects named uniquely in the group
        self.labels = [u.uav for u in task.uavs]

    def cause(self, s: Seen) -> str:
        """The key of :data:`CAUSE` for the object's state."""
        return self.q[s.uav].degradation.kind if s.state == "degraded" else s.state


# ---- option draws ----------------------------------------------------------------------------


def numeric(gold: int, lo: int = 0) -> Draw:
    """Four consecutive counts from ``lo`` up to the type's largest gold in the release (the
    pool's one value), the gold at a uniformly drawn rank; None (not asked) when that range holds
    fewer than four: a count above every gold would be an option nobody needs to look to rule
    out."""

    def draw(rng: np.random.Generator, pool: Sequence[str]) -> list[str] | None:
        if not pool:
            raise ValueError("a count's options need the type's largest gold")
        hi = int(pool[0])
        if hi - lo + 1 < MAX_OPTIONS:
            return None
        w = O.window(gold, MAX_OPTIONS, rng, lo=lo, hi=hi)
        return None if w is None else [str(gold), *(str(v) for v in w if v != gold)]

    return draw


def among(gold: str, pool: Sequence[str]) -> Draw:
    """Three distractors drawn uniformly from ``pool``, a set fixed before the gold is (the
    group's UAVs, the four sides); None (not asked) when the pool holds fewer than four: the
    source's rows have exactly four options."""

    def draw(rng: np.random.Generator, _: Sequence[str]) -> list[str] | None:
        if len(set(pool)) < MAX_OPTIONS:
            return None
        return O.from_pool(gold, pool, MAX_OPTIONS, rng)

    return draw


def released(key: str, text: Callable[[str], str]) -> Draw:
    """Three distractors drawn uniformly from the release's golds of this type, each key as
    ``text``; None when the pool holds fewer than four keys."""

    def draw(rng: np.random.Generator, pool: Sequence[str]) -> list[str] | None:
        ok = len(set(pool)) >= MAX_OPTIONS and key in pool
        keys = O.from_pool(key, pool, MAX_OPTIONS, rng) if ok else None
        return None if keys is None else [text(x) for x in keys]

    return draw


# ---- what a view shows: counts and lists that no "perhaps" object could change ----------------


def _kindred(s: Seen, t: Seen) -> bool:
    return s.obj.category == t.obj.category


def _whole(
    g: Group, u: int, keep: Callable[[Instance], bool]
) -> tuple[list[Instance], list[Instance]] | None:
    """The instances ``keep`` selects in view ``u`` that a person counts for certain, and those
    a person might or might not count (:func:`.facts.counted`); None when an instance of a class
    the vocabulary does not name might be one of them (it cannot be told either way)."""
    view, q = g.views[u], g.q[u]
    sure: list[Instance] = []
    perhaps: list[Instance] = []
    for i in view.instances:
        verdict = counted(i, view, q, g.task.width, g.task.height)
        if verdict is False:
            continue
        if i.class_name is None:
            return None
        if keep(i):
            (sure if verdict else perhaps).append(i)
    return sure, perhaps


def _vehicle(i: Instance) -> bool:
    return i.category == "vehicle"


def _of_class(name: str) -> Callable[[Instance], bool]:
    return lambda i: i.class_name == name


IDENTIFY = 4.0  # times the size a vehicle is made out at: only from here on is its kind told


def _kind_unsure(g: Group, u: int) -> bool:
    """A vehicle in view ``u`` too small to tell a car from a truck or a bus: a count of one
    kind of vehicle could take it for any."""
    px = IDENTIFY * visible_px(g.task.width, g.task.height)
    return any(i.category == "vehicle" and TRACE_PX <= i.pixels < px for i in g.views[u].instances)


# what counting and comparing views count: every vehicle, and each kind of vehicle on its own
COUNTED: dict[str, Callable[[Instance], bool]] = {
    "vehicles": _vehicle,
    "cars": _of_class("car"),
    "trucks": _of_class("truck"),
    "buses": _of_class("bus"),
}
MAX_COUNT = 12  # more than this in one view, and people's counts of it differ


# the environmental features a view can be mostly of (:func:`.facts.feature_of`), one form each
FEATURES = {
    "road": "roads and paved streets",
    "building": "buildings and their roofs",
    "vegetation": "trees and green areas",
    "ground": "open ground and plazas",
    "vehicle": "parked and moving vehicles",
    "industrial": "tanks, containers and chimneys",
}
DOMINANT = 1.5  # the main feature's share this many times any other's (unlabelled pixels too)
DOMINANT_MIN = 0.3  # and at least this share of what the view shows


def scene_description(g: Group) -> Iterator[Question]:
    """The main environmental feature of a view (AirCopBench: "What is the dominant
    environmental feature in UAV1's view?"): the feature whose pixels cover the largest share of
    what the view shows, ``DOMINANT`` times any other's, so that a person sees it at a glance.
    Views rated Poor or worse are not asked about."""
    for u, view in enumerate(g.views):
        q = g.q[u]
        if q.quality < USABLE_QUALITY and q.degradation.kind != "masking":
            continue
        ranked = sorted(view.shares.items(), key=lambda kv: (-kv[1], kv[0]))
        if not ranked:
            continue
        top, share = ranked[0]
        second = ranked[1][1] if len(ranked) > 1 else 0.0
        if top not in FEATURES or share < DOMINANT_MIN or share < DOMINANT * second:
            continue
        text = f"What is the dominant environmental feature in {g.labels[u]}'s view?"
        ev: Evidence = {"feature": top, "shares": [f"{k} {v:.2f}" for k, v in ranked]}
        yield Question(
            "scene_description",
            g.labels[u],
            text,
            FEATURES[top],
            top,
            released(top, FEATURES.__getitem__),
            ev,
        )


def scene_comparison(g: Group) -> Iterator[Question]:
    """The view that shows the most vehicles (or cars, trucks, buses: every one in the picture,
    not only the area's), ``COUNT_MARGIN`` ahead of any other view even if everything a person
    might count there were counted."""
    if len(g.views) < MAX_OPTIONS:
        return
    for noun, keep in COUNTED.items():
        bounds = [_whole(g, u, keep) for u in range(len(g.views))]
        if any(b is None for b in bounds):
            return
        if noun != "vehicles" and any(_kind_unsure(g, u) for u in range(len(g.views))):
            continue
        lo = [len(b[0]) for b in bounds if b is not None]
        hi = [len(b[0]) + len(b[1]) for b in bounds if b is not None]
        best = max(range(len(lo)), key=lambda k: (lo[k], -k))
        if all(lo[best] >= hi[k] + COUNT_MARGIN for k in range(len(lo)) if k != best):
            ev: Evidence = {noun: lo, "at_most": hi}
            gold = g.labels[best]
            q = f"Which UAV's view shows the most {noun}?"
            yield Question("scene_comparison", "", q, gold, gold, among(gold, g.labels), ev)


POSTURES: dict[str, tuple[str, Callable[[Group, int], float]]] = {
    "lowest": ("Which UAV observes the area from the lowest height?", lambda g, k: g.task.uavs[k].altitude_m),
    "farthest": (
        "Which UAV observes the area from the farthest away?",
        lambda g, k: -g.task.uavs[k].distance_m,
    ),
}


def observing_posture(g: Group) -> Iterator[Question]:
    """The UAV lowest or farthest, ``RATIO`` beyond the next: closer than that, a person
    cannot tell from the views which one it is, and nothing is asked (there is no "about
    equal" option, and so no tied UAV among the wrong ones)."""
    if len(g.labels) < MAX_OPTIONS:
        return
    for name, (q, value) in POSTURES.items():
        values = [value(g, k) for k in range(len(g.labels))]
        ranked = sorted(range(len(values)), key=lambda k: (values[k], k))
        a, b = abs(values[ranked[0]]), abs(values[ranked[1]])
        if beyond_margin(a, b):
            ev: Evidence = {"posture": name, "values": [round(abs(v), 2) for v in values]}
            gold = g.labels[ranked[0]]
            yield Question("observing_posture", "", q, gold, gold, among(gold, g.labels), ev)


def beyond_margin(a: float, b: float, ratio: float = RATIO) -> bool:
    """Two magnitudes a person can tell apart from the images: the larger ``ratio`` times the
    smaller."""
    return max(a, b) >= ratio * min(a, b)


# the kinds of object a recognition question lists, by category: named in the question, so a
# person counts what the question counts (a billboard or a car and a truck as one kind or two
# would otherwise be anyone's guess)
KINDS = {
    "building": "buildings",
    "vehicle": "vehicles",
    "vegetation": "trees",
    "public_facility": "street lamps or shelters",
    "industrial_infrastructure": "tanks, containers or chimneys",
}
KIND_LIST = "; ".join(KINDS.values())


def object_recognition(g: Group) -> Iterator[Question]:
    """How many of the listed kinds a view shows, every instance of the picture counted; not
    asked when a kind only perhaps shown would change the number."""
    for u in range(len(g.views)):
        found = _whole(g, u, lambda i: i.category in KINDS)
        if found is None:
            continue
        sure, perhaps = found
        kinds = sorted({str(i.category) for i in sure})
        if not kinds or not {str(i.category) for i in perhaps} <= set(kinds):
            continue
        q = f"How many of these kinds of object can be made out in {g.labels[u]}'s view: {KIND_LIST}?"
        n = len(kinds)
        yield Question(
            "object_recognition", g.labels[u], q, str(n), str(n), numeric(n, lo=1), {"kinds": kinds}
        )


def object_counting(g: Group) -> Iterator[Question]:
    """How many vehicles (cars, trucks, buses) a view shows, every one in the picture, when it
    shows some, at most ``MAX_COUNT``, and none is one a person might or might not count (a
    sliver at the frame, one mostly hidden, a few pixels, a view rated Poor or worse). A whole
    city view often holds a far car or two of a few dozen pixels: then its vehicles are not
    counted, but its buses may be. Counts start at 1, options too: most views that make out
    nothing are views of nothing (hidden, lost, blurred), and a count that is often 0 would make
    the smallest of four options the likeliest wherever the options start at 0."""
    for u in range(len(g.views)):
        for noun, keep in COUNTED.items():
            found = _whole(g, u, keep)
            if found is None or found[1] or not 1 <= len(found[0]) <= MAX_COUNT:
                continue
            if noun != "vehicles" and _kind_unsure(g, u):
                continue
            n = len(found[0])
            q = f"How many {noun} can be made out in {g.labels[u]}'s view?"
            ev: Evidence = {noun: n}
            yield Question("object_counting", g.labels[u], q, str(n), str(n), numeric(n, lo=1), ev)


# where one object appears relative to another in an image, one form each
RELATIONS = {"left": "on its left", "right": "on its right", "above": "above it", "below": "below it"}
SIDES = tuple(RELATIONS.values())
AXIS_RATIO = 2.0  # the offset along one image axis this many times the other's
GAP = 0.02  # of the image: the two boxes this far apart along that axis


def relation(
    box: Sequence[SupportsFloat], ref: Sequence[SupportsFloat], width: int, height: int
) -> str | None:
    """Where the box lies relative to ``ref`` in the image ("left", "right", "above", "below"),
    or None when no one side is clear: its offset along one axis less than ``AXIS_RATIO`` times
    the other's (in pixels), or the boxes closer than ``GAP`` along it (overlapping boxes have
    no side a person would agree on)."""
    x0, y0, x1, y1 = (float(v) for v in box)  # numpy scalars from a re-check would index as bools
    r0, s0, r1, s1 = (float(v) for v in ref)
    dx = ((x0 + x1) - (r0 + r1)) / 2 * width
    dy = ((y0 + y1) - (s0 + s1)) / 2 * height
    if abs(dx) >= AXIS_RATIO * abs(dy):
        gap = r0 - x1 if dx < 0 else x0 - r1
        return ("left" if dx < 0 else "right") if gap >= GAP else None
    if abs(dy) >= AXIS_RATIO * abs(dx):
        gap = s0 - y1 if dy < 0 else y0 - s1
        return ("above" if dy < 0 else "below") if gap >= GAP else None
    return None


def _relations(g: Group, u: int, k: int) -> Iterator[tuple[int, str]]:
    """The named objects object ``k`` has a clear side of in view ``u``, with that side."""
    s = g.seen[u][k]
    if not s.usable:
        return
    for j in _targets(g):
        t = g.seen[u][j]
        if j != k and t.usable:
            side = relation(s.view.bbox_xyxy_norm, t.view.bbox_xyxy_norm, g.task.width, g.task.height)
            if side:
                yield j, side


def object_grounding(g: Group) -> Iterator[Question]:
    """Where a named object appears relative to another named object in a view (AirCopBench:
    "the white van is ... behind the red car"), the four sides offered every time."""
    for u in range(len(g.seen)):
        for k in _targets(g):
            for j, side in _relations(g, u, k):
                name, ref = g.names[g.task.objects[k].instance_id], g.names[g.task.objects[j].instance_id]
                q = f"In {g.labels[u]}'s image, where does the {name} appear relative to the {ref}?"
                ev: Evidence = {"instance_id": g.task.objects[k].instance_id, "reference": ref, "side": side}
                gold = RELATIONS[side]
                yield Question(
                    "object_grounding", g.labels[u], q, gold, side, among(gold, list(RELATIONS.values())), ev
                )


NEAR_RATIO = 1.5  # the pointer's reference this many times nearer than any other named object


def _nearest(g: Group, u: int, k: int) -> int | None:
    """The named object nearest object ``k`` in view ``u`` (box centres, in pixels), when it is
    ``NEAR_RATIO`` times nearer than any other object the view perhaps shows."""
    s = g.seen[u][k]
    w, h = g.task.width, g.task.height

    def centre(t: Seen) -> tuple[float, float]:
        b = t.view.bbox_xyxy_norm
        return (b[0] + b[2]) / 2 * w, (b[1] + b[3]) / 2 * h

    cx, cy = centre(s)
    dist = sorted(
        (float(np.hypot(centre(t)[0] - cx, centre(t)[1] - cy)), j)
        for j, t in enumerate(g.seen[u])
        if j != k and made_out(t) is not False
    )
    nearest = dist[0][1] if dist else -1
    if nearest < 0 or g.task.objects[nearest].instance_id not in g.names or not g.seen[u][nearest].usable:
        return None
    if len(dist) > 1 and dist[1][0] < NEAR_RATIO * dist[0][0]:
        return None
    return dist[0][1]


def object_matching(g: Group) -> Iterator[Question]:
    """An object pointed at in one view by its description (colour, class and the named object
    it is nearest), and where the same object appears in another view relative to a named
    object there (AirCopBench: "which object in UAV2 corresponds to the dark gray car
    approaching the intersection from the left in UAV1?")."""
    for a in range(len(g.seen)):
        for k in _targets(g):
            if not g.seen[a][k].usable:
                continue
            near = _nearest(g, a, k)
            if near is None:
                continue
            name = g.names[g.task.objects[k].instance_id]
            ref = g.names[g.task.objects[near].instance_id]
            for b in range(len(g.seen)):
                if b == a:
                    continue
                for j, side in _relations(g, b, k):
                    other = g.names[g.task.objects[j].instance_id]
                    q = (
                        f"In {g.labels[a]}'s image, take the {name} nearest the {ref}. In {g.labels[b]}'s "
                        f"image, where does that same object appear relative to the {other}?"
                    )
                    ev: Evidence = {
                        "instance_id": g.task.objects[k].instance_id,
                        "from": g.labels[a],
                        "to": g.labels[b],
                        "side": side,
                    }
                    gold = RELATIONS[side]
                    draw = among(gold, SIDES)
                    yield Question("object_matching", g.labels[b], q, gold, side, draw, ev)


def quality_assessment(g: Group) -> Iterator[Question]:
    for u, q in enumerate(g.q):
        gold = LEVELS[q.quality]
        text = f"How would you rate the image quality of {g.labels[u]}'s view?"
        ev: Evidence = {"degradation": q.degradation.kind, "quality": q.quality, "limited_by": q.limited_by}
        yield Question("quality_assessment", g.labels[u], text, gold, gold, released(gold, str), ev)


def _targets(g: Group) -> list[int]:
    """Objects named uniquely in the group, by position in the task's object list."""
    return [k for k, o in enumerate(g.task.objects) if o.instance_id in g.names]


def usability_assessment(g: Group) -> Iterator[Question]:
    for k in _targets(g):
        for u, seen in enumerate(g.seen):
            s = seen[k]
            if s.doubtful:
                continue  # its state could be judged either way
            q = f"Can the {g.names[s.obj.instance_id]} be reliably detected in {g.labels[u]}'s image?"
            ev: Evidence = {"state": s.state}
            draw = released(s.state, USABLE.__getitem__)
            yield Question("usability_assessment", g.labels[u], q, USABLE[s.state], s.state, draw, ev)


def causal_assessment(g: Group) -> Iterator[Question]:
    for k in _targets(g):
        for u, seen in enumerate(g.seen):
            s = seen[k]
            if s.doubtful:
                continue
            key = g.cause(s)
            q = f"What most limits detecting the {g.names[s.obj.instance_id]} in {g.labels[u]}'s image?"
            draw = released(key, CAUSE.__getitem__)
            yield Question("causal_assessment", g.labels[u], q, CAUSE[key], key, draw, {"state": s.state})


def _helpers(g: Group, k: int, u: int) -> list[int]:
    """Other UAVs that make object ``k`` out, most pixels first."""
    ok = [b for b in range(len(g.seen)) if b != u and g.seen[b][k].usable]
    return sorted(ok, key=lambda b: (-g.seen[b][k].view.pixels, b))


def _needs_help(s: Seen) -> bool:
    """The UAV certainly cannot rely on its view of the object: not made out, or its view rated
    Poor or worse, and no margin in doubt."""
    return not s.doubtful and s.state != "clear"


def when_to_collaborate(g: Group) -> Iterator[Question]:
    """No when the UAV makes the object out; yes (with its state) when it certainly cannot and
    another UAV does (when none does, asking would not help: not a collaboration question)."""
    for k in _targets(g):
        for u, seen in enumerate(g.seen):
            s = seen[k]
            if not (s.usable or (_needs_help(s) and _helpers(g, k, u))):
                continue
            name = g.names[s.obj.instance_id]
            q = f"Should {g.labels[u]} ask another UAV for information about the {name}?"
            draw = released(s.state, WHEN.__getitem__)
            yield Question(
                "when_to_collaborate", g.labels[u], q, WHEN[s.state], s.state, draw, {"state": s.state}
            )


def who_to_collaborate(g: Group) -> Iterator[Question]:
    """The other UAV that makes the object out with the most pixels, ``PX_RATIO`` times any
    other UAV that does or perhaps does; the options are the other UAVs of the group."""
    for k in _targets(g):
        for u, seen in enumerate(g.seen):
            helpers = _helpers(g, k, u)
            if not _needs_help(seen[k]) or not helpers or len(g.labels) - 1 < MAX_OPTIONS:
                continue  # the options are the other UAVs: four of them, or the row is not asked
            best = helpers[0]
            # every other UAV a person might think sees it (a view rated Poor or worse too)
            rivals = [
                g.seen[b][k].view.pixels
                for b in range(len(g.seen))
                if b not in (u, best) and made_out(g.seen[b][k]) is not False
            ]
            if any(not beyond_margin(g.seen[best][k].view.pixels, px, PX_RATIO) for px in rivals):
                continue  # two UAVs see it about as well: no single answer a person would agree on
            name = g.names[seen[k].obj.instance_id]
            q = f"Which UAV should {g.labels[u]} collaborate with to see the {name} clearly?"
            ev: Evidence = {"state": seen[k].state, "pixels": [row[k].view.pixels for row in g.seen]}
            gold, others = g.labels[best], [x for b, x in enumerate(g.labels) if b != u]
            yield Question("who_to_collaborate", g.labels[u], q, gold, gold, among(gold, others), ev)


def what_to_collaborate(g: Group) -> Iterator[Question]:
    """The object the asking UAV cannot rely on but the helper makes out, among objects of its
    category the helper has no reason to send: those the asking UAV makes out itself, and
    those the helper cannot make out either (never another object the helper could usefully
    send). The options name objects of one category, so the category (vehicles are hidden more
    often than buildings) does not point at the gold; where no other object of the category
    qualifies, nothing is asked."""
    targets = _targets(g)
    for k in targets:
        for u, seen in enumerate(g.seen):
            helpers = _helpers(g, k, u)
            if not _needs_help(seen[k]) or not helpers:
                continue
            b = helpers[0]
            other = g.seen[b]
            needless = [
                j
                for j in targets
                if j != k
                and _kindred(seen[k], seen[j])
                and not (seen[j].doubtful or other[j].doubtful)
                and (seen[j].usable or not other[j].usable)
            ]
            if not needless:
                continue
            q = f"What should {g.labels[b]} share with {g.labels[u]}: the position of which object?"
            names = [f"the {g.names[g.task.objects[j].instance_id]}" for j in (k, *needless)]
            ev: Evidence = {"helper": g.labels[b]}
            key = g.task.objects[k].class_name
            yield Question("what_to_collaborate", g.labels[u], q, names[0], key, among(names[0], names), ev)


def why_to_collaborate(g: Group) -> Iterator[Question]:
    for k in _targets(g):
        for u, seen in enumerate(g.seen):
            helpers = _helpers(g, k, u)
            if not _needs_help(seen[k]) or not helpers:
                continue
            b, name = helpers[0], f"the {g.names[seen[k].obj.instance_id]}"
            state = seen[k].state
            q = f"Why should {g.labels[u]} collaborate with {g.labels[b]} about {name}?"
            draw = released(state, WHY.__getitem__)
            yield Question("why_to_collaborate", g.labels[u], q, WHY[state], state, draw, {"state": state})


NUMERIC = frozenset({"object_counting", "object_recognition"})  # drawn by :func:`numeric`
BUILDERS: dict[str, Callable[[Group], Iterator[Question]]] = {
    "scene_description": scene_description,
    "scene_comparison": scene_comparison,
    "observing_posture": observing_posture,
    "object_recognition": object_recognition,
    "object_counting": object_counting,
    "object_grounding": object_grounding,
    "object_matching": object_matching,
    "quality_assessment": quality_assessment,
    "usability_assessment": usability_assessment,
    "causal_assessment": causal_assessment,
    "when_to_collaborate": when_to_collaborate,
    "what_to_collaborate": what_to_collaborate,
    "who_to_collaborate": who_to_collaborate,
    "why_to_collaborate": why_to_collaborate,
}
