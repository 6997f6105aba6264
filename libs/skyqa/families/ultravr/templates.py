"""UltraVR's three reasoning categories over one view's objects, each candidate with its
options and a typed GT-CoT trace (GND, PER, QUA, INT, INF).

- Comparison: the RS template's conditioned count comparison, the absolute difference between
  one object type's counts in two regions, each near a reviewed landmark that region shows,
  with the template's nine steps (two landmark groundings among them); and CCTV's comparisons
  of two bundle tallies (the same bundle in two regions, or two bundles of one super-category,
  :func:`.objects.comparable`, in one region): the total, the reduced ratio, or which region
  has more. Numeric options are four consecutive counts (ratios: one
  of the fixed :data:`RATIO_SETS`), never built around the gold: every window holding the
  gold is a candidate, and planning asks each window's ranks in turn, so that given the
  window every member was the gold equally often.
- Logical verification: presence of an orientation- or colour-restricted bundle in two regions
  (a four-way presence pattern), or the truth pattern of a count claim and a region-maximum
  claim over the four quadrants.
- Relational inference: the cross-axis relation of one region's extreme object to another's
  (extremes along x are compared along y and vice versa), with "no such object" options; the
  relative position of two objects of one region named by colour, class and region.

Every categorical task has one fixed set of four labels, offered in every row in one order
(two regions are "the first" and "the second", as the question orders them, never by name), so
each label is offered as often as any other and a label prior learns nothing; the labels are
alike in form and length and none alone repeats the question's words. Both orders of two
regions or two objects are candidates, so which one is named first is not a cue.

A candidate some step of which is not certain is removed, with the reason counted: an object
near a region boundary, below the visibility floor, cut or hidden, an ambiguous orientation, a
tie for an extreme or a maximum, a relation closer than ``RELATION_MARGIN``, a description that
does not pick out one object, a numeric gold no window within the answer range holds. An
object whose doubt (its region, or whether it is seen) cannot change an answer, because what
is seen of it rules it out of what the question names, does not remove the candidate
(:func:`.objects.ruled_out`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import permutations
from typing import Any

import numpy as np

from skyqa.contracts.ultravr import AnswerFormat, UltraStep
from skyqa.families import options as opts
from skyqa.families.ultravr.objects import (
    NEAR_BOUNDARY,
    NOUNS,
    ORIENTATIONS,
    ORIENTED,
    REGIONS,
    VEHICLES,
    Bundle,
    Landmark,
    Obj,
    Tally,
    comparable,
    near_tally,
    norm_box,
    norm_landmark,
    ruled_out,
    tally,
)

EXTREME_MARGIN = 0.01  # of the image's size: the runner-up must be this much less extreme
RELATION_MARGIN = 0.02  # of the image's size: two centres closer along an axis are ambiguous
TINY, SMALL = 2e-4, 1e-3  # evidence share of the image below which a row is hard, medium
NOT_UNIQUE_EXTREME = "extreme object not unique"
NOT_UNIQUE_MAXIMUM = "region maximum not unique"
TOO_CLOSE = "relation too close to call"
NOT_UNIQUE_NAME = "description does not pick out one object"
OUT_OF_RANGE = "numeric options outside the answer range"

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
# tasks whose options are values in ascending order (a window holding the gold)
RANKED = frozenset({"count_difference", "count_total", "count_ratio"})
# the answer range of the counting tasks: a gold outside it is not asked, an option never
# leaves it. Small, so that every window of it is asked with each of its members as the gold
# (planning balances the gold's rank per window, and a window holding a value views rarely
# offer would stay unbalanced)
COUNT_RANGE = {"count_difference": (1, 6), "count_total": (1, 8)}
# a ratio's option sets: fixed, each closed under reversing its ratios (a:b and b:a are asked
# equally often, whichever region is named first), so no option is built from the gold (the
# nearest ratios of counts one off the gold's made the gold the one option all others derive
# from) and a reversed ratio among the options says nothing. A gold is asked with one of the
# sets holding it (:func:`ratio_windows`), its members of similar frequency (1:2 is never
# with 3:4), so that a set's turns of ranks are not held up by a rare member
RATIO_SETS = (
    ("1:3", "1:2", "2:1", "3:1"),
    ("1:4", "1:3", "3:1", "4:1"),
    ("1:2", "2:3", "3:2", "2:1"),
    ("2:3", "3:4", "4:3", "3:2"),
)  # each ascending by value
RATIOS = tuple(sorted({r for s in RATIO_SETS for r in s}, key=lambda r: Fraction(r.replace(":", "/"))))
# categorical tasks: four labels, the same in every row and in this order; two regions or two
# objects are "the first" and "the second" as the question names them
CLAIM_LABELS = (
    "Claim A is true, claim B is true",
    "Claim A is true, claim B is false",
    "Claim A is false, claim B is true",
    "Claim A is false, claim B is false",
)
PRESENCE_LABELS = (
    "Yes in the first region, yes in the second",
    "Yes in the first region, no in the second",
    "No in the first region, yes in the second",
    "No in the first region, no in the second",
)
ORDER_LABELS = (
    "The first region has more than the second",
    "The second region has more than the first",
    "The first region has as many as the second, not zero",
    "The first region has none, nor has the second",
)
EXTREME_LABELS = (
    "The first one is higher, or further left",
    "The first one is lower, or further right",
    "There is no such object in the first region",
    "There is no such object in the second region",
)
# (upper, left), (upper, right), (lower, left), (lower, right); in image words that share
# nothing with the region names ("upper-left") the question uses to name the two objects
POSITIONS = (
    "Above and to the left of it",
    "Above and to the right of it",
    "Below and to the left of it",
    "Below and to the right of it",
)
LABELS = {
    "count_order": ORDER_LABELS,
    "presence_pattern": PRESENCE_LABELS,
    "claim_pattern": CLAIM_LABELS,
    "extreme_relation": EXTREME_LABELS,
    "relative_position": POSITIONS,
}


@dataclass(frozen=True)
class Candidate:
    task: str
    question: str
    gold: str
    # all four, in the order they are shown: numbers and ratios ascending (a window holding the
    # gold at a uniform rank), labels in the task's own order
    options: tuple[str, ...]
    steps: tuple[UltraStep, ...]
    evidence: dict[str, Any]
    objects: tuple[Obj, ...]  # the objects the answer rests on
    kind: str  # the gold's label: what planning balances
    rank: int | None = None  # numeric tasks: the answer's rank among the options
    group: str = ""  # what the question is about (a bundle, two classes): drawn before the gold
    # words of the question a gold could go with (a bundle, a region, a claimed number):
    # planning spreads each one's rows over the labels
    cues: tuple[str, ...] = ()
    # what had to be searched for where the answer rests on an absence (a region with none of
    # what the question names): the clear objects of that kind anywhere in the view
    sought: tuple[Obj, ...] = ()

    @property
    def category(self) -> str:
        return CATEGORY[self.task]


@dataclass
class View:
    objects: list[Obj]
    width: int
    height: int
    removed: Counter[str] = field(default_factory=Counter)
    landmarks: list[Landmark] = field(default_factory=list)  # the reviewed landmarks it shows

    def boxes(self, objs: tuple[Obj, ...]) -> str:
        return json.dumps([norm_box(o, self.width, self.height) for o in objs])

    def box(self, o: Obj | None) -> str:
        return "none" if o is None else json.dumps(norm_box(o, self.width, self.height))


def fact(c: Candidate) -> str:
    """The fact a candidate asks of its view, the same for every wording of it: its mirror
    image (the two regions, bundles, objects or landmarks named the other way round: "more in
    the first" against "more in the second", a ratio and its inverse) and, for a claim
    pattern, every pair of claims about its bundle (the claims only word the bundle's total
    and maximum region, one fact: two rows "exactly 8 trucks" with another region claimed
    asked it twice). A view is asked a fact once."""
    ev: Any = c.evidence
    if "first" not in ev:
        return f"{c.task}:{ev['bundle']}" if c.task == "claim_pattern" else c.question
    parts = []
    for side in ("first", "second"):
        e = ev[side]
        where = f"{e.get('bundle') or e.get('class')}@{e.get('region')}"
        if "landmark" in e:
            where += f"~{e['landmark']['instance']}"
        parts.append(str(e.get("description") or where))
    extreme = ev["first"].get("extreme", "")
    return f"{c.task}:{extreme}:{'|'.join(sorted(parts))}"


def difficulty(c: Candidate, width: int, height: int) -> str:
    """How tiny the evidence is: the smallest object the answer rests on, or of the kind whose
    absence it rests on, as a share of the image (an absence is as hard to see as what is
    absent: calling it easy would make "easy" mean "none", and "medium" mean "no such
    object")."""
    share = min((o.pixels for o in (*c.objects, *c.sought)), default=width * height) / (width * height)
    return "hard" if share < TINY else "medium" if share < SMALL else "easy"


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


def count_windows(task: str, gold: int) -> list[tuple[int, tuple[str, ...]]]:
    """Every window of four consecutive counts within the task's answer range that holds
    ``gold``, each with the gold's rank in it. Each is a candidate of its own (one question,
    asked once): planning asks a window's ranks in turn (:func:`.family.choose`), so that given
    the window every member was the gold equally often, and a gold the views offer rarely
    fills the turn of whichever window needs it."""
    lo, hi = COUNT_RANGE[task]
    out = []
    for rank in range(4):
        first = gold - rank
        if first >= lo and first + 3 <= hi:
            out.append((rank, tuple(str(first + i) for i in range(4))))
    return out


def ratio_windows(gold: str) -> list[tuple[int, tuple[str, ...]]]:
    """Every set of :data:`RATIO_SETS` holding ``gold``, with the gold's rank in it (asked in
    turn per set, as :func:`count_windows`)."""
    return [(s.index(gold), s) for s in RATIO_SETS if gold in s]


def _ratio(a: int, b: int) -> str:
    f = Fraction(a, b)
    return f"{f.numerator}:{f.denominator}"


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


OPTION_STEP = "Which option does the computed evidence support?"
ORDERING = ("the first count is larger", "the second count is larger", "the two counts are equal")


def pair_ratio(a: int, b: int) -> str:
    """Two counts' ratio in lowest terms ("0:1" when the first is 0; "1:0", "0:0" when the
    second is)."""
    if b == 0:
        return "0:0" if a == 0 else "1:0"
    f = Fraction(a, b)
    return f"{f.numerator}:{f.denominator}"


def _pair_steps(
    view: View, first: tuple[Bundle, str, Tally], second: tuple[Bundle, str, Tally]
) -> tuple[UltraStep, ...]:
    """UltraVR CCTV's comparison trace up to its last step (S1..S10): per bundle whether it
    exists in its region (GND), its boxes (PER) and its count (QUA); then the total, the
    absolute difference and the reduced ratio (QUA) and the ordering (INT). S11, the option
    the evidence supports (INF), is the task's."""
    out: list[UltraStep] = []
    for bundle, region, t in (first, second):
        out += [
            _step(
                f"Are there any {bundle.words} in the {region} region?",
                "yes" if t.count else "no",
                "GND",
                "boolean",
            ),
            _step(
                f"What are the coordinates of the {bundle.words} in the {region} region?",
                view.boxes(t.members),
                "PER",
                "bbox_coordinates_list",
            ),
            _step(f"How many {bundle.words} are in the {region} region?", str(t.count), "QUA", "integer"),
        ]
    n1, n2 = first[2].count, second[2].count
    out += [
        _step("What is the total of the two counts?", str(n1 + n2), "QUA", "integer"),
        _step("What is the absolute difference of the two counts?", str(abs(n1 - n2)), "QUA", "integer"),
        _step(
            "What is the ratio of the first count to the second, in lowest terms?",
            pair_ratio(n1, n2),
            "QUA",
            "relation",
        ),
        _step(
            "Which count is larger?",
            ORDERING[0 if n1 > n2 else 1 if n2 > n1 else 2],
            "INT",
            "relation",
        ),
    ]
    return tuple(out)


def _two(r1: str, r2: str) -> str:
    return f"Consider two regions, first the {r1} region and second the {r2} region."


def _numeric(
    task: str,
    question: str,
    gold: str,
    windows: list[tuple[int, tuple[str, ...]]],
    steps: tuple[UltraStep, ...],
    about: Candidate,
    view: View,
) -> Iterator[Candidate]:
    """One candidate per option window holding the gold (:func:`count_windows`,
    :func:`ratio_windows`), each the same question; what the question is about from ``about``."""
    if not windows:
        view.removed[OUT_OF_RANGE] += 1
    for rank, shown in windows:
        yield Candidate(
            task,
            question,
            gold,
            shown,
            steps,
            about.evidence,
            about.objects,
            gold,
            rank,
            about.group,
            about.cues,
            about.sought,
        )


def comparison(view: View) -> Iterator[Candidate]:
    """The RS template's conditioned count comparison (:func:`conditioned`), then CCTV's
    comparisons of two bundles' counts: the same bundle in two regions, or two bundles of one
    kind (:func:`.objects.comparable`) in one region; totals, ratios and orderings."""
    yield from conditioned(view)
    bundled = bundles(view.objects)
    pairs = [(b, r1, b, r2) for b in bundled for r1, r2 in permutations(REGIONS, 2)]
    plain = [b for b in bundled if b.colour is None]
    pairs += [
        (a, r, b, r)
        for a, b in permutations(plain, 2)
        if not set(a.classes) & set(b.classes) and comparable(a, b)
        for r in REGIONS
    ]
    for a, r1, b, r2 in pairs:
        t1, t2 = tally(view.objects, a, r1), tally(view.objects, b, r2)
        if t1.problem or t2.problem:
            view.removed[t1.problem or t2.problem or ""] += 1
            continue
        counted = _pair_steps(view, (a, r1, t1), (b, r2, t2))
        what1, what2 = f"{a.words} in the {r1} region", f"{b.words} in the {r2} region"
        sought = (_sought(view, a) if not t1.count else ()) + (_sought(view, b) if not t2.count else ())
        about = Candidate(
            "",
            "",
            "",
            (),
            (),
            {"first": _ev(a, r1, t1), "second": _ev(b, r2, t2)},
            t1.members + t2.members,
            "",
            group=f"{a.key()}|{b.key()}",
            cues=(f"first={a.key()}", f"second={b.key()}", f"regions={r1}|{r2}"),
            sought=sought,
        )
        if a != b or r1 < r2:  # a total is the same question in either order
            total = str(t1.count + t2.count)
            yield from _numeric(
                "count_total",
                f"How many {what1} and {what2} are there in total?",
                total,
                count_windows("count_total", t1.count + t2.count),
                (*counted, _step(OPTION_STEP, total, "INF", "integer")),
                about,
                view,
            )
        if t1.count and t2.count and t1.count != t2.count:
            gold = _ratio(t1.count, t2.count)
            yield from _numeric(
                "count_ratio",
                f"What is the ratio of the number of {what1} to the number of {what2}, in lowest terms?",
                gold,
                ratio_windows(gold),
                (*counted, _step(OPTION_STEP, gold, "INF", "relation")),
                about,
                view,
            )
        if a == b:  # both orders: which region is named first says nothing
            kind = 0 if t1.count > t2.count else 1 if t2.count > t1.count else 2 if t1.count else 3
            gold = ORDER_LABELS[kind]
            yield Candidate(
                "count_order",
                f"{_two(r1, r2)} Which of them has more {a.words}?",
                gold,
                ORDER_LABELS,
                (*counted, _step(OPTION_STEP, gold, "INF", "option_label")),
                about.evidence,
                about.objects,
                gold,
                group=a.key(),
                cues=(f"bundle={a.key()}", f"first={r1}", f"second={r2}"),
                sought=sought,
            )


def conditioned(view: View) -> Iterator[Candidate]:
    """UltraVR RS's conditioned count comparison: the absolute difference between the counts
    of one object type in two regions, each near a reviewed landmark the region shows, with the
    template's nine steps (S1/S5 ground the landmark, S2/S6 whether any object is near it,
    S3/S7 its objects' boxes, S4/S8 their count, S9 the difference). A landmark of a class the
    bundle counts is not used (it would count itself)."""
    usable = [lm for lm in view.landmarks if lm.problem is None]
    for lm in view.landmarks:
        if lm.problem:
            view.removed[lm.problem] += 1
    near: dict[tuple[str, str, int], Tally] = {}
    for a in bundles(view.objects):
        for r1, r2 in permutations(REGIONS, 2):
            for l1 in (lm for lm in usable if lm.region == r1 and lm.class_name not in a.classes):
                for l2 in (lm for lm in usable if lm.region == r2 and lm.class_name not in a.classes):
                    t1, t2 = (
                        near.setdefault(
                            (a.key(), r, lm.instance_id),
                            near_tally(view.objects, a, r, lm, view.width, view.height),
                        )
                        for r, lm in ((r1, l1), (r2, l2))
                    )
                    if t1.problem or t2.problem:
                        view.removed[t1.problem or t2.problem or ""] += 1
                        continue
                    steps: list[UltraStep] = []
                    for r, lm, t in ((r1, l1, t1), (r2, l2, t2)):
                        where = f"in the {r} region near the {lm.name}"
                        steps += [
                            _step(
                                f"Locate the {lm.name} in the {r} region. Report its bbox coordinates.",
                                json.dumps(norm_landmark(lm, view.width, view.height)),
                                "GND",
                                "bbox",
                            ),
                            _step(
                                f"Does the {r} region contain any {a.words} near the {lm.name}?",
                                "yes" if t.count else "no",
                                "INT",
                                "boolean",
                            ),
                            _step(
                                f"Locate every one of the {a.words} {where}. Report bbox coordinates.",
                                view.boxes(t.members),
                                "PER",
                                "bbox_coordinates_list",
                            ),
                            _step(f"How many such {a.words} are {where}?", str(t.count), "QUA", "integer"),
                        ]
                    d = abs(t1.count - t2.count)
                    steps.append(
                        _step(
                            "Compute the absolute difference |Step 4 count - Step 8 count|.",
                            str(d),
                            "INF",
                            "integer",
                        )
                    )
                    sought = (_sought(view, a) if not t1.count else ()) + (
                        _sought(view, a) if not t2.count else ()
                    )
                    about = Candidate(
                        "",
                        "",
                        "",
                        (),
                        (),
                        {"first": _ev(a, r1, t1, l1), "second": _ev(a, r2, t2, l2)},
                        t1.members + t2.members,
                        "",
                        group=a.key(),
                        cues=(f"bundle={a.key()}", f"regions={r1}|{r2}", f"landmarks={l1.name}|{l2.name}"),
                        sought=sought,
                    )
                    yield from _numeric(
                        "count_difference",
                        f"What is the absolute difference between the counts of {a.words} in the {r1} "
                        f"region near the {l1.name} and {a.words} in the {r2} region near the {l2.name}?",
                        str(d),
                        count_windows("count_difference", d),
                        tuple(steps),
                        about,
                        view,
                    )


def _sought(view: View, b: Bundle) -> tuple[Obj, ...]:
    """The clear objects of the bundle's classes anywhere in the view."""
    return tuple(o for o in view.objects if o.class_name in b.classes and o.problem is None)


def _ev(b: Bundle, region: str, t: Tally, landmark: Landmark | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bundle": b.key(),
        "region": region,
        "instances": [o.instance_id for o in t.members],
    }
    if landmark is not None:
        out["landmark"] = {"instance": landmark.instance_id, "name": landmark.name}
    return out


def logical(view: View, claim_offset: int, rng: np.random.Generator) -> Iterator[Candidate]:
    present = sorted({o.class_name for o in view.objects})
    for c in present:
        base = Bundle((c,), NOUNS[c][1])
        restricted = [Bundle((c,), NOUNS[c][1], orientation=o) for o in ORIENTATIONS if c in ORIENTED]
        colours = sorted({o.colour for o in view.objects if o.class_name == c and o.colour})
        restricted += [Bundle((c,), NOUNS[c][1], colour=col) for col in colours if len(colours) >= 2]
        for bundle in restricted:
            # both orders: "only in the first" and "only in the second" are one fact named either way
            for r1, r2 in permutations(REGIONS, 2):
                t1, t2 = tally(view.objects, bundle, r1), tally(view.objects, bundle, r2)
                # the class's objects of each region, those the restriction rules out wherever
                # they lie left out (a white car on the split line is in neither list of red ones)
                all1, all2 = (
                    tally(view.objects, base, r1, by=bundle),
                    tally(view.objects, base, r2, by=bundle),
                )
                bad = t1.problem or t2.problem or all1.problem or all2.problem
                if bad:
                    view.removed[bad] += 1
                    continue
                kind = [(True, True), (True, False), (False, True), (False, False)].index(
                    (t1.count > 0, t2.count > 0)
                )
                gold = PRESENCE_LABELS[kind]
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
                    f"{_two(r1, r2)} Are there any {bundle.words} in the first, and in the second?",
                    gold,
                    PRESENCE_LABELS,
                    tuple(steps),
                    {"first": _ev(bundle, r1, t1), "second": _ev(bundle, r2, t2)},
                    all1.members + all2.members,
                    gold,
                    group=bundle.key(),
                    cues=(f"bundle={bundle.key()}", f"first={r1}", f"second={r2}"),
                    sought=(_sought(view, base) if not all1.count or not all2.count else ()),
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
        # the false count: the other member of a pair of counts one or two apart that holds
        # the true one at a uniform place, so a false claim is as often above as below it
        # one value is shown (the claim), never the pair: no upper bound to keep
        pair = opts.window(total, 2, rng, lo=1, hi=None, step=1 + claim_offset % 2)
        if pair is None:
            view.removed[OUT_OF_RANGE] += 1
            continue
        wrong_total = pair[0] if pair[1] == total else pair[1]
        steps = _count_steps(view, *((bundle, r, t) for r, t in zip(REGIONS, tallies, strict=True)))
        steps.append(_step(f"How many {bundle.words} are there in all?", str(total), "INT", "integer"))
        steps.append(_step(f"Which region has the most {bundle.words}?", best, "INT", "relation"))
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
                    gold,
                    group=bundle.key(),
                    cues=(f"bundle={bundle.key()}", f"count={n}", f"region={region}"),
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


def _extreme_of(view: View, cls: str, region: str, which: str) -> Obj | str | None:
    """The region's extreme object of the class (:func:`_extreme` over those that lie in it for
    certain), None when it certainly has none, or why it is not certain: an object of the class
    that may lie there and is not clear, or one whose region is in doubt that could be as
    extreme (one that trails the extreme by ``EXTREME_MARGIN`` by both its centre and its outer
    edge, whichever region holds it, does not change the answer)."""
    sure: list[Obj] = []
    doubt: list[Obj] = []
    for o in view.objects:
        if o.class_name == cls and region in o.regions:
            (sure if o.problem is None and len(o.regions) == 1 else doubt).append(o)
    unclear = next((o.problem for o in doubt if o.problem is not None), None)
    if unclear or (doubt and not sure):
        return unclear or NEAR_BOUNDARY
    best = _extreme(view, Tally(tuple(sure), None), which)
    if best is None or isinstance(best, str):
        return best
    axis, sign = EXTREMES[which]
    edge = axis if sign < 0 else axis + 2
    margin = EXTREME_MARGIN * (view.width if axis == 0 else view.height)
    for o in doubt:
        if (
            -sign * (o.centre[axis] - best.centre[axis]) < margin
            or -sign * (o.box[edge] - best.box[edge]) < margin
        ):
            return NEAR_BOUNDARY
    return best


def relational(view: View) -> Iterator[Candidate]:
    for c1, c2 in (
        (a, b)
        for a in sorted({o.class_name for o in view.objects})
        for b in sorted({o.class_name for o in view.objects})
    ):
        b1, b2 = Bundle((c1,), NOUNS[c1][1]), Bundle((c2,), NOUNS[c2][1])
        for r1, r2 in permutations(REGIONS, 2):
            for which in EXTREMES:
                # extremes along one axis are compared along the other, between two regions on
                # the same side of that axis's split line, so the regions' names do not decide it
                axis = 1 - EXTREMES[which][0]
                if r1.split("-")[axis == 0] != r2.split("-")[axis == 0]:
                    continue
                e1, e2 = _extreme_of(view, c1, r1, which), _extreme_of(view, c2, r2, which)
                if isinstance(e1, str) or isinstance(e2, str):
                    view.removed[e1 if isinstance(e1, str) else str(e2)] += 1
                    continue
                if e1 is None and e2 is None:
                    continue
                n1, n2 = NOUNS[c1][0], NOUNS[c2][0]
                if e1 is None:
                    kind = 2
                elif e2 is None:
                    kind = 3
                else:
                    delta = e1.centre[axis] - e2.centre[axis]
                    size = view.width if axis == 0 else view.height
                    if abs(delta) < RELATION_MARGIN * size:
                        view.removed[TOO_CLOSE] += 1
                        continue
                    kind = 0 if delta < 0 else 1
                gold = EXTREME_LABELS[kind]
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
                    f"Consider {first} (the first one) and {second} (the second one). Compared "
                    f"{axis_word}, where is the first one?",
                    gold,
                    EXTREME_LABELS,
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
                    gold,
                    group=f"{c1}|{c2}",
                    cues=(f"first={c1}", f"second={c2}", f"regions={r1}|{r2}", f"extreme={which}"),
                    sought=_sought(view, b1 if e1 is None else b2) if e1 is None or e2 is None else (),
                )
    named = _named(view)
    # two objects of one region: regions the question names would otherwise decide the answer
    for (d1, (o1, ra)), (d2, (o2, rb)) in permutations(sorted(named.items()), 2):
        if ra == rb:
            yield from _relative(view, d1, o1, d2, o2, ra)


def _relative(view: View, d1: str, o1: Obj, d2: str, o2: Obj, group: str) -> Iterator[Candidate]:
    """Where the first named object lies relative to the second, unless too close to call."""
    dx, dy = o1.centre[0] - o2.centre[0], o1.centre[1] - o2.centre[1]
    if abs(dx) < RELATION_MARGIN * view.width or abs(dy) < RELATION_MARGIN * view.height:
        view.removed[TOO_CLOSE] += 1
        return
    side, level = ("left" if dx < 0 else "right"), ("upper" if dy < 0 else "lower")
    gold = POSITIONS[2 * (level == "lower") + (side == "right")]
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
        group=group,
        cues=(f"first={o1.class_name}", f"second={o2.class_name}", f"region={group}"),
    )


def _named(view: View) -> dict[str, tuple[Obj, str]]:
    """Objects a colour, a class and a region pick out (UltraVR's references name an
    approximate location): the object is clear, coloured and clear of the split lines, and
    every other object of the class that may lie in the region shows another colour (see
    :func:`.objects.ruled_out`: a white car on the split line, or half hidden, is not "the red
    car" of either region; one whose colour is unclear, or too small to tell, may be)."""
    out = {}
    for c in sorted({o.class_name for o in view.objects}):
        for region in REGIONS:
            same = [o for o in view.objects if o.class_name == c and region in o.regions]
            for o in same:
                if o.problem or o.colour is None or len(o.regions) > 1:
                    continue
                name = Bundle((c,), NOUNS[c][1], colour=o.colour)
                if any(x is not o and not ruled_out(x, name) for x in same):
                    view.removed[NOT_UNIQUE_NAME] += 1
                    continue
                out[f"the {o.colour} {NOUNS[c][0]} in the {region} region"] = (o, region)
    return out


def candidates(view: View, claim_offset: int, rng: np.random.Generator | None = None) -> list[Candidate]:
    """Every candidate of the view; ``rng`` draws the false claims (seeded from the view when
    planning; a fixed seed otherwise)."""
    draw = rng if rng is not None else np.random.default_rng(0)
    return [
        *comparison(view),
        *logical(view, claim_offset, draw),
        *relational(view),
    ]
