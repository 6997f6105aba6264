"""The 14 AirCopBench question types over one UAV group, each answered by a rule on what the
renderer measured and what the view's recorded degradation did (:mod:`.facts`).

A builder yields candidate questions: the gold, the key its label class is balanced by, and how
to draw its options. The family picks one candidate per group and type and draws its options
so that the option set says nothing about which member is the gold (:mod:`..options`). Every
row has the source's four options A-D; a candidate that cannot offer four is not asked:

- counts: a window of four consecutive values within the release's range of golds for the type
  (:func:`count_range`), the gold at a uniformly drawn rank; each value of the range asked
  about equally often in the release (``family.choose``), so no rank is the likeliest;
- UAVs: drawn from the group's UAVs (the asking one excepted), whichever is the gold; a group
  with too few UAVs is not asked (AirCopBench pads with "None" and "a ground-based sensor");
- sides (grounding, matching): all four, every time;
- features, quality levels, states and causes (:data:`SPACES`): drawn from the labels that are
  golds of this type elsewhere in the release (:data:`RELEASED`), the same pool for every row;
- objects to share: drawn from the other objects of the gold's class that need not be sent,
  each described as the helper's image shows it, none too like another.

What a view shows is asked about as a whole (counts, kinds, the view with most vehicles, the
dominant feature): every instance its segmentation shows, never only the objects near a
centre the model is not shown (:func:`.facts.counted`); or, for counts and the view with most
vehicles, inside a red box drawn on the view the model is shown and named in the question
(:func:`regions`), where no instance a person might or might not count lies near the box's
line or inside it (a wrong option's box in a comparison may hold some: it is compared by the
most a person could count there, :func:`region_bounds`). Objects are named by colour and class
where the name picks out one object in the views the question sends the reader to: the image
it asks about for grounding, both images for what to share, every view for the questions
about one object across the group (:meth:`Group.named_in`, :func:`.facts.shown_names`); any
object the views show may be asked about, the group's or not. Where a name alone does not
pick one out, the object is pointed at by its description: colour, class and the named object
it is nearest to, well nearer than any namesake (:func:`_pointer`).

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

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import SupportsFloat

import numpy as np
from numpy.typing import NDArray

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
    named_in,
    visible_px,
)
from skyqa.families.structure import MAX_SIMILARITY
from skyqa.sim.classes import BY_NAME
from skyqa.vocab.directions import similarity

Evidence = dict[str, str | int | float | bool | list[str] | list[int] | list[float] | dict[str, list[float]]]
Box = tuple[float, float, float, float]  # normalized xyxy
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
    # the regions the question names, drawn as a red box on those UAVs' views (UAV label, box)
    marks: tuple[tuple[str, Box], ...] = ()


class Group:
    """A group's task with the lookups every question needs."""

    def __init__(
        self,
        task: GroupTask,
        seen: list[list[Seen]],
        qualities: list[ViewQuality],
        names: dict[int, str],
        views: list[ViewContents],
        shown: Sequence[Mapping[int, str]] | None = None,
    ) -> None:
        if not len(seen) == len(qualities) == len(views) == len(task.uavs):
            raise ValueError("a group needs the objects, quality and contents of every UAV's view")
        if shown is not None and len(shown) != len(task.uavs):
            raise ValueError("a group needs the names every UAV's view shows")
        self.task = task
        self.seen = seen
        self.views = views  # per UAV, everything its segmentation shows
        self.q = qualities
        self.names = names  # instance id -> "red car", for objects named uniquely in the group
        # per UAV, the name of every instance its view shows (:func:`.facts.shown_names`); without
        # them, each view shows the group's names only
        self.shown = [dict(v) for v in shown] if shown is not None else [dict(names) for _ in task.uavs]
        self.labels = [u.uav for u in task.uavs]
        self.memo: dict[tuple[int, str], dict[int, Box]] = {}  # :func:`regions` per view and noun
        self.spots: dict[int, dict[int, tuple[Box, bool]]] = {}  # :func:`_spots` per view
        self.by_id: list[dict[int, Instance]] = []  # :meth:`instance`, built on first use
        # :func:`_grid_bounds` per view and noun
        self.bounds: dict[
            tuple[int, str], tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]
        ] = {}

    def instance(self, u: int, iid: int) -> Instance | None:
        """The instance view ``u``'s segmentation shows under ``iid``, if any."""
        if not self.by_id:
            self.by_id = [{i.instance_id: i for i in v.instances} for v in self.views]
        return self.by_id[u].get(iid)

    def named_in(self, *views: int) -> dict[int, str]:
        """The instances (the group's objects and any other) whose name nothing else the given
        views show carries: a question a reader answers from those views alone may name them
        (:func:`.facts.named_in`)."""
        return named_in(self.shown, views)

    def cause(self, s: Seen) -> str:
        """The key of :data:`CAUSE` for the object's state."""
        return self.q[s.uav].degradation.kind if s.state == "degraded" else s.state


# ---- option draws ----------------------------------------------------------------------------


def numeric(gold: int, lo: int = 0) -> Draw:
    """Four consecutive counts within the type's range of golds in the release (the pool: its
    top, and its bottom if above ``lo``; :func:`count_range`), the gold at a uniformly drawn
    rank; None (not asked) when that range holds fewer than four or not the gold: a count
    outside every gold would be an option nobody needs to look to rule out."""

    def draw(rng: np.random.Generator, pool: Sequence[str]) -> list[str] | None:
        if not pool:
            return None  # the release's golds of this type offer no even range (count_range)
        hi, bottom = int(pool[0]), max(lo, int(pool[1]) if len(pool) > 1 else lo)
        if hi - bottom + 1 < MAX_OPTIONS or not bottom <= gold <= hi:
            return None
        w = _window(gold, bottom, hi, rng)
        return None if w is None else [str(gold), *(str(v) for v in w if v != gold)]

    return draw


def _window(gold: int, lo: int, hi: int, rng: np.random.Generator) -> list[int] | None:
    """Four consecutive values within ``[lo, hi]`` holding the gold at a uniformly drawn rank
    (``options.window``), each window drawn with probability one over the most windows any
    value of the range lies in: a range of exactly four values has one window, which every
    gold takes (bounding by four instead would turn three draws in four away, each a fall back
    to a candidate with another gold, and most often a low one)."""

    def windows(x: int) -> list[list[int]]:
        out = []
        for r in range(MAX_OPTIONS):
            values = [x + i - r for i in range(MAX_OPTIONS)]
            if values[0] >= lo and values[-1] <= hi:
                out.append(values)
        return out

    most = min(MAX_OPTIONS, hi - lo + 2 - MAX_OPTIONS)
    return O.exchangeable(gold, windows, most, rng)


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
    a person might or might not count (:func:`.facts.counted`, and any :data:`LOOKALIKE`); None
    when an instance of a class the vocabulary does not name might be one of them (it cannot be
    told either way)."""
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
        elif i.class_name in LOOKALIKE:
            perhaps.append(i)
    return sure, perhaps


# classes a person counting vehicles from above could take for one: a shipping container is a
# truck's box without a cab (the counts here are all of vehicles)
LOOKALIKE = frozenset({"shipping_container"})


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
    """The view that shows the most vehicles (or cars, trucks, buses), ``COUNT_MARGIN`` ahead of
    any other view even if everything a person might count there were counted: over the whole
    picture where that decides it, else inside a red box drawn on every view (each view's
    region that holds the most, :func:`regions`)."""
    if len(g.views) < MAX_OPTIONS:
        return
    for noun, keep in COUNTED.items():
        kind = noun != "vehicles"
        bounds = [_whole(g, u, keep) for u in range(len(g.views))]
        unsure = kind and any(_kind_unsure(g, u) for u in range(len(g.views)))
        if all(b is not None for b in bounds) and not unsure:
            lo = [len(b[0]) for b in bounds if b is not None]
            hi = [len(b[0]) + len(b[1]) for b in bounds if b is not None]
            best = _leader(lo, hi)
            if best is not None:
                ev: Evidence = {noun: lo, "at_most": hi}
                gold = g.labels[best]
                q = f"Which UAV's view shows the most {noun}?"
                yield Question("scene_comparison", "", q, gold, gold, among(gold, g.labels), ev)
                continue
        yield from _boxed_comparison(g, noun)


def _boxed_comparison(g: Group, noun: str) -> Iterator[Question]:
    """The view whose red box holds the most ``noun``, one box of one size drawn on every view.
    Per view as the leader, the largest size at which its box holding the most holds them
    for sure (:func:`region_bounds`; at most ``MAX_COUNT``), ``COUNT_MARGIN`` more than every
    other view's box could hold even if everything a person might count there were counted;
    each other view's box the one of that size holding the most within that bound. A view
    rated Poor or worse is never the leader, yet may be a wrong option: its box holds at most
    the instances its segmentation shows there, however a person reads the blurred picture."""
    bounds = [_grid_bounds(g, u, noun) for u in range(len(g.views))]
    for lead in range(len(g.views)):
        for sel in BY_SIZE:
            lo, _, exact = bounds[lead]
            ok = sel[exact[sel] & (lo[sel] <= MAX_COUNT)]
            if not len(ok) or (n := int(lo[ok].max())) < COUNT_MARGIN:
                continue
            picked = {lead: int(ok[np.argmax(lo[ok])])}
            for u in range(len(g.views)):
                hi = bounds[u][1]
                under = sel[hi[sel] <= n - COUNT_MARGIN]
                if u != lead and len(under):
                    picked[u] = int(under[np.argmax(hi[under])])
            if len(picked) < len(g.views):
                continue  # a view every box of this size could hold as many in
            marks = tuple((g.labels[u], _box(GRID[picked[u]])) for u in range(len(g.views)))
            ev: Evidence = {
                noun: [int(bounds[u][0][picked[u]]) for u in range(len(g.views))],
                "at_most": [int(bounds[u][1][picked[u]]) for u in range(len(g.views))],
                "regions": {label: list(box) for label, box in marks},
            }
            gold = g.labels[lead]
            q = f"A red box is drawn on each UAV's view. Which UAV's box holds the most {noun}?"
            yield Question("scene_comparison", "", q, gold, gold, among(gold, g.labels), ev, marks)
            break


def _leader(lo: list[int], hi: list[int]) -> int | None:
    """The view whose sure count is ``COUNT_MARGIN`` beyond every other's largest possible."""
    best = max(range(len(lo)), key=lambda k: (lo[k], -k))
    ok = all(lo[best] >= hi[k] + COUNT_MARGIN for k in range(len(lo)) if k != best)
    return best if ok else None


# ---- regions: a red box drawn on the view, holding only instances a person counts for sure ---
#
# A wide city view often holds far cars of a few dozen pixels, which a person might or might not
# count: a count of the whole picture is then not asked. A region drawn on the image and named
# in the question ("inside the red box drawn on UAV3's view") asks about a part of the picture
# where every instance is clearly one: none that a person might or might not count, and none
# the box's line cuts, lies within ``REGION_GAP`` of the box's line on either side.
REGION_SIZES = (0.2, 0.3, 0.4, 0.5, 0.6)  # a region's width and height, of the image's
REGION_STEP = 0.05
REGION_EDGE = 0.05  # the box this far from the image's border: its line stays in the picture
REGION_GAP = 0.02  # of the image, both sides of the box's line


def _grid() -> NDArray[np.float64]:
    out = []
    for w in REGION_SIZES:
        for h in REGION_SIZES:
            xs = np.arange(REGION_EDGE, 1 - REGION_EDGE - w + 1e-9, REGION_STEP)
            ys = np.arange(REGION_EDGE, 1 - REGION_EDGE - h + 1e-9, REGION_STEP)
            out += [(round(x, 2), round(y, 2), round(x + w, 2), round(y + h, 2)) for y in ys for x in xs]
    return np.array(out, dtype=np.float64)


GRID = _grid()


def region_count(
    g: Group, u: int, keep: Callable[[Instance], bool], kind: bool, boxes: NDArray[np.float64]
) -> NDArray[np.int64]:
    """How many instances ``keep`` selects each region (normalized xyxy rows of ``boxes``) of
    view ``u`` holds, or -1 where a person could count it otherwise (:func:`region_bounds`: its
    fewest and most differ, or the view is rated Poor or worse, where a person cannot be sure
    even that a part of it is empty)."""
    lo, _, exact = region_bounds(g, u, keep, kind, boxes)
    return np.where(exact, lo, -1)


def region_bounds(
    g: Group, u: int, keep: Callable[[Instance], bool], kind: bool, boxes: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """Per region (normalized xyxy rows of ``boxes``) of view ``u``: the fewest instances
    ``keep`` selects a person counts in it, the most a person might count in it, and whether
    the count is sure. The fewest: those counted for sure (:func:`.facts.counted`) lying inside
    the region by ``REGION_GAP``. The most adds every instance within ``REGION_GAP`` of the
    region's line or inside it that a person counts or might: one counted for sure that the
    line cuts, one a person might or might not count, of a class the vocabulary does not name,
    a :data:`LOOKALIKE`, or (``kind``: a count of cars, trucks or buses) a vehicle whose kind a
    person could misjudge. Sure: the two agree and the view is rated Fair or better."""
    view, q, w, h = g.views[u], g.q[u], g.task.width, g.task.height
    unsure_px = IDENTIFY * visible_px(w, h)
    bad, good = [], []
    for i in view.instances:
        verdict = counted(i, view, q, w, h)
        if verdict is False:
            continue
        # a vehicle too small to tell its kind, or one perhaps counted (mostly hidden, cut
        # off), could be taken for any kind
        unsure_kind = kind and i.category == "vehicle" and (i.pixels < unsure_px or verdict is None)
        if i.class_name in LOOKALIKE:
            bad.append(i.box)
        elif verdict is None or i.class_name is None or unsure_kind:
            if i.class_name is None or keep(i) or unsure_kind:
                bad.append(i.box)
        elif keep(i):
            good.append(i.box)
    lo = np.zeros(len(boxes), dtype=np.int64)
    hi = np.zeros(len(boxes), dtype=np.int64)
    exact = np.full(len(boxes), q.quality >= USABLE_QUALITY or q.degradation.kind == "masking")
    r = boxes[:, None, :]
    for arr, sure in ((np.array(bad, dtype=np.float64), False), (np.array(good, dtype=np.float64), True)):
        if not len(arr):
            continue
        b = arr[None, :, :]
        touch = (
            (b[..., 0] < r[..., 2] + REGION_GAP)
            & (b[..., 2] > r[..., 0] - REGION_GAP)
            & (b[..., 1] < r[..., 3] + REGION_GAP)
            & (b[..., 3] > r[..., 1] - REGION_GAP)
        )
        hi += touch.sum(axis=1)
        if not sure:
            exact &= ~touch.any(axis=1)
            continue
        inside = (
            (b[..., 0] >= r[..., 0] + REGION_GAP)
            & (b[..., 2] <= r[..., 2] - REGION_GAP)
            & (b[..., 1] >= r[..., 1] + REGION_GAP)
            & (b[..., 3] <= r[..., 3] - REGION_GAP)
        )
        lo += inside.sum(axis=1)
        exact &= ~(touch & ~inside).any(axis=1)
    return lo, hi, exact


# the grid's regions, largest first (grid order among equals)
BY_AREA = np.lexsort((np.arange(len(GRID)), -(GRID[:, 2] - GRID[:, 0]) * (GRID[:, 3] - GRID[:, 1])))


def _by_size() -> list[NDArray[np.intp]]:
    """The grid's regions of each size (indices in grid order), the largest size first."""
    size = np.round(GRID[:, 2:] - GRID[:, :2], 2)
    keys = sorted({(float(w), float(h)) for w, h in size}, key=lambda wh: (-wh[0] * wh[1], wh))
    return [np.flatnonzero((size[:, 0] == w) & (size[:, 1] == h)) for w, h in keys]


BY_SIZE = _by_size()


def _grid_bounds(
    g: Group, u: int, noun: str
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """:func:`region_bounds` of every grid region of view ``u`` for ``noun`` (a key of
    :data:`COUNTED`), once per group."""
    if (u, noun) not in g.bounds:
        g.bounds[u, noun] = region_bounds(g, u, COUNTED[noun], noun != "vehicles", GRID)
    return g.bounds[u, noun]


def regions(g: Group, u: int, noun: str) -> dict[int, Box]:
    """Per count of ``noun`` (a key of :data:`COUNTED`; 0 up to ``MAX_COUNT``), the largest grid
    region of view ``u`` that holds that many, clearly (:func:`region_count`); the first in
    grid order among equals."""
    if (u, noun) not in g.memo:
        lo, _, exact = _grid_bounds(g, u, noun)
        counts = np.where(exact, lo, -1)[BY_AREA]
        values, first = np.unique(counts, return_index=True)
        g.memo[u, noun] = {
            int(n): _box(GRID[BY_AREA[k]])
            for n, k in zip(values.tolist(), first.tolist(), strict=True)
            if 0 <= n <= MAX_COUNT
        }
    return g.memo[u, noun]


def _box(row: NDArray[np.float64]) -> Box:
    x0, y0, x1, y1 = (float(v) for v in row)
    return x0, y0, x1, y1


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


# the kinds of object a recognition question may list: the scene's classes as a person names them
# from above (the three kinds of building are one: from above, a person would not agree which
# is which)
KINDS: dict[str, tuple[str, ...]] = {
    "buildings": ("residential_building", "office_tower", "house"),
    "cars": ("car",),
    "trucks": ("truck",),
    "buses": ("bus",),
    "street lamps": ("street_lamp",),
    "bus shelters": ("bus_shelter",),
    "fountains": ("fountain",),
    "statues": ("statue",),
    "bridges": ("bridge",),
    "traffic signs": ("traffic_sign",),
    "storage tanks": ("storage_tank",),
    "shipping containers": ("shipping_container",),
    "chimneys": ("chimney",),
    "trees": ("tree",),
    "billboards": ("billboard",),
    "water towers": ("water_tower",),
}
KIND_OF = {c: k for k, classes in KINDS.items() for c in classes}
LISTED = 4  # kinds a recognition question lists; its gold is 0..LISTED


@dataclass(frozen=True)
class Kinds:
    """The kinds a view certainly shows, and those it certainly does not."""

    present: frozenset[str]
    absent: frozenset[str]


def kinds_of(g: Group, u: int) -> Kinds | None:
    """A kind is present when an instance of it is counted for sure (:func:`.facts.counted`)
    and large enough to tell its kind (``IDENTIFY`` times the make-out size); absent when no
    instance a person might count is of its category, or of the kind itself (a far, small
    vehicle could be taken for a car, a truck or a bus). None (no kind decided) when an
    instance of a class the vocabulary does not name might be counted, or the view is rated
    Poor or worse."""
    view, q, w, h = g.views[u], g.q[u], g.task.width, g.task.height
    if q.quality < USABLE_QUALITY and q.degradation.kind != "masking":
        return None
    told = IDENTIFY * visible_px(w, h)
    present: set[str] = set()
    doubt: set[str] = set()  # kinds perhaps shown
    for i in view.instances:
        verdict = counted(i, view, q, w, h)
        if verdict is False:
            continue
        if i.class_name is None:
            return None
        k = KIND_OF.get(i.class_name)
        if verdict and i.pixels >= told and k:
            present.add(k)
        elif i.pixels < told:  # its kind not told: any kind of its category
            doubt |= {x for x, cs in KINDS.items() if any(_category(c) == i.category for c in cs)}
        elif k:
            doubt.add(k)
    return Kinds(frozenset(present), frozenset(set(KINDS) - present - doubt))


def _category(class_name: str) -> str | None:
    c = BY_NAME.get(class_name)
    return c.category if c else None


def recognise(g: Group, u: int, listed: Sequence[str]) -> Question | None:
    """How many of the ``listed`` kinds view ``u`` shows, when each is certainly shown or
    certainly not (:func:`kinds_of`); None otherwise."""
    kinds = kinds_of(g, u)
    if kinds is None or len(listed) != LISTED or len(set(listed)) != LISTED:
        return None
    if not all(k in kinds.present or k in kinds.absent for k in listed):
        return None
    shown = [k for k in listed if k in kinds.present]
    q = f"How many of these kinds of object can be made out in {g.labels[u]}'s view: {'; '.join(listed)}?"
    n = len(shown)
    ev: Evidence = {"listed": list(listed), "present": shown}
    return Question("object_recognition", g.labels[u], q, str(n), str(n), numeric(n, lo=0), ev)


def presence_rates(groups: Sequence[Group]) -> dict[str, float]:
    """Per kind, the share of the views deciding it (:func:`kinds_of`) that show it; only kinds
    some view shows and some view does not."""
    shown: Counter[str] = Counter()
    decided: Counter[str] = Counter()
    for g in groups:
        for u in range(len(g.views)):
            kinds = kinds_of(g, u)
            if kinds is not None:
                shown.update(kinds.present)
                decided.update(kinds.present | kinds.absent)
    return {k: shown[k] / decided[k] for k in KINDS if 0 < shown[k] < decided[k]}


def object_recognition(g: Group, rates: Mapping[str, float] | None = None) -> Iterator[Question]:
    """How many of ``LISTED`` kinds a view shows (AirCopBench: "How many types of objects are
    there?"), the kinds listed so that a person counts what is counted. One candidate per view
    and gold 0..``LISTED`` the view can offer, so golds spread over the range rather than
    following how many kinds a view shows (most city views show most kinds). The list draws
    each kind the view shows with a weight of one over the share of the release's views that
    show it (``rates``, :func:`presence_rates`), and each kind it does not with one over the
    share that do not: a kind shown in most views is listed as often where it is absent as
    where it is present, so knowing which kinds are common says nothing about the count.
    Without ``rates`` (a group on its own), every kind weighs alike."""
    rates = rates if rates is not None else {k: 0.5 for k in KINDS}
    for u in range(len(g.views)):
        kinds = kinds_of(g, u)
        if kinds is None:
            continue
        present = sorted(k for k in kinds.present if k in rates)
        absent = sorted(k for k in kinds.absent if k in rates)
        for n in range(LISTED + 1):
            if len(present) < n or len(absent) < LISTED - n:
                continue
            rng = np.random.default_rng([g.task.seed, u, n, 0x6B1D])
            listed = _weighted(present, n, [1 / rates[k] for k in present], rng)
            listed += _weighted(absent, LISTED - n, [1 / (1 - rates[k]) for k in absent], rng)
            order = [listed[int(i)] for i in rng.permutation(LISTED)]
            q = recognise(g, u, order)
            if q is not None:
                yield q


def _weighted(items: list[str], k: int, weights: list[float], rng: np.random.Generator) -> list[str]:
    if k == 0:
        return []
    p = np.array(weights, dtype=np.float64)
    picked = rng.choice(len(items), size=k, replace=False, p=p / p.sum())
    return [items[int(i)] for i in picked]


def object_counting(g: Group) -> Iterator[Question]:
    """How many vehicles (cars, trucks, buses) a view shows, at most ``MAX_COUNT``: over the
    whole picture where none is one a person might or might not count (a sliver at the frame,
    one mostly hidden, a few pixels, a view rated Poor or worse) and it shows some, and inside
    a red box drawn on the view (:func:`regions`), one per count the view's regions offer. A
    whole city view often holds a far car or two of a few dozen pixels: then its vehicles are
    counted in a region that holds none of those. Whole-view counts start at 1: most views that
    make out nothing are views of nothing (hidden, lost, blurred), so a count of 0 would say
    more about the view than its pixels. A region may hold none: the box is drawn where the
    question asks, and a box over a lawn is as plain to read as one over a car park."""
    for u in range(len(g.views)):
        for noun, keep in COUNTED.items():
            kind = noun != "vehicles"
            found = _whole(g, u, keep)
            whole = found is not None and not found[1] and 1 <= len(found[0]) <= MAX_COUNT
            if found is not None and whole and not (kind and _kind_unsure(g, u)):
                n = len(found[0])
                q = f"How many {noun} can be made out in {g.labels[u]}'s view?"
                ev: Evidence = {noun: n}
                yield Question("object_counting", g.labels[u], q, str(n), str(n), numeric(n, lo=1), ev)
            for n, box in sorted(regions(g, u, noun).items()):
                q = f"How many {noun} can be made out inside the red box drawn on {g.labels[u]}'s view?"
                ev = {noun: n, "regions": {g.labels[u]: list(box)}}
                marks = ((g.labels[u], box),)
                yield Question("object_counting", g.labels[u], q, str(n), str(n), numeric(n, lo=0), ev, marks)


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


def _spots(g: Group, u: int) -> dict[int, tuple[Box, bool]]:
    """Every instance view ``u`` names (:attr:`Group.shown`): its box (its pixels' bounds, as the
    QC re-reads them) and whether it is made out for certain, the group's objects by the
    renderer's measurements (:func:`.facts.made_out`), any other as a person counts it from the
    picture (:func:`.facts.counted`)."""
    if u not in g.spots:
        view, q, w, h = g.views[u], g.q[u], g.task.width, g.task.height
        out: dict[int, tuple[Box, bool]] = {
            i.instance_id: (i.box, counted(i, view, q, w, h) is True)
            for i in view.instances
            if i.instance_id in g.shown[u]
        }
        for o, s in zip(g.task.objects, g.seen[u], strict=True):
            if o.instance_id in g.shown[u]:
                x0, y0, x1, y1 = (float(v) for v in s.view.bbox_xyxy_norm)
                out[o.instance_id] = (out.get(o.instance_id, ((x0, y0, x1, y1), False))[0], s.usable)
        g.spots[u] = out
    return g.spots[u]


def _relations(g: Group, u: int, iid: int, names: Mapping[int, str]) -> Iterator[tuple[int, str]]:
    """The instances ``names`` holds, made out in view ``u``, that instance ``iid`` (made out
    there too) has a clear side of, with that side."""
    spots = _spots(g, u)
    if iid not in spots or not spots[iid][1]:
        return
    for j in names:
        if j != iid and j in spots and spots[j][1]:
            side = relation(spots[iid][0], spots[j][0], g.task.width, g.task.height)
            if side:
                yield j, side


def object_grounding(g: Group) -> Iterator[Question]:
    """Where a named object appears relative to another named object in a view (AirCopBench:
    "the white van is ... behind the red car"), the four sides offered every time. Any object
    the view makes out may be asked about, each named by colour and class where nothing else in
    that view carries its name (:meth:`Group.named_in`): the question sends the reader to that
    image alone, so a car of the same colour in another UAV's view confuses nobody."""
    for u in range(len(g.seen)):
        names = g.named_in(u)
        for k in names:
            for j, side in _relations(g, u, k, names):
                q = f"In {g.labels[u]}'s image, where does the {names[k]} appear relative to the {names[j]}?"
                ev: Evidence = {"instance_id": k, "reference": names[j], "side": side}
                gold = RELATIONS[side]
                yield Question(
                    "object_grounding", g.labels[u], q, gold, side, among(gold, list(RELATIONS.values())), ev
                )


NEAR_RATIO = 1.5  # the pointed-at object this many times nearer its reference than any namesake


def _centre(box: Box, width: int, height: int) -> tuple[float, float]:
    return (box[0] + box[2]) / 2 * width, (box[1] + box[3]) / 2 * height


def _pointer(g: Group, u: int, iid: int) -> str | None:
    """The named object of view ``u`` that makes "the <name of iid> nearest the <it>" pick out
    instance ``iid`` among every instance the view shows under its name: of the objects named
    uniquely in the view and made out there, the one nearest ``iid``, when ``iid`` is
    ``NEAR_RATIO`` times nearer it (box centres, in pixels) than any namesake. None when there
    is no such reference."""
    name, named, spots = g.shown[u][iid], g.named_in(u), _spots(g, u)
    w, h = g.task.width, g.task.height

    def dist(a: int, b: int) -> float:
        (x0, y0), (x1, y1) = _centre(spots[a][0], w, h), _centre(spots[b][0], w, h)
        return float(np.hypot(x1 - x0, y1 - y0))

    refs = sorted((dist(iid, j), j) for j in named if j != iid and spots[j][1] and named[j] != name)
    if not refs:
        return None
    mine, ref = refs[0]
    namesakes = [i for i, n in g.shown[u].items() if n == name and i != iid]
    # a namesake whose place is unknown could be the nearer one
    if any(i not in spots or dist(i, ref) < NEAR_RATIO * mine for i in namesakes):
        return None
    return named[ref]


def object_matching(g: Group) -> Iterator[Question]:
    """An object pointed at in one view by its description (colour, class and the named object
    it is nearest to, among everything of its colour and class that view shows), and where the
    same object appears in another view relative to an object named uniquely there (AirCopBench:
    "which object in UAV2 corresponds to the dark gray car approaching the intersection from the
    left in UAV1?"). The object needs no name of its own in the second view: telling it from its
    namesakes there is the matching."""
    for a in range(len(g.seen)):
        spots = _spots(g, a)
        for iid in sorted(g.shown[a]):
            if not spots[iid][1] or (ref := _pointer(g, a, iid)) is None:
                continue
            name = g.shown[a][iid]
            for b in range(len(g.seen)):
                if b == a:
                    continue
                there = g.named_in(b)
                for j, side in _relations(g, b, iid, there):
                    q = (
                        f"In {g.labels[a]}'s image, take the {name} nearest the {ref}. In {g.labels[b]}'s "
                        f"image, where does that same object appear relative to the {there[j]}?"
                    )
                    ev: Evidence = {"instance_id": iid, "from": g.labels[a], "to": g.labels[b], "side": side}
                    gold = RELATIONS[side]
                    yield Question("object_matching", g.labels[b], q, gold, side, among(gold, SIDES), ev)


def quality_assessment(g: Group) -> Iterator[Question]:
    for u, q in enumerate(g.q):
        gold = LEVELS[q.quality]
        text = f"How would you rate the image quality of {g.labels[u]}'s view?"
        ev: Evidence = {"degradation": q.degradation.kind, "quality": q.quality, "limited_by": q.limited_by}
        yield Question("quality_assessment", g.labels[u], text, gold, gold, released(gold, str), ev)


def _targets(g: Group) -> list[int]:
    """Objects named uniquely in the group, by position in the task's object list."""
    return _indices(g, g.names)


def _indices(g: Group, names: Mapping[int, str]) -> list[int]:
    """The objects ``names`` holds, by position in the task's object list."""
    return [k for k, o in enumerate(g.task.objects) if o.instance_id in names]


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


def _helpers_by_sight(sights: Sequence[tuple[bool | None, bool, int]], u: int) -> list[int]:
    """Other UAVs that make an object out, most pixels first, from each view's :func:`_sight`
    (any instance a view shows; :func:`_helpers` reads a group object's measurements)."""
    made = [b for b, (seen, _, _) in enumerate(sights) if b != u and seen is True]
    return sorted(made, key=lambda b: (-sights[b][2], b))


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


def _sight(g: Group, u: int, iid: int) -> tuple[bool | None, bool, int]:
    """How view ``u`` shows instance ``iid``: made out (:func:`_made_out_in`), whether the UAV
    certainly needs help with it, and its pixels there. The group's objects by the renderer's
    measurements (:func:`_needs_help`); any other needs help where the view does not show it,
    shows a speck or a lost part of it (:func:`.facts.counted` False), or is rated Poor or worse."""
    for k, o in enumerate(g.task.objects):
        if o.instance_id == iid:
            s = g.seen[u][k]
            return made_out(s), _needs_help(s), s.view.pixels
    view, q, found = g.views[u], g.q[u], g.instance(u, iid)
    if found is None:
        return False, True, 0
    verdict = counted(found, view, q, g.task.width, g.task.height)
    poor = q.quality < USABLE_QUALITY and q.degradation.kind != "masking"
    return verdict, verdict is False or poor, found.pixels


def who_to_collaborate(g: Group) -> Iterator[Question]:
    """The other UAV that makes the object out with the most pixels, ``PX_RATIO`` times any
    other UAV that does or perhaps does; the options are the other UAVs of the group. Any
    object a view shows may be asked about, named by colour and class where nothing else any
    view shows carries its name (the reader looks for it in every view)."""
    if len(g.labels) - 1 < MAX_OPTIONS:
        return  # the options are the other UAVs: four of them, or the row is not asked
    names = g.named_in(*range(len(g.labels)))
    for iid, name in names.items():
        sights = [_sight(g, u, iid) for u in range(len(g.labels))]
        for u, (_, needs, _) in enumerate(sights):
            helpers = _helpers_by_sight(sights, u)
            if not needs or not helpers:
                continue
            best = helpers[0]
            # every other UAV a person might think sees it (a view rated Poor or worse too)
            rivals = [
                px for b, (made, _, px) in enumerate(sights) if b not in (u, best) and made is not False
            ]
            if any(not beyond_margin(sights[best][2], px, PX_RATIO) for px in rivals):
                continue  # two UAVs see it about as well: no single answer a person would agree on
            q = f"Which UAV should {g.labels[u]} collaborate with to see the {name} clearly?"
            ev: Evidence = {"instance_id": iid, "pixels": [px for _, _, px in sights]}
            gold, others = g.labels[best], [x for b, x in enumerate(g.labels) if b != u]
            yield Question("who_to_collaborate", g.labels[u], q, gold, gold, among(gold, others), ev)


def what_to_collaborate(g: Group) -> Iterator[Question]:
    """The object the asking UAV cannot rely on but the helper makes out, among objects of its
    class the helper has no reason to send: those the asking UAV makes out itself (never
    another object the helper could usefully send, nor one the asking UAV perhaps makes out).
    Every option points at one object as the helper's image shows it, by its description
    (colour, class and the named object it is nearest to, :func:`_pointer`): the reader finds
    each in the helper's view and asks whether the asking UAV's view shows it too (AirCopBench:
    "What information should UAV2 share with UAV1?"). The options name objects of one class:
    small objects are hidden more often than large ones (cars more often than buses, even), so
    a class in the set would point at the gold; where fewer than three others qualify, nothing
    is asked."""
    shown = sorted({iid for view in g.shown for iid in view})
    for iid in shown:
        sights = [_sight(g, u, iid) for u in range(len(g.labels))]
        kind = next((c for c in (_class_in(g, u, iid) for u in range(len(g.labels))) if c), None)
        for u, (_, needs, _) in enumerate(sights):
            helpers = _helpers_by_sight(sights, u)
            if not needs or not helpers:
                continue
            b = helpers[0]
            gold = _described(g, b, iid)
            if gold is None:
                continue
            texts = [gold]
            for j, (_, clear) in sorted(_spots(g, b).items()):
                if j == iid or not clear or kind is None or _class_in(g, b, j) != kind:
                    continue
                text = _described(g, b, j) if _made_out_in(g, u, j) is True else None
                # descriptions of one class can read alike ("the white car nearest the red bus"
                # / "... the red bus shelter"): the pool keeps none too like another
                # (``family.fair`` refuses such a set whichever member is the gold)
                if text is not None and all(similarity(text, t) <= MAX_SIMILARITY for t in texts):
                    texts.append(text)
            if len(set(texts)) < MAX_OPTIONS:
                continue  # the source's four options, or the row is not asked
            q = (
                f"What should {g.labels[b]} share with {g.labels[u]}: the position of which object "
                f"in {g.labels[b]}'s image?"
            )
            ev: Evidence = {"helper": g.labels[b], "instance_id": iid}
            yield Question(
                "what_to_collaborate", g.labels[u], q, texts[0], str(kind), among(texts[0], texts), ev
            )


def _described(g: Group, u: int, iid: int) -> str | None:
    """Instance ``iid`` as view ``u`` shows it: "the <colour> <class> nearest the <named
    object>" (:func:`_pointer`), or None when the view does not make it out or it has no such
    description there."""
    spot = _spots(g, u).get(iid)
    if spot is None or not spot[1] or (ref := _pointer(g, u, iid)) is None:
        return None
    return f"the {g.shown[u][iid]} nearest the {ref}"


def _class_in(g: Group, u: int, iid: int) -> str | None:
    """The class of an instance view ``u`` shows (the task's for the group's objects)."""
    for o in g.task.objects:
        if o.instance_id == iid:
            return o.class_name
    found = g.instance(u, iid)
    return None if found is None else found.class_name


def _made_out_in(g: Group, u: int, iid: int) -> bool | None:
    """Whether view ``u`` makes instance ``iid`` out: the group's objects by the renderer's
    measurements (:func:`.facts.made_out`), any other as a person counts it from the picture
    (:func:`.facts.counted`); an instance the view does not show is not made out."""
    for k, o in enumerate(g.task.objects):
        if o.instance_id == iid:
            return made_out(g.seen[u][k])
    view, found = g.views[u], g.instance(u, iid)
    return False if found is None else counted(found, view, g.q[u], g.task.width, g.task.height)


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


def count_range(offers: Sequence[set[int]]) -> tuple[int, int, int] | None:
    """The range of golds a count type asks in a release, from the golds each slot can offer:
    of the ranges of ``MAX_OPTIONS`` consecutive values, the one whose least offered value the
    most slots offer (among equals the lower), so every row of the type offers the same four
    values. A wider range puts its end values in fewer windows than its middle ones: a 0 is
    offered only with 0-3 and is then the gold more often than chance (8 of 17 rows in a
    40-landmark build), whatever the quota. Returns (lowest, highest, how many slots offer its
    least offered value): each value is asked at most that often. None (not asked in this
    release) when every range of four holds a value no slot offers."""
    values = sorted({v for o in offers for v in o})
    if not values or values[-1] - values[0] + 1 < MAX_OPTIONS:
        return None
    best = (0, 0, 0)
    for a in range(values[0], values[-1] - MAX_OPTIONS + 2):
        least = min(sum(v in o for o in offers) for v in range(a, a + MAX_OPTIONS))
        best = max(best, (least, -a, a))
    lo = best[2]
    return (lo, lo + MAX_OPTIONS - 1, best[0]) if best[0] else None


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
