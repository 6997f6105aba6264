"""The 14 AirCopBench question types over one UAV group, each answered by a rule on what the
renderer measured and what the view's recorded degradation did (:mod:`.facts`).

A builder yields candidate questions, the gold option first; the family picks among them and
shuffles the options. Options come from the same group (its UAVs, its objects, its causes, counts
near the gold) so none can be ruled out by its words alone. A question is only asked where its
answer holds with a margin (counts two apart, heights 25 % apart, box centres off region edges).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from skyqa.contracts.aircop import GroupTask
from skyqa.contracts.collab import CollabTask
from skyqa.degrade import LEVELS
from skyqa.families.aircop.facts import Seen, ViewQuality, visible

Evidence = dict[str, str | int | float | bool | list[str] | list[int] | list[float]]
REGION_MARGIN = 0.04  # a box centre this close to a region border is not placed
RATIO = 1.25
TIE = 1.10  # two values this close have no single winner
TIED = "no single one: two are about equal"
NOBODY = "none of the others sees it clearly"
MAX_OPTIONS = 4
CAUSE = {
    "clear": "nothing: it is clearly visible",
    "occluded": "it is hidden behind another object",
    "small": "it is too small or too far away",
    "out_of_view": "it is outside the field of view",
    "lost": "part of the image is lost",
}
KIND_CAUSE = {
    "noise": "sensor noise",
    "blur": "blur",
    "low_light": "low light",
    "compression": "compression artefacts",
    "masking": "part of the image is lost",
}
NO = "No: it sees it clearly"
YES = {
    "occluded": "Yes: it is hidden",
    "small": "Yes: it is too small",
    "out_of_view": "Yes: it is out of view",
    "lost": "Yes: part of its image is lost",
    "degraded": "Yes: the image is degraded",
}
USABLE = {
    "clear": "Yes: it is clearly visible",
    "occluded": "No: it is mostly hidden",
    "small": "No: it is too small",
    "out_of_view": "No: it is out of the frame",
    "lost": "No: that part of the image is lost",
    "degraded": "No: the image is too degraded",
}
WHY = {
    "occluded": "{obj} is hidden in {a}'s view, while {b} sees it unoccluded",
    "small": "{obj} is too small in {a}'s view, while it is larger in {b}'s",
    "out_of_view": "{obj} is outside {a}'s view, while {b} captures it",
    "lost": "part of {a}'s image is lost where {obj} is, while {b}'s shows it",
    "degraded": "{a}'s image is too degraded to make out {obj}, while {b}'s is clear",
}


@dataclass(frozen=True)
class Question:
    task: CollabTask
    uav: str
    question: str
    options: tuple[str, ...]  # the gold first
    key: str  # the gold's class, for balancing across groups
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
        if s.state == "degraded":
            return KIND_CAUSE[self.q[s.uav].degradation.kind]
        return CAUSE[s.state]

    def uav_options(self, gold: int, ranked: list[int]) -> tuple[str, ...]:
        """The gold UAV and the next ones of ``ranked`` (closest competitors first)."""
        rest = [self.labels[k] for k in ranked if k != gold][: MAX_OPTIONS - 1]
        return (self.labels[gold], *rest)


def _count_options(gold: int) -> tuple[str, ...]:
    near = [gold + 1, gold - 1, gold + 2, gold - 2, gold + 3]
    return tuple(str(v) for v in [gold, *[v for v in near if v >= 0][: MAX_OPTIONS - 1]])


def _plural(name: str, n: int) -> str:
    name = name.replace("_", " ")
    if n == 1:
        return f"1 {name}"
    return f"{n} {name}es" if name.endswith(("s", "sh", "ch")) else f"{n} {name}s"


def _summary(seen: list[Seen]) -> str:
    return _listed(Counter(s.obj.class_name for s in visible(seen)))


def _listed(counts: Counter[str]) -> str:
    parts = [_plural(c, n) for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n > 0]
    if not parts:
        return "no object of the area"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _near_lists(counts: Counter[str], classes: list[str]) -> list[str]:
    """Lists one count off the true one, or with a class of the area added: what a careless
    look would report."""
    out = []
    for c in sorted(counts):
        out += [_listed(counts + Counter({c: 1})), _listed(counts - Counter({c: 1}))]
    out += [_listed(counts + Counter({c: 1})) for c in classes if c not in counts]
    return out


def scene_description(g: Group) -> Iterator[Question]:
    classes = sorted({o.class_name for o in g.task.objects})
    for u, seen in enumerate(g.seen):
        counts = Counter(s.obj.class_name for s in visible(seen))
        gold = _summary(seen)
        others = [_summary(s) for k, s in enumerate(g.seen) if k != u]
        options = tuple(dict.fromkeys([gold, *others, *_near_lists(counts, classes)]))[:MAX_OPTIONS]
        if len(options) >= 2:
            q = f"Which list matches the objects of the area that {g.labels[u]} can make out?"
            yield Question("scene_description", g.labels[u], q, options, "summary", {"summary": gold})


def _vehicles(seen: list[Seen]) -> int:
    return sum(1 for s in visible(seen) if s.obj.category == "vehicle")


def scene_comparison(g: Group) -> Iterator[Question]:
    counts = [_vehicles(s) for s in g.seen]
    ranked = sorted(range(len(counts)), key=lambda k: (-counts[k], k))
    if len(ranked) >= 2 and counts[ranked[0]] >= counts[ranked[1]] + 2:
        q = "Which UAV's view shows the most vehicles?"
        yield Question(
            "scene_comparison", "", q, g.uav_options(ranked[0], ranked), "uav", {"vehicles": counts}
        )


POSTURES: dict[str, tuple[str, Callable[[Group, int], float]]] = {
    "lowest": ("Which UAV observes the area from the lowest height?", lambda g, k: g.task.uavs[k].altitude_m),
    "farthest": (
        "Which UAV observes the area from the farthest away?",
        lambda g, k: -g.task.uavs[k].distance_m,
    ),
}


def observing_posture(g: Group) -> Iterator[Question]:
    """The UAV lowest or farthest, 25 % beyond the next; "no single one" when the two leading
    are within 10 % of each other (between the two margins nothing is asked)."""
    for name, (q, value) in POSTURES.items():
        values = [value(g, k) for k in range(len(g.labels))]
        ranked = sorted(range(len(values)), key=lambda k: (values[k], k))
        a, b = abs(values[ranked[0]]), abs(values[ranked[1]])
        ev: Evidence = {"posture": name, "values": [round(abs(v), 2) for v in values]}
        uavs = g.uav_options(ranked[0], ranked)
        if max(a, b) >= RATIO * min(a, b):
            yield Question("observing_posture", "", q, (*uavs[: MAX_OPTIONS - 1], TIED), "uav", ev)
        elif max(a, b) <= TIE * min(a, b):
            yield Question("observing_posture", "", q, (TIED, *uavs[: MAX_OPTIONS - 1]), "tied", ev)


def object_recognition(g: Group) -> Iterator[Question]:
    for u, seen in enumerate(g.seen):
        kinds = sorted({s.obj.class_name for s in visible(seen)})
        if kinds:
            q = f"How many different kinds of object of the area can be made out in {g.labels[u]}'s view?"
            yield Question(
                "object_recognition", g.labels[u], q, _count_options(len(kinds)), "count", {"kinds": kinds}
            )


def object_counting(g: Group) -> Iterator[Question]:
    for u, seen in enumerate(g.seen):
        n = _vehicles(seen)
        q = f"How many vehicles of the area can be made out in {g.labels[u]}'s view?"
        yield Question("object_counting", g.labels[u], q, _count_options(n), "count", {"vehicles": n})


ROWS, COLS = ("top", "middle", "bottom"), ("left", "centre", "right")


def region(box: list[float]) -> str | None:
    """The third (vertically and horizontally) of the image the box centre lies in, or None when
    it is within ``REGION_MARGIN`` of a border between thirds."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    for v in (cx, cy):
        if min(abs(v - 1 / 3), abs(v - 2 / 3)) < REGION_MARGIN:
            return None
    row, col = ROWS[min(2, int(cy * 3))], COLS[min(2, int(cx * 3))]
    return "centre" if (row, col) == ("middle", "centre") else f"{row} {col}"


def _region_options(gold: str) -> tuple[str, ...]:
    every = [f"{r} {c}" if (r, c) != ("middle", "centre") else "centre" for r in ROWS for c in COLS]
    gr = gold.split() if gold != "centre" else ["middle", "centre"]

    def far(x: str) -> int:
        xr = x.split() if x != "centre" else ["middle", "centre"]
        return abs(ROWS.index(xr[0]) - ROWS.index(gr[0])) + abs(COLS.index(xr[1]) - COLS.index(gr[1]))

    # the neighbouring regions first: a distractor across the image is too easy to rule out
    rest = sorted((x for x in every if x != gold), key=lambda x: (far(x), every.index(x)))
    return (gold, *rest[: MAX_OPTIONS - 1])


def object_grounding(g: Group) -> Iterator[Question]:
    for u, seen in enumerate(g.seen):
        for s in seen:
            name = g.names.get(s.obj.instance_id)
            place = region(s.view.bbox_xyxy_norm) if s.usable else None
            if name and place:
                q = f"Where in {g.labels[u]}'s image is the {name}?"
                ev: Evidence = {"instance_id": s.obj.instance_id, "box": s.view.bbox_xyxy_norm}
                yield Question("object_grounding", g.labels[u], q, _region_options(place), place, ev)


def object_matching(g: Group) -> Iterator[Question]:
    """An object pointed at by class and region in one view, found by region in another."""
    for a, seen in enumerate(g.seen):
        for s in seen:
            here = region(s.view.bbox_xyxy_norm) if s.usable else None
            same = [t for t in seen if t.usable and t.obj.class_name == s.obj.class_name]
            if here is None or sum(1 for t in same if region(t.view.bbox_xyxy_norm) == here) != 1:
                continue
            cls = s.obj.class_name.replace("_", " ")
            for b, other in enumerate(g.seen):
                t = other[seen.index(s)]
                there = region(t.view.bbox_xyxy_norm) if b != a and t.usable else None
                if there is None:
                    continue
                q = (
                    f"The {cls} in the {here} of {g.labels[a]}'s image: where is the same {cls} "
                    f"in {g.labels[b]}'s image?"
                )
                ev: Evidence = {"instance_id": s.obj.instance_id, "from": g.labels[a], "to": g.labels[b]}
                yield Question("object_matching", g.labels[b], q, _region_options(there), there, ev)


def quality_assessment(g: Group) -> Iterator[Question]:
    for u, q in enumerate(g.q):
        gold = LEVELS[q.quality]
        rest = sorted((x for x in LEVELS if x != gold), key=lambda x: (abs(LEVELS.index(x) - q.quality), x))
        text = f"How would you rate the image quality of {g.labels[u]}'s view?"
        ev: Evidence = {"degradation": q.degradation.kind, "quality": q.quality, "limited_by": q.limited_by}
        yield Question("quality_assessment", g.labels[u], text, (gold, *rest[:3]), gold, ev)


def _targets(g: Group) -> list[int]:
    """Objects named uniquely in the group, by position in the task's object list."""
    return [k for k, o in enumerate(g.task.objects) if o.instance_id in g.names]


def usability_assessment(g: Group) -> Iterator[Question]:
    values = list(USABLE.values())
    for k in _targets(g):
        for u, seen in enumerate(g.seen):
            s = seen[k]
            gold = USABLE[s.state]
            # a "No" gold always has the "Yes" beside it, and the reverse
            rest = sorted(
                (x for x in values if x != gold), key=lambda x: (not x.startswith("Yes"), values.index(x))
            )
            q = f"Can the {g.names[s.obj.instance_id]} be reliably detected in {g.labels[u]}'s image?"
            ev: Evidence = {"state": s.state}
            yield Question(
                "usability_assessment",
                g.labels[u],
                q,
                (gold, *rest[: MAX_OPTIONS - 1]),
                gold.split(":")[0],
                ev,
            )


def _cause_options(g: Group, gold: str) -> tuple[str, ...]:
    pool = [*CAUSE.values(), *KIND_CAUSE.values()]
    present = Counter(g.cause(s) for seen in g.seen for s in seen)
    rest = sorted(dict.fromkeys(x for x in pool if x != gold), key=lambda x: (-present[x], pool.index(x)))
    return (gold, *rest[: MAX_OPTIONS - 1])


def causal_assessment(g: Group) -> Iterator[Question]:
    for k in _targets(g):
        for u, seen in enumerate(g.seen):
            s = seen[k]
            gold = g.cause(s)
            q = f"What most limits detecting the {g.names[s.obj.instance_id]} in {g.labels[u]}'s image?"
            yield Question(
                "causal_assessment", g.labels[u], q, _cause_options(g, gold), s.state, {"state": s.state}
            )


def _helpers(g: Group, k: int, u: int) -> list[int]:
    """Other UAVs that see object ``k`` clearly, most pixels first."""
    ok = [b for b in range(len(g.seen)) if b != u and g.seen[b][k].usable]
    return sorted(ok, key=lambda b: (-g.seen[b][k].view.pixels, b))


def when_to_collaborate(g: Group) -> Iterator[Question]:
    for k in _targets(g):
        for u, seen in enumerate(g.seen):
            s, helpers = seen[k], _helpers(g, k, u)
            name = g.names[s.obj.instance_id]
            if s.usable:
                gold = NO
            elif helpers:
                gold = YES.get(s.state, YES["degraded"])
            else:
                continue  # no other UAV could help: not a collaboration question
            rest = [x for x in (NO, *YES.values()) if x != gold][: MAX_OPTIONS - 1]
            q = f"Should {g.labels[u]} ask another UAV for information about the {name}?"
            ev: Evidence = {"state": s.state}
            yield Question("when_to_collaborate", g.labels[u], q, (gold, *rest), gold.split(":")[0], ev)


def who_to_collaborate(g: Group) -> Iterator[Question]:
    """The other UAV that sees the object clearly with the most pixels, 25 % ahead of the next
    clear one; "none" when no other sees it clearly; "no single one" when the two best are
    within 10 % (between the margins nothing is asked)."""
    for k in _targets(g):
        for u, seen in enumerate(g.seen):
            if seen[k].usable:
                continue
            helpers = _helpers(g, k, u)
            px = [g.seen[b][k].view.pixels for b in helpers]
            others = [b for b in range(len(g.seen)) if b != u]
            ranked = [g.labels[b] for b in [*helpers, *[b for b in others if b not in helpers]]]
            if not helpers:
                gold, rest, key = NOBODY, [*ranked[: MAX_OPTIONS - 2], TIED], "nobody"
            elif len(helpers) > 1 and px[0] <= TIE * px[1]:
                gold, rest, key = TIED, [*ranked[: MAX_OPTIONS - 2], NOBODY], "tied"
            elif len(helpers) == 1 or px[0] >= RATIO * px[1]:
                gold, rest, key = ranked[0], [*ranked[1 : MAX_OPTIONS - 2], NOBODY, TIED], "uav"
            else:
                continue
            name = g.names[seen[k].obj.instance_id]
            q = f"Which UAV should {g.labels[u]} collaborate with to see the {name} clearly?"
            ev: Evidence = {"state": seen[k].state, "pixels": [row[k].view.pixels for row in g.seen]}
            yield Question("who_to_collaborate", g.labels[u], q, (gold, *rest)[:MAX_OPTIONS], key, ev)


def what_to_collaborate(g: Group) -> Iterator[Question]:
    targets = _targets(g)
    for k in targets:
        for u, seen in enumerate(g.seen):
            helpers = _helpers(g, k, u)
            if seen[k].usable or not helpers:
                continue
            b = helpers[0]
            # what the helper could share but the asker already sees clearly: no need to send
            known = [j for j in targets if j != k and seen[j].usable and g.seen[b][j].usable]
            if len(known) < 2:
                continue
            q = f"What should {g.labels[b]} share with {g.labels[u]}: the position of which object?"
            options = tuple(
                f"the {g.names[g.task.objects[j].instance_id]}" for j in (k, *known[: MAX_OPTIONS - 1])
            )
            yield Question("what_to_collaborate", g.labels[u], q, options, "target", {"helper": g.labels[b]})


def why_to_collaborate(g: Group) -> Iterator[Question]:
    for k in _targets(g):
        for u, seen in enumerate(g.seen):
            helpers = _helpers(g, k, u)
            if seen[k].usable or not helpers:
                continue
            b, name = helpers[0], f"the {g.names[seen[k].obj.instance_id]}"
            fill = {"obj": name, "a": g.labels[u], "b": g.labels[b]}
            gold = WHY[seen[k].state].format(**fill)
            rest = [WHY[x].format(**fill) for x in WHY if x != seen[k].state][: MAX_OPTIONS - 1]
            q = f"Why should {g.labels[u]} collaborate with {g.labels[b]} about {name}?"
            yield Question(
                "why_to_collaborate", g.labels[u], q, (gold, *rest), seen[k].state, {"state": seen[k].state}
            )


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
