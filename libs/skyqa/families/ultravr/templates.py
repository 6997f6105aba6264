"""UltraVR's three reasoning categories over one view's objects, each candidate with its
distractors from the task's structure and a typed GT-CoT trace (GND, PER, QUA, INT, INF).

- Comparison: two (bundle, region) tallies; the absolute difference, the total, the reduced
  ratio, or which region has more. Numeric distractors are the neighbours of the answer at a
  seeded step, placed so the answer's rank among the options is the one asked for.
- Logical verification: presence of an orientation- or colour-restricted bundle in two regions
  (a four-way presence pattern), or the truth pattern of a count claim and a region-maximum
  claim over the four quadrants.
- Relational inference: the cross-axis relation of one region's extreme object to another's
  (extremes along x are compared along y and vice versa), with "no such object" options; the
  relative position of two objects named by colour and class.

A candidate some step of which is not certain is removed, with the reason counted: an object
near a region boundary, below the visibility floor, cut or hidden, an ambiguous orientation, a
tie for an extreme or a maximum, a relation closer than ``RELATION_MARGIN``, a description that
does not pick out one object.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import permutations
from typing import Any

from skyqa.contracts.ultravr import AnswerFormat, UltraStep
from skyqa.families.ultravr.objects import (
    NOUNS,
    ORIENTATIONS,
    ORIENTED,
    REGIONS,
    VEHICLES,
    Bundle,
    Obj,
    Tally,
    norm_box,
    tally,
)

EXTREME_MARGIN = 0.01  # of the image's size: the runner-up must be this much less extreme
RELATION_MARGIN = 0.02  # of the image's size: two centres closer along an axis are ambiguous
NOT_UNIQUE_EXTREME = "extreme object not unique"
NOT_UNIQUE_MAXIMUM = "region maximum not unique"
TOO_CLOSE = "relation too close to call"
NOT_UNIQUE_NAME = "description does not pick out one object"

CATEGORY = {
    "count_difference": "comparison",
    "count_total": "comparison",
    "count_ratio": "comparison",
    "count_order": "comparison",
    "presence_pattern": "logical_verification",
    "claim_pattern": "logical_verification",
    "extreme_relation": "relational_inference",
    "relative_position": "relational_inference",
}
DISPLAY = {
    "count_difference": "Count difference",
    "count_total": "Count total",
    "count_ratio": "Count ratio",
    "count_order": "Count order",
    "presence_pattern": "Presence pattern",
    "claim_pattern": "Claim truth pattern",
    "extreme_relation": "Extreme-object relation",
    "relative_position": "Relative position",
}
# tasks whose options are values in ascending order: planning cycles the gold's rank among them
RANKED = frozenset({"count_difference", "count_total", "count_ratio"})
CLAIM_LABELS = (
    "Both claims are true",
    "Only claim A is true",
    "Only claim B is true",
    "Neither claim is true",
)
POSITIONS = ("upper-left", "upper-right", "lower-left", "lower-right")


@dataclass(frozen=True)
class Candidate:
    task: str
    question: str
    gold: str
    # all four, in the order they are shown: numbers and ratios ascending, labels in the task's
    # own order, so the gold's place is its value's rank or its answer kind, both balanced
    options: tuple[str, ...]
    steps: tuple[UltraStep, ...]
    evidence: dict[str, Any]
    objects: tuple[Obj, ...]  # the objects the answer rests on
    kind: str  # which of the task's answer kinds the gold is (what planning balances)
    rank: int | None = None  # numeric tasks: the answer's rank among the options

    @property
    def category(self) -> str:
        return CATEGORY[self.task]


@dataclass
class View:
    objects: list[Obj]
    width: int
    height: int
    removed: Counter[str] = field(default_factory=Counter)

    def boxes(self, objs: tuple[Obj, ...]) -> str:
        return json.dumps([norm_box(o, self.width, self.height) for o in objs])

    def box(self, o: Obj | None) -> str:
        return "none" if o is None else json.dumps(norm_box(o, self.width, self.height))


def _step(question: str, answer: str, operation: str, fmt: AnswerFormat) -> UltraStep:
    return UltraStep(question=question, answer=answer, operation=operation, answer_format=fmt)


def bundles(objects: list[Obj]) -> list[Bundle]:
    """Every class in view, the vehicles together, and each class's colours when it shows two
    or more (a colour word only narrows a class that has others)."""
    present = sorted({o.class_name for o in objects})
    out = [Bundle((c,), NOUNS[c][1]) for c in present]
    if sum(c in VEHICLES for c in present) >= 2:
        out.append(Bundle(VEHICLES, "vehicles"))
    for c in present:
        colours = sorted({o.colour for o in objects if o.class_name == c and o.colour})
        if len(colours) >= 2:
            out += [Bundle((c,), NOUNS[c][1], colour=col) for col in colours]
    return out


def _numeric(gold: int, rank: int, step: int) -> tuple[str, ...] | None:
    """Four counts ``step`` apart, ascending, the gold at ``rank``; None when one would be below
    1 (a 0 among the options would only ever be a difference's gold, and give it away)."""
    values = [gold + (i - rank) * step for i in range(4)]
    if min(values) < 1:
        return None
    return tuple(str(v) for v in values)


def _ratio(a: int, b: int) -> str:
    f = Fraction(a, b)
    return f"{f.numerator}:{f.denominator}"


def _ratio_options(a: int, b: int, rank: int) -> tuple[str, ...] | None:
    """The reduced ratio a:b and the three nearest wrong ones with a count one or two off,
    ascending by value, the gold at ``rank``; None when no three put it there."""
    gold = Fraction(a, b)
    offsets = ((1, 0), (0, 1), (-1, 0), (0, -1), (2, 0), (0, 2))
    near = [Fraction(a + da, b + db) for da, db in offsets if a + da > 0 and b + db > 0]
    # no 1:1 (the gold never is: its counts differ) and no two options each other's reciprocal
    # (the reversed ratio would single the gold out as one of a pair)
    kept: list[Fraction] = []
    for w in near:
        if w != gold and w != 1 and all(w != 1 / o for o in (gold, *kept)) and w not in kept:
            kept.append(w)
    below = sorted((w for w in kept if w < gold), key=lambda w: gold - w)
    above = sorted((w for w in kept if w > gold), key=lambda w: w - gold)
    if len(below) < rank or len(above) < 3 - rank:
        return None
    picked = sorted([*below[:rank], gold, *above[: 3 - rank]])
    return tuple(f"{f.numerator}:{f.denominator}" for f in picked)


def _count_steps(view: View, *tallies: tuple[Bundle, str, Tally]) -> list[UltraStep]:
    """Per (bundle, region, tally): ground the bundle's boxes in the region, then count them."""
    out = []
    for bundle, region, t in tallies:
        out.append(
            _step(
                f"What are the coordinates of the {bundle.words} in the {region} region?",
                view.boxes(t.members),
                "GND",
                "bbox_coordinates_list",
            )
        )
        out.append(
            _step(f"How many {bundle.words} are in the {region} region?", str(t.count), "QUA", "integer")
        )
    return out


def comparison(view: View, step_size: int) -> Iterator[Candidate]:
    pairs: list[tuple[Bundle, str, Bundle, str]] = []
    for b in bundles(view.objects):
        pairs += [(b, r1, b, r2) for r1, r2 in permutations(REGIONS, 2)]
    plain = [b for b in bundles(view.objects) if b.colour is None]
    pairs += [
        (a, r, b, r)
        for a, b in permutations(plain, 2)
        if not set(a.classes) & set(b.classes)
        for r in REGIONS
    ]
    for a, r1, b, r2 in pairs:
        t1, t2 = tally(view.objects, a, r1), tally(view.objects, b, r2)
        if t1.problem or t2.problem:
            view.removed[t1.problem or t2.problem or ""] += 1
            continue
        counted = _count_steps(view, (a, r1, t1), (b, r2, t2))
        what1, what2 = f"{a.words} in the {r1} region", f"{b.words} in the {r2} region"
        evidence = {"first": _ev(a, r1, t1), "second": _ev(b, r2, t2)}
        objs = t1.members + t2.members
        d = abs(t1.count - t2.count)
        for rank in range(4):
            options = _numeric(d, rank, step_size)
            if options is not None:
                yield Candidate(
                    "count_difference",
                    f"What is the absolute difference between the number of {what1} and the number of "
                    f"{what2}?",
                    str(d),
                    options,
                    (
                        *counted,
                        _step("What is the absolute difference of the two counts?", str(d), "INF", "integer"),
                    ),
                    evidence,
                    objs,
                    str(rank),
                    rank,
                )
        if a != b or r1 < r2:
            total = t1.count + t2.count
            for rank in range(4):
                options = _numeric(total, rank, step_size)
                if options is not None:
                    yield Candidate(
                        "count_total",
                        f"How many {what1} and {what2} are there in total?",
                        str(total),
                        options,
                        (*counted, _step("What is the sum of the two counts?", str(total), "INF", "integer")),
                        evidence,
                        objs,
                        str(rank),
                        rank,
                    )
        if t1.count and t2.count and t1.count != t2.count:
            gold = _ratio(t1.count, t2.count)
            for rank in range(4):
                ratios = _ratio_options(t1.count, t2.count, rank)
                if ratios is None:
                    continue
                yield Candidate(
                    "count_ratio",
                    f"What is the ratio of the number of {what1} to the number of {what2}, in lowest terms?",
                    gold,
                    ratios,
                    (
                        *counted,
                        _step(
                            "What is the ratio of the two counts, in lowest terms?", gold, "INF", "relation"
                        ),
                    ),
                    evidence,
                    objs,
                    str(rank),
                    rank,
                )
        if a == b and r1 < r2:
            labels = (
                f"The {r1} region has more",
                f"The {r2} region has more",
                "Both regions have the same, non-zero number",
                f"Neither region has any {a.words}",
            )
            kind = 0 if t1.count > t2.count else 1 if t2.count > t1.count else 2 if t1.count else 3
            gold = labels[kind]
            yield Candidate(
                "count_order",
                f"Which region has more {a.words}: the {r1} region or the {r2} region?",
                gold,
                labels,
                (*counted, _step("Which count is larger?", gold, "INF", "option_label")),
                evidence,
                objs,
                str(kind),
            )


def _ev(b: Bundle, region: str, t: Tally) -> dict[str, Any]:
    return {"bundle": b.key(), "region": region, "instances": [o.instance_id for o in t.members]}


def logical(view: View, claim_offset: int) -> Iterator[Candidate]:
    present = sorted({o.class_name for o in view.objects})
    for c in present:
        base = Bundle((c,), NOUNS[c][1])
        restricted = [Bundle((c,), NOUNS[c][1], orientation=o) for o in ORIENTATIONS if c in ORIENTED]
        colours = sorted({o.colour for o in view.objects if o.class_name == c and o.colour})
        restricted += [Bundle((c,), NOUNS[c][1], colour=col) for col in colours if len(colours) >= 2]
        for bundle in restricted:
            for r1, r2 in ((a, b) for a, b in permutations(REGIONS, 2) if a < b):
                t1, t2 = tally(view.objects, bundle, r1), tally(view.objects, bundle, r2)
                all1, all2 = tally(view.objects, base, r1), tally(view.objects, base, r2)
                bad = t1.problem or t2.problem or all1.problem or all2.problem
                if bad:
                    view.removed[bad] += 1
                    continue
                labels = (
                    "In both regions",
                    f"Only in the {r1} region",
                    f"Only in the {r2} region",
                    "In neither region",
                )
                kind = [(True, True), (True, False), (False, True), (False, False)].index(
                    (t1.count > 0, t2.count > 0)
                )
                gold = labels[kind]
                attr = "orientation" if bundle.orientation else "colour"
                steps = []
                for region, every, chosen in ((r1, all1, t1), (r2, all2, t2)):
                    steps.append(
                        _step(
                            f"What are the coordinates of the {base.noun} in the {region} region?",
                            view.boxes(every.members),
                            "GND",
                            "bbox_coordinates_list",
                        )
                    )
                    steps.append(
                        _step(
                            f"Judging each one's {attr}, which of them are {bundle.words}?",
                            view.boxes(chosen.members),
                            "PER",
                            "bbox_coordinates_list",
                        )
                    )
                steps.append(
                    _step("Which presence pattern do the two regions show?", gold, "INF", "option_label")
                )
                yield Candidate(
                    "presence_pattern",
                    f"Are there any {bundle.words} in the {r1} region and in the {r2} region?",
                    gold,
                    labels,
                    tuple(steps),
                    {"first": _ev(bundle, r1, t1), "second": _ev(bundle, r2, t2)},
                    all1.members + all2.members,
                    str(kind),
                )
    for bundle in bundles(view.objects):
        tallies = [tally(view.objects, bundle, r) for r in REGIONS]
        bad = next((t.problem for t in tallies if t.problem), None)
        if bad:
            view.removed[bad] += 1
            continue
        counts = [t.count for t in tallies]
        total, top = sum(counts), max(counts)
        if total == 0:
            continue
        if counts.count(top) > 1:
            view.removed[NOT_UNIQUE_MAXIMUM] += 1
            continue
        best = REGIONS[counts.index(top)]
        other = REGIONS[(counts.index(top) + 1 + claim_offset % 3) % 4]
        steps = _count_steps(view, *((bundle, r, t) for r, t in zip(REGIONS, tallies, strict=True)))
        steps.append(_step(f"How many {bundle.words} are there in all?", str(total), "INT", "integer"))
        steps.append(_step(f"Which region has the most {bundle.words}?", best, "INT", "relation"))
        wrong_total = total + (1 + claim_offset % 2) * (1 if total < 2 or claim_offset % 2 else -1)
        for a_true in (True, False):
            for b_true in (True, False):
                n = total if a_true else wrong_total
                region = best if b_true else other
                kind = [(True, True), (True, False), (False, True), (False, False)].index((a_true, b_true))
                gold = CLAIM_LABELS[kind]
                yield Candidate(
                    "claim_pattern",
                    f"Claim A: there are exactly {n} {bundle.words} in the image. Claim B: the {region} "
                    f"region has more {bundle.words} than any other region. Which is correct?",
                    gold,
                    CLAIM_LABELS,
                    (*steps, _step("Which claims hold?", gold, "INF", "option_label")),
                    {
                        "bundle": bundle.key(),
                        "counts": dict(zip(REGIONS, counts, strict=True)),
                        "claimed": {"count": n, "region": region},
                    },
                    tuple(o for t in tallies for o in t.members),
                    str(kind),
                )


EXTREMES = {"leftmost": (0, -1), "rightmost": (0, 1), "topmost": (1, -1), "bottommost": (1, 1)}


def _extreme(view: View, t: Tally, which: str) -> Obj | str | None:
    """The region's extreme object, None when it has none, or why it is not unique: it must
    lead the runner-up by ``EXTREME_MARGIN`` both by its box centre and by its outer box edge
    (a long bus may reach further left than a short car whose centre is further left)."""
    axis, sign = EXTREMES[which]
    if not t.members:
        return None
    size = view.width if axis == 0 else view.height
    edge = axis if sign < 0 else axis + 2  # x0/y0 for left/top, x1/y1 for right/bottom

    def by_centre(o: Obj) -> float:
        return -sign * o.centre[axis]

    def by_edge(o: Obj) -> float:
        return -sign * o.box[edge]

    first = None
    for key in (by_centre, by_edge):
        ranked = sorted(t.members, key=key)
        if len(ranked) > 1 and key(ranked[1]) - key(ranked[0]) < EXTREME_MARGIN * size:
            return NOT_UNIQUE_EXTREME
        if first is not None and ranked[0] is not first:
            return NOT_UNIQUE_EXTREME
        first = ranked[0]
    return first


def relational(view: View) -> Iterator[Candidate]:
    for c1, c2 in (
        (a, b)
        for a in sorted({o.class_name for o in view.objects})
        for b in sorted({o.class_name for o in view.objects})
    ):
        b1, b2 = Bundle((c1,), NOUNS[c1][1]), Bundle((c2,), NOUNS[c2][1])
        for r1, r2 in permutations(REGIONS, 2):
            t1, t2 = tally(view.objects, b1, r1), tally(view.objects, b2, r2)
            if t1.problem or t2.problem:
                view.removed[t1.problem or t2.problem or ""] += 1
                continue
            if not t1.members and not t2.members:
                continue
            for which in EXTREMES:
                # extremes along one axis are compared along the other, between two regions on
                # the same side of that axis's split line, so the regions' names do not decide it
                axis = 1 - EXTREMES[which][0]
                if r1.split("-")[axis == 0] != r2.split("-")[axis == 0]:
                    continue
                e1, e2 = _extreme(view, t1, which), _extreme(view, t2, which)
                if isinstance(e1, str) or isinstance(e2, str):
                    view.removed[NOT_UNIQUE_EXTREME] += 1
                    continue
                words = ("above", "below") if axis == 1 else ("to the left of", "to the right of")
                n1, n2 = NOUNS[c1][0], NOUNS[c2][0]
                missing1, missing2 = (
                    f"There is no {n1} in the {r1} region",
                    f"There is no {n2} in the {r2} region",
                )
                if e1 is None:
                    gold = missing1
                elif e2 is None:
                    gold = missing2
                else:
                    delta = e1.centre[axis] - e2.centre[axis]
                    size = view.width if axis == 0 else view.height
                    if abs(delta) < RELATION_MARGIN * size:
                        view.removed[TOO_CLOSE] += 1
                        continue
                    gold = f"It is {words[0] if delta < 0 else words[1]} it"
                labels = (f"It is {words[0]} it", f"It is {words[1]} it", missing1, missing2)
                kind = labels.index(gold)
                first = f"the {which} {n1} in the {r1} region"
                second = f"the {which} {n2} in the {r2} region"
                steps = (
                    _step(
                        f"Are there any {NOUNS[c1][1]} in the {r1} region?",
                        "yes" if e1 else "no",
                        "GND",
                        "boolean",
                    ),
                    _step(f"What are the coordinates of {first}?", view.box(e1), "PER", "bbox"),
                    _step(
                        f"Are there any {NOUNS[c2][1]} in the {r2} region?",
                        "yes" if e2 else "no",
                        "GND",
                        "boolean",
                    ),
                    _step(f"What are the coordinates of {second}?", view.box(e2), "PER", "bbox"),
                    _step("How do the two box centres relate?", gold, "INT", "relation"),
                )
                axis_word = "vertically" if axis == 1 else "horizontally"
                yield Candidate(
                    "extreme_relation",
                    f"Consider {first} and {second}. Where is the first one relative to the second, "
                    f"{axis_word}?",
                    gold,
                    labels,
                    steps,
                    {
                        "first": {
                            "region": r1,
                            "class": c1,
                            "extreme": which,
                            "instance": e1.instance_id if e1 else 0,
                        },
                        "second": {
                            "region": r2,
                            "class": c2,
                            "extreme": which,
                            "instance": e2.instance_id if e2 else 0,
                        },
                    },
                    tuple(o for o in (e1, e2) if o is not None),
                    str(kind),
                )
    named = _named(view)
    # two objects of one region: regions the question names would otherwise decide the answer
    for (d1, (o1, ra)), (d2, (o2, rb)) in permutations(sorted(named.items()), 2):
        if ra != rb:
            continue
        dx, dy = o1.centre[0] - o2.centre[0], o1.centre[1] - o2.centre[1]
        if abs(dx) < RELATION_MARGIN * view.width or abs(dy) < RELATION_MARGIN * view.height:
            view.removed[TOO_CLOSE] += 1
            continue
        side, level = ("left" if dx < 0 else "right"), ("upper" if dy < 0 else "lower")
        gold = f"{level}-{side}"
        steps = (
            _step(f"What are the coordinates of {d1}?", view.box(o1), "GND", "bbox"),
            _step(f"What are the coordinates of {d2}?", view.box(o2), "GND", "bbox"),
            _step(f"Is {d1} to the left or to the right of {d2}?", side, "INT", "relation"),
            _step(
                f"Is {d1} higher or lower in the image than {d2}?",
                "higher" if level == "upper" else "lower",
                "INT",
                "relation",
            ),
            _step("Which relative position follows?", gold, "INF", "option_label"),
        )
        yield Candidate(
            "relative_position",
            f"In the image, where is {d1} relative to {d2}?",
            gold,
            POSITIONS,
            steps,
            {
                "first": {"description": d1, "instance": o1.instance_id},
                "second": {"description": d2, "instance": o2.instance_id},
            },
            (o1, o2),
            gold,
        )


def _named(view: View) -> dict[str, tuple[Obj, str]]:
    """Objects a colour, a class and a region pick out (UltraVR's references name an
    approximate location): every object of the class that may lie in the region is clear,
    coloured and clear of the split lines, and no other has the same colour."""
    out = {}
    for c in sorted({o.class_name for o in view.objects}):
        for region in REGIONS:
            same = [o for o in view.objects if o.class_name == c and region in o.regions]
            if any(o.problem or o.colour is None or len(o.regions) > 1 for o in same):
                view.removed[NOT_UNIQUE_NAME] += 1
                continue
            counts = Counter(o.colour for o in same)
            for o in same:
                if counts[o.colour] == 1:
                    out[f"the {o.colour} {NOUNS[c][0]} in the {region} region"] = (o, region)
    return out


def candidates(view: View, step_size: int, claim_offset: int) -> list[Candidate]:
    return [*comparison(view, step_size), *logical(view, claim_offset), *relational(view)]
