"""The 14 AirCopBench question types over one UAV group, each answered by a rule on what the
renderer measured and what the view's recorded degradation did (:mod:`.facts`).

A builder yields candidate questions: the gold, the key its label class is balanced by, and how
to draw its options. The family picks one candidate per group and type and draws its options
so that the option set says nothing about which member is the gold (:mod:`..options`):

- counts: a window of four consecutive values from 1 up with the gold at a uniformly drawn rank;
- UAVs: drawn from the group's UAVs (the asking one excepted), whichever is the gold;
- image quarters: all four, every time;
- quality levels, states and causes (:data:`SPACES`): drawn from the labels that are golds of
  this type elsewhere in the release (:data:`RELEASED`), the same pool for every row;
- kinds of object: drawn from every list of as many of the area's kinds;
- objects to share: drawn from the other objects of the gold's category that need not be sent.

Option texts of one type share one form ("it is ..., so no" for every usability option, two
words for every quarter), and no question repeats an option's words (matching points at its
object as the "leftmost car", never by a quarter). A drawn set whose form still singles an
option out (``options.singled_out``), or that holds two options more alike than
``MAX_SIMILARITY``, is not asked, whichever of its members the gold is.

A question is only asked where its answer holds with a margin a person can see: counts two
apart, heights and distances 25 % apart, pixels 50 % apart, boxes off the lines between the
image's quarters, and
nothing it depends on perhaps made out (:func:`.facts.made_out`). There is no "about equal"
or "none of them" option: where the two leading UAVs are too close to tell, nothing is asked.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import SupportsFloat

import numpy as np

from skyqa.contracts.aircop import GroupTask
from skyqa.contracts.collab import CollabTask
from skyqa.degrade import LEVELS
from skyqa.families import options as O
from skyqa.families.aircop.facts import Seen, ViewQuality, made_out

Evidence = dict[str, str | int | float | bool | list[str] | list[int] | list[float]]
# gold first; None: not asked with this draw. The second argument is the release's pool of
# keys for the types in RELEASED (the golds of the type elsewhere), empty for the others.
Draw = Callable[[np.random.Generator, Sequence[str]], list[str] | None]
REGION_MARGIN = 0.05  # of the image: how far a box keeps off the lines between quarters
RATIO = 1.25  # heights and distances: the leader this far beyond the next
PX_RATIO = 1.5  # an object's pixels in the helper's view this many times any other's
COUNT_MARGIN = 2  # the view with the most vehicles shows this many more than any other
MAX_OPTIONS = 4

# the quarters of the image: the UAVs of a group aim at the area's centre, so a finer grid's
# middle cell would be most objects' answer (58 % of grounding golds with a 3 x 3 grid), while
# quarters are about equally likely; every row offers all four, alike in form
REGIONS = ("top left", "top right", "bottom left", "bottom right")
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
    ) -> None:
        self.task = task
        self.seen = seen
        self.q = qualities
        self.names = names  # instance id -> "red car", for objects named uniquely in the group
        self.labels = [u.uav for u in task.uavs]

    def cause(self, s: Seen) -> str:
        """The key of :data:`CAUSE` for the object's state."""
        return self.q[s.uav].degradation.kind if s.state == "degraded" else s.state


# ---- option draws ----------------------------------------------------------------------------


def numeric(gold: int, lo: int = 0) -> Draw:
    """Four consecutive counts (fewer when the range holds fewer) from ``lo`` up to the type's
    largest gold in the release (the pool's one value), the gold at a uniformly drawn rank."""

    def draw(rng: np.random.Generator, pool: Sequence[str]) -> list[str] | None:
        if not pool:
            raise ValueError("a count's options need the type's largest gold")
        hi = int(pool[0])
        k = min(MAX_OPTIONS, hi - lo + 1)
        if k < 2:
            return None
        w = O.window(gold, k, rng, lo=lo, hi=hi)
        return None if w is None else [str(gold), *(str(v) for v in w if v != gold)]

    return draw


def among(gold: str, pool: Sequence[str]) -> Draw:
    """Distractors drawn uniformly from ``pool``, a set fixed before the gold is (the group's
    UAVs): up to three, fewer when the pool is smaller."""

    def draw(rng: np.random.Generator, _: Sequence[str]) -> list[str] | None:
        k = min(MAX_OPTIONS, len(set(pool)))
        return O.from_pool(gold, pool, k, rng) if k >= 2 else None

    return draw


def released(key: str, text: Callable[[str], str]) -> Draw:
    """Distractors drawn uniformly from the release's golds of this type, each key as ``text``."""

    def draw(rng: np.random.Generator, pool: Sequence[str]) -> list[str] | None:
        k = min(MAX_OPTIONS, len(set(pool)))
        keys = O.from_pool(key, pool, k, rng) if k >= 2 and key in pool else None
        return None if keys is None else [text(x) for x in keys]

    return draw


# ---- what a view shows: counts and lists that no "perhaps" object could change ----------------


def _made_out(seen: list[Seen], keep: Callable[[Seen], bool]) -> tuple[list[Seen], list[Seen]]:
    """The objects ``keep`` selects that are made out, and those perhaps made out."""
    picked = [s for s in seen if keep(s)]
    return [s for s in picked if made_out(s) is True], [s for s in picked if made_out(s) is None]


def _alike(s: Seen, t: Seen) -> bool:
    return s.obj.class_name == t.obj.class_name


def _kindred(s: Seen, t: Seen) -> bool:
    return s.obj.category == t.obj.category


def _vehicle(s: Seen) -> bool:
    return s.obj.category == "vehicle"


def _plural(name: str) -> str:
    name = name.replace("_", " ")
    return f"{name}es" if name.endswith(("s", "sh", "ch")) else f"{name}s"


def _kinds_label(kinds: frozenset[str], order: list[str]) -> str:
    names = [_plural(c) for c in order if c in kinds]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def scene_description(g: Group) -> Iterator[Question]:
    """The kinds of object of the area a UAV makes out, among lists of as many kinds of the
    area (every such list as likely a distractor): lists of different lengths would let the
    length point at the gold (views make out few kinds more often than many). The kinds of the
    area are listed by how many of its objects have them, so lists of the same kinds read the
    same."""
    counts = Counter(o.class_name for o in g.task.objects)
    order = sorted(counts, key=lambda c: (-counts[c], c))
    for u, seen in enumerate(g.seen):
        sure, perhaps = _made_out(seen, lambda s: True)
        kinds = frozenset(s.obj.class_name for s in sure)
        if not kinds or not {s.obj.class_name for s in perhaps} <= kinds:
            continue  # nothing to list, or a kind perhaps made out would change the list
        alike = [_kinds_label(frozenset(c), order) for c in itertools.combinations(order, len(kinds))]
        gold = _kinds_label(kinds, order)
        q = f"Which kinds of object of the area can be made out in {g.labels[u]}'s view?"
        ev: Evidence = {"kinds": sorted(kinds)}
        yield Question("scene_description", g.labels[u], q, gold, gold, among(gold, alike), ev)


COMPARED: dict[str, tuple[str, Callable[[Seen], bool]]] = {
    "vehicles": ("Which UAV's view shows the most vehicles?", _vehicle),
    "objects": ("Which UAV's view shows the most objects of the area?", lambda s: True),
}


def scene_comparison(g: Group) -> Iterator[Question]:
    """The view that makes out the most vehicles (or objects), ``COUNT_MARGIN`` ahead of what
    any other view shows even if everything it perhaps makes out were counted."""
    for what, (q, keep) in COMPARED.items():
        bounds = [_made_out(s, keep) for s in g.seen]
        lo = [len(sure) for sure, _ in bounds]
        hi = [len(sure) + len(perhaps) for sure, perhaps in bounds]
        best = max(range(len(lo)), key=lambda k: (lo[k], -k))
        if len(lo) >= 2 and all(lo[best] >= hi[k] + COUNT_MARGIN for k in range(len(lo)) if k != best):
            ev: Evidence = {what: lo, "at_most": hi}
            gold = g.labels[best]
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
    cannot tell from the views which one it is, and nothing is asked."""
    for name, (q, value) in POSTURES.items():
        values = [value(g, k) for k in range(len(g.labels))]
        ranked = sorted(range(len(values)), key=lambda k: (values[k], k))
        a, b = abs(values[ranked[0]]), abs(values[ranked[1]])
        if max(a, b) >= RATIO * min(a, b):
            ev: Evidence = {"posture": name, "values": [round(abs(v), 2) for v in values]}
            gold = g.labels[ranked[0]]
            yield Question("observing_posture", "", q, gold, gold, among(gold, g.labels), ev)


def object_recognition(g: Group) -> Iterator[Question]:
    for u, seen in enumerate(g.seen):
        sure, perhaps = _made_out(seen, lambda s: True)
        kinds = sorted({s.obj.class_name for s in sure})
        if not kinds or not {s.obj.class_name for s in perhaps} <= set(kinds):
            continue  # none made out (see object_counting), or one perhaps made out would change it
        q = f"How many different kinds of object of the area can be made out in {g.labels[u]}'s view?"
        n = len(kinds)
        yield Question(
            "object_recognition", g.labels[u], q, str(n), str(n), numeric(n, lo=1), {"kinds": kinds}
        )


def object_counting(g: Group) -> Iterator[Question]:
    """How many vehicles of the area a view makes out, when it makes out some and none is
    perhaps made out. Counts start at 1, options too: most views that make out nothing are
    views of nothing (hidden, lost, blurred), and a count that is often 0 would make the
    smallest of four options the likeliest wherever the options start at 0."""
    for u, seen in enumerate(g.seen):
        sure, perhaps = _made_out(seen, _vehicle)
        if perhaps or not sure:
            continue  # none made out, or one perhaps made out would change the count
        n = len(sure)
        q = f"How many vehicles of the area can be made out in {g.labels[u]}'s view?"
        yield Question("object_counting", g.labels[u], q, str(n), str(n), numeric(n, lo=1), {"vehicles": n})


def region(box: Sequence[SupportsFloat]) -> str | None:
    """The quarter of the image the box lies in ("top left" .. "bottom right"), or None when
    its centre is within ``REGION_MARGIN`` of a line between quarters or the box reaches more
    than that across one (a person would not say which quarter it is in)."""
    out = []
    x0, y0, x1, y1 = (float(v) for v in box)  # numpy scalars from a re-check would index as bools
    for lo, hi, words in ((y0, y1, ("top", "bottom")), (x0, x1, ("left", "right"))):
        centre = (lo + hi) / 2
        if abs(centre - 0.5) < REGION_MARGIN or (
            hi > 0.5 + REGION_MARGIN if centre < 0.5 else lo < 0.5 - REGION_MARGIN
        ):
            return None
        out.append(words[centre > 0.5])
    return " ".join(out)


def object_grounding(g: Group) -> Iterator[Question]:
    for u, seen in enumerate(g.seen):
        for s in seen:
            name = g.names.get(s.obj.instance_id)
            place = region(s.view.bbox_xyxy_norm) if s.usable else None
            if name and place:
                q = f"Where in {g.labels[u]}'s image is the {name}?"
                ev: Evidence = {"instance_id": s.obj.instance_id, "box": s.view.bbox_xyxy_norm}
                yield Question("object_grounding", g.labels[u], q, place, place, among(place, REGIONS), ev)


# how the matching question points at its object in the first view: one word each, none of
# which is a word of the quarter options (a question that said "top left" would make the option
# repeating it stand out, and point at it whenever the two views are alike)
POINTERS: dict[str, tuple[int, int]] = {
    "leftmost": (0, -1),
    "rightmost": (0, 1),
    "topmost": (1, -1),
    "bottommost": (1, 1),
}
EXTREME_MARGIN = 0.05  # of the image: the pointed-at object this far beyond any rival


def _centre(s: Seen, axis: int) -> float:
    box = s.view.bbox_xyxy_norm
    return (box[axis] + box[axis + 2]) / 2


def object_matching(g: Group) -> Iterator[Question]:
    """An object pointed at in one view as the leftmost (rightmost, topmost, bottommost) of its
    class there, by a margin over every other object of its class the view perhaps shows, and
    the quarter it lies in in another view."""
    for a, seen in enumerate(g.seen):
        for k, s in enumerate(seen):
            if not s.usable:
                continue
            rivals = [
                t
                for t in seen
                if t is not s and made_out(t) is not False and t.obj.class_name == s.obj.class_name
            ]
            cls = s.obj.class_name.replace("_", " ")
            for pointer, (axis, sign) in POINTERS.items():
                if any(sign * (_centre(s, axis) - _centre(t, axis)) < EXTREME_MARGIN for t in rivals):
                    continue
                for b, other in enumerate(g.seen):
                    there = region(other[k].view.bbox_xyxy_norm) if b != a and other[k].usable else None
                    if there is None:
                        continue
                    q = (
                        f"The {pointer} {cls} in {g.labels[a]}'s image: where is the same {cls} "
                        f"in {g.labels[b]}'s image?"
                    )
                    ev: Evidence = {"instance_id": s.obj.instance_id, "from": g.labels[a], "to": g.labels[b]}
                    draw = among(there, REGIONS)
                    yield Question("object_matching", g.labels[b], q, there, there, draw, ev)


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
            if not _needs_help(seen[k]) or not helpers:
                continue
            best = helpers[0]
            rivals = [
                g.seen[b][k].view.pixels
                for b in range(len(g.seen))
                if b not in (u, best) and (g.seen[b][k].state == "clear" or g.seen[b][k].doubtful)
            ]
            if any(g.seen[best][k].view.pixels < PX_RATIO * px for px in rivals):
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
